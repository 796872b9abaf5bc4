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
//! because `immediate_exit` is already set.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

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

/// Kick state of one vCPU, shared by the vCPU thread and the posters.
#[derive(Default)]
pub struct Kick {
    /// The vCPU thread is in (or about to enter) `KVM_RUN`.
    in_guest: AtomicBool,
    /// A request is posted that the guest has not been made to look at.
    wanted: AtomicBool,
    /// `kvm_run.immediate_exit` of the vCPU (null before it runs).
    immediate_exit: AtomicPtr<u8>,
    /// The vCPU thread (`pthread_t`), valid while `immediate_exit` is set.
    thread: AtomicU64,
    /// Kicks sent (signals), for the stats.
    pub sent: AtomicU64,
}

impl Kick {
    /// Makes the guest look at the control page soon: a kick if it runs.
    pub fn request(&self) {
        self.wanted.store(true, Ordering::SeqCst);
        if !self.in_guest.load(Ordering::SeqCst) {
            return;
        }
        let exit = self.immediate_exit.load(Ordering::SeqCst);
        if exit.is_null() {
            return;
        }
        // SAFETY: `exit` points into the vCPU's kvm_run mapping, which
        // lives as long as the VcpuFd; the vCPU thread clears the pointer
        // (`detach`) before the VcpuFd is dropped, and a byte store is
        // what KVM expects from another thread or a signal handler.
        unsafe { exit.write_volatile(1) };
        self.sent.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the thread id was stored by the vCPU thread, which is
        // alive while `immediate_exit` is non-null.
        unsafe {
            libc::pthread_kill(
                self.thread.load(Ordering::SeqCst) as libc::pthread_t,
                kick_signal(),
            )
        };
    }

    /// Called by the vCPU thread before its first `KVM_RUN`.
    pub fn attach(&self, immediate_exit: *mut u8) {
        // SAFETY: pthread_self has no preconditions.
        let me = unsafe { libc::pthread_self() };
        self.thread.store(me as u64, Ordering::SeqCst);
        self.immediate_exit.store(immediate_exit, Ordering::SeqCst);
        RUN_EXIT.with(|p| p.set(immediate_exit));
    }

    /// Called by the vCPU thread when it stops running the guest.
    pub fn detach(&self) {
        self.in_guest.store(false, Ordering::SeqCst);
        self.immediate_exit
            .store(std::ptr::null_mut(), Ordering::SeqCst);
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
