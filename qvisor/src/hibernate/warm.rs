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
//! pages), on a thread of its own while the guest already runs. At most
//! [`WARM_MAX`] bytes; the sandbox's PSS once woken is then what it was
//! warm (docs/memory.md, "Warm free memory across a hibernation").
//!
//! The thread only ever populates: a page the guest wrote meanwhile keeps
//! its bytes, and a run it cannot populate is left to the guest's faults.
//! The next hibernation stops and joins it before it drops anything
//! ([`Repopulate::finish`]), so nothing it brings back outlives a drop.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use crate::guest_mem::GuestRam;

/// The most free memory a wake faults back in.
pub const WARM_MAX: u64 = 64 << 20;

/// Populated per `madvise`, between checks for a stop.
const STEP: u64 = 2 << 20;

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

    /// Forgets what was noted (a hibernation that starts).
    pub fn clear(&mut self) {
        self.runs.clear();
        self.bytes = 0;
    }

    /// Starts faulting the noted runs back in on a thread; returns it and
    /// the bytes it will populate (`None`, 0: nothing noted, or no thread).
    pub fn start(&mut self, ram: &GuestRam) -> (Option<Repopulate>, u64) {
        let bytes = std::mem::take(&mut self.bytes);
        let runs: Vec<(u64, u64)> = self
            .runs
            .drain(..)
            .filter(|&(gpa, len)| ram.check_range(gpa, len).is_ok())
            .map(|(gpa, len)| (ram.host_base() + gpa, len))
            .collect();
        if runs.is_empty() {
            return (None, 0);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let spawned = std::thread::Builder::new()
            .name("warm-free".into())
            .spawn(move || populate(&runs, &flag));
        match spawned {
            Ok(handle) => (
                Some(Repopulate {
                    handle: Some(handle),
                    stop,
                }),
                bytes,
            ),
            Err(e) => {
                log::debug!("no thread to fault free memory back in: {e}");
                (None, 0)
            }
        }
    }
}

/// Populates `runs` (host addresses inside guest RAM) until `stop`.
fn populate(runs: &[(u64, u64)], stop: &AtomicBool) {
    for &(addr, len) in runs {
        let mut off = 0;
        while off < len && !stop.load(Ordering::Relaxed) {
            let n = STEP.min(len - off);
            // SAFETY: the range lies inside the guest-RAM mapping (checked
            // by `start`), which outlives this thread (`Repopulate` is
            // joined before the hibernation controller, and with it the
            // VMM's guest RAM, goes).
            if unsafe { crate::guest_mem::populate_host(addr + off, n) }.is_err() {
                break;
            }
            off += n;
        }
    }
}

/// The thread faulting warm free memory back in.
#[derive(Debug)]
pub struct Repopulate {
    handle: Option<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
}

impl Repopulate {
    /// Stops the thread where it is and waits for it.
    pub fn finish(mut self) {
        self.join();
    }

    fn join(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Repopulate {
    fn drop(&mut self) {
        self.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noted_runs_come_back_as_zeros_and_written_pages_keep_their_bytes() {
        let ram = GuestRam::new(16 << 20).expect("guest RAM");
        let base = 4 << 20;
        ram.write_bytes(base, &[7u8; 3 * 4096]).expect("write");
        let mut w = WarmFree::default();
        w.note(&ram, base, 1 << 20);
        assert_eq!(w.bytes, 3 * 4096);
        ram.discard(base, 1 << 20).expect("drop");
        assert!(ram.resident_runs(base, 1 << 20).is_empty());
        // The guest wrote one of them again before the thread got there.
        ram.write_bytes(base + 4096, b"new").expect("write");
        let (job, bytes) = w.start(&ram);
        assert_eq!(bytes, 3 * 4096);
        // Let it run to the end (`finish` would stop it where it is).
        let mut job = job.expect("a thread");
        if let Some(h) = job.handle.take() {
            h.join().expect("join");
        }
        assert_eq!(ram.resident_runs(base, 1 << 20), vec![(base, 3 * 4096)]);
        let mut b = [9u8; 3];
        ram.read_bytes(base, &mut b).expect("read");
        assert_eq!(b, [0; 3]);
        ram.read_bytes(base + 4096, &mut b).expect("read");
        assert_eq!(&b, b"new");
        // Nothing noted: no thread.
        assert!(w.start(&ram).0.is_none());
    }
}
