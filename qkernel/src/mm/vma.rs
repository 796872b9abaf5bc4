//! Virtual memory areas of a user address space: non-overlapping ranges
//! with a protection, kept in a `BTreeMap` by start address.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

/// `PROT_READ`.
pub const PROT_READ: u32 = 1;
/// `PROT_WRITE`.
pub const PROT_WRITE: u32 = 2;
/// `PROT_EXEC`.
pub const PROT_EXEC: u32 = 4;

/// What a VMA holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VmaKind {
    /// Anonymous memory (`mmap`, program segments' zero fill).
    Anon,
    /// `MAP_SHARED | MAP_ANONYMOUS` memory: a fork shares its frames
    /// (writable in both processes) instead of copying them on write.
    /// Region `id` (one per `mmap`, kept by forks), in which address `va`
    /// is at offset `va.wrapping_add(delta)`: shared futexes are keyed by
    /// them, so processes meet on a word wherever they map it.
    SharedAnon {
        /// The region.
        id: u32,
        /// Offset minus address.
        delta: u64,
    },
    /// The `brk` heap.
    Heap,
    /// The main thread's stack.
    Stack,
    /// A `MAP_SHARED` mapping of a file opened for writing: the pages of
    /// object `id` (`super::sharedfile`), shared writable by every mapping
    /// of the file; the file offset of address `va` is
    /// `va.wrapping_add(delta)` (absolute, so a split keeps it).
    SharedFile {
        /// The object.
        id: u32,
        /// File offset minus address.
        delta: u64,
    },
    /// A kernel page shown to the program (`arch::user_return`), not a
    /// user frame.
    Kernel,
}

impl VmaKind {
    /// Whether a fork and a write share the frames instead of copying them
    /// (`MAP_SHARED`).
    pub fn is_shared(self) -> bool {
        matches!(self, Self::SharedAnon { .. } | Self::SharedFile { .. })
    }

    /// The shared-file object, if any.
    fn object(self) -> Option<u32> {
        match self {
            Self::SharedFile { id, .. } => Some(id),
            _ => None,
        }
    }
}

/// File pages behind part of a VMA: host page-cache pages in the file
/// window (`super::filemap`), mapped read-only; a write copies the page
/// into guest RAM (`MAP_PRIVATE`). Both fields are absolute, so a VMA
/// split keeps them unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileBacking {
    /// The window GPA of user address `va` is `va.wrapping_add(delta)`.
    pub delta: u64,
    /// User addresses at or above this are past the file's end:
    /// anonymous zero pages.
    pub end: u64,
}

impl FileBacking {
    /// The window page behind the user page `va`, if the file reaches it.
    pub fn gpa(&self, va: u64) -> Option<u64> {
        (va < self.end).then(|| va.wrapping_add(self.delta))
    }
}

/// A mapped range `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vma {
    /// First address.
    pub start: u64,
    /// End (exclusive).
    pub end: u64,
    /// `PROT_*` bits.
    pub prot: u32,
    /// Kind.
    pub kind: VmaKind,
    /// File pages behind it, if any.
    pub file: Option<FileBacking>,
}

/// The VMAs of an address space.
#[derive(Default)]
pub struct VmaSet {
    map: BTreeMap<u64, Vma>,
}

impl Drop for VmaSet {
    fn drop(&mut self) {
        for v in self.map.values() {
            if let Some(id) = v.kind.object() {
                super::sharedfile::vma_removed(id);
            }
        }
    }
}

impl VmaSet {
    /// Stores `v` (keeping shared-file objects' VMA counts).
    fn put(&mut self, v: Vma) {
        if let Some(id) = v.kind.object() {
            super::sharedfile::vma_added(id);
        }
        if let Some(old) = self.map.insert(v.start, v)
            && let Some(id) = old.kind.object()
        {
            super::sharedfile::vma_removed(id);
        }
    }

    /// Removes the VMA starting at `start` (keeping the counts).
    fn take(&mut self, start: u64) -> Option<Vma> {
        let v = self.map.remove(&start)?;
        if let Some(id) = v.kind.object() {
            super::sharedfile::vma_removed(id);
        }
        Some(v)
    }

    /// The VMA containing `addr`.
    pub fn find(&self, addr: u64) -> Option<&Vma> {
        let (_, v) = self.map.range(..=addr).next_back()?;
        (addr < v.end).then_some(v)
    }

    /// Whether any VMA overlaps `[start, end)`.
    pub fn overlaps(&self, start: u64, end: u64) -> bool {
        self.iter_range(start, end).next().is_some()
    }

    /// VMAs overlapping `[start, end)`, in order.
    pub fn iter_range(&self, start: u64, end: u64) -> impl Iterator<Item = &Vma> {
        let first = match self.map.range(..=start).next_back() {
            Some((&s, v)) if v.end > start => s,
            _ => start,
        };
        self.map
            .range(first..end)
            .map(|(_, v)| v)
            .filter(move |v| v.end > start)
    }

    /// Whether `[start, end)` is covered without holes.
    pub fn covers(&self, start: u64, end: u64) -> bool {
        let mut at = start;
        for v in self.iter_range(start, end) {
            if v.start > at {
                return false;
            }
            at = v.end;
        }
        at >= end
    }

    /// Splits the VMA containing `addr` so that a VMA starts at `addr`.
    pub fn split_at(&mut self, addr: u64) {
        let Some(v) = self.find(addr).copied() else {
            return;
        };
        if v.start == addr {
            return;
        }
        self.put(Vma { end: addr, ..v });
        self.put(Vma { start: addr, ..v });
    }

    /// Removes `[start, end)` from the set; returns the removed pieces.
    pub fn remove_range(&mut self, start: u64, end: u64) -> Vec<Vma> {
        self.split_at(start);
        self.split_at(end);
        let keys: Vec<u64> = self.iter_range(start, end).map(|v| v.start).collect();
        keys.iter().filter_map(|&k| self.take(k)).collect()
    }

    /// Inserts a VMA; the range must be free. Merges with an equal
    /// neighbour on either side.
    pub fn insert(&mut self, mut vma: Vma) {
        if let Some(prev) = self.map.range(..vma.start).next_back().map(|(_, v)| *v)
            && prev.end == vma.start
            && prev.prot == vma.prot
            && prev.kind == vma.kind
            && prev.file == vma.file
        {
            self.take(prev.start);
            vma.start = prev.start;
        }
        if let Some(next) = self.map.get(&vma.end).copied()
            && next.prot == vma.prot
            && next.kind == vma.kind
            && next.file == vma.file
        {
            self.take(next.start);
            vma.end = next.end;
        }
        self.put(vma);
    }

    /// Sets the protection of `[start, end)`, which must be covered.
    pub fn protect(&mut self, start: u64, end: u64, prot: u32) {
        for v in self.remove_range(start, end) {
            self.insert(Vma { prot, ..v });
        }
    }

    /// The highest free range of `len` bytes ending at or below `top` and
    /// starting at or above `bottom`.
    pub fn find_free(&self, len: u64, bottom: u64, top: u64) -> Option<u64> {
        let mut hole_end = top;
        for (_, v) in self.map.range(..top).rev() {
            if v.end <= hole_end && hole_end - v.end >= len {
                return Some(hole_end - len).filter(|&s| s >= bottom);
            }
            hole_end = hole_end.min(v.start);
            if hole_end < bottom {
                return None;
            }
        }
        hole_end.checked_sub(len).filter(|&s| s >= bottom)
    }
}
