//! The vCPU kick: makes a guest that runs code without host calls (a
//! program spinning in user mode) serve a control request at once.
//!
//! Whoever posts a request ([`crate::control::ControlChannel::post`]) calls
//! [`Kick::request`]. If the vCPU thread is inside `KVM_RUN` it is kicked
//! out with a real-time signal and `immediate_exit`; the vCPU loop then
//! injects the kick interrupt (`qlib::abi::KICK_VECTOR`) and re-enters, and
//! the guest kernel's interrupt stub serves the request (and delivers
//! signals) on its way back to the program. A request posted while the
//! vCPU serves a host call needs no kick: the guest kernel looks at the
//! control page after every host call.
//!
//! The race (the vCPU enters `KVM_RUN` just after the poster decided that
//! no kick is needed) is closed the usual way: the poster sets `wanted`
//! then reads `in_guest`; the vCPU sets `in_guest` then reads `wanted`
//! (all `SeqCst`), so at least one of them sees the other. The vCPU that
//! sees `wanted` sets `immediate_exit` itself, so `KVM_RUN` returns
//! `EINTR` at once; a signal that arrives before `KVM_RUN` is harmless
//! because `immediate_exit` is already set (the signal handler sets it
//! too). When the kick finds the guest kernel running, the interrupt is
//! not injected (`crate::kick_inject`) and [`retry_loop`] kicks again.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// The signal that kicks a vCPU thread out of `KVM_RUN`.
pub fn kick_signal() -> i32 {
    libc::SIGRTMIN()
}

thread_local! {
    /// `kvm_run.immediate_exit` of the vCPU this thread runs (null if none).
    static RUN_EXIT: Cell<*mut u8> = const { Cell::new(std::ptr::null_mut()) };
}

/// The kick signal's handler: sets `immediate_exit` of this thread's vCPU,
/// so that a signal arriving just before `KVM_RUN` still makes it exit.
extern "C" fn on_kick(_: libc::c_int) {
    let p = RUN_EXIT.with(Cell::get);
    if !p.is_null() {
        // SAFETY: set by `Kick::attach` on this thread to its vCPU's
        // kvm_run mapping, cleared by `detach` before the VcpuFd goes; a
        // const-initialized thread-local without destructor is safe to
        // read in a signal handler.
        unsafe { p.write_volatile(1) };
    }
}

/// Installs the (empty) kick signal handler, without `SA_RESTART`, so that
/// the signal makes `KVM_RUN` return `EINTR`. Idempotent.
pub fn install_handler() -> std::io::Result<()> {
    // SAFETY: a zeroed sigaction is valid; the handler is an empty
    // async-signal-safe function; sigaction gets valid pointers.
    let rc = unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_kick as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(kick_signal(), &sa, std::ptr::null_mut())
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The running vCPU's thread and `kvm_run.immediate_exit`.
struct Target {
    thread: libc::pthread_t,
    immediate_exit: *mut u8,
}

// SAFETY: the pointer is only written through (a byte store KVM expects
// from any thread), under the mutex, while the vCPU is attached.
unsafe impl Send for Target {}

/// What [`retry_loop`] has to do.
#[derive(Default)]
struct Later {
    /// A kick found the guest kernel running: kick again shortly.
    retry: bool,
    /// Make a [`Kick::request`] then (a hibernate request's grace period).
    request_at: Option<Instant>,
}

/// Kick state of one vCPU, shared by the vCPU thread and the posters.
#[derive(Default)]
pub struct Kick {
    /// The vCPU thread is in (or about to enter) `KVM_RUN`.
    in_guest: AtomicBool,
    /// A request is posted that the guest has not been made to look at.
    wanted: AtomicBool,
    /// The vCPU while it runs: `detach` takes it under the lock, so no
    /// kick touches a vCPU (or thread) that is gone.
    target: Mutex<Option<Target>>,
    /// Kicks [`retry_loop`] owes.
    retry: Mutex<Later>,
    retry_cv: Condvar,
    /// Kicks sent (signals), for the stats.
    pub sent: AtomicU64,
}

impl Kick {
    /// Makes the guest look at the control page soon: a kick if it runs.
    pub fn request(&self) {
        self.wanted.store(true, Ordering::SeqCst);
        if self.in_guest.load(Ordering::SeqCst) {
            self.signal();
        }
    }

    /// Whether the vCPU thread is in (or about to enter) `KVM_RUN`.
    pub fn in_guest(&self) -> bool {
        self.in_guest.load(Ordering::SeqCst)
    }

    /// Sets `immediate_exit` and signals the vCPU thread.
    fn signal(&self) {
        let target = self.target.lock().unwrap_or_else(|e| e.into_inner());
        let Some(t) = target.as_ref() else {
            return;
        };
        // SAFETY: `immediate_exit` points into the vCPU's kvm_run mapping,
        // alive while attached (we hold the lock `detach` takes); a byte
        // store is what KVM expects from another thread.
        unsafe { t.immediate_exit.write_volatile(1) };
        self.sent.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the vCPU thread is alive while attached.
        unsafe { libc::pthread_kill(t.thread, kick_signal()) };
    }

    /// Called by the vCPU thread before its first `KVM_RUN`.
    pub fn attach(&self, immediate_exit: *mut u8) {
        // SAFETY: pthread_self has no preconditions.
        let thread = unsafe { libc::pthread_self() };
        *self.target.lock().unwrap_or_else(|e| e.into_inner()) = Some(Target {
            thread,
            immediate_exit,
        });
        RUN_EXIT.with(|p| p.set(immediate_exit));
    }

    /// Called by the vCPU thread when it stops running the guest.
    pub fn detach(&self) {
        self.in_guest.store(false, Ordering::SeqCst);
        *self.target.lock().unwrap_or_else(|e| e.into_inner()) = None;
        RUN_EXIT.with(|p| p.set(std::ptr::null_mut()));
    }

    /// Called by the vCPU thread just before `KVM_RUN`: whether a request
    /// is already wanted (then `KVM_RUN` should exit at once).
    pub fn entering(&self) -> bool {
        self.in_guest.store(true, Ordering::SeqCst);
        self.wanted.load(Ordering::SeqCst)
    }

    /// Called by the vCPU thread after `KVM_RUN` returned.
    pub fn left(&self) {
        self.in_guest.store(false, Ordering::SeqCst);
    }

    /// Takes the wanted flag: true if a kick interrupt should be injected.
    pub fn take(&self) -> bool {
        self.wanted.swap(false, Ordering::SeqCst)
    }

    /// Asks [`retry_loop`] to kick the vCPU again after [`RETRY`].
    pub fn retry_later(&self) {
        self.retry.lock().unwrap_or_else(|e| e.into_inner()).retry = true;
        self.retry_cv.notify_one();
    }

    /// Asks [`retry_loop`] to make a [`Kick::request`] after `delay` (the
    /// earliest of several such asks wins).
    pub fn request_after(&self, delay: Duration) {
        let at = Instant::now() + delay;
        let mut later = self.retry.lock().unwrap_or_else(|e| e.into_inner());
        later.request_at = Some(later.request_at.map_or(at, |t| t.min(at)));
        drop(later);
        self.retry_cv.notify_one();
    }

    /// Drops a delayed request of [`Kick::request_after`] not made yet
    /// (the hibernation it was for is done: the retry thread then does not
    /// wake a hibernated sandbox's VMM later for nothing).
    pub fn cancel_request_after(&self) {
        let mut later = self.retry.lock().unwrap_or_else(|e| e.into_inner());
        if later.request_at.take().is_some() {
            drop(later);
            self.retry_cv.notify_one();
        }
    }
}

/// How long until a kick that found the guest kernel running is retried.
const RETRY: Duration = Duration::from_micros(200);

/// The retry thread (one per sandbox): kicks again, without posting
/// anything, when the vCPU loop asks, and makes the delayed requests of
/// [`Kick::request_after`]; ends when the channel shuts down
/// (`ControlChannel::shutdown` wakes it). Idle, it sleeps on a condvar.
/// (A POSIX timer aimed at the vCPU thread would do, but `timer_create`
/// is refused under containerd's shim here: EPERM.)
pub fn retry_loop(channel: &crate::control::ControlChannel) {
    let kick = &channel.kick;
    let mut later = kick.retry.lock().unwrap_or_else(|e| e.into_inner());
    while !channel.stopping() {
        let now = Instant::now();
        if later.request_at.is_some_and(|t| t <= now) {
            later.request_at = None;
            drop(later);
            kick.request();
        } else if later.retry {
            later.retry = false;
            drop(later);
            std::thread::sleep(RETRY);
            kick.signal();
        } else {
            later = match later.request_at {
                Some(t) => {
                    kick.retry_cv
                        .wait_timeout(later, t - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
                None => kick.retry_cv.wait(later).unwrap_or_else(|e| e.into_inner()),
            };
            continue;
        }
        later = kick.retry.lock().unwrap_or_else(|e| e.into_inner());
    }
}

/// Robustness testing only (`QVISOR_KICK_STORM` set): kicks the vCPU every
/// 300 µs until the sandbox ends, so that the kick interrupt lands at every
/// kind of place in the program and the guest kernel.
pub fn storm(channel: &crate::control::ControlChannel) {
    while !channel.stopping() {
        std::thread::sleep(std::time::Duration::from_micros(300));
        channel.kick.request();
    }
}
