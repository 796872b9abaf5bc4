//! The REAP file (format: `qlib::swapfile`): the guest's recorded working
//! set, written contiguously at hibernation (the guest keeps its PTEs and
//! frames; the VMM drops the host memory at commit) and read back with
//! large sequential `preadv`s before the guest runs again.

use std::path::Path;

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

impl ReapFile {
    /// Creates the REAP file in `dir`.
    pub fn create(dir: &Path) -> Result<Self, SwapError> {
        Ok(Self {
            file: PageFile::create(dir.join(FILE_NAME), Kind::Reap)?,
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
    pub fn read_back(&mut self, ram: &GuestRam) -> Result<u64, SwapError> {
        if !self.dropped {
            return Ok(0);
        }
        // Refused before RAM is touched unless it is what we wrote.
        let entries = self
            .file
            .read_meta(ram.size() / swapfile::PAGE, self.written)?;
        let mut iov = Vec::new();
        for (gpa, len) in runs(&entries) {
            iov.push(
                ram.host_range(gpa, len)
                    .map_err(|_| SwapError::BadPage(gpa))?,
            );
        }
        self.file.read_at(swapfile::page_offset(0), &iov)?;
        for (i, e) in entries.iter().enumerate() {
            let crc = ram
                .checksum(e.gpa, swapfile::PAGE)
                .map_err(|_| SwapError::BadPage(e.gpa))?;
            if crc != e.crc {
                return Err(SwapError::Format(
                    self.file.path().display().to_string(),
                    FormatError::PageChecksum(i as u64),
                ));
            }
        }
        self.dropped = false;
        let bytes = entries.len() as u64 * swapfile::PAGE;
        self.written = (0, 0);
        self.file.clear()?;
        Ok(bytes)
    }
}
