//! Deferred hand-back of freed guest memory (docs/memory.md, "Warm
//! latency"). The guest hands back pages the program freed right before a
//! blocking host call (`Reclaim` flagged `RECLAIM_RUNNING |
//! RECLAIM_DEFER`); dropping them at once made a server that frees its
//! request's memory and waits for the next request pay a host fault (and a
//! shadow-MMU fault without the hypervisor's prefetch) for every page the
//! next request touches again. So the ranges are only noted here; the wait
//! that follows drops them once it has lasted [`DEFER_NS`]. When the next
//! call returns first the guest may use the pages again: the ranges are
//! forgotten (the pages are zero, the guest zeroed them when freed, and
//! stay the guest's until a later hand-back).

use std::cell::{Cell, RefCell};

use qlib::abi::IoVec;

use super::Returned;
use crate::guest_mem::GuestRam;

/// How long a wait lasts before the noted ranges are dropped: longer than
/// the gap between back-to-back requests, short against an idle sandbox's
/// life.
pub const DEFER_NS: u64 = 50_000_000;

/// Ranges noted for the current host call.
#[derive(Default)]
pub struct Deferred {
    ranges: RefCell<Vec<IoVec>>,
    /// What was dropped (the `Returned` counts of `qrun do --stats`).
    returned: Cell<Returned>,
}

impl Deferred {
    /// Notes `ranges` (checked by the caller); returns their bytes.
    pub fn note(&self, ranges: Vec<IoVec>) -> u64 {
        let total = ranges.iter().map(|r| r.len).sum();
        self.ranges.borrow_mut().extend(ranges);
        total
    }

    /// Whether ranges wait to be dropped.
    pub fn pending(&self) -> bool {
        !self.ranges.borrow().is_empty()
    }

    /// The wait lasted long enough: drops the noted ranges.
    pub fn drop_now(&self, ram: &GuestRam) {
        let ranges = std::mem::take(&mut *self.ranges.borrow_mut());
        if ranges.is_empty() {
            return;
        }
        let mut total = 0;
        for r in &ranges {
            // Checked when noted; a failure only leaves memory in place.
            if ram.discard(r.gpa, r.len).is_ok() {
                total += r.len;
            }
        }
        let mut ret = self.returned.get();
        ret.calls += 1;
        ret.bytes += total;
        self.returned.set(ret);
        log::debug!("returned {total} bytes freed by the program (deferred)");
    }

    /// The host call the ranges were noted for returns: the guest may
    /// reuse them from now on.
    pub fn forget(&self) {
        self.ranges.borrow_mut().clear();
    }

    /// What was dropped so far.
    pub fn returned(&self) -> Returned {
        self.returned.get()
    }
}
