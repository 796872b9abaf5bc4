//! How long tasks stay in user mode between entries, for the choice of
//! which run on a secondary vCPU (`qlib::stint::Habit`, docs/smp.md "Who
//! goes to a secondary").
//!
//! A stint on a secondary is timed by `offload` (from its start there to
//! its entry). A stint on vCPU 0 is timed here: [`returning`] notes the
//! TSC when vCPU 0 returns the running task to user mode, [`entered`]
//! reads it at the task's next entry (a syscall or an exception from user
//! mode) and records the stint in the task's `habit`. A short kick (a
//! control request served while the task computes) does not end the
//! stint: the task's time in user mode goes on counting across it, so a
//! task that computes while the VMM posts I/O completions still shows a
//! long stint. With one vCPU none of this runs.
//!
//! vCPU 0 alone uses these statics. Lock: `KERNEL` (to record).

use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};

use qlib::stint::LONG_NS;

use super::{KERNEL, current_pid, offload};
use crate::arch;

/// TSC at the running task's return to user mode.
static SINCE: AtomicU64 = AtomicU64::new(0);
/// The task [`SINCE`] belongs to (0: none).
static PID: AtomicU32 = AtomicU32::new(0);
/// The last entry was a short kick: the stint goes on at the return.
static GOES_ON: AtomicBool = AtomicBool::new(false);

/// vCPU 0 returns the running task to user mode (it stays on vCPU 0).
pub fn returning() {
    if offload::cpus() < 2 {
        return;
    }
    let pid = current_pid();
    if GOES_ON.swap(false, Relaxed) && PID.load(Relaxed) == pid {
        return;
    }
    PID.store(pid, Relaxed);
    SINCE.store(arch::rdtsc(), Relaxed);
}

/// An entry from user mode on vCPU 0; `kick`: the kick interrupt (the
/// kernel cut the stint), else the task's own syscall or exception.
/// Also notes that the task's user mode last ran on vCPU 0 (`getcpu`).
pub fn entered(kick: bool) {
    if offload::cpus() < 2 {
        return;
    }
    let pid = current_pid();
    let timed = PID.load(Relaxed) == pid;
    let ns = crate::time::tsc_to_ns(arch::rdtsc().wrapping_sub(SINCE.load(Relaxed)));
    if let Some(t) = KERNEL.lock().tasks.get_mut(&pid) {
        t.last_cpu = 0;
        if timed {
            t.habit.stint(ns, !kick);
        }
    }
    GOES_ON.store(timed && kick && ns < LONG_NS, Relaxed);
}

/// The vCPU the running task's user mode last ran on (0 with one vCPU).
pub fn last_cpu() -> u32 {
    if offload::cpus() < 2 {
        return 0;
    }
    KERNEL
        .lock()
        .tasks
        .get(&current_pid())
        .map_or(0, |t| u32::from(t.last_cpu))
}
