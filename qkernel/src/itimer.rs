//! The real-time interval timer (`ITIMER_REAL`, which `alarm` also sets):
//! one per process, kept across `execve` and not inherited by `fork`, as
//! on Linux. The deadline lives in the guest's timer queue
//! (`task::timers`), which keeps the VMM's one alarm timerfd armed at the
//! nearest alarm of any process; when it goes off the VMM posts
//! `control::ALARM` (quietly while the sandbox is hibernated: timers do
//! not wake it), which wakes a blocked host call or kicks the running
//! program, and [`fire`] sends `SIGALRM` (`si_code` `SI_KERNEL`, as
//! Linux's `it_real_fn`) to the process that armed the timer, re-arming an
//! interval timer. The guest's clock and the host's may differ by a
//! little, so an alarm that arrives before the guest sees its deadline is
//! simply armed again.

use crate::task::{current_tgid, timers};

/// What is left of the running process's timer: (ns until it goes off, 0
/// if disarmed; interval ns).
pub fn get() -> (u64, u64) {
    timers::alarm(current_tgid())
}

/// Arms the running process's timer to go off in `value` ns, then every
/// `interval` ns (0: once); `value` 0 disarms. Returns the old
/// (remaining, interval).
pub fn set(value: u64, interval: u64) -> (u64, u64) {
    timers::set_alarm(current_tgid(), value, interval)
}

/// The VMM's alarm went off: fires what is due.
pub fn fire() {
    timers::host_alarm_fired();
}
