//! Exit, zombies, `wait4`/`waitid` and signals to other processes.

use alloc::boxed::Box;

use super::{KERNEL, Kernel, State, Status, Task, sched};
use crate::errno::Errno;
use crate::process::{PROCESS, Process};
use crate::signal::{self, Info, Posted, SIGCHLD};

/// Frees a process that no longer runs: its fds close, its pages go.
pub fn free_process(p: Process) {
    let Process { mm, files, .. } = p;
    drop(files);
    // SAFETY: the process does not run, so CR3 names another PGD.
    unsafe { mm.free() };
}

/// Turns task `pid` (not running, or the one exiting) into a zombie with
/// `st`: its children go to pid 1, its parent gets its exit signal and
/// is woken. Returns whether nobody will wait for it (SIGCHLD ignored).
fn zombify(k: &mut Kernel, pid: u32, st: Status) -> bool {
    let Some(t) = k.tasks.get_mut(&pid) else {
        return false;
    };
    t.state = State::Zombie(st);
    super::park::unpark(pid);
    let ppid = t.ppid;
    let exit_signal = t.exit_signal;
    let vfork_parent = t.vfork_parent.take();
    let mut orphans_zombie = false;
    for c in k.tasks.values_mut() {
        if c.ppid == pid {
            c.ppid = 1;
            orphans_zombie |= matches!(c.state, State::Zombie(_));
        }
    }
    if let Some(vp) = vfork_parent {
        sched::wake(k, vp);
    }
    if orphans_zombie {
        sched::wake(k, 1);
    }
    let me = super::current_pid();
    let mut auto_reap = false;
    if ppid == 0 {
        // Started from outside (`task::spawn`): nobody in the guest waits.
        auto_reap = super::spawn::exited(pid, st);
    } else if ppid == me {
        // The parent is the running task (it killed its child).
        if exit_signal == SIGCHLD && signal::explicitly_ignored(SIGCHLD) {
            auto_reap = true;
        } else if exit_signal != 0 {
            signal::send(exit_signal, child_info(pid, st));
        }
    } else if let Some(parent) = k.tasks.get_mut(&ppid) {
        if exit_signal == SIGCHLD && parent.sig.explicitly_ignores(SIGCHLD) {
            auto_reap = true;
        } else if exit_signal != 0 {
            let _ = parent.sig.post(exit_signal, child_info(pid, st));
        }
        sched::wake(k, ppid);
    }
    auto_reap
}

fn child_info(pid: u32, st: Status) -> Info {
    let (code, _) = cld(st);
    Info::user(code, pid, 0)
}

/// `si_code` and `si_status` for a child that ended with `st`.
pub fn cld(st: Status) -> (i32, i32) {
    match st {
        Status::Exited(c) => (1, i32::from(c)), // CLD_EXITED
        Status::Killed(s) => (2, s as i32),     // CLD_KILLED
    }
}

/// The running task (not pid 1) exits with `st`.
pub fn exit_current(pid: u32, st: Status) -> ! {
    let proc = PROCESS.lock().take();
    if let Some(mut p) = proc {
        // Close the fds now (a reader sees EOF); the pages go after the
        // switch, when CR3 no longer names them.
        drop(core::mem::take(&mut p.files));
        sched::set_dead(p);
    }
    let auto = zombify(&mut KERNEL.lock(), pid, st);
    if auto {
        sched::set_auto_reap(pid);
    }
    sched::leave_dead()
}

/// Kills task `pid`, which is not running, with signal `sig`.
fn kill_other(k: &mut Kernel, pid: u32, sig: u32) {
    if pid == 1 {
        log::info!("pid 1 killed by signal {sig}");
        crate::hostcall::exit(128 + sig as i32);
    }
    let Some(t) = k.tasks.get_mut(&pid) else {
        return;
    };
    let proc = t.proc.take();
    t.kstack = None;
    if let Some(p) = proc {
        free_process(p);
    }
    if zombify(k, pid, Status::Killed(sig)) {
        k.tasks.remove(&pid);
    }
}

/// Sends `sig` to task `pid`, which is not the running one.
pub fn send_to_other(pid: u32, sig: u32, info: Info) -> Result<(), Errno> {
    let mut k = KERNEL.lock();
    let t = k.tasks.get_mut(&pid).ok_or(Errno::ESRCH)?;
    if matches!(t.state, State::Zombie(_)) {
        return Ok(());
    }
    match t.sig.post(sig, info) {
        Posted::Dropped | Posted::Queued => {}
        Posted::Wake => sched::wake(&mut k, pid),
        Posted::Fatal => kill_other(&mut k, pid, sig),
    }
    Ok(())
}

/// Which children a wait looks at.
#[derive(Debug, Clone, Copy)]
pub enum Which {
    Any,
    Pid(u32),
    Pgid(u32),
}

impl Which {
    fn matches(self, t: &Task) -> bool {
        match self {
            Which::Any => true,
            Which::Pid(p) => t.pid == p,
            Which::Pgid(g) => t.pgid == g,
        }
    }
}

/// A reaped (or, with `keep`, only looked-at) child: pid and status.
/// `Ok(None)`: children exist, none has ended. `ECHILD`: no such child.
pub fn reap(which: Which, keep: bool) -> Result<Option<(u32, Status)>, Errno> {
    let me = super::current_pid();
    let mut k = KERNEL.lock();
    let mut any = false;
    let mut found = None;
    for t in k.tasks.values() {
        if t.ppid != me || t.pid == me || !which.matches(t) {
            continue;
        }
        any = true;
        if let State::Zombie(st) = t.state {
            found = Some((t.pid, st));
            break;
        }
    }
    if !any {
        return Err(Errno::ECHILD);
    }
    if let Some((pid, _)) = found
        && !keep
    {
        let t: Option<Box<Task>> = k.tasks.remove(&pid);
        drop(k);
        drop(t);
    }
    Ok(found)
}

/// Whether process `pid` exists (zombies included).
pub fn exists(pid: u32) -> bool {
    KERNEL.lock().tasks.contains_key(&pid)
}

/// The process group of the running task.
pub fn current_pgid() -> u32 {
    let k = KERNEL.lock();
    k.tasks.get(&super::current_pid()).map_or(1, |t| t.pgid)
}

/// Every pid of process group `pgid` (all tasks for `None`), zombies
/// excluded.
pub fn pids_of(pgid: Option<u32>) -> alloc::vec::Vec<u32> {
    let k = KERNEL.lock();
    k.tasks
        .values()
        .filter(|t| !matches!(t.state, State::Zombie(_)))
        .filter(|t| pgid.is_none_or(|g| t.pgid == g))
        .map(|t| t.pid)
        .collect()
}
