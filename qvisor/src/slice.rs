//! Time slices: the guest kernel has no timer tick, so a task that
//! computes without syscalls would keep the vCPU forever. The slice
//! watcher (one thread per sandbox) samples the guest's
//! `ControlPage::slice` word every [`SLICE`] of guest running time: when
//! it says other tasks want the vCPU and its switch counter has not moved
//! since the previous sample, the running task has had a whole slice, and
//! the watcher posts `control::PREEMPT` with a kick (`crate::kick`): the
//! guest switches at its next return to user mode (docs/threads.md,
//! "Preemption").
//!
//! Cost: nothing while the guest has one task or its tasks block: the
//! watcher sleeps until the guest, having set the "others want the vCPU"
//! bit, reads `slice_watch` = 0 and makes a `Call::SliceWatch` (one exit).
//! After [`QUIET_TICKS`] samples without that bit it goes back to sleep.
//! The samples come from a timerfd ([`SliceTimer`]) that runs only while
//! vCPU 0 runs: the vCPU thread stops it when it starts waiting in the
//! host (an idle `Poll` or `Sleep`, a blocking read: [`Slicer::pause`])
//! and restarts it for a whole slice when the wait ends
//! ([`Slicer::resume`]), two `timerfd_settime` calls per wait. So a guest
//! whose tasks wake for a moment many times a second (a JVM's periodic
//! threads) costs the watcher no wake-up at all, while a task that
//! computes for a slice with others waiting (on the run queue, on host
//! fds, on a deadline) is still preempted. The kick is only sent while
//! the vCPU runs guest code: a task in a host call returns to the guest
//! kernel, which reads the control page anyway; and a blocking host call
//! is never cut short (no eventfd poke).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use qlib::abi::{
    CONTROL_SLICE_OFFSET, CONTROL_SLICE_WATCH_OFFSET, SLICE_QUICK, SLICE_WANTED, control,
};
use qlib::layout::CONTROL_GPA;

use crate::control::ControlChannel;
use crate::guest_mem::GuestRam;
use crate::hibernate::Hibernation;

/// The time slice, and the watcher's sampling period.
pub const SLICE: Duration = Duration::from_millis(10);

/// The short slice while the guest's slice word has [`SLICE_QUICK`]: a
/// task waits while a secondary vCPU is idle, and the running task, if
/// it computes, should show it soon (docs/smp.md, "Who goes to a
/// secondary").
pub const QUICK_SLICE: Duration = Duration::from_millis(1);

/// Samples without competing tasks before the watcher sleeps (1 s of
/// guest running time).
const QUIET_TICKS: u32 = 100;

const WANTED: u64 = SLICE_WANTED;

/// A blocking `CLOCK_MONOTONIC` timerfd: the watcher's sampling clock.
struct SliceTimer(OwnedFd);

impl SliceTimer {
    fn new() -> std::io::Result<Self> {
        // SAFETY: timerfd_create has no memory-safety preconditions.
        let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor we own.
        Ok(Self(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Fires after `first`, then every `every` (zero: never again); both
    /// zero stop it.
    fn set(&self, first: Duration, every: Duration) {
        let ts = |d: Duration| libc::timespec {
            tv_sec: d.as_secs() as libc::time_t,
            tv_nsec: d.subsec_nanos().into(),
        };
        let spec = libc::itimerspec {
            it_interval: ts(every),
            it_value: ts(first),
        };
        // SAFETY: a valid timerfd and itimerspec; the old value is not
        // asked for. It cannot fail with these arguments.
        unsafe { libc::timerfd_settime(self.0.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
    }

    /// Fires every `period`, the first time a whole `period` from now.
    fn start(&self, period: Duration) {
        self.set(period, period);
    }

    fn stop(&self) {
        self.set(Duration::ZERO, Duration::ZERO);
    }

    /// Blocks until the timer has fired.
    fn wait(&self) {
        let mut buf = [0u8; 8];
        // SAFETY: reads at most 8 bytes into a valid buffer; a blocking
        // timerfd read returns once the timer has fired (or on a signal,
        // which the caller treats as a spurious wake-up).
        unsafe { libc::read(self.0.as_raw_fd(), buf.as_mut_ptr().cast(), 8) };
    }
}

/// What the timer should do, shared by the watcher, the vCPU thread and
/// the host calls (under [`Slicer::state`]).
#[derive(Debug)]
struct Watch {
    /// The guest asked for slices (`Call::SliceWatch`) and the watcher
    /// has not gone quiet since.
    on: bool,
    /// vCPU 0 waits in the host: it runs no guest code, no slice runs.
    waiting: bool,
    /// The sampling period the timer runs with.
    period: Duration,
    /// The sandbox ends: the timer fired for the last time.
    stopping: bool,
}

/// The watcher's clock and switch, shared with the host-call side.
pub struct Slicer {
    state: Mutex<Watch>,
    timer: SliceTimer,
    /// The slice ([`slice_len`]).
    slice: Duration,
    /// `control::PREEMPT` posts, for the stats and tests.
    pub preempts: AtomicU64,
}

impl Slicer {
    /// A watcher that sleeps until the guest asks for slices.
    pub fn new() -> std::io::Result<Self> {
        let slice = slice_len();
        Ok(Self {
            state: Mutex::new(Watch {
                on: false,
                waiting: false,
                period: slice,
                stopping: false,
            }),
            timer: SliceTimer::new()?,
            slice,
            preempts: AtomicU64::new(0),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Watch> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `Call::SliceWatch`: the guest wants slices; start the samples.
    pub fn watch(&self, ram: &GuestRam) {
        let mut w = self.lock();
        let _ = ram.atomic_or_u64(CONTROL_GPA + CONTROL_SLICE_WATCH_OFFSET, 1);
        if !w.on && !w.stopping {
            w.on = true;
            w.period = self.slice;
            if !w.waiting {
                self.timer.start(w.period);
            }
        }
    }

    /// vCPU 0 starts waiting in the host: no slice runs until [`resume`].
    ///
    /// [`resume`]: Slicer::resume
    pub fn pause(&self) {
        let mut w = self.lock();
        w.waiting = true;
        if w.on && !w.stopping {
            self.timer.stop();
        }
    }

    /// vCPU 0's wait in the host ended: it runs again, a whole period
    /// before the next sample.
    pub fn resume(&self) {
        let mut w = self.lock();
        w.waiting = false;
        if w.on && !w.stopping {
            self.timer.start(w.period);
        }
    }

    /// Wakes the watcher so that it sees the channel shut down.
    pub fn shutdown(&self) {
        let mut w = self.lock();
        w.stopping = true;
        self.timer.set(Duration::from_nanos(1), Duration::ZERO);
    }
}

/// What one sample decides.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// Nothing to do.
    Wait,
    /// The running task's slice is over: post `PREEMPT`.
    Preempt,
}

/// Watcher state across samples.
#[derive(Default)]
struct Sampler {
    last: Option<u64>,
    quiet: u32,
}

impl Sampler {
    /// Looks at the guest's slice `word`.
    fn sample(&mut self, word: u64) -> Verdict {
        let same = self.last == Some(word);
        self.last = Some(word);
        if word & WANTED == 0 {
            self.quiet += 1;
            return Verdict::Wait;
        }
        self.quiet = 0;
        if same {
            Verdict::Preempt
        } else {
            Verdict::Wait
        }
    }

    fn quiet(&self) -> bool {
        self.quiet >= QUIET_TICKS
    }

    /// How long until the next sample: `slice`, or the short slice
    /// when the last word asked for it.
    fn period(&self, slice: Duration) -> Duration {
        if self.last.is_some_and(|w| w & SLICE_QUICK != 0) {
            slice.min(QUICK_SLICE)
        } else {
            slice
        }
    }
}

/// The guest's slice word (0 if the page cannot be read).
fn slice_word(ram: &GuestRam) -> u64 {
    ram.atomic_load_u64(CONTROL_GPA + CONTROL_SLICE_OFFSET)
        .unwrap_or(0)
}

/// The slice: [`SLICE`], or `QVISOR_SLICE_US` microseconds (at least
/// 100) for debugging: short slices make preemption bugs show quickly
/// (docs/threads.md, "Java").
fn slice_len() -> Duration {
    std::env::var("QVISOR_SLICE_US")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(SLICE, |us| Duration::from_micros(us.max(100)))
}

/// The watcher thread: ends when the channel shuts down.
pub fn watch_loop(channel: &ControlChannel, ram: &GuestRam, hib: &Hibernation) {
    let slicer = &channel.slicer;
    let mut sampler = Sampler::default();
    loop {
        slicer.timer.wait();
        let mut w = slicer.lock();
        if w.stopping || channel.stopping() {
            break;
        }
        if !w.on || w.waiting {
            // Fired just before a pause or after the watcher went quiet.
            continue;
        }
        // A hibernated guest does not run: its slices wait for the wake.
        let word = if hib.holds_guest() {
            0
        } else {
            slice_word(ram)
        };
        if sampler.sample(word) == Verdict::Preempt && channel.kick.in_guest() {
            let _ = ram.atomic_or_u64(CONTROL_GPA, control::PREEMPT);
            slicer.preempts.fetch_add(1, Ordering::Relaxed);
            channel.kick.request();
        }
        let period = sampler.period(slicer.slice);
        if period != w.period {
            w.period = period;
            slicer.timer.start(period);
        }
        if sampler.quiet() {
            // Sleep; the guest sets WANTED then reads slice_watch, we clear
            // slice_watch then read WANTED (both SeqCst): one of us sees
            // the other, so no slice is missed.
            let _ = ram.atomic_and_u64(CONTROL_GPA + CONTROL_SLICE_WATCH_OFFSET, 0);
            std::sync::atomic::fence(Ordering::SeqCst);
            if slice_word(ram) & WANTED != 0 && !hib.holds_guest() {
                let _ = ram.atomic_or_u64(CONTROL_GPA + CONTROL_SLICE_WATCH_OFFSET, 1);
                sampler.quiet = 0;
            } else {
                w.on = false;
                slicer.timer.stop();
                sampler = Sampler::default();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preempts_only_after_a_whole_slice_with_others_waiting() {
        let mut s = Sampler::default();
        assert_eq!(s.sample(4 | WANTED), Verdict::Wait);
        assert_eq!(s.sample(4 | WANTED), Verdict::Preempt);
        // A switch happened: a new slice.
        assert_eq!(s.sample(6 | WANTED), Verdict::Wait);
        assert_eq!(s.sample(6 | WANTED), Verdict::Preempt);
        // Nobody else wants the vCPU.
        assert_eq!(s.sample(6), Verdict::Wait);
        assert_eq!(s.sample(6), Verdict::Wait);
    }

    #[test]
    fn goes_quiet_after_a_second_without_competition() {
        let mut s = Sampler::default();
        for _ in 0..QUIET_TICKS - 1 {
            s.sample(8);
        }
        assert!(!s.quiet());
        s.sample(8 | WANTED);
        s.sample(8);
        assert!(!s.quiet());
        for _ in 0..QUIET_TICKS {
            s.sample(8);
        }
        assert!(s.quiet());
    }

    #[test]
    fn samples_faster_while_a_secondary_is_idle() {
        let mut s = Sampler::default();
        assert_eq!(s.period(SLICE), SLICE);
        s.sample(8 | WANTED);
        assert_eq!(s.period(SLICE), SLICE);
        assert_eq!(s.sample(8 | WANTED | SLICE_QUICK), Verdict::Wait);
        assert_eq!(s.period(SLICE), QUICK_SLICE);
        assert_eq!(s.sample(8 | WANTED | SLICE_QUICK), Verdict::Preempt);
        // A slice set shorter for debugging stays shorter.
        assert_eq!(
            s.period(Duration::from_micros(200)),
            Duration::from_micros(200)
        );
        s.sample(12 | WANTED);
        assert_eq!(s.period(SLICE), SLICE);
    }
}
