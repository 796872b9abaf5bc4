//! Free guest memory that was warm when the sandbox hibernated.
//!
//! A hibernation hands every free guest page back to the host. The free
//! pages the host still had (the program freed them and had not waited
//! long since: the deferred hand-back keeps them for back-to-back
//! requests) are the ones its next request allocates again; after the
//! wake each of them cost that request a host fault inside the
//! hypervisor's shadow-MMU fault, and without a resident host page KVM's
//! 8-PTE prefetch stops too. So the hibernation notes which free pages
//! were resident when it dropped them, and the wake faults them back in
//! (`MADV_POPULATE_WRITE`: zero pages, as the guest expects of free
//! pages) after the REAP pages. At most [`WARM_MAX`] bytes; the sandbox's
//! PSS once woken is then what it was warm (docs/memory.md, "Warm free
//! memory across a hibernation").

use crate::guest_mem::GuestRam;

/// The most free memory a wake faults back in.
pub const WARM_MAX: u64 = 64 << 20;

/// Runs of free guest pages that were resident when dropped.
#[derive(Debug, Default)]
pub struct WarmFree {
    runs: Vec<(u64, u64)>,
    bytes: u64,
}

impl WarmFree {
    /// The hibernation is about to drop `[gpa, gpa + len)`: notes its
    /// resident runs, up to [`WARM_MAX`] in all.
    pub fn note(&mut self, ram: &GuestRam, gpa: u64, len: u64) {
        if self.bytes >= WARM_MAX {
            return;
        }
        for (start, run) in ram.resident_runs(gpa, len) {
            let take = run.min(WARM_MAX - self.bytes);
            if take == 0 {
                break;
            }
            self.runs.push((start, take));
            self.bytes += take;
        }
    }

    /// Forgets what was noted (a hibernation that starts, or aborts).
    pub fn clear(&mut self) {
        self.runs.clear();
        self.bytes = 0;
    }

    /// Faults the noted runs back in; returns the bytes. A run the host
    /// cannot populate (out of memory) is left to the guest's faults.
    pub fn repopulate(&mut self, ram: &GuestRam) -> u64 {
        let mut done = 0;
        for (gpa, len) in self.runs.drain(..) {
            match ram.populate(gpa, len) {
                Ok(()) => done += len,
                Err(_) => log::debug!("free memory at {gpa:#x}+{len:#x} not faulted back"),
            }
        }
        self.bytes = 0;
        done
    }
}
