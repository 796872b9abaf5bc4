//! Which tasks the guest kernel sends to a secondary vCPU (docs/smp.md,
//! "Who goes to a secondary").
//!
//! A task's user mode runs on a secondary vCPU only while vCPU 0 does its
//! kernel work, so every syscall or fault of a task on a secondary is a
//! round trip to vCPU 0 (two host calls). That pays for a task that
//! computes for a long time between entries, and costs a task that comes
//! back within a few microseconds many times more than it gains. A
//! [`Habit`] remembers how a task's recent *stints* in user mode (from
//! the return to user mode to the next entry) ended: a task whose last
//! [`SHORT_STINTS`] stints each ended with a syscall or fault in less than
//! [`LONG_NS`] stays on vCPU 0; one stint of [`LONG_NS`] or more, however
//! it ended, makes it eligible again. A stint cut short by the kernel (a
//! kick or a recall: preemption, a control request, a wake, a TLB
//! shootdown) says nothing about the task and leaves the habit as it
//! was. A new task stays on vCPU 0 until it shows a long stint: most
//! tasks a program starts make a few syscalls and end or block (a round
//! trip each would double what they cost), and one that computes shows it
//! within a short slice (the VMM's slice watcher samples every
//! millisecond while a task waits and a secondary is idle).

/// A stint in user mode at least this long (ns) shows a task that
/// computes: 1 ms, ten times what a round trip to vCPU 0 costs on a
/// loaded machine.
pub const LONG_NS: u64 = 1_000_000;

/// Short stints in a row (each ended by a syscall or fault) after which
/// a task that computed stays on vCPU 0: more than one, so that a worker
/// that computes, then wakes another and waits (two short stints) keeps
/// going to a secondary.
pub const SHORT_STINTS: u8 = 3;

/// How a task's recent stints in user mode went.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Habit {
    /// Short stints in a row that the task ended itself (saturating).
    short: u8,
}

impl Habit {
    /// A new task's: it stays on vCPU 0 until it shows a long stint.
    pub const fn new() -> Self {
        Self {
            short: SHORT_STINTS,
        }
    }

    /// A stint of `ns` in user mode ended; `own`: by the task's syscall
    /// or fault (not by a kick or a recall).
    pub fn stint(&mut self, ns: u64, own: bool) {
        if ns >= LONG_NS {
            self.short = 0;
        } else if own {
            self.short = self.short.saturating_add(1);
        }
    }

    /// Whether the task should stay on vCPU 0 (it keeps coming back
    /// quickly).
    pub fn stays(self) -> bool {
        self.short >= SHORT_STINTS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_task_stays_until_it_computes() {
        let mut h = Habit::new();
        assert!(h.stays());
        h.stint(LONG_NS - 1, false);
        assert!(h.stays());
        h.stint(LONG_NS, false);
        assert!(!h.stays());
    }

    #[test]
    fn short_stints_in_a_row_keep_it_on_vcpu_0() {
        let mut h = Habit::new();
        h.stint(LONG_NS, true);
        for _ in 0..SHORT_STINTS - 1 {
            h.stint(5_000, true);
            assert!(!h.stays());
        }
        h.stint(5_000, true);
        assert!(h.stays());
        for _ in 0..1000 {
            h.stint(1, true);
        }
        assert!(h.stays());
    }

    #[test]
    fn one_long_stint_makes_it_eligible_again() {
        let mut h = Habit::new();
        for _ in 0..10 {
            h.stint(5_000, true);
        }
        h.stint(LONG_NS, false);
        assert!(!h.stays());
        let mut h2 = Habit::new();
        for _ in 0..10 {
            h2.stint(5_000, true);
        }
        h2.stint(LONG_NS * 20, true);
        assert!(!h2.stays());
    }

    #[test]
    fn short_kicks_and_recalls_change_nothing() {
        let mut h = Habit::new();
        h.stint(LONG_NS, true);
        for _ in 0..100 {
            h.stint(10, false);
        }
        assert!(!h.stays());
        for _ in 0..SHORT_STINTS {
            h.stint(10, true);
        }
        h.stint(10, false);
        assert!(h.stays());
    }
}
