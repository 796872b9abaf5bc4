//! User page faults: demand paging with fault-around. A fault costs
//! ~8.5 µs here, so one fault maps a whole aligned window of pages of the
//! VMA (not-present -> present needs no TLB flush).

use qlib::layout::in_file_window;
use qlib::pte::{Pte, WRITABLE};

use super::{frames, gpa_to_kva};

use super::addr_space::{AddrSpace, pte_flags};
use super::vma::{PROT_EXEC, PROT_READ, PROT_WRITE, VmaKind};

/// Pages mapped per fault (an aligned window around the faulting page).
pub const FAULT_AROUND_PAGES: u64 = 16;
/// Pages a read fault on a file-window mapping maps around the faulting
/// one (256 KiB, aligned): mapping a window page costs only its PTE (the
/// page is the host page cache's), and each guest fault saved is ~75 us
/// here (Python's imports: 258 faults -> 188, docs/coldstart.md).
pub const FILE_FAULT_AROUND_PAGES: u64 = 64;

/// The most pages one fault maps ahead in anonymous memory touched in
/// order (2 MiB, the size of a huge page Linux would fault in).
pub const SEQ_MAX_PAGES: u64 = 512;

/// Where the last anonymous fault-ahead of an address space ended and
/// how many pages it mapped: a fault right there is sequential (a heap or
/// a large array written from start to end), and the next window doubles,
/// up to [`SEQ_MAX_PAGES`], as readahead does for files. A fault takes
/// ~75 µs on this hypervisor (docs/platform-notes.md); a 2 MiB array
/// written in order took 32 of them at 16 pages each, now 7. At most
/// about as much as was already touched in order is mapped ahead of use.
#[derive(Debug, Default, Clone, Copy)]
pub struct SeqFaults {
    /// End of the last window (0: none).
    next: u64,
    /// Pages in the last window.
    pages: u64,
}

/// The window `[start, end)` a not-present fault at `page` of anonymous
/// private memory `vma` maps: the aligned [`FAULT_AROUND_PAGES`] window,
/// or, when the fault is where the previous window ended, twice that
/// window's pages from `page` on (within the VMA).
pub fn anon_window(seq: &mut SeqFaults, vma: &super::vma::Vma, page: u64) -> (u64, u64) {
    let window = FAULT_AROUND_PAGES * 4096;
    let aligned = (page & !(window - 1)).max(vma.start);
    let (start, pages) = if seq.next == page && seq.pages != 0 {
        (page, (seq.pages * 2).min(SEQ_MAX_PAGES))
    } else {
        (aligned, FAULT_AROUND_PAGES)
    };
    let end = start.saturating_add(pages * 4096).min(vma.end);
    *seq = SeqFaults { next: end, pages };
    (start, end)
}

/// #PF error-code bits.
const PF_PRESENT: u64 = 1;
const PF_WRITE: u64 = 2;
const PF_FETCH: u64 = 16;

/// Why a fault could not be resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultError {
    /// No VMA, or the access is not allowed: SIGSEGV.
    Segv,
    /// Out of memory: the program is killed (SIGKILL, as the OOM killer).
    Oom,
    /// A file mapping's page past the file's end: SIGBUS.
    Bus,
}

/// Whether a VMA with `prot` allows the access described by `error`.
fn allowed(prot: u32, error: u64) -> bool {
    if error & PF_WRITE != 0 {
        prot & PROT_WRITE != 0
    } else if error & PF_FETCH != 0 {
        prot & PROT_EXEC != 0
    } else {
        prot & (PROT_READ | PROT_WRITE | PROT_EXEC) != 0
    }
}

/// The error code of a fault as if it were taken now, on the page's
/// current PTE `pte`. The present bit says what the PTE was when the
/// fault was taken; a fault of a task on a secondary vCPU is served later,
/// on vCPU 0 (docs/smp.md), and meanwhile a hibernation may have swapped
/// the page out, or `munmap`/`mmap` cleared the PTE. Served as a
/// protection fault, the swap entry's slot bits were taken for a frame
/// and mapped writable into the program: it wrote its data into guest
/// kernel memory (docs/smp.md, "The 2-vCPU hibernation failure"). A page
/// that became present meanwhile keeps the bit clear: the not-present
/// path skips present PTEs and the retried access faults again if it
/// still must.
fn as_now(error: u64, pte: Pte) -> u64 {
    if pte.present() {
        error
    } else {
        error & !PF_PRESENT
    }
}

/// Resolves a fault at `addr` with #PF error code `error`.
pub fn handle(mm: &mut AddrSpace, addr: u64, error: u64) -> Result<(), FaultError> {
    let vma = *mm.vmas.find(addr).ok_or(FaultError::Segv)?;
    if !allowed(vma.prot, error) {
        return Err(FaultError::Segv);
    }
    let page = addr & !0xfff;
    let error = as_now(error, mm.pt.get(page));
    // Kernel pages (vDSO, vvar, return page) are mapped whole or not at
    // all: nothing to fault in.
    if vma.kind == VmaKind::Kernel && error & PF_PRESENT == 0 {
        return Err(FaultError::Segv);
    }
    if error & PF_PRESENT == 0 && mm.pt.get(page).swapped() {
        return super::swap::swap_in(mm, &vma, page);
    }
    if error & PF_PRESENT == 0 {
        let pages = if vma.file.is_some() && error & PF_WRITE == 0 {
            FILE_FAULT_AROUND_PAGES
        } else {
            FAULT_AROUND_PAGES
        };
        let window = pages * 4096;
        let start = (page & !(window - 1)).max(vma.start);
        let mut end = ((page & !(window - 1)) + window).min(vma.end);
        // A file that shrank on the host past this page.
        if vma
            .file
            .and_then(|f| f.gpa(page))
            .is_some_and(super::filemap::is_gone)
        {
            return Err(FaultError::Bus);
        }
        if let VmaKind::SharedFile { id, delta } = vma.kind {
            // Only pages the file reaches; one host read for the missing
            // ones of the window.
            let size = super::sharedfile::size(id).ok_or(FaultError::Bus)?;
            let last = size.div_ceil(4096);
            let first = start.wrapping_add(delta) >> 12;
            if page.wrapping_add(delta) >> 12 >= last {
                return Err(FaultError::Bus);
            }
            end = end.min(start + (last - first.min(last)) * 4096);
            let n = (end - start) / 4096;
            super::sharedfile::prefetch(id, first, first + n).map_err(|_| FaultError::Oom)?;
        }
        // A write to a private file mapping: the window's file pages are
        // copied straight into the empty PTEs (data segments are written
        // all over; a read-only mapping first would cost a TLB flush per
        // page on the next write).
        if error & PF_WRITE != 0 && vma.file.is_some() {
            return mm.populate_private(start, end).map_err(|_| FaultError::Oom);
        }
        if vma.file.is_none() && matches!(vma.kind, VmaKind::Anon | VmaKind::Heap) {
            let (start, end) = anon_window(&mut mm.seq, &vma, page);
            crate::stats::mapped((end - start) / 4096);
            // Near the memory limit only the page itself must fit: what
            // was mapped ahead stays (zero pages of the program's own).
            return mm
                .populate(start, end)
                .or_else(|_| mm.populate(page, page + 4096))
                .map_err(|_| FaultError::Oom);
        }
        crate::stats::mapped((end - start) / 4096);
        return mm.populate(start, end).map_err(|_| FaultError::Oom);
    }
    {
        let leaf = mm.pt.leaf(page, false).ok_or(FaultError::Segv)?;
        // SAFETY: `leaf` points into a live page-table page.
        let pte = Pte(unsafe { *leaf });
        let gpa = pte.addr();
        // A file page is shared with the page cache: never written.
        // Frames of `MAP_SHARED` anonymous memory stay shared on write.
        let shared = pte.present()
            && !vma.kind.is_shared()
            && (frames::user_refs(gpa) > 1 || in_file_window(gpa));
        if shared && error & PF_WRITE != 0 && in_file_window(gpa) {
            // A write to a file page of a private mapping (a data
            // segment read first): the window's other file pages get
            // their copies too, under one TLB flush (the flush costs
            // far more than the copies).
            let window = FAULT_AROUND_PAGES * 4096;
            let start = (page & !(window - 1)).max(vma.start);
            let end = ((page & !(window - 1)) + window).min(vma.end);
            return mm.make_private(start, end).map_err(|_| FaultError::Oom);
        }
        let mut flags = pte_flags(vma.prot);
        let new = if shared && error & PF_WRITE != 0 {
            // Copy-on-write after fork, or a write to a private file
            // page: this space gets its own copy.
            let copy = copy_page(gpa).ok_or(FaultError::Oom)?;
            frames::put(gpa);
            copy
        } else {
            // A stale, more restrictive PTE (e.g. after mprotect upgraded
            // the VMA, or the last sharer of a copy-on-write page): refresh
            // it from the VMA; a page still shared stays read-only.
            if shared {
                flags &= !WRITABLE;
            }
            gpa
        };
        // SAFETY: as above.
        unsafe { *leaf = Pte::new(new, flags).0 };
        crate::arch::flush_tlb();
        Ok(())
    }
}

/// A fresh user page holding a copy of the page at `src` (a user page or
/// a file-window page, both in the direct map); `None` when out of pages.
pub fn copy_page(src: u64) -> Option<u64> {
    let copy = frames::alloc_zeroed()?;
    // SAFETY: both are whole pages in the direct map; `copy` is fresh and
    // nobody else maps it.
    unsafe {
        core::ptr::copy_nonoverlapping(
            gpa_to_kva(src) as *const u8,
            gpa_to_kva(copy) as *mut u8,
            4096,
        );
    }
    Some(copy)
}
