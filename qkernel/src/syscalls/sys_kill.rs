//! Waiting for a signal (`pause`, `rt_sigsuspend`, the masks of
//! `ppoll`/`pselect6`/`epoll_pwait`). Sending is in `sys_task`.

use crate::errno::{Errno, SysResult};
use crate::hostcall;
use crate::mm::uaccess;
use crate::process::Process;
use crate::signal;
use crate::task::{self, park};

/// Waits in the host until a handled signal is pending (a signal whose
/// default action ends the program ends it while we wait).
fn wait_for_signal() -> SysResult {
    if !signal::interrupts() && park::worthwhile() {
        // Parked until a handled signal wakes it (`finish_syscall` then
        // ends the call); the result is dropped.
        park::wait_on(&[], park::deadline(None))?;
        return Err(Errno::EAGAIN);
    }
    while !signal::interrupts() {
        hostcall::sleep_until(u64::MAX);
    }
    Err(Errno::ERESTARTNOHAND)
}

/// The `sigmask` argument of `ppoll`, `pselect6` and `epoll_pwait` (0:
/// none): installed for the wait like `rt_sigsuspend`'s, and put back on
/// the way out (`signal::deliver`). A handled signal it unblocks ends the
/// wait before it starts.
pub fn wait_mask(p: &mut Process, mask: u64, size: u64) -> Result<(), Errno> {
    if mask == 0 {
        return Ok(());
    }
    if size != 8 {
        return Err(Errno::EINVAL);
    }
    let m: u64 = uaccess::read(&mut p.mm, mask)?;
    // Run again after a park: the mask is already in place (installing
    // it again would lose the one to restore).
    if !park::rerun() {
        signal::suspend_with(m);
    }
    if signal::interrupts() {
        return Err(Errno::ERESTARTNOHAND);
    }
    Ok(())
}

/// `pause()`.
pub fn pause(_p: &mut Process, _a: &[u64; 6]) -> SysResult {
    wait_for_signal()
}

/// `rt_sigsuspend(mask, sigsetsize)`: the mask is replaced while waiting,
/// and put back once the handler is set up (the frame holds the old one).
pub fn rt_sigsuspend(p: &mut Process, a: &[u64; 6]) -> SysResult {
    if a[1] != 8 {
        return Err(Errno::EINVAL);
    }
    let mask: u64 = uaccess::read(&mut p.mm, a[0])?;
    if !park::rerun() {
        signal::suspend_with(mask);
    }
    wait_for_signal()
}

/// `rt_sigtimedwait(set, info, timeout, sigsetsize)`: takes a pending
/// signal of `set` (normally blocked by the caller) and returns its
/// number, its `siginfo_t` written to `info` (if not 0). With none
/// pending, waits (`task::Action::SigWait`) until one is sent to the
/// thread or its group, the relative `timeout` passes (`EAGAIN`; at once
/// for a zero timeout) or a handled signal interrupts (`EINTR`).
pub fn rt_sigtimedwait(p: &mut Process, a: &[u64; 6]) -> SysResult {
    if a[3] != 8 {
        return Err(Errno::EINVAL);
    }
    let set = uaccess::read::<u64>(&mut p.mm, a[0])? & !signal::UNBLOCKABLE;
    if let Some((sig, info)) = signal::take_from(set) {
        signal::set_sigwait_set(0);
        if a[1] != 0 {
            let mut bytes = [0u8; 128];
            for (c, w) in bytes
                .chunks_exact_mut(8)
                .zip(signal::siginfo_words(sig, info))
            {
                c.copy_from_slice(&w.to_le_bytes());
            }
            uaccess::copy_out(&mut p.mm, a[1], &bytes)?;
        }
        return Ok(sig as usize);
    }
    let deadline = if a[2] == 0 {
        u64::MAX
    } else {
        let ns = super::sys_time::get_timespec(p, a[2])?;
        if ns == 0 {
            signal::set_sigwait_set(0);
            return Err(Errno::EAGAIN);
        }
        crate::time::monotonic_ns().saturating_add(ns)
    };
    signal::set_sigwait_set(set);
    task::request(task::Action::SigWait(deadline));
    Err(Errno::EAGAIN)
}
