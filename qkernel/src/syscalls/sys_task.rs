//! Process syscalls over the task table: `fork`, `vfork`, `clone`,
//! `exit`, `wait4`, `waitid`, `kill`/`tkill`/`tgkill` and the ids.

use crate::errno::{Errno, SysResult};
use crate::mm::uaccess;
use crate::process::Process;
use crate::signal::{self, Info, SI_TKILL, SI_USER};
use crate::task::fork::{self, CLONE_VFORK, CLONE_VM, ForkArgs};
use crate::task::wait::{self, WaitFor, Which};
use crate::task::{self, Action, Status};
use crate::task::{offload, pgrp};

const SIGCHLD: u64 = 17;

fn start(p: &mut Process, a: &ForkArgs) -> SysResult {
    let pid = fork::fork(p, a)?;
    if a.flags & CLONE_VFORK != 0 {
        task::request(Action::Vfork(pid));
    } else {
        task::request(Action::Yield);
    }
    Ok(pid as usize)
}

/// `fork()`.
pub fn sys_fork(p: &mut Process, _a: &[u64; 6]) -> SysResult {
    let args = ForkArgs {
        flags: SIGCHLD,
        stack: 0,
        parent_tid: 0,
        child_tid: 0,
        tls: 0,
    };
    start(p, &args)
}

/// `vfork()`: a fork whose parent waits for the child's exec or exit.
pub fn sys_vfork(p: &mut Process, _a: &[u64; 6]) -> SysResult {
    let args = ForkArgs {
        flags: CLONE_VM | CLONE_VFORK | SIGCHLD,
        stack: 0,
        parent_tid: 0,
        child_tid: 0,
        tls: 0,
    };
    start(p, &args)
}

/// `clone(flags, stack, parent_tid, child_tid, tls)`: new processes only.
pub fn sys_clone(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let args = ForkArgs {
        flags: a[0],
        stack: a[1],
        parent_tid: a[2],
        child_tid: a[3],
        tls: a[4],
    };
    start(p, &args)
}

/// `exit(status)`: the calling thread ends (the last one ends the
/// process).
pub fn sys_exit(_p: &mut Process, a: &[u64; 6]) -> SysResult {
    task::request(Action::ExitThread((a[0] & 0xff) as u8));
    Ok(0)
}

/// `exit_group(status)`: every thread of the process ends.
pub fn exit_group(_p: &mut Process, a: &[u64; 6]) -> SysResult {
    task::request(Action::Exit(Status::Exited((a[0] & 0xff) as u8)));
    Ok(0)
}

/// `clone3(args, size)`: `struct clone_args` (flags, pidfd, child_tid,
/// parent_tid, exit_signal, stack, stack_size, tls, then set_tid and
/// cgroup, which must be unused).
pub fn clone3(p: &mut Process, a: &[u64; 6]) -> SysResult {
    const CLONE_ARGS_SIZE_VER0: u64 = 64;
    const CLONE_PIDFD: u64 = 0x1000;
    const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;
    let size = a[1];
    if !(CLONE_ARGS_SIZE_VER0..=4096).contains(&size) {
        return Err(Errno::EINVAL);
    }
    let mut w = [0u64; 11];
    for (i, v) in w.iter_mut().enumerate() {
        if (i as u64 + 1) * 8 <= size {
            *v = uaccess::read(&mut p.mm, a[0] + i as u64 * 8)?;
        }
    }
    // Fields beyond the ones we know must be zero (E2BIG, as Linux).
    let mut off = 88;
    while off + 8 <= size {
        let v: u64 = uaccess::read(&mut p.mm, a[0] + off)?;
        if v != 0 {
            return Err(Errno::E2BIG);
        }
        off += 8;
    }
    let [
        flags,
        _pidfd,
        child_tid,
        parent_tid,
        exit_signal,
        stack,
        stack_size,
        tls,
        set_tid,
        set_tid_size,
        _cgroup,
    ] = w;
    if flags & 0xff != 0 || exit_signal > 64 {
        return Err(Errno::EINVAL);
    }
    if flags & (CLONE_PIDFD | CLONE_INTO_CGROUP) != 0 || set_tid != 0 || set_tid_size != 0 {
        log::warn!("clone3 flags {flags:#x}: pidfd, cgroup and set_tid are not supported");
        return Err(Errno::ENOSYS);
    }
    if (stack == 0) != (stack_size == 0) {
        return Err(Errno::EINVAL);
    }
    let args = ForkArgs {
        flags: flags | exit_signal,
        stack: stack.wrapping_add(stack_size),
        parent_tid,
        child_tid,
        tls,
    };
    start(p, &args)
}

/// `gettid()`.
pub fn gettid(_p: &mut Process, _a: &[u64; 6]) -> SysResult {
    Ok(task::current_pid() as usize)
}

/// `sched_yield()`: the other runnable tasks run first.
pub fn sched_yield(_p: &mut Process, _a: &[u64; 6]) -> SysResult {
    task::request(Action::Yield);
    Ok(0)
}

/// `getpid()`: the thread group id.
pub fn getpid(_p: &mut Process, _a: &[u64; 6]) -> SysResult {
    Ok(task::current_tgid() as usize)
}

/// `getppid()`: 0 for pid 1 (the sandbox has no parent).
pub fn getppid(_p: &mut Process, _a: &[u64; 6]) -> SysResult {
    Ok(task::current_ppid() as usize)
}

/// `getpgid(pid)`.
pub fn getpgid(_p: &mut Process, a: &[u64; 6]) -> SysResult {
    Ok(pgrp::getpgid(a[0] as u32)? as usize)
}

/// `setpgid(pid, pgid)`.
pub fn setpgid(_p: &mut Process, a: &[u64; 6]) -> SysResult {
    if (a[0] as i32) < 0 || (a[1] as i32) < 0 {
        return Err(Errno::EINVAL);
    }
    pgrp::setpgid(a[0] as u32, a[1] as u32)?;
    Ok(0)
}

/// `setsid()`.
pub fn setsid(_p: &mut Process, _a: &[u64; 6]) -> SysResult {
    Ok(pgrp::setsid()? as usize)
}

/// `getsid(pid)`.
pub fn getsid(_p: &mut Process, a: &[u64; 6]) -> SysResult {
    Ok(pgrp::getsid(a[0] as u32)? as usize)
}

/// `getpgrp()`.
pub fn getpgrp(_p: &mut Process, _a: &[u64; 6]) -> SysResult {
    Ok(wait::current_pgid() as usize)
}

const WNOHANG: u64 = 1;
const WUNTRACED: u64 = 2;
const WEXITED: u64 = 4;
const WCONTINUED: u64 = 8;
const WNOWAIT: u64 = 0x0100_0000;
const WNOTHREAD: u64 = 0x2000_0000;
const WALL: u64 = 0x4000_0000;
const WCLONE: u64 = 0x8000_0000;

/// `wait4(pid, status, options, rusage)`: ended children, and stopped
/// (`WUNTRACED`) or continued (`WCONTINUED`) ones (`task::jobctl`).
pub fn wait4(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let options = a[2];
    if options & !(WNOHANG | WUNTRACED | WCONTINUED | WNOTHREAD | WALL | WCLONE) != 0 {
        return Err(Errno::EINVAL);
    }
    let which = match a[0] as i32 {
        -1 => Which::Any,
        0 => Which::Pgid(wait::current_pgid()),
        i32::MIN => return Err(Errno::ESRCH),
        n if n < 0 => Which::Pgid(n.unsigned_abs()),
        n => Which::Pid(n as u32),
    };
    let w = WaitFor {
        exited: true,
        stopped: options & WUNTRACED != 0,
        continued: options & WCONTINUED != 0,
        keep: false,
    };
    match wait::reap(which, w)? {
        Some((pid, ev, used)) => {
            if a[1] != 0 {
                uaccess::write(&mut p.mm, a[1], &ev.wait_status())?;
            }
            if a[3] != 0 {
                uaccess::copy_out(&mut p.mm, a[3], &super::sys_info::rusage(used, 0))?;
            }
            Ok(pid as usize)
        }
        None if options & WNOHANG != 0 => Ok(0),
        None => {
            task::request(Action::Block);
            Ok(0)
        }
    }
}

/// `waitid(idtype, id, infop, options, rusage)`: P_ALL, P_PID, P_PGID;
/// `WEXITED`, `WSTOPPED` (= `WUNTRACED`), `WCONTINUED`.
pub fn waitid(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let options = a[3];
    if options & !(WNOHANG | WUNTRACED | WEXITED | WCONTINUED | WNOWAIT | WNOTHREAD | WALL | WCLONE)
        != 0
        || options & (WUNTRACED | WEXITED | WCONTINUED) == 0
    {
        return Err(Errno::EINVAL);
    }
    let which = match a[0] {
        0 => Which::Any,
        1 if a[1] as i32 > 0 => Which::Pid(a[1] as u32),
        2 if a[1] as i32 == 0 => Which::Pgid(wait::current_pgid()),
        2 if a[1] as i32 > 0 => Which::Pgid(a[1] as u32),
        _ => return Err(Errno::EINVAL),
    };
    let w = WaitFor {
        exited: options & WEXITED != 0,
        stopped: options & WUNTRACED != 0,
        continued: options & WCONTINUED != 0,
        keep: options & WNOWAIT != 0,
    };
    match wait::reap(which, w)? {
        Some((pid, ev, used)) => {
            if a[2] != 0 {
                let (code, status) = ev.cld();
                let mut info = [0u8; 128];
                info[0..4].copy_from_slice(&(SIGCHLD as i32).to_ne_bytes());
                info[8..12].copy_from_slice(&code.to_ne_bytes());
                info[16..20].copy_from_slice(&(pid as i32).to_ne_bytes());
                info[20..24].copy_from_slice(&p.ids[0].to_ne_bytes());
                info[24..28].copy_from_slice(&status.to_ne_bytes());
                uaccess::copy_out(&mut p.mm, a[2], &info)?;
            }
            if a[4] != 0 {
                uaccess::copy_out(&mut p.mm, a[4], &super::sys_info::rusage(used, 0))?;
            }
            Ok(0)
        }
        None if options & WNOHANG != 0 => {
            if a[2] != 0 {
                uaccess::copy_out(&mut p.mm, a[2], &[0u8; 128])?;
            }
            Ok(0)
        }
        None => {
            task::request(Action::Block);
            Ok(0)
        }
    }
}

/// Sends process-directed `sig` (0: only checks) to the process of task
/// `pid` (a thread id names its process, as on Linux).
fn send_one(p: &Process, pid: u32, sig: u64, code: i32) -> Result<(), Errno> {
    let me = task::current_tgid();
    let info = Info::user(code, me, p.ids[0]);
    let g = if pid == me {
        me
    } else {
        wait::group_of(pid).ok_or(Errno::ESRCH)?
    };
    if sig == 0 {
        return Ok(());
    }
    if g == me {
        signal::send(sig as u32, info);
        return Ok(());
    }
    wait::send_to_group(g, sig as u32, info)
}

/// `kill(pid, sig)`: a process, our group (0), a group (-pgid) or every
/// process but pid 1 (-1; pid 1 itself reaches itself, as before).
pub fn kill(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let sig = a[1];
    if sig != 0 && !signal::valid(sig) {
        return Err(Errno::EINVAL);
    }
    let me = task::current_tgid();
    let targets = match a[0] as i32 {
        n if n > 0 => {
            send_one(p, n as u32, sig, SI_USER)?;
            return Ok(0);
        }
        0 => wait::pids_of(Some(wait::current_pgid())),
        -1 => wait::pids_of(None)
            .into_iter()
            .filter(|&t| t != 1 || me == 1)
            .collect(),
        i32::MIN => return Err(Errno::ESRCH),
        n => wait::pids_of(Some(n.unsigned_abs())),
    };
    if targets.is_empty() {
        return Err(Errno::ESRCH);
    }
    // Ourselves last: pid 1 may end the sandbox on the spot.
    for &t in targets.iter().filter(|&&t| t != me) {
        send_one(p, t, sig, SI_USER)?;
    }
    if targets.contains(&me) {
        send_one(p, me, sig, SI_USER)?;
    }
    Ok(0)
}

/// Thread-directed `sig` to thread `tid`, which must belong to group `tgid`
/// if given.
fn send_tid(p: &Process, tgid: Option<u32>, tid: u32, sig: u64) -> Result<(), Errno> {
    let g = wait::group_of(tid).ok_or(Errno::ESRCH)?;
    if tgid.is_some_and(|t| t != g) {
        return Err(Errno::ESRCH);
    }
    if sig == 0 {
        return Ok(());
    }
    let info = Info::user(SI_TKILL, task::current_tgid(), p.ids[0]);
    wait::send_to_thread(tid, sig as u32, info)
}

/// `tkill(tid, sig)`.
pub fn tkill(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let tid = a[0] as i32;
    if tid <= 0 {
        return Err(Errno::EINVAL);
    }
    if a[1] != 0 && !signal::valid(a[1]) {
        return Err(Errno::EINVAL);
    }
    send_tid(p, None, tid as u32, a[1])?;
    Ok(0)
}

/// `tgkill(tgid, tid, sig)`.
pub fn tgkill(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let (g, t) = (a[0] as i32, a[1] as i32);
    if g <= 0 || t <= 0 {
        return Err(Errno::EINVAL);
    }
    if a[2] != 0 && !signal::valid(a[2]) {
        return Err(Errno::EINVAL);
    }
    send_tid(p, Some(g as u32), t as u32, a[2])?;
    Ok(0)
}

/// `sched_getaffinity(pid, size, mask)`: every vCPU that runs tasks
/// (`task::offload`), or CPU 0 alone for a task pinned there.
pub fn sched_getaffinity(p: &mut Process, a: &[u64; 6]) -> SysResult {
    check_target(a[0])?;
    if a[1] < 8 || !a[1].is_multiple_of(8) {
        return Err(Errno::EINVAL);
    }
    let mask = offload::affinity(target_tid(a[0]));
    uaccess::write(&mut p.mm, a[2], &mask)?;
    Ok(8)
}

/// `sched_setaffinity(pid, size, mask)`: a mask must name a vCPU the
/// sandbox has (`EINVAL` otherwise, as Linux for a mask of no online
/// CPU). A mask of CPU 0 alone keeps the task on vCPU 0; any other runs
/// it on whichever vCPU is free (the kernel does not pin a task to one
/// secondary).
pub fn sched_setaffinity(p: &mut Process, a: &[u64; 6]) -> SysResult {
    check_target(a[0])?;
    if a[1] == 0 {
        return Err(Errno::EINVAL);
    }
    let mut first = [0u8; 1];
    uaccess::copy_in(&mut p.mm, a[2], &mut first)?;
    let online = offload::affinity(0);
    let asked = u64::from(first[0]) & online;
    if asked == 0 {
        return Err(Errno::EINVAL);
    }
    offload::pin(target_tid(a[0]), asked == 1 && online != 1);
    Ok(0)
}

/// The thread a scheduling call names (0: the caller).
fn target_tid(pid: u64) -> u32 {
    if pid == 0 {
        crate::task::current_pid()
    } else {
        pid as u32
    }
}

/// A `pid` argument of the scheduling calls: 0 (the caller) or a task.
fn check_target(pid: u64) -> Result<(), Errno> {
    if pid == 0 || wait::group_of(pid as u32).is_some() {
        Ok(())
    } else {
        Err(Errno::ESRCH)
    }
}
