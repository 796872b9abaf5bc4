//! The REAP file (format: `qlib::swapfile`): the guest's recorded working
//! set, written contiguously at hibernation (the guest keeps its PTEs and
//! frames; the VMM drops the host memory at commit) and read back with
//! large sequential `preadv`s before the guest runs again, by two threads,
//! every page checked before the guest can see it.
//!
//! Measured here (64 MiB, 2 host CPUs, cold O_DIRECT reads into guest RAM
//! dropped at hibernation): one thread read then checked in ~70 + 4 ms;
//! two workers reading and checking 4 MiB chunks take ~50 ms. What is
//! left is the per-4 KiB cost of faulting guest RAM back in on the host
//! (~1.3 us a page) and of 4 KiB direct-I/O segments. Transparent huge
//! pages would cut it to ~20 ms, but on this platform freed 2 MiB blocks
//! are reported to the outer hypervisor (virtio-balloon free page
//! reporting) and the first touch of one costs ~4 ms: the first wake after
//! a hibernation took ~200 ms with them, so they are not used.

use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

use qlib::abi::IoVec;
use qlib::swapfile::{self, Entry, FormatError, Kind};

use super::SwapError;
use super::file::PageFile;
use crate::guest_mem::GuestRam;

/// File name in the state directory.
pub const FILE_NAME: &str = "reap.qreap";

/// The sandbox's REAP file.
pub struct ReapFile {
    file: PageFile,
    /// One entry per page, in file order; released at commit.
    entries: Vec<Entry>,
    /// Pages and table checksum of the file as written.
    written: (u64, u32),
    /// Whether the pages were dropped from guest RAM (and must come back
    /// before the guest runs).
    dropped: bool,
}

/// Merges the pages of `entries` that are adjacent in guest RAM.
fn runs(entries: &[Entry]) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for e in entries {
        match out.last_mut() {
            Some((gpa, len)) if *gpa + *len == e.gpa => *len += swapfile::PAGE,
            _ => out.push((e.gpa, swapfile::PAGE)),
        }
    }
    out
}

/// Pages per read of the read-back (4 MiB): large reads for the disk,
/// small enough that the two workers share the file evenly.
const CHUNK_PAGES: usize = 1024;

/// Checks the pages `range` of `entries` against their checksums; the index
/// of the first that fails.
fn check(ram: &GuestRam, entries: &[Entry], range: Range<usize>) -> Result<(), usize> {
    for i in range {
        let e = &entries[i];
        match ram.checksum(e.gpa, swapfile::PAGE) {
            Ok(crc) if crc == e.crc => {}
            _ => return Err(i),
        }
    }
    Ok(())
}

/// Reads the pages of `entries` (file order, destinations inside guest
/// RAM) and checks each, in chunks shared by two workers (this thread and
/// one more): the two host CPUs fault guest RAM in, checksum and keep two
/// reads in flight, about 1.5x faster than one thread here. The first
/// error stops both. Without a second thread, this one does all of it.
///
/// Two workers only if no page appears twice in `entries` (a guest could
/// have named one twice): then no worker writes a page the other checks.
fn read_checked(file: &PageFile, ram: &GuestRam, entries: &[Entry]) -> Result<(), SwapError> {
    let mut gpas: Vec<u64> = entries.iter().map(|e| e.gpa).collect();
    gpas.sort_unstable();
    let distinct = gpas.windows(2).all(|w| w[0] != w[1]);
    drop(gpas);
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let chunk = |start: usize, end: usize| -> Result<(), SwapError> {
        let mut iov = Vec::new();
        for (gpa, len) in runs(&entries[start..end]) {
            iov.push(
                ram.host_range(gpa, len)
                    .map_err(|_| SwapError::BadPage(gpa))?,
            );
        }
        file.read_at(swapfile::page_offset(start as u64), &iov)?;
        check(ram, entries, start..end).map_err(|i| {
            SwapError::Format(
                file.path().display().to_string(),
                FormatError::PageChecksum(i as u64),
            )
        })
    };
    let work = || -> Result<(), SwapError> {
        while !stop.load(Ordering::Relaxed) {
            let start = next.fetch_add(CHUNK_PAGES, Ordering::Relaxed);
            if start >= entries.len() {
                break;
            }
            let r = chunk(start, (start + CHUNK_PAGES).min(entries.len()));
            if r.is_err() {
                stop.store(true, Ordering::Relaxed);
                return r;
            }
        }
        Ok(())
    };
    std::thread::scope(|scope| {
        let helper = if distinct {
            std::thread::Builder::new()
                .name("reap-read".into())
                .spawn_scoped(scope, work)
                .ok()
        } else {
            None
        };
        let mine = work();
        let theirs = match helper {
            Some(h) => h.join().unwrap_or_else(|_| {
                Err(SwapError::Failed("REAP read-back worker panicked".into()))
            }),
            // No second thread: `work` above did every chunk.
            None => Ok(()),
        };
        mine.and(theirs)
    })
}

impl ReapFile {
    /// Creates the REAP file in `dir`.
    pub fn create(dir: &Path) -> Result<Self, SwapError> {
        Self::create_named(dir, FILE_NAME)
    }

    /// Creates a file of the REAP format named `name` in `dir` (the
    /// parked kernel pages use one too: `controller`, "Kernel pages").
    pub fn create_named(dir: &Path, name: &str) -> Result<Self, SwapError> {
        Ok(Self {
            file: PageFile::create(dir.join(name), Kind::Reap)?,
            entries: Vec::new(),
            written: (0, 0),
            dropped: false,
        })
    }

    /// Starts a new REAP file (a new hibernation).
    pub fn reset(&mut self) {
        self.entries.clear();
        self.written = (0, 0);
        self.dropped = false;
    }

    /// Pages in the file.
    pub fn pages(&self) -> u64 {
        self.entries.len() as u64
    }

    /// Appends the pages of `ranges` (page-aligned guest ranges) to the
    /// file; returns the bytes written.
    pub fn append(&mut self, ram: &GuestRam, ranges: &[IoVec]) -> Result<u64, SwapError> {
        let mut iov = Vec::with_capacity(ranges.len());
        let mut new = Vec::new();
        for r in ranges {
            if !r.gpa.is_multiple_of(swapfile::PAGE) || !r.len.is_multiple_of(swapfile::PAGE) {
                return Err(SwapError::BadPage(r.gpa));
            }
            iov.push(
                ram.host_range(r.gpa, r.len)
                    .map_err(|_| SwapError::BadPage(r.gpa))?,
            );
            for gpa in (r.gpa..r.gpa + r.len).step_by(swapfile::PAGE as usize) {
                let crc = ram
                    .checksum(gpa, swapfile::PAGE)
                    .map_err(|_| SwapError::BadPage(gpa))?;
                new.push(Entry::used(gpa, crc));
            }
        }
        if self.entries.len() as u64 + new.len() as u64 > ram.size() / swapfile::PAGE {
            return Err(SwapError::BadPage(0));
        }
        let offset = swapfile::page_offset(self.entries.len() as u64);
        self.file.write_at(offset, &iov)?;
        let bytes = new.len() as u64 * swapfile::PAGE;
        self.entries.extend(new);
        Ok(bytes)
    }

    /// Writes the table and header.
    pub fn finish(&mut self) -> Result<(), SwapError> {
        let crc = self.file.write_meta(&self.entries)?;
        self.written = (self.entries.len() as u64, crc);
        Ok(())
    }

    /// Drops the pages from guest RAM (commit); they must be read back
    /// with [`ReapFile::read_back`] before the guest runs.
    pub fn drop_pages(&mut self, ram: &GuestRam) {
        for (gpa, len) in runs(&self.entries) {
            if ram.discard(gpa, len).is_err() {
                log::warn!("REAP: could not drop {gpa:#x}+{len:#x}");
            }
        }
        // The file holds the table now; `written` identifies it.
        self.entries = Vec::new();
        self.dropped = true;
    }

    /// Reads the file back into guest RAM in one sequential pass and checks
    /// every page; returns the bytes read. The file's own header and table
    /// are what is trusted (checked, destinations inside guest RAM). On an
    /// error the guest's working set is lost: the caller stops the sandbox.
    /// Two workers read and check it chunk by chunk ([`read_checked`]).
    pub fn read_back(&mut self, ram: &GuestRam) -> Result<u64, SwapError> {
        if !self.dropped {
            return Ok(0);
        }
        let t0 = Instant::now();
        // Refused before RAM is touched unless it is what we wrote.
        let entries = self
            .file
            .read_meta(ram.size() / swapfile::PAGE, self.written)?;
        let runs = runs(&entries);
        for &(gpa, len) in &runs {
            ram.check_range(gpa, len)
                .map_err(|_| SwapError::BadPage(gpa))?;
        }
        let t1 = Instant::now();
        let read = read_checked(&self.file, ram, &entries);
        let t2 = Instant::now();
        log::debug!(
            "REAP read-back: table {} us, read+check {} us, {} runs",
            (t1 - t0).as_micros(),
            (t2 - t1).as_micros(),
            runs.len()
        );
        read?;
        self.dropped = false;
        let bytes = entries.len() as u64 * swapfile::PAGE;
        self.written = (0, 0);
        self.file.invalidate()?;
        Ok(bytes)
    }
}
