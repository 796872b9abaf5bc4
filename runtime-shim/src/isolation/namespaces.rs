//! Entering the namespaces the config asks for: joining the ones given by
//! path (`setns`), then making the rest (`unshare`). A mount namespace is
//! always made, whatever the config says: the sandbox process pivots into
//! a root of its own and the host's mounts must not see that.
//!
//! The pid namespace is special: it only applies to children, so `create`
//! enters it ([`enter_pid_for_children`]) before it spawns sandbox-init,
//! which then is pid 1 there.

use std::fs::File;

use nix::sched::{CloneFlags, setns, unshare};

use super::IsolationError;
use crate::plan::{NsKind, Plan};

pub fn flag(kind: NsKind) -> CloneFlags {
    match kind {
        NsKind::Mount => CloneFlags::CLONE_NEWNS,
        NsKind::Pid => CloneFlags::CLONE_NEWPID,
        NsKind::Ipc => CloneFlags::CLONE_NEWIPC,
        NsKind::Uts => CloneFlags::CLONE_NEWUTS,
        NsKind::Network => CloneFlags::CLONE_NEWNET,
        NsKind::Cgroup => CloneFlags::CLONE_NEWCGROUP,
        NsKind::User => CloneFlags::CLONE_NEWUSER,
    }
}

/// Opens a namespace file without waiting (a FIFO named instead must not
/// hang `create`: `setns` then refuses it).
fn open_ns(path: &std::path::Path) -> Result<File, IsolationError> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(IsolationError::io(format!("namespace {}", path.display())))
}

/// Joins or makes every namespace of `plan` but the pid namespace and the
/// user namespace (`userns`, entered last).
pub fn enter(plan: &Plan) -> Result<(), IsolationError> {
    let mut new = CloneFlags::CLONE_NEWNS;
    let later = [NsKind::Pid, NsKind::User];
    for ns in plan.namespaces.iter().filter(|n| !later.contains(&n.kind)) {
        match &ns.path {
            Some(path) => {
                let f = open_ns(path)?;
                setns(f, flag(ns.kind))
                    .map_err(IsolationError::sys(format!("setns {}", path.display())))?;
            }
            None => new |= flag(ns.kind),
        }
    }
    unshare(new).map_err(IsolationError::sys(format!("unshare {new:?}")))
}

/// Makes (or joins) the pid namespace the *next child* of this process
/// will be pid 1 of, if the plan has one.
pub fn enter_pid_for_children(plan: &Plan) -> Result<(), IsolationError> {
    let Some(ns) = plan.namespaces.iter().find(|n| n.kind == NsKind::Pid) else {
        return Ok(());
    };
    match &ns.path {
        Some(path) => {
            let f = open_ns(path)?;
            setns(f, CloneFlags::CLONE_NEWPID)
                .map_err(IsolationError::sys(format!("setns {}", path.display())))
        }
        None => unshare(CloneFlags::CLONE_NEWPID).map_err(IsolationError::sys("unshare pid")),
    }
}

/// Undoes [`enter_pid_for_children`] once the sandbox process exists: the
/// next children (hooks) are in this process's own pid namespace again.
pub fn leave_pid_for_children(plan: &Plan) -> Result<(), IsolationError> {
    if !plan.has_namespace(NsKind::Pid) {
        return Ok(());
    }
    let own = File::open("/proc/self/ns/pid").map_err(IsolationError::io("/proc/self/ns/pid"))?;
    setns(own, CloneFlags::CLONE_NEWPID).map_err(IsolationError::sys("setns to our pid namespace"))
}
