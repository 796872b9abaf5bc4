//! A user address space: page tables, VMAs and the `brk` heap, with the
//! operations behind `mmap`, `munmap`, `mprotect`, `mremap`, `brk` and
//! `madvise`. TLB work is batched: one flush per operation that removed or
//! downgraded present mappings (not-present -> present needs none).

use qlib::layout::in_file_window;
use qlib::pte::{Pte, user_flags};

use super::filecopy::Copies;
use super::frames;
use super::pagetable::PageTables;
use super::vma::{FileBacking, PROT_EXEC, PROT_READ, PROT_WRITE, Vma, VmaKind, VmaSet};
use crate::arch;
use crate::errno::Errno;

/// Lowest address `mmap` hands out (`vm.mmap_min_addr`).
pub const MMAP_MIN: u64 = 0x1_0000;
/// `mmap` places mappings top-down from here.
pub const MMAP_TOP: u64 = 0x7fff_0000_0000;
/// Top of the main thread's stack.
pub const STACK_TOP: u64 = 0x7fff_ffff_e000;
/// Size of the main thread's stack (`RLIMIT_STACK`).
pub const STACK_SIZE: u64 = 8 << 20;
/// Largest `brk` heap.
const BRK_MAX: u64 = 1 << 40;

/// A user address space.
pub struct AddrSpace {
    /// Page tables.
    pub pt: PageTables,
    /// Mapped areas.
    pub vmas: VmaSet,
    /// Start of the `brk` heap.
    pub brk_start: u64,
    /// Current program break.
    pub brk: u64,
    /// Sequential anonymous faults ([`super::fault::anon_window`]).
    pub seq: super::fault::SeqFaults,
    /// End of the heap's slack: the pages of `[page_up(brk), slack_end)`
    /// keep their PTEs after `brk` shrank (see [`Self::set_brk`]); none
    /// when not above the break.
    slack_end: u64,
}

/// Most heap slack an address space keeps ([`AddrSpace::set_brk`]).
pub const SLACK_MAX: u64 = 8 << 20;

/// PTE flags for a VMA protection.
pub fn pte_flags(prot: u32) -> u64 {
    user_flags(prot & PROT_WRITE != 0, prot & PROT_EXEC != 0)
}

impl AddrSpace {
    /// An empty address space.
    pub fn new() -> Self {
        Self {
            pt: PageTables::new(),
            vmas: VmaSet::default(),
            brk_start: 0,
            brk: 0,
            seq: super::fault::SeqFaults::default(),
            slack_end: 0,
        }
    }

    /// Releases every user page and page-table page (`execve` replaced
    /// this space). The return page is the kernel's and is left alone.
    ///
    /// # Safety
    /// CR3 must name another address space's PGD.
    pub unsafe fn free(mut self) {
        // No secondary vCPU may still run on it.
        crate::task::offload::shootdown(self.pt.kernel_cr3());
        let ranges: alloc::vec::Vec<(u64, u64)> = self
            .vmas
            .iter_range(0, u64::MAX)
            .filter(|v| v.kind != VmaKind::Kernel)
            .map(|v| (v.start, v.end))
            .collect();
        for (start, end) in ranges {
            self.release_pages(start, end);
        }
        self.release_slack();
        arch::flush_tlb();
        // SAFETY: the caller guarantees CR3 is elsewhere; the pages the
        // tables named are released.
        unsafe { self.pt.free() };
    }

    /// Adds an anonymous VMA over a free range.
    pub fn add_vma(&mut self, start: u64, end: u64, prot: u32, kind: VmaKind) {
        self.claim(start, end);
        self.vmas.insert(Vma {
            start,
            end,
            prot,
            kind,
            file: None,
        });
    }

    /// Adds a VMA over a free range whose pages below `file.end` are file
    /// pages in the window.
    pub fn add_file_vma(&mut self, start: u64, end: u64, prot: u32, file: FileBacking) {
        self.claim(start, end);
        self.vmas.insert(Vma {
            start,
            end,
            prot,
            kind: VmaKind::Anon,
            file: Some(file),
        });
    }

    /// Maps the kernel page at `gpa` at `va` with `prot` (no write: a
    /// `VmaKind::Kernel` VMA, so `mmap` never picks it, and the program can
    /// neither write it, change its protection, move it nor discard it).
    pub fn map_kernel_page(&mut self, va: u64, gpa: u64, prot: u32) -> Result<(), Errno> {
        self.claim(va, va + 4096);
        let prot = prot & (PROT_READ | PROT_EXEC);
        let leaf = self.pt.leaf(va, true).ok_or(Errno::ENOMEM)?;
        // SAFETY: `leaf` points into a live page-table page of ours.
        unsafe { *leaf = Pte::new(gpa, pte_flags(prot)).0 };
        self.add_vma(va, va + 4096, prot, VmaKind::Kernel);
        Ok(())
    }

    /// Maps every unmapped page of `[start, end)`, which must lie in
    /// VMAs: its file page read-only (see [`FileBacking`]), or a fresh
    /// zeroed page. Returns `ENOMEM` when out of pages.
    pub fn populate(&mut self, start: u64, end: u64) -> Result<(), Errno> {
        self.populate_inner(start, end, false)
    }

    /// [`Self::populate`], but file pages of writable VMAs are copied into
    /// fresh pages (mapped writable).
    pub fn populate_private(&mut self, start: u64, end: u64) -> Result<(), Errno> {
        self.populate_inner(start, end, true)
    }

    /// Gives every present file page of `[start, end)` a private copy
    /// (writable as its VMA allows), so the kernel may write into it.
    pub fn make_private(&mut self, start: u64, end: u64) -> Result<(), Errno> {
        let mut copies = Copies::default();
        let mut flush = false;
        let mut va = start;
        while va < end {
            let pte = self.pt.get(va);
            if pte.present() && in_file_window(pte.addr()) {
                let prot = self.vmas.find(va).map_or(0, |v| v.prot);
                copies.push(&mut self.pt, va, pte.addr(), pte_flags(prot))?;
                flush = true;
            }
            va += 4096;
        }
        copies.finish(&mut self.pt)?;
        if flush {
            arch::flush_tlb();
        }
        Ok(())
    }

    fn populate_inner(&mut self, start: u64, end: u64, copy: bool) -> Result<(), Errno> {
        let mut copies = Copies::default();
        let mut va = start;
        while va < end {
            let vma = self.vmas.find(va).ok_or(Errno::EFAULT)?;
            let (prot, kind) = (vma.prot, vma.kind);
            // A kernel page is mapped by `map_kernel_page` or not at all.
            if kind == VmaKind::Kernel {
                va += 4096;
                continue;
            }
            // Window pages of a file that shrank on the host stay unmapped
            // (a fault there is SIGBUS).
            let file = vma.file.and_then(|f| f.gpa(va));
            if file.is_some_and(super::filemap::is_gone) {
                va += 4096;
                continue;
            }
            let leaf = self.pt.leaf(va, true).ok_or(Errno::ENOMEM)?;
            // SAFETY: `leaf` points into a live page-table page of ours.
            let pte = Pte(unsafe { *leaf });
            // Swapped pages stay swapped: a fault reads them back.
            if let VmaKind::SharedFile { id, delta } = kind {
                // The object's page, shared writable; pages past the
                // file's end stay unmapped (a fault there is SIGBUS).
                if pte.0 == 0
                    && prot != 0
                    && let Some(gpa) = super::sharedfile::page(id, va.wrapping_add(delta) >> 12)?
                {
                    // SAFETY: as above.
                    unsafe { *leaf = Pte::new(gpa, pte_flags(prot)).0 };
                }
            } else if pte.0 == 0 && prot != 0 {
                let new = match file {
                    Some(gpa) if copy && prot & PROT_WRITE != 0 => {
                        copies.push(&mut self.pt, va, gpa, pte_flags(prot))?;
                        va += 4096;
                        continue;
                    }
                    Some(gpa) => Pte::new(gpa, pte_flags(prot) & !qlib::pte::WRITABLE),
                    None => Pte::new(
                        frames::alloc_zeroed().ok_or(Errno::ENOMEM)?,
                        pte_flags(prot),
                    ),
                };
                // SAFETY: as above.
                unsafe { *leaf = new.0 };
            }
            va += 4096;
        }
        copies.finish(&mut self.pt)
    }

    /// Unmaps and releases every page of `[start, end)`; returns whether a
    /// present page was removed (so a TLB flush is due).
    fn release_pages(&mut self, start: u64, end: u64) -> bool {
        let mut removed = false;
        let mut va = start;
        while va < end {
            match self.pt.leaf(va, false) {
                Some(leaf) => {
                    // SAFETY: `leaf` points into a live page-table page.
                    let pte = Pte(unsafe { *leaf });
                    if pte.present() {
                        // SAFETY: as above.
                        unsafe { *leaf = 0 };
                        frames::put(pte.addr());
                        removed = true;
                    } else if pte.swapped() {
                        // SAFETY: as above.
                        unsafe { *leaf = 0 };
                        super::swap::release(pte);
                    }
                    va += 4096;
                }
                // No table: skip to the next 2 MiB boundary.
                None => va = (va | 0x1f_ffff) + 1,
            }
        }
        removed
    }

    /// `munmap`: removes `[start, end)` (page aligned).
    pub fn unmap(&mut self, start: u64, end: u64) {
        let pieces = self.vmas.remove_range(start, end);
        let mut flush = false;
        // `munmap` of a shared file mapping writes it back (the object
        // itself goes when no VMA names it: `sharedfile::reap`).
        let mut written = alloc::vec::Vec::new();
        for v in &pieces {
            if let VmaKind::SharedFile { id, .. } = v.kind
                && !written.contains(&id)
            {
                super::sharedfile::flush(id);
                written.push(id);
            }
        }
        for v in pieces {
            flush |= self.release_pages(v.start, v.end);
        }
        if flush {
            arch::flush_tlb();
        }
    }

    /// `madvise(MADV_DONTNEED)`: drops the pages; they read back as zeros.
    pub fn discard(&mut self, start: u64, end: u64) {
        if self.release_pages(start, end) {
            arch::flush_tlb();
        }
    }

    /// `mprotect` over a fully mapped range.
    pub fn protect(&mut self, start: u64, end: u64, prot: u32) -> Result<(), Errno> {
        if !self.vmas.covers(start, end) {
            return Err(Errno::ENOMEM);
        }
        // Kernel pages (the return page, the vDSO and vvar) keep their
        // protection: a PROT_NONE round trip would otherwise leave their
        // VMA without its page.
        if self
            .vmas
            .iter_range(start, end)
            .any(|v| v.kind == VmaKind::Kernel && v.prot != prot)
        {
            return Err(Errno::EACCES);
        }
        self.vmas.protect(start, end, prot);
        let mut flush = false;
        let mut va = start;
        while va < end {
            if let Some(leaf) = self.pt.leaf(va, false) {
                // SAFETY: `leaf` points into a live page-table page.
                let pte = Pte(unsafe { *leaf });
                if pte.present() {
                    let new = if prot == 0 {
                        // PROT_NONE: keep the page, make it inaccessible.
                        frames::put(pte.addr());
                        0
                    } else if (frames::user_refs(pte.addr()) > 1
                        && !self.vmas.find(va).is_some_and(|v| v.kind.is_shared()))
                        || in_file_window(pte.addr())
                    {
                        // Shared copy-on-write (or a file page): writable
                        // on the next fault.
                        Pte::new(pte.addr(), pte_flags(prot) & !qlib::pte::WRITABLE).0
                    } else {
                        Pte::new(pte.addr(), pte_flags(prot)).0
                    };
                    // SAFETY: as above.
                    unsafe { *leaf = new };
                    flush = true;
                }
            }
            va += 4096;
        }
        if flush {
            arch::flush_tlb();
        }
        Ok(())
    }

    /// Moves the pages of `[old, old + len)` to `new` (both free of
    /// mappings at `new`), keeping their contents.
    pub fn move_pages(&mut self, old: u64, new: u64, len: u64) -> Result<(), Errno> {
        self.claim(new, new.saturating_add(len));
        let mut off = 0;
        while off < len {
            let pte = self.pt.get(old + off);
            if pte.present() || pte.swapped() {
                let dst = self.pt.leaf(new + off, true).ok_or(Errno::ENOMEM)?;
                let src = self.pt.leaf(old + off, false).ok_or(Errno::EFAULT)?;
                // SAFETY: both point into live page-table pages of ours.
                unsafe {
                    *dst = pte.0;
                    *src = 0;
                }
            }
            off += 4096;
        }
        arch::flush_tlb();
        Ok(())
    }

    /// Sets the program break; returns the new (or unchanged) break.
    ///
    /// Shrinking keeps the pages above the new break mapped, up to
    /// [`SLACK_MAX`] of them (the heap's slack), and growing over them
    /// again zeroes them in place: `malloc` trims and regrows its heap on
    /// every large request (`matmul`: 6 MiB a call), and each page mapped
    /// anew costs a fault of the hypervisor's shadow MMU here
    /// (docs/memory.md, "Heap slack"). The difference from Linux: an
    /// access above the break to slack pages does not fault (Linux:
    /// SIGSEGV), nor does a system call given a buffer there fail. A
    /// mapping placed over the slack, `execve` and exit drop it; the
    /// hand-back before a wait offers its frames to the host
    /// ([`super::slack`]).
    pub fn set_brk(&mut self, want: u64) -> u64 {
        if want < self.brk_start || want > self.brk_start + BRK_MAX {
            return self.brk;
        }
        let Some(new_end) = super::page_up(want) else {
            return self.brk;
        };
        let old_end = super::page_up(self.brk).unwrap_or(self.brk);
        if new_end > old_end {
            if self.vmas.overlaps(old_end, new_end) {
                return self.brk;
            }
            let reuse_end = self.slack_end.min(new_end);
            if reuse_end > old_end {
                if self.reuse_slack(old_end, reuse_end) {
                    arch::flush_tlb();
                }
                super::frames::note_slack_reused((reuse_end - old_end) / 4096);
            }
            if self.slack_end <= new_end {
                self.slack_end = 0;
            }
            // Not `add_vma`: what is left of the slack lies above.
            self.vmas.insert(Vma {
                start: old_end,
                end: new_end,
                prot: super::vma::PROT_READ | PROT_WRITE,
                kind: VmaKind::Heap,
                file: None,
            });
        } else if new_end < old_end
            && self
                .vmas
                .iter_range(new_end, old_end)
                .any(|v| v.kind != VmaKind::Heap)
        {
            // Something else was mapped into the heap (`MAP_FIXED`): as
            // `munmap`, which writes shared files back.
            self.release_slack();
            self.unmap(new_end, old_end);
        } else if new_end < old_end {
            // The VMAs go; the pages stay as slack, up to SLACK_MAX.
            self.vmas.remove_range(new_end, old_end);
            let keep = new_end.saturating_add(SLACK_MAX);
            let mut end = self.slack_end.max(old_end);
            if end > keep {
                if self.release_pages(keep, end) {
                    arch::flush_tlb();
                }
                end = keep;
            }
            // Pages released above count as freed already.
            super::frames::note_slack((old_end.min(end) - new_end) / 4096);
            self.slack_end = end;
        }
        self.brk = want;
        self.sync_slack();
        self.brk
    }

    /// Tells [`super::slack`] this space's slack now.
    fn sync_slack(&self) {
        let start = super::page_up(self.brk).unwrap_or(self.brk);
        super::slack::set(self.pt.kernel_cr3(), start, self.slack_end);
    }

    /// Makes the slack pages of `[start, end)` the heap's again: a page
    /// only this space maps, writable, is zeroed in place; any other page
    /// (shared copy-on-write after a fork, swapped out by a hibernation)
    /// is dropped and faults in afresh. Returns whether a present mapping
    /// went (the caller flushes).
    fn reuse_slack(&mut self, start: u64, end: u64) -> bool {
        let mut removed = false;
        let mut va = start;
        while va < end {
            let Some(leaf) = self.pt.leaf(va, false) else {
                va = ((va | 0x1f_ffff) + 1).min(end);
                continue;
            };
            // SAFETY: `leaf` points into a live page-table page of ours.
            let pte = Pte(unsafe { *leaf });
            let own = pte.present()
                && pte.0 & qlib::pte::WRITABLE != 0
                && !in_file_window(pte.addr())
                && frames::user_refs(pte.addr()) == 1;
            if own {
                // SAFETY: a user page of this space alone, in the direct
                // map; nothing else reads it.
                unsafe {
                    core::ptr::write_bytes(super::gpa_to_kva(pte.addr()) as *mut u8, 0, 4096)
                };
            } else if pte.present() || pte.swapped() {
                removed |= self.release_pages(va, va + 4096);
            }
            va += 4096;
        }
        removed
    }

    /// Drops the heap's slack, if any, with a TLB flush.
    fn release_slack(&mut self) {
        let start = super::page_up(self.brk).unwrap_or(self.brk);
        let end = core::mem::take(&mut self.slack_end);
        self.sync_slack();
        if end > start && self.release_pages(start, end) {
            arch::flush_tlb();
        }
    }

    /// A mapping is about to be made over `[start, end)`: the heap's slack
    /// goes first if it lies there.
    fn claim(&mut self, start: u64, end: u64) {
        let slack_start = super::page_up(self.brk).unwrap_or(self.brk);
        if start < self.slack_end && end > slack_start {
            self.release_slack();
        }
    }
}
