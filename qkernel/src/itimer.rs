//! The real-time interval timer (`ITIMER_REAL`, which `alarm` also sets):
//! one per process, kept across `execve` as on Linux. The VMM holds the
//! deadline in a host timerfd (`Call::SetAlarm`, one host call per change)
//! and posts `control::ALARM` when it passes, which wakes a blocked host
//! call or kicks the running program; [`fire`] then sends `SIGALRM`
//! (`si_code` `SI_KERNEL`, as Linux's `it_real_fn`) and re-arms an interval
//! timer. The guest's clock and the host's may differ by a little, so an
//! alarm that arrives before the guest sees its deadline is simply armed
//! again.

use qlib::abi::Call;
use spin::Mutex;

use crate::{hostcall, signal, time};

/// `SIGALRM`.
pub const SIGALRM: u32 = 14;

#[derive(Clone, Copy)]
struct Real {
    /// Guest `CLOCK_MONOTONIC` ns when it next goes off; 0 = disarmed.
    deadline: u64,
    /// Period in ns; 0 = one shot.
    interval: u64,
}

static REAL: Mutex<Real> = Mutex::new(Real {
    deadline: 0,
    interval: 0,
});

/// What is left of the timer: (ns until it goes off, 0 if disarmed;
/// interval ns).
pub fn get() -> (u64, u64) {
    let r = *REAL.lock();
    (remaining(r.deadline), r.interval)
}

fn remaining(deadline: u64) -> u64 {
    if deadline == 0 {
        0
    } else {
        // Armed but due: 1 ns left, so it still reads as armed.
        deadline.saturating_sub(time::monotonic_ns()).max(1)
    }
}

/// Arms the timer to go off in `value` ns, then every `interval` ns (0:
/// once); `value` 0 disarms. Returns the old (remaining, interval).
pub fn set(value: u64, interval: u64) -> (u64, u64) {
    let (old, deadline) = {
        let mut r = REAL.lock();
        let old = (remaining(r.deadline), r.interval);
        *r = if value == 0 {
            Real {
                deadline: 0,
                interval: 0,
            }
        } else {
            Real {
                deadline: time::monotonic_ns().saturating_add(value),
                interval,
            }
        };
        (old, r.deadline)
    };
    arm(deadline);
    old
}

/// Sets the host alarm. Never called with `REAL` held: the host call
/// serves pending control requests on its way back, `fire` among them.
fn arm(deadline: u64) {
    let rc = hostcall::call(Call::SetAlarm, [deadline, 0, 0, 0, 0, 0]);
    if rc < 0 {
        log::error!("the VMM refused the alarm ({rc}): SIGALRM will not come");
    }
}

/// The VMM's alarm went off: sends `SIGALRM` if the timer is due (then
/// re-arms an interval timer, skipping periods already missed), or arms
/// the host alarm again if the guest's clock is not there yet.
pub fn fire() {
    let (due, rearm) = {
        let mut r = REAL.lock();
        let now = time::monotonic_ns();
        if r.deadline == 0 {
            return; // disarmed after the host alarm went off
        } else if now < r.deadline {
            (false, r.deadline)
        } else if let Some(missed) = (now - r.deadline).checked_div(r.interval) {
            r.deadline += (missed + 1) * r.interval;
            (true, r.deadline)
        } else {
            r.deadline = 0; // one shot
            (true, 0)
        }
    };
    if rearm != 0 {
        arm(rearm);
    }
    if due {
        signal::send(SIGALRM, signal::Info::user(signal::SI_KERNEL, 0, 0));
    }
}
