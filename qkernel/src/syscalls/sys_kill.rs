//! Sending signals to self (`kill`, `tkill`, `tgkill`) and waiting for
//! one (`pause`, `rt_sigsuspend`). There is one process, pid 1, with one
//! thread, tid 1; any other target does not exist.

use crate::errno::{Errno, SysResult};
use crate::hostcall;
use crate::mm::uaccess;
use crate::process::Process;
use crate::signal::{self, Info, SI_TKILL, SI_USER};

const SELF: i32 = 1;

fn send(p: &Process, sig: u64, code: i32) -> SysResult {
    if sig == 0 {
        return Ok(0);
    }
    if !signal::valid(sig) {
        return Err(Errno::EINVAL);
    }
    signal::send(sig as u32, Info::user(code, SELF as u32, p.ids[0]));
    Ok(0)
}

/// `kill(pid, sig)`: pid 1 (us), 0 (our group) or -1 (everyone we may
/// signal) reach the program.
pub fn kill(p: &mut Process, a: &[u64; 6]) -> SysResult {
    match a[0] as i32 {
        SELF | 0 | -1 => send(p, a[1], SI_USER),
        _ => Err(Errno::ESRCH),
    }
}

/// `tkill(tid, sig)`.
pub fn tkill(p: &mut Process, a: &[u64; 6]) -> SysResult {
    match a[0] as i32 {
        SELF => send(p, a[1], SI_TKILL),
        t if t <= 0 => Err(Errno::EINVAL),
        _ => Err(Errno::ESRCH),
    }
}

/// `tgkill(tgid, tid, sig)`.
pub fn tgkill(p: &mut Process, a: &[u64; 6]) -> SysResult {
    match (a[0] as i32, a[1] as i32) {
        (SELF, SELF) => send(p, a[2], SI_TKILL),
        (g, t) if g <= 0 || t <= 0 => Err(Errno::EINVAL),
        _ => Err(Errno::ESRCH),
    }
}

/// Waits in the host until a handled signal is pending (a signal whose
/// default action ends the program ends it while we wait).
fn wait_for_signal() -> SysResult {
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
    signal::suspend_with(m);
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
    signal::suspend_with(mask);
    wait_for_signal()
}
