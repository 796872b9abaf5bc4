//! The file window: host files mapped into a guest-physical range above
//! guest RAM ([`FILE_WINDOW_GPA`], [`FILE_WINDOW_SIZE`]), so that the
//! guest's program, library and file-mapping pages are the host's
//! page-cache pages, shared by every sandbox that maps the same file.
//!
//! The window is one KVM memslot over one host reservation (anonymous,
//! `PROT_READ`, `MAP_NORESERVE`: untouched parts cost nothing). Mapping a
//! file replaces a piece of the reservation with `mmap(MAP_FIXED |
//! MAP_PRIVATE, PROT_READ)` of the whole file; KVM's MMU notifier drops any
//! stale translation. A file is mapped once per sandbox: the same device,
//! inode, size and mtime get the same window range (a file replaced or
//! changed on the host gets a new one). Window space is never given back
//! during the sandbox's life: a full window makes the guest copy files
//! into its RAM instead (`-ENOMEM`).
//!
//! The guest maps window pages into user page tables read-only; a write to
//! a `MAP_PRIVATE` page is copied into guest RAM, by the VMM when the
//! guest asks (`Call::CopyPages`, [`FileWindow::copy_pages`]) or by the
//! guest kernel. The VMM itself never reads window memory (`GuestRam`
//! accepts window ranges only as host-I/O iovecs, and copies go through a
//! pipe, where a page beyond a truncated file's end is an `EFAULT` from the
//! host kernel, not a `SIGBUS`).
//!
//! A file shrunk on the host while mapped: the guest's access to a page
//! past its new end makes `KVM_RUN` fail with `EFAULT` (KVM has no page to
//! map; this host's KVM does not say which GPA). [`FileWindow::shrunk`]
//! then finds the files whose last mapped page the host can no longer
//! read (a `write` of it into a pipe: `EFAULT`, never `SIGBUS`),
//! finds each one's first missing page by bisection, puts anonymous zero
//! pages from there to the end of the file's range (so `KVM_RUN` can go
//! on) and keeps the ranges for the guest, which takes them with
//! `Call::WindowGone`, unmaps them from every address space and answers
//! later accesses with `SIGBUS`.
//!
//! Cap: [`FILE_WINDOW_SIZE`] (1 GiB) of files per sandbox, never reused;
//! when a file does not fit, `Call::MapFile` is `-ENOMEM` and the guest
//! copies the file into its RAM instead (where that does not fit either,
//! the program's `mmap` or `execve` gets `ENOMEM`).

use std::collections::HashMap;
use std::os::fd::AsRawFd;

use qlib::layout::{FILE_WINDOW_GPA, FILE_WINDOW_SIZE, PAGE_SIZE};

use crate::guest_mem::GuestRam;

/// What identifies one version of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct FileKey {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
}

/// The files mapped into one sandbox's window.
#[derive(Debug, Default)]
pub struct FileWindow {
    /// Bytes of the window handed out (from its start).
    used: u64,
    /// Mapped files: window offset of byte 0, and the size mapped.
    files: HashMap<FileKey, (u64, u64)>,
    /// Window ranges (GPA, length) of shrunk files given zero pages, not
    /// yet taken by the guest (`Call::WindowGone`).
    gone: Vec<(u64, u64)>,
    /// The pipe [`FileWindow::copy_pages`] copies through (made at its
    /// first use).
    pipe: Option<Probe>,
}

/// Tells whether the host can read a byte of our own memory: writing it
/// into a pipe fails with `EFAULT` for a file page past the file's end,
/// where a plain read would be `SIGBUS`. (Only calls the sandbox's seccomp
/// filter allows.) Also copies window pages into guest RAM that way
/// ([`FileWindow::copy_pages`]).
#[derive(Debug)]
struct Probe {
    r: std::os::fd::OwnedFd,
    w: std::os::fd::OwnedFd,
}

impl Probe {
    fn new() -> Option<Self> {
        use std::os::fd::FromRawFd;
        let mut fds = [0i32; 2];
        // SAFETY: pipe2 writes two fds into a valid array.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
            return None;
        }
        // SAFETY: both fds are fresh and ours.
        Some(unsafe {
            Self {
                r: std::os::fd::OwnedFd::from_raw_fd(fds[0]),
                w: std::os::fd::OwnedFd::from_raw_fd(fds[1]),
            }
        })
    }

    /// `Some(readable)`, or `None` when the probe itself failed.
    fn readable(&self, addr: u64) -> Option<bool> {
        // SAFETY: the kernel reads one byte at `addr` (reporting a bad
        // address as EFAULT) into the pipe; nothing in Rust is accessed.
        let n = unsafe { libc::write(self.w.as_raw_fd(), addr as *const libc::c_void, 1) };
        if n == 1 {
            let mut byte = 0u8;
            // SAFETY: reads back the one byte into a valid buffer.
            unsafe { libc::read(self.r.as_raw_fd(), (&raw mut byte).cast(), 1) };
            return Some(true);
        }
        (std::io::Error::last_os_error().raw_os_error() == Some(libc::EFAULT)).then_some(false)
    }

    /// Copies the pages at host addresses `srcs` to `dsts` (as many, 4 KiB
    /// each, at most [`PIPE_PAGES`]) through the pipe: a source the host
    /// cannot read is `EFAULT` (nothing is read back then).
    ///
    /// # Safety
    /// Every destination must be a writable page of memory no Rust object
    /// lives in (guest RAM).
    unsafe fn copy(&self, srcs: &[libc::iovec], dsts: &[libc::iovec]) -> Result<(), i32> {
        let want = (srcs.len() * PAGE_SIZE as usize) as isize;
        // SAFETY: the kernel reads the source iovecs (EFAULT for a page it
        // cannot read) into the pipe; no Rust object is accessed.
        let n = unsafe { libc::writev(self.w.as_raw_fd(), srcs.as_ptr(), srcs.len() as i32) };
        if n != want {
            let err = if n < 0 {
                std::io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EIO)
            } else {
                libc::EFAULT
            };
            self.drain();
            return Err(err);
        }
        // SAFETY: the caller's contract for the destinations.
        let m = unsafe { libc::readv(self.r.as_raw_fd(), dsts.as_ptr(), dsts.len() as i32) };
        if m != want {
            self.drain();
            return Err(libc::EIO);
        }
        Ok(())
    }

    /// Empties the pipe after a failed copy.
    fn drain(&self) {
        let mut buf = [0u8; 4096];
        // SAFETY: reads into a valid local buffer until the non-blocking
        // pipe is empty.
        while unsafe { libc::read(self.r.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) } > 0 {}
    }
}

/// Pages one pipe round of [`FileWindow::copy_pages`] moves: a pipe's
/// default capacity (64 KiB), so that the write never blocks.
const PIPE_PAGES: usize = 16;

/// Why a file could not be mapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapError {
    /// Not a regular file (or `fstat` failed).
    NotRegular,
    /// The window has no room left for it.
    Full,
    /// The host `mmap` failed with this errno.
    Mmap(i32),
}

impl MapError {
    /// The negated errno the guest gets.
    pub fn errno(self) -> i64 {
        -i64::from(match self {
            Self::NotRegular => libc::ENODEV,
            Self::Full => libc::ENOMEM,
            Self::Mmap(e) => e,
        })
    }
}

impl FileWindow {
    /// Maps the regular file `fd` (whole) into the window of `ram`, or
    /// finds it mapped already; returns the window GPA of its byte 0 and
    /// its size.
    pub fn map(&mut self, ram: &GuestRam, fd: &impl AsRawFd) -> Result<(u64, u64), MapError> {
        // SAFETY: an all-zero `stat` is a valid value for fstat to fill.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fstat writes one `stat` into a valid pointer.
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0
            || st.st_mode & libc::S_IFMT != libc::S_IFREG
        {
            return Err(MapError::NotRegular);
        }
        let key = FileKey {
            dev: st.st_dev,
            ino: st.st_ino,
            size: st.st_size as u64,
            mtime: (st.st_mtime, st.st_mtime_nsec),
        };
        if let Some(&(off, size)) = self.files.get(&key) {
            return Ok((FILE_WINDOW_GPA + off, size));
        }
        let size = key.size;
        let len = size.next_multiple_of(PAGE_SIZE);
        if len == 0 {
            // Nothing to map: an empty file reads as zero pages anyway.
            return Ok((FILE_WINDOW_GPA + self.used, 0));
        }
        if len > FILE_WINDOW_SIZE - self.used {
            return Err(MapError::Full);
        }
        let off = self.used;
        let at = ram.window_host_base() + off;
        // SAFETY: `[at, at + len)` lies inside the window reservation that
        // `ram` owns and no Rust object lives in; MAP_FIXED replaces
        // reservation pages only. The mapping is read-only and private.
        let p = unsafe {
            libc::mmap(
                at as *mut libc::c_void,
                len as usize,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_FIXED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(MapError::Mmap(
                std::io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::ENOMEM),
            ));
        }
        self.used += len;
        self.files.insert(key, (off, size));
        Ok((FILE_WINDOW_GPA + off, size))
    }

    /// `Call::CopyPages`: copies each window page `src` into the guest RAM
    /// page `dst` of `pairs` with the host kernel (through a pipe: a page
    /// past a shrunk file's end is `EFAULT`, never a `SIGBUS` here).
    /// `EINVAL` for a page that is not aligned or outside guest RAM or the
    /// used window.
    pub fn copy_pages(&mut self, ram: &GuestRam, pairs: &[[u64; 2]]) -> Result<(), i32> {
        let mut srcs = Vec::with_capacity(pairs.len());
        let mut dsts = Vec::with_capacity(pairs.len());
        for &[dst, src] in pairs {
            let in_window = src >= FILE_WINDOW_GPA
                && src - FILE_WINDOW_GPA < self.used
                && src.is_multiple_of(PAGE_SIZE);
            if !in_window || !dst.is_multiple_of(PAGE_SIZE) {
                return Err(libc::EINVAL);
            }
            let d = ram.host_range(dst, PAGE_SIZE).map_err(|_| libc::EINVAL)?;
            srcs.push(libc::iovec {
                iov_base: (ram.window_host_base() + (src - FILE_WINDOW_GPA)) as *mut libc::c_void,
                iov_len: PAGE_SIZE as usize,
            });
            dsts.push(d);
        }
        if self.pipe.is_none() {
            self.pipe = Probe::new();
        }
        let pipe = self.pipe.as_ref().ok_or(libc::EMFILE)?;
        for (s, d) in srcs.chunks(PIPE_PAGES).zip(dsts.chunks(PIPE_PAGES)) {
            // SAFETY: every destination is a whole page of guest RAM
            // (`host_range` checked it), where no Rust object lives.
            unsafe { pipe.copy(s, d) }?;
        }
        Ok(())
    }

    /// `KVM_RUN` failed with `EFAULT`: finds the mapped files that shrank
    /// on the host, puts anonymous zero pages over each one's range from
    /// its first missing page on, and records the ranges for the guest.
    /// Returns how many files it found (0: the fault is something else).
    pub fn shrunk(&mut self, ram: &GuestRam) -> usize {
        let base = ram.window_host_base();
        let Some(probe) = Probe::new() else {
            return 0;
        };
        let readable = |addr: u64| probe.readable(addr);
        let ranges: Vec<(u64, u64)> = self
            .files
            .values()
            .map(|&(s, size)| (s, s + size.next_multiple_of(PAGE_SIZE)))
            .collect();
        let mut found = 0;
        for (start, end) in ranges {
            match readable(base + end - PAGE_SIZE) {
                Some(false) if end > start => {}
                Some(_) => continue,
                // The probe failed: tell nothing rather than guess.
                None => return found,
            }
            // The first missing page: pages below a readable one are
            // readable (a file shrinks from its end).
            let (mut lo, mut hi) = (start / PAGE_SIZE, end / PAGE_SIZE - 1);
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                match readable(base + mid * PAGE_SIZE) {
                    Some(true) => lo = mid + 1,
                    Some(false) => hi = mid,
                    None => return found,
                }
            }
            if self.zero(ram, lo * PAGE_SIZE, end) {
                found += 1;
            }
        }
        found
    }

    /// Puts anonymous zero pages over window offsets `[from, end)` and
    /// records the range for the guest.
    fn zero(&mut self, ram: &GuestRam, from: u64, end: u64) -> bool {
        let at = ram.window_host_base() + from;
        // SAFETY: `[at, at + end - from)` lies inside the window reservation
        // `ram` owns (within one mapped file's range), where no Rust object
        // lives; MAP_FIXED replaces that file's pages with zero pages.
        let p = unsafe {
            libc::mmap(
                at as *mut libc::c_void,
                (end - from) as usize,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            log::warn!(
                "file window: zero pages over a shrunk file: {}",
                std::io::Error::last_os_error()
            );
            return false;
        }
        self.gone.push((FILE_WINDOW_GPA + from, end - from));
        true
    }

    /// Takes the ranges [`Self::shrunk`] recorded, at most `max`.
    pub fn take_gone(&mut self, max: usize) -> Vec<(u64, u64)> {
        let n = self.gone.len().min(max);
        self.gone.drain(..n).collect()
    }

    /// Bytes of the window in use.
    #[cfg(test)]
    pub fn used(&self) -> u64 {
        self.used
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn ram() -> GuestRam {
        GuestRam::new(16 << 20).expect("guest RAM")
    }

    fn temp_file(bytes: &[u8]) -> (tempfile_path::Guard, std::fs::File) {
        let g = tempfile_path::Guard::new();
        let mut f = std::fs::File::create(&g.0).expect("create");
        f.write_all(bytes).expect("write");
        let f = std::fs::File::open(&g.0).expect("open");
        (g, f)
    }

    mod tempfile_path {
        /// A temporary path removed on drop.
        pub struct Guard(pub std::path::PathBuf);
        impl Guard {
            pub fn new() -> Self {
                use std::sync::atomic::{AtomicU32, Ordering};
                static N: AtomicU32 = AtomicU32::new(0);
                let n = N.fetch_add(1, Ordering::Relaxed);
                Self(std::env::temp_dir().join(format!("qvisor-window-{}-{n}", std::process::id())))
            }
        }
        impl Drop for Guard {
            fn drop(&mut self) {
                let _ = std::fs::remove_file(&self.0);
            }
        }
    }

    #[test]
    fn a_file_is_mapped_once_and_reads_through_the_window() {
        let ram = ram();
        let mut w = FileWindow::default();
        let (g, f) = temp_file(b"hello window");
        let (gpa, size) = w.map(&ram, &f).expect("map");
        assert_eq!((gpa, size), (FILE_WINDOW_GPA, 12));
        let again = std::fs::File::open(&g.0).expect("open");
        assert_eq!(w.map(&ram, &again), Ok((gpa, 12)), "same file, same range");
        assert_eq!(w.used(), PAGE_SIZE);
        let iov = ram.host_iovecs_checked(&[qlib::abi::IoVec { gpa, len: 12 }]);
        let iov = iov.expect("window ranges are host-I/O iovecs");
        // SAFETY: the iovec names 12 readable bytes of the window mapping.
        let bytes = unsafe { std::slice::from_raw_parts(iov[0].iov_base as *const u8, 12) };
        assert_eq!(bytes, b"hello window");
        let (_g2, other) = temp_file(b"x");
        assert_eq!(w.map(&ram, &other), Ok((FILE_WINDOW_GPA + PAGE_SIZE, 1)));
    }

    #[test]
    fn pages_are_copied_into_guest_ram_and_a_shrunk_file_is_efault() {
        let ram = ram();
        let mut w = FileWindow::default();
        let mut bytes = vec![0u8; 20 * PAGE_SIZE as usize];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (i / PAGE_SIZE as usize) as u8 + 1;
        }
        let (g, f) = temp_file(&bytes);
        let (gpa, _) = w.map(&ram, &f).expect("map");
        // 18 pages (more than one pipe round), in reverse order.
        let pairs: Vec<[u64; 2]> = (0..18)
            .map(|i| [(1 << 20) + i * PAGE_SIZE, gpa + (17 - i) * PAGE_SIZE])
            .collect();
        assert_eq!(w.copy_pages(&ram, &pairs), Ok(()));
        for i in 0..18u64 {
            let mut page = vec![0u8; PAGE_SIZE as usize];
            ram.read_bytes((1 << 20) + i * PAGE_SIZE, &mut page)
                .expect("read");
            assert!(page.iter().all(|&b| b == 18 - i as u8), "page {i}");
        }
        // Unaligned, outside guest RAM or past the window's used part.
        let bad = [
            [(1 << 20) + 1, gpa],
            [16 << 20, gpa],
            [1 << 20, gpa + 1],
            [1 << 20, gpa + 20 * PAGE_SIZE],
            [1 << 20, 0],
        ];
        for pair in bad {
            assert_eq!(w.copy_pages(&ram, &[pair]), Err(libc::EINVAL), "{pair:x?}");
        }
        // Shrunk on the host: the missing page is an error, not a SIGBUS,
        // and the pipe is left empty for the next copy.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&g.0)
            .and_then(|f| f.set_len(2 * PAGE_SIZE))
            .expect("shrink");
        let pairs = [[1 << 20, gpa], [(1 << 20) + PAGE_SIZE, gpa + 5 * PAGE_SIZE]];
        assert_eq!(w.copy_pages(&ram, &pairs), Err(libc::EFAULT));
        assert_eq!(w.copy_pages(&ram, &[[3 << 20, gpa + PAGE_SIZE]]), Ok(()));
        let mut page = vec![0u8; PAGE_SIZE as usize];
        ram.read_bytes(3 << 20, &mut page).expect("read");
        assert!(page.iter().all(|&b| b == 2));
    }

    #[test]
    fn a_shrunk_file_gets_zero_pages_from_its_first_missing_page() {
        let ram = ram();
        let mut w = FileWindow::default();
        let (_g0, intact) = temp_file(&[1u8; 2 * PAGE_SIZE as usize]);
        w.map(&ram, &intact).expect("map");
        let (g, f) = temp_file(&[7u8; 5 * PAGE_SIZE as usize]);
        let (gpa, _) = w.map(&ram, &f).expect("map");
        assert_eq!(w.shrunk(&ram), 0, "nothing shrank yet");
        std::fs::OpenOptions::new()
            .write(true)
            .open(&g.0)
            .and_then(|f| f.set_len(PAGE_SIZE + 100))
            .expect("shrink");
        assert_eq!(w.shrunk(&ram), 1);
        assert_eq!(w.shrunk(&ram), 0, "zero pages now: found once");
        let iov = ram.host_iovecs_checked(&[qlib::abi::IoVec {
            gpa,
            len: 5 * PAGE_SIZE,
        }]);
        let iov = iov.expect("window iovec");
        // SAFETY: the iovec names five readable pages of the window now.
        let bytes = unsafe {
            std::slice::from_raw_parts(iov[0].iov_base as *const u8, 5 * PAGE_SIZE as usize)
        };
        let page = PAGE_SIZE as usize;
        assert!(bytes[..100].iter().all(|&b| b == 7), "the kept part");
        assert!(bytes[page + 100..2 * page].iter().all(|&b| b == 0));
        assert!(bytes[2 * page..].iter().all(|&b| b == 0), "zero pages");
        assert_eq!(w.take_gone(8), vec![(gpa + 2 * PAGE_SIZE, 3 * PAGE_SIZE)]);
        assert!(w.take_gone(8).is_empty());
    }

    #[test]
    fn non_regular_files_and_a_full_window_are_refused() {
        let ram = ram();
        let mut w = FileWindow::default();
        let dir = std::fs::File::open("/").expect("open /");
        assert_eq!(w.map(&ram, &dir), Err(MapError::NotRegular));
        w.used = FILE_WINDOW_SIZE;
        let (_g, f) = temp_file(b"abc");
        assert_eq!(w.map(&ram, &f), Err(MapError::Full));
        assert_eq!(MapError::Full.errno(), -i64::from(libc::ENOMEM));
    }
}
