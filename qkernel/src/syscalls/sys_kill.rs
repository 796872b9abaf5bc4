//! Waiting for a signal (`pause`, `rt_sigsuspend`, the masks of
//! `ppoll`/`pselect6`/`epoll_pwait`). Sending is in `sys_task`.

use crate::errno::{Errno, SysResult};
use crate::hostcall;
use crate::mm::uaccess;
use crate::process::Process;
use crate::signal;
use crate::task::park;

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
