//! Process groups and sessions: `setpgid`, `getpgid`, `setsid`, `getsid`.

use super::{KERNEL, State, current_pid, current_tgid};
use crate::errno::Errno;

/// The process a call names: 0 is the caller.
fn target(pid: u32) -> u32 {
    if pid == 0 { current_pid() } else { pid }
}

/// `getpgid(pid)`.
pub fn getpgid(pid: u32) -> Result<u32, Errno> {
    let k = KERNEL.lock();
    k.tasks
        .get(&target(pid))
        .map(|t| t.pgid)
        .ok_or(Errno::ESRCH)
}

/// `getsid(pid)`.
pub fn getsid(pid: u32) -> Result<u32, Errno> {
    let k = KERNEL.lock();
    k.tasks.get(&target(pid)).map(|t| t.sid).ok_or(Errno::ESRCH)
}

/// `setpgid(pid, pgid)`: the caller or one of its children (before it
/// execs is not tracked) joins or starts a group of the caller's session.
pub fn setpgid(pid: u32, pgid: u32) -> Result<(), Errno> {
    let me = current_pid();
    let pid = target(pid);
    let pgid = if pgid == 0 { pid } else { pgid };
    let mut k = KERNEL.lock();
    let my_sid = k.tasks.get(&me).map_or(1, |t| t.sid);
    let t = k.tasks.get(&pid).ok_or(Errno::ESRCH)?;
    if pid != me && t.ppid != me {
        return Err(Errno::ESRCH);
    }
    if t.sid != my_sid || t.sid == pid {
        return Err(Errno::EPERM);
    }
    let exists = k
        .tasks
        .values()
        .any(|o| o.pgid == pgid && o.sid == my_sid && !matches!(o.state, State::Zombie(_)));
    if pgid != pid && !exists {
        return Err(Errno::EPERM);
    }
    if let Some(t) = k.tasks.get_mut(&pid) {
        t.pgid = pgid;
    }
    Ok(())
}

/// `setsid()`: a new session and group led by the caller, unless it
/// already leads a group.
pub fn setsid() -> Result<u32, Errno> {
    let me = current_pid();
    let mut k = KERNEL.lock();
    if k.tasks.values().any(|t| t.pgid == me) {
        return Err(Errno::EPERM);
    }
    let t = k.tasks.get_mut(&me).ok_or(Errno::ESRCH)?;
    t.pgid = me;
    t.sid = me;
    Ok(me)
}

/// The running process's (session, process group).
pub fn ids() -> (u32, u32) {
    let k = KERNEL.lock();
    k.tasks
        .get(&super::current_tgid())
        .map_or((1, 1), |t| (t.sid, t.pgid))
}

/// Whether process group `pgid` has a live member in session `sid`.
pub fn group_in_session(pgid: u32, sid: u32) -> bool {
    let k = KERNEL.lock();
    k.tasks
        .values()
        .any(|t| t.pgid == pgid && t.sid == sid && !matches!(t.state, State::Zombie(_)))
}

/// Whether process group `pgid` has a live member.
pub fn group_exists(pgid: u32) -> bool {
    let k = KERNEL.lock();
    k.tasks
        .values()
        .any(|t| t.pgid == pgid && !matches!(t.state, State::Zombie(_)))
}

/// Whether process group `pgid` is orphaned (`jobctl::orphaned`).
pub fn orphaned(pgid: u32) -> bool {
    super::jobctl::orphaned(&KERNEL.lock(), pgid)
}

/// Sends `sig` from the kernel (a terminal: `SI_KERNEL`) to every
/// process of group `pgid`, the running one last.
pub fn signal_group(pgid: u32, sig: u32) {
    const SI_KERNEL: i32 = 0x80;
    let info = crate::signal::Info::user(SI_KERNEL, 0, 0);
    let me = current_tgid();
    let pids = super::wait::pids_of(Some(pgid));
    for &t in pids.iter().filter(|&&t| t != me) {
        let _ = super::wait::send_to_group(t, sig, info);
    }
    if pids.contains(&me) {
        crate::signal::send(sig, info);
    }
}
