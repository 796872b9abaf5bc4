//! The swap file (format: `qlib::swapfile`): slot-addressed pages of
//! swapped-out PTEs. The guest allocates the slots; the VMM writes the
//! pages straight from guest RAM, keeps each slot's checksum, and checks
//! every page it reads back before the guest can see it.

use std::path::Path;

use qlib::abi::SwapPage;
use qlib::swapfile::{self, Entry, FormatError, Kind};

use super::SwapError;
use super::file::PageFile;
use crate::guest_mem::GuestRam;

/// File name in the state directory.
pub const FILE_NAME: &str = "swap.qswap";

/// The sandbox's swap file.
pub struct SwapFile {
    file: PageFile,
    /// Entry of each slot; empty while hibernated (the file has it).
    table: Vec<Entry>,
    /// Slots and checksum of the table last written.
    written: (u64, u32),
}

/// Runs of `pages` with consecutive slots, as `(first slot, pages)`.
fn slot_runs(pages: &[SwapPage]) -> impl Iterator<Item = &[SwapPage]> {
    pages.chunk_by(|a, b| a.slot.checked_add(1) == Some(b.slot))
}

/// Host iovecs for a run of pages, merging pages adjacent in guest RAM.
fn iovecs(ram: &GuestRam, run: &[SwapPage]) -> Result<Vec<libc::iovec>, SwapError> {
    let mut out: Vec<libc::iovec> = Vec::new();
    let mut last_end = u64::MAX;
    for p in run {
        let v = ram
            .host_range(p.gpa, swapfile::PAGE)
            .map_err(|_| SwapError::BadPage(p.gpa))?;
        match out.last_mut() {
            Some(prev) if last_end == p.gpa => prev.iov_len += v.iov_len,
            _ => out.push(v),
        }
        last_end = p.gpa + swapfile::PAGE;
    }
    Ok(out)
}

impl SwapFile {
    /// Creates the swap file in `dir`.
    pub fn create(dir: &Path) -> Result<Self, SwapError> {
        Ok(Self {
            file: PageFile::create(dir.join(FILE_NAME), Kind::Swap)?,
            table: Vec::new(),
            written: (0, 0),
        })
    }

    /// Whether writes bypass the page cache.
    pub fn direct(&self) -> bool {
        self.file.direct
    }

    /// Writes `pages` from guest RAM to their slots; returns the bytes
    /// written. Nothing is dropped from guest RAM here.
    pub fn write(&mut self, ram: &GuestRam, pages: &[SwapPage]) -> Result<u64, SwapError> {
        let slots = ram.size() / swapfile::PAGE;
        for p in pages {
            if p.slot >= slots {
                return Err(SwapError::BadSlot(p.slot));
            }
        }
        for run in slot_runs(pages) {
            let iov = iovecs(ram, run)?;
            self.file
                .write_at(swapfile::page_offset(run[0].slot), &iov)?;
        }
        for p in pages {
            let crc = ram
                .checksum(p.gpa, swapfile::PAGE)
                .map_err(|_| SwapError::BadPage(p.gpa))?;
            let slot = p.slot as usize;
            if self.table.len() <= slot {
                self.table.resize(slot + 1, Entry::default());
            }
            self.table[slot] = Entry::used(0, crc);
        }
        Ok(pages.len() as u64 * swapfile::PAGE)
    }

    /// Writes the table and header.
    pub fn finish(&mut self) -> Result<(), SwapError> {
        let crc = self.file.write_meta(&self.table)?;
        self.written = (self.table.len() as u64, crc);
        Ok(())
    }

    /// Frees the in-memory table (hibernated: the file holds it).
    pub fn release_table(&mut self) {
        self.table = Vec::new();
    }

    /// Reads the table back from the file if it was released (at wake),
    /// checking the header and that it is the table this sandbox wrote.
    pub fn reload(&mut self, ram: &GuestRam) -> Result<(), SwapError> {
        if self.table.is_empty() && self.written.0 > 0 {
            self.table = self
                .file
                .read_meta(ram.size() / swapfile::PAGE, self.written)?;
        }
        Ok(())
    }

    /// Reads `pages` from their slots into guest RAM and checks each
    /// against its checksum; returns the bytes read. On a mismatch the
    /// pages hold unchecked data: the caller must stop the sandbox.
    pub fn read(&mut self, ram: &GuestRam, pages: &[SwapPage]) -> Result<u64, SwapError> {
        let bad = |e| SwapError::Format(self.file.path().display().to_string(), e);
        for p in pages {
            if !self.table.get(p.slot as usize).is_some_and(Entry::is_used) {
                return Err(SwapError::BadSlot(p.slot));
            }
        }
        for run in slot_runs(pages) {
            let iov = iovecs(ram, run)?;
            self.file
                .read_at(swapfile::page_offset(run[0].slot), &iov)?;
        }
        for p in pages {
            let crc = ram
                .checksum(p.gpa, swapfile::PAGE)
                .map_err(|_| SwapError::BadPage(p.gpa))?;
            if crc != self.table[p.slot as usize].crc {
                return Err(bad(FormatError::PageChecksum(p.slot)));
            }
        }
        Ok(pages.len() as u64 * swapfile::PAGE)
    }
}
