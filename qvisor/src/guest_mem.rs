//! Guest RAM and bounds-checked access to it.
//!
//! Guest memory is untrusted input: every access goes through a range check
//! against guest RAM; nothing here turns a guest address into a Rust
//! reference. Raw host pointers leave this module only as `libc::iovec`s
//! for vectored host I/O, after the check.

use qlib::abi::{HelloReply, HostCall, IoVec, PollFd, SwapPage};
use vm_memory::{ByteValued, Bytes, GuestAddress, GuestMemoryBackend, GuestMemoryMmap};

use crate::error::VmmError;
use qlib::layout::{FILE_WINDOW_GPA, FILE_WINDOW_SIZE};

/// A guest address range was outside guest RAM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadRange;

/// Plain-data wrapper so ABI structs can be read from guest memory.
#[derive(Clone, Copy, Default)]
#[repr(transparent)]
pub struct Pod<T>(pub T);

// SAFETY: HostCall is repr(C), made only of u64/i64 fields (no padding), and
// every bit pattern is a valid value.
unsafe impl ByteValued for Pod<HostCall> {}
// SAFETY: u64 has no padding and no invalid bit patterns.
unsafe impl ByteValued for Pod<u64> {}
// SAFETY: u32 and i32 have no padding and no invalid bit patterns.
unsafe impl ByteValued for Pod<u32> {}
// SAFETY: as above.
unsafe impl ByteValued for Pod<i32> {}
// SAFETY: SockAddr is repr(C): two u32 then 128 bytes (136, no padding);
// any bit pattern is valid.
unsafe impl ByteValued for Pod<qlib::io_abi::SockAddr> {}
// SAFETY: MsgCtl is repr(C) plain integers with no padding (size asserted
// in qlib); every bit pattern is valid.
unsafe impl ByteValued for Pod<qlib::io_abi::MsgCtl> {}
// SAFETY: repr(C), six u32 fields, no padding; any bit pattern is valid.
unsafe impl ByteValued for Pod<qlib::io_abi::UnixPeer> {}
// SAFETY: IoVec is repr(C) with two u64 fields; any bit pattern is valid.
unsafe impl ByteValued for Pod<IoVec> {}
// SAFETY: SwapPage is repr(C) with two u64 fields; any bit pattern is valid.
unsafe impl ByteValued for Pod<SwapPage> {}
// SAFETY: HelloReply is repr(C) with two u64 fields; any bit pattern is valid.
unsafe impl ByteValued for Pod<HelloReply> {}
// SAFETY: PollFd is repr(C) (i32, i16, i16: no padding); any bit pattern is valid.
unsafe impl ByteValued for Pod<PollFd> {}
// SAFETY: BootInfo is repr(C) of u64 fields, IoVecs and arrays of u64/u32 with
// an even number of u32s (no padding); any bit pattern is valid.
unsafe impl ByteValued for Pod<qlib::abi::BootInfo> {}
// SAFETY: NetInfo is repr(C): two u32 then arrays of Link (52 bytes) and
// Addr (44 bytes), both of u32/u16/u8 fields laid out without padding
// (sizes asserted in qlib); any bit pattern is valid.
unsafe impl ByteValued for Pod<qlib::netinfo::NetInfo> {}

/// The sandbox's guest RAM: one anonymous `MAP_NORESERVE` mapping at GPA 0,
/// and the host reservation behind the file window (`crate::file_window`).
pub struct GuestRam {
    mem: GuestMemoryMmap<()>,
    size: u64,
    base: u64,
    /// Host address of the window's GPA [`FILE_WINDOW_GPA`].
    window: u64,
    /// Ranges of guest RAM mapped from a file (`crate::kernel_text`):
    /// `mincore` says "resident" for page-cache pages, so
    /// [`GuestRam::resident_pages`] leaves them out.
    file_backed: std::sync::Mutex<Vec<(u64, u64)>>,
    /// Blocks populated for the guest ([`GuestRam::populate`]) since the
    /// last [`GuestRam::trim_backed`], merged when contiguous.
    backed: std::sync::Mutex<Vec<(u64, u64)>>,
}

impl Drop for GuestRam {
    fn drop(&mut self) {
        // SAFETY: the window reservation is ours (made in `new`) and no
        // Rust object lives in it; the VM using it is gone before `self`.
        unsafe { libc::munmap(self.window as *mut libc::c_void, FILE_WINDOW_SIZE as usize) };
    }
}

impl GuestRam {
    /// Maps `size` bytes of guest RAM.
    pub fn new(size: u64) -> Result<Self, VmmError> {
        let len = usize::try_from(size).map_err(|_| VmmError::Memory(size))?;
        let mem = GuestMemoryMmap::from_ranges(&[(GuestAddress(0), len)])
            .map_err(|_| VmmError::Memory(size))?;
        let base = mem
            .get_host_address(GuestAddress(0))
            .map_err(|_| VmmError::Memory(size))? as u64;
        // SAFETY: a fresh anonymous reservation; nothing else refers to it.
        let window = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                FILE_WINDOW_SIZE as usize,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if window == libc::MAP_FAILED {
            return Err(VmmError::Memory(size));
        }
        Ok(Self {
            mem,
            size,
            base,
            window: window as u64,
            file_backed: std::sync::Mutex::new(Vec::new()),
            backed: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// Host address of the file window's first byte (for
    /// `KVM_SET_USER_MEMORY_REGION` and `crate::file_window`).
    pub fn window_host_base(&self) -> u64 {
        self.window
    }

    /// Drops the host pages behind the whole file window (hibernation): the
    /// file mappings stay, and their pages come back from the page cache
    /// when the guest touches them again.
    pub fn drop_window_pages(&self) {
        // SAFETY: the reservation is ours, holds only read-only anonymous
        // and private file mappings nothing writes, and no Rust object;
        // MADV_DONTNEED makes the next access read the file (or zeros).
        let rc = unsafe {
            libc::madvise(
                self.window as *mut libc::c_void,
                FILE_WINDOW_SIZE as usize,
                libc::MADV_DONTNEED,
            )
        };
        if rc != 0 {
            log::warn!(
                "file window pages not dropped: {}",
                std::io::Error::last_os_error()
            );
        }
    }

    /// The host address of `[gpa, gpa + len)` for host I/O: guest RAM, or
    /// the file window (read-only: the host kernel fails a write to it, and
    /// reading past a truncated file's end, with `EFAULT`).
    fn host_io_addr(&self, gpa: u64, len: u64) -> Result<u64, BadRange> {
        if self.check(gpa, len).is_ok() {
            return Ok(self.base + gpa);
        }
        match gpa.checked_add(len) {
            Some(end) if gpa >= FILE_WINDOW_GPA && end <= FILE_WINDOW_GPA + FILE_WINDOW_SIZE => {
                Ok(self.window + (gpa - FILE_WINDOW_GPA))
            }
            _ => Err(BadRange),
        }
    }

    /// Host iovecs of guest ranges (guest RAM or the file window, see
    /// [`Self::host_io_addr`]).
    pub fn host_iovecs_checked(&self, list: &[IoVec]) -> Result<Vec<libc::iovec>, BadRange> {
        list.iter()
            .map(|v| {
                Ok(libc::iovec {
                    iov_base: self.host_io_addr(v.gpa, v.len)? as *mut libc::c_void,
                    iov_len: v.len as usize,
                })
            })
            .collect()
    }

    /// Bytes of guest RAM.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Host address of GPA 0 (for `KVM_SET_USER_MEMORY_REGION`).
    pub fn host_base(&self) -> u64 {
        self.base
    }

    /// Checks that `[gpa, gpa + len)` lies inside guest RAM.
    pub fn check_range(&self, gpa: u64, len: u64) -> Result<(), BadRange> {
        self.check(gpa, len)
    }

    fn check(&self, gpa: u64, len: u64) -> Result<(), BadRange> {
        match gpa.checked_add(len) {
            Some(end) if end <= self.size => Ok(()),
            _ => Err(BadRange),
        }
    }

    /// Reads a plain-data object.
    pub fn read<T>(&self, gpa: u64) -> Result<T, BadRange>
    where
        Pod<T>: ByteValued,
    {
        self.check(gpa, size_of::<T>() as u64)?;
        self.mem
            .read_obj::<Pod<T>>(GuestAddress(gpa))
            .map(|p| p.0)
            .map_err(|_| BadRange)
    }

    /// Writes a plain-data object.
    pub fn write<T>(&self, gpa: u64, value: T) -> Result<(), BadRange>
    where
        Pod<T>: ByteValued,
    {
        self.check(gpa, size_of::<T>() as u64)?;
        self.mem
            .write_obj(Pod(value), GuestAddress(gpa))
            .map_err(|_| BadRange)
    }

    /// Reads bytes.
    pub fn read_bytes(&self, gpa: u64, buf: &mut [u8]) -> Result<(), BadRange> {
        self.check(gpa, buf.len() as u64)?;
        self.mem
            .read_slice(buf, GuestAddress(gpa))
            .map_err(|_| BadRange)
    }

    /// Writes bytes.
    pub fn write_bytes(&self, gpa: u64, buf: &[u8]) -> Result<(), BadRange> {
        self.check(gpa, buf.len() as u64)?;
        self.mem
            .write_slice(buf, GuestAddress(gpa))
            .map_err(|_| BadRange)
    }

    /// Reads `count` iovecs at `gpa` (capped by `qlib::abi::MAX_IOVECS`) and
    /// turns them into host iovecs after checking every range (guest RAM or
    /// the file window).
    pub fn host_iovecs(&self, gpa: u64, count: u64) -> Result<Vec<libc::iovec>, BadRange> {
        if count > qlib::abi::MAX_IOVECS {
            return Err(BadRange);
        }
        let list = (0..count)
            .map(|i| self.read::<IoVec>(gpa + i * size_of::<IoVec>() as u64))
            .collect::<Result<Vec<_>, _>>()?;
        self.host_iovecs_checked(&list)
    }

    /// Reads a guest iovec list, every range checked against guest RAM.
    pub fn ranges(&self, gpa: u64, count: u64) -> Result<Vec<IoVec>, BadRange> {
        if count > qlib::abi::MAX_IOVECS {
            return Err(BadRange);
        }
        (0..count)
            .map(|i| {
                let v: IoVec = self.read(gpa + i * size_of::<IoVec>() as u64)?;
                self.check(v.gpa, v.len)?;
                Ok(v)
            })
            .collect()
    }

    /// The host iovec of a checked guest range, for vectored host I/O.
    pub fn host_range(&self, gpa: u64, len: u64) -> Result<libc::iovec, BadRange> {
        self.check(gpa, len)?;
        Ok(libc::iovec {
            iov_base: (self.host_base() + gpa) as *mut libc::c_void,
            iov_len: len as usize,
        })
    }

    /// CRC-32 (`qlib::swapfile::checksum`) of a checked guest range.
    ///
    /// Callers use it only while no vCPU runs (hibernation and wake happen
    /// with the guest stopped in a host call), and while no other VMM thread
    /// writes the range (the REAP read-back's two workers read into
    /// distinct pages), so the bytes cannot change under the checksum.
    pub fn checksum(&self, gpa: u64, len: u64) -> Result<u32, BadRange> {
        self.check(gpa, len)?;
        let p = (self.host_base() + gpa) as *const u8;
        // SAFETY: the range lies inside guest RAM, mapped while `self`
        // lives; the only vCPU is stopped in a host call and no other
        // thread writes the range (callers' contract, see above), so no one
        // writes it while the shared slice exists.
        let bytes = unsafe { std::slice::from_raw_parts(p, len as usize) };
        Ok(qlib::swapfile::checksum(bytes))
    }

    /// Reads a guest list of [`SwapPage`]s (at most
    /// `qlib::abi::MAX_IOVECS`), every page checked against guest RAM.
    pub fn swap_pages(&self, gpa: u64, count: u64) -> Result<Vec<SwapPage>, BadRange> {
        if count > qlib::abi::MAX_IOVECS {
            return Err(BadRange);
        }
        (0..count)
            .map(|i| {
                let p: SwapPage = self.read(gpa + i * size_of::<SwapPage>() as u64)?;
                self.check(p.gpa, 4096)?;
                if !p.gpa.is_multiple_of(4096) {
                    return Err(BadRange);
                }
                Ok(p)
            })
            .collect()
    }

    /// Atomically ORs `bits` into the aligned u64 at `gpa`.
    pub fn atomic_or_u64(&self, gpa: u64, bits: u64) -> Result<(), BadRange> {
        self.check(gpa, 8)?;
        if !gpa.is_multiple_of(8) {
            return Err(BadRange);
        }
        let p = (self.host_base() + gpa) as *mut u64;
        // SAFETY: the 8 aligned bytes lie inside guest RAM, which stays
        // mapped while `self` lives; the guest accesses this word only with
        // atomic instructions too.
        let word = unsafe { std::sync::atomic::AtomicU64::from_ptr(p) };
        word.fetch_or(bits, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }

    /// Atomically loads the aligned u64 at `gpa`.
    pub fn atomic_load_u64(&self, gpa: u64) -> Result<u64, BadRange> {
        self.check(gpa, 8)?;
        if !gpa.is_multiple_of(8) {
            return Err(BadRange);
        }
        let p = (self.host_base() + gpa) as *mut u64;
        // SAFETY: as in `atomic_or_u64`.
        let word = unsafe { std::sync::atomic::AtomicU64::from_ptr(p) };
        Ok(word.load(std::sync::atomic::Ordering::SeqCst))
    }

    /// Atomically ANDs `mask` into the aligned u64 at `gpa`.
    pub fn atomic_and_u64(&self, gpa: u64, mask: u64) -> Result<(), BadRange> {
        self.check(gpa, 8)?;
        if !gpa.is_multiple_of(8) {
            return Err(BadRange);
        }
        let p = (self.host_base() + gpa) as *mut u64;
        // SAFETY: as in `atomic_or_u64`.
        let word = unsafe { std::sync::atomic::AtomicU64::from_ptr(p) };
        word.fetch_and(mask, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }

    /// Drops every resident page of `[from, size)` whose bytes are all
    /// zero (they read back as zero: nothing changes for the guest);
    /// returns how many. Only for memory no other thread writes meanwhile:
    /// a write between the check and the drop would be lost.
    pub fn discard_zero_pages(&self, from: u64) -> u64 {
        self.resident_pages(from)
            .into_iter()
            .filter(|&gpa| self.is_zero_page(gpa) && self.discard(gpa, 4096).is_ok())
            .count() as u64
    }

    /// Whether the resident page at `gpa` (in guest RAM) holds only zeros.
    fn is_zero_page(&self, gpa: u64) -> bool {
        // SAFETY: a page of our guest-RAM mapping (the callers' pages come
        // from `resident_runs`/`resident_pages`), read only; the callers
        // keep writers away.
        let bytes =
            unsafe { std::slice::from_raw_parts((self.host_base() + gpa) as *const u64, 512) };
        bytes.iter().all(|&w| w == 0)
    }

    /// [`Self::discard_zero_pages`] for `[gpa, gpa + len)`, dropping
    /// neighbouring zero pages with one `madvise`.
    /// Pages mapped from a file ([`Self::note_file_backed`]) are kept: a
    /// dropped one would read the file again, not zeros.
    fn discard_zero_runs(&self, gpa: u64, len: u64) -> u64 {
        let from_file = self.file_backed_test();
        let mut dropped = 0;
        for (start, n) in self.resident_runs(gpa, len) {
            let mut run: Option<(u64, u64)> = None;
            let mut flush = |run: &mut Option<(u64, u64)>| {
                if let Some((s, l)) = run.take()
                    && self.discard(s, l).is_ok()
                {
                    dropped += l / 4096;
                }
            };
            for page in (start..start + n).step_by(4096) {
                if from_file(page) || !self.is_zero_page(page) {
                    flush(&mut run);
                    continue;
                }
                match &mut run {
                    Some((_, l)) => *l += 4096,
                    None => run = Some((page, 4096)),
                }
            }
            flush(&mut run);
        }
        dropped
    }

    /// Whether a page lies in a range mapped from a file, as the ranges
    /// are now ([`Self::note_file_backed`]).
    fn file_backed_test(&self) -> impl Fn(u64) -> bool {
        let ranges = self
            .file_backed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        move |g| ranges.iter().any(|&(s, l)| g >= s && g < s + l)
    }

    /// Notes that `[gpa, gpa + len)` is now mapped from a file.
    pub fn note_file_backed(&self, gpa: u64, len: u64) {
        let mut v = self.file_backed.lock().unwrap_or_else(|e| e.into_inner());
        v.push((gpa, len));
    }

    /// The guest-physical addresses of the resident pages of guest RAM
    /// from `from` (page aligned) to its end, in order (`mincore`), but
    /// for ranges mapped from a file ([`GuestRam::note_file_backed`]):
    /// reading or parking those would bring them into this process or
    /// make private copies of them.
    pub fn resident_pages(&self, from: u64) -> Vec<u64> {
        let from_file = self.file_backed_test();
        let mut out = self.resident_pages_all(from);
        out.retain(|&g| !from_file(g));
        out
    }

    fn resident_pages_all(&self, from: u64) -> Vec<u64> {
        let from = from.next_multiple_of(4096);
        if from >= self.size {
            return Vec::new();
        }
        self.resident_runs(from, self.size - from)
            .into_iter()
            .flat_map(|(gpa, len)| (gpa..gpa + len).step_by(4096))
            .collect()
    }

    /// The runs `(gpa, len)` of `[gpa, gpa + len)` (page aligned) whose
    /// host pages are resident; none for a range outside guest RAM.
    pub fn resident_runs(&self, gpa: u64, len: u64) -> Vec<(u64, u64)> {
        const CHUNK: u64 = 16 << 20;
        let mut runs: Vec<(u64, u64)> = Vec::new();
        if self.check(gpa, len).is_err() || !gpa.is_multiple_of(4096) {
            return runs;
        }
        let mut resident = vec![0u8; (CHUNK / 4096) as usize];
        let end = gpa + len;
        let mut at = gpa;
        while at < end {
            let n = CHUNK.min(end - at).next_multiple_of(4096);
            // SAFETY: `[host_base + at, + n)` lies inside our guest-RAM
            // mapping (checked above, page aligned); mincore writes one
            // byte per page into `resident`, which has room for CHUNK /
            // 4096 pages.
            let rc = unsafe {
                libc::mincore(
                    (self.host_base() + at) as *mut libc::c_void,
                    n as usize,
                    resident.as_mut_ptr(),
                )
            };
            if rc == 0 {
                for (k, r) in resident[..(n / 4096) as usize].iter().enumerate() {
                    if r & 1 == 0 {
                        continue;
                    }
                    let page = at + k as u64 * 4096;
                    match runs.last_mut() {
                        Some((s, l)) if *s + *l == page => *l += 4096,
                        _ => runs.push((page, 4096)),
                    }
                }
            }
            at += n;
        }
        runs
    }

    /// Backs a checked, page-aligned range with host pages before the
    /// guest touches it (`Call::Populate`); its bytes stay as they were.
    /// `Err` holds the errno (`EINVAL` for a bad range, or from a host
    /// kernel without `MADV_POPULATE_WRITE`).
    pub fn populate(&self, gpa: u64, len: u64) -> Result<(), i32> {
        if self.check(gpa, len).is_err() || !gpa.is_multiple_of(4096) || !len.is_multiple_of(4096) {
            return Err(libc::EINVAL);
        }
        // SAFETY: the range lies inside our guest-RAM mapping (checked
        // above), which `self` keeps mapped.
        unsafe { populate_host(self.host_base() + gpa, len) }?;
        let mut v = self.backed.lock().unwrap_or_else(|e| e.into_inner());
        let full = v.len() >= MAX_BACKED_RUNS;
        match v.last_mut() {
            Some((s, l)) if *s + *l == gpa => *l += len,
            // Bounded: past that the blocks are simply kept whole.
            _ if full => {}
            _ => v.push((gpa, len)),
        }
        Ok(())
    }

    /// Whether blocks were populated since the last [`Self::trim_backed`].
    pub fn has_backed(&self) -> bool {
        !self
            .backed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    /// Drops the all-zero pages of the blocks populated since the last
    /// call (the guest mapped them ahead and the program never wrote
    /// them; they read back as zero); returns how many. Only while no
    /// guest code runs and no other thread writes that memory, as for
    /// [`Self::discard_zero_pages`].
    pub fn trim_backed(&self) -> u64 {
        let runs = std::mem::take(&mut *self.backed.lock().unwrap_or_else(|e| e.into_inner()));
        runs.into_iter()
            .map(|(gpa, len)| self.discard_zero_runs(gpa, len))
            .sum()
    }

    /// Drops the host memory behind a checked, page-aligned range; it reads
    /// back as zeros.
    pub fn discard(&self, gpa: u64, len: u64) -> Result<(), BadRange> {
        self.check(gpa, len)?;
        if !gpa.is_multiple_of(4096) || !len.is_multiple_of(4096) {
            return Err(BadRange);
        }
        let addr = (self.host_base() + gpa) as *mut libc::c_void;
        // SAFETY: the range lies inside our private anonymous guest-RAM
        // mapping (checked above); MADV_DONTNEED on it only makes the guest
        // see zero pages, it cannot affect any Rust object.
        let rc = unsafe { libc::madvise(addr, len as usize, libc::MADV_DONTNEED) };
        if rc == 0 { Ok(()) } else { Err(BadRange) }
    }
}

/// Most separate runs [`GuestRam::populate`] keeps for the next trim.
const MAX_BACKED_RUNS: usize = 4096;

/// Faults `[addr, addr + len)` in as written (`MADV_POPULATE_WRITE`):
/// host pages where there were none, no byte changed. `Err` holds the
/// errno.
///
/// # Safety
/// The range must lie inside a private anonymous mapping that stays mapped
/// during the call (guest RAM).
pub unsafe fn populate_host(addr: u64, len: u64) -> Result<(), i32> {
    // SAFETY: the caller's contract; populating only allocates zero pages
    // where none are, it changes no byte the guest or Rust sees.
    let rc = unsafe {
        libc::madvise(
            addr as *mut libc::c_void,
            len as usize,
            libc::MADV_POPULATE_WRITE,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resident(ram: &GuestRam, gpa: u64) -> bool {
        let mut v = [0u8; 1];
        // SAFETY: one page of our guest-RAM mapping; mincore writes one byte.
        let rc = unsafe {
            libc::mincore(
                (ram.host_base() + gpa) as *mut libc::c_void,
                4096,
                v.as_mut_ptr(),
            )
        };
        rc == 0 && v[0] & 1 != 0
    }

    #[test]
    fn zero_pages_are_dropped_and_the_others_kept() {
        let ram = GuestRam::new(32 << 20).expect("guest RAM");
        ram.write_bytes(0x1000, &[0u8; 4096]).expect("zero page");
        ram.write_bytes(0x2000, b"kept").expect("data page");
        // Past the 16 MiB step of the scan.
        ram.write_bytes((16 << 20) + 0x3000, &[0u8; 8])
            .expect("zero page 2");
        ram.write_bytes((16 << 20) + 0x4000, &[9u8; 8])
            .expect("data page 2");
        assert!(resident(&ram, 0x1000) && resident(&ram, (16 << 20) + 0x3000));
        assert!(ram.discard_zero_pages(0x1000) >= 2);
        assert!(!resident(&ram, 0x1000), "the zero page went");
        assert!(!resident(&ram, (16 << 20) + 0x3000));
        assert!(resident(&ram, 0x2000) && resident(&ram, (16 << 20) + 0x4000));
        let mut b = [0u8; 4];
        ram.read_bytes(0x2000, &mut b).expect("read");
        assert_eq!(&b, b"kept");
        ram.read_bytes(0x1000, &mut b).expect("read");
        assert_eq!(b, [0; 4]);
        // Below `from` nothing is dropped.
        ram.write_bytes(0, &[0u8; 8]).expect("page 0");
        ram.discard_zero_pages(0x1000);
        assert!(resident(&ram, 0));
    }

    #[test]
    fn resident_runs_of_a_range() {
        let ram = GuestRam::new(32 << 20).expect("guest RAM");
        let base = 8 << 20;
        ram.write_bytes(base + 0x1000, b"a").expect("write");
        ram.write_bytes(base + 0x2000, b"b").expect("write");
        ram.write_bytes(base + (17 << 20), b"c").expect("write");
        assert_eq!(
            ram.resident_runs(base, 20 << 20),
            vec![(base + 0x1000, 0x2000), (base + (17 << 20), 0x1000)]
        );
        // Outside guest RAM, or unaligned: nothing.
        assert!(ram.resident_runs(40 << 20, 0x1000).is_empty());
        assert!(ram.resident_runs(base + 1, 0x1000).is_empty());
    }

    #[test]
    fn populate_backs_a_block_and_keeps_its_bytes() {
        let ram = GuestRam::new(16 << 20).expect("guest RAM");
        let block = 4 << 20;
        ram.write_bytes(block + 0x3000, b"kept").expect("write");
        assert!(!resident(&ram, block));
        assert_eq!(ram.populate(block, 256 << 10), Ok(()));
        assert!((0..64).all(|i| resident(&ram, block + i * 4096)));
        assert!(!resident(&ram, block + (256 << 10)), "only the block");
        let mut b = [9u8; 4];
        ram.read_bytes(block + 0x3000, &mut b).expect("read");
        assert_eq!(&b, b"kept");
        ram.read_bytes(block, &mut b).expect("read");
        assert_eq!(b, [0; 4]);
        // Unaligned, or outside guest RAM: refused, nothing touched.
        assert_eq!(ram.populate(block + 1, 4096), Err(libc::EINVAL));
        assert_eq!(ram.populate(block, 4095), Err(libc::EINVAL));
        assert_eq!(ram.populate(16 << 20, 4096), Err(libc::EINVAL));
        assert_eq!(ram.populate(!0xfff, 8192), Err(libc::EINVAL));
    }
}
