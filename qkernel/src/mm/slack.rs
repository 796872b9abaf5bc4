//! The heaps' slack, by address space: pages above a shrunk break that
//! keep their mappings (`AddrSpace::set_brk`, docs/memory.md "Heap
//! slack"). Recorded here, by kernel PGD, so that the hand-back before a
//! wait (`control::return_freed_before_wait`) can offer their frames to
//! the host too: dropped after the wait lasted a while, they read as
//! zeros, which is what they are zeroed to when the heap grows over them
//! again. The address space keeps its own copy of its range; this one
//! follows it.

use alloc::collections::BTreeMap;

use qlib::abi::IoVec;
use qlib::layout::in_file_window;
use qlib::pte::WRITABLE;
use spin::Mutex;

use super::{frames, pagetable};

/// Kernel PGD -> slack `[start, end)`.
static SLACK: Mutex<BTreeMap<u64, (u64, u64)>> = Mutex::new(BTreeMap::new());

/// Records the slack of the address space of `pgd` (none when `start >=
/// end`).
pub fn set(pgd: u64, start: u64, end: u64) {
    let mut map = SLACK.lock();
    if start < end {
        map.insert(pgd, (start, end));
    } else {
        map.remove(&pgd);
    }
}

/// Appends the slack frames that only their heap maps (writable, one
/// reference) to `out`, contiguous ones merged.
pub fn own_runs(out: &mut alloc::vec::Vec<IoVec>) {
    let map = SLACK.lock();
    for (&pgd, &(start, end)) in map.iter() {
        for va in (start..end).step_by(4096) {
            // SAFETY: the map holds the PGDs of live address spaces (an
            // address space clears its entry before it goes).
            let pte = unsafe { pagetable::lookup(pgd, va) };
            let gpa = pte.addr();
            if !pte.present()
                || pte.0 & WRITABLE == 0
                || in_file_window(gpa)
                || frames::user_refs(gpa) != 1
            {
                continue;
            }
            match out.last_mut() {
                Some(last) if last.gpa + last.len == gpa => last.len += 4096,
                _ => out.push(IoVec { gpa, len: 4096 }),
            }
        }
    }
}
