//! `unshare(flags)`: the caller gets a private fd table (`CLONE_FILES`)
//! or fs state (`CLONE_FS`) when it shares one with another process
//! (docs/processes.md, "Shared process objects"). Namespaces do not
//! exist in the sandbox: asking for one is `EPERM`.

use alloc::sync::Arc;

use crate::errno::{Errno, SysResult};
use crate::process::Process;
use crate::task::fork::{CLONE_FILES, CLONE_FS, CLONE_SIGHAND, CLONE_THREAD, CLONE_VM};

const CLONE_NEWTIME: u64 = 0x80;
const CLONE_NEWNS: u64 = 0x2_0000;
const CLONE_SYSVSEM: u64 = 0x4_0000;
const CLONE_NEWCGROUP: u64 = 0x200_0000;
const CLONE_NEWUTS: u64 = 0x400_0000;
const CLONE_NEWIPC: u64 = 0x800_0000;
const CLONE_NEWUSER: u64 = 0x1000_0000;
const CLONE_NEWPID: u64 = 0x2000_0000;
const CLONE_NEWNET: u64 = 0x4000_0000;

const NAMESPACES: u64 = CLONE_NEWTIME
    | CLONE_NEWNS
    | CLONE_NEWCGROUP
    | CLONE_NEWUTS
    | CLONE_NEWIPC
    | CLONE_NEWUSER
    | CLONE_NEWPID
    | CLONE_NEWNET;

/// The flags `unshare` takes (Linux's `check_unshare_flags`).
const KNOWN: u64 =
    CLONE_THREAD | CLONE_FS | CLONE_SIGHAND | CLONE_VM | CLONE_FILES | CLONE_SYSVSEM | NAMESPACES;

/// `unshare(flags)`.
pub fn unshare(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let mut flags = a[0];
    if flags & !KNOWN != 0 {
        return Err(Errno::EINVAL);
    }
    // The flags one implies (Linux's `ksys_unshare`).
    if flags & CLONE_NEWUSER != 0 {
        flags |= CLONE_THREAD | CLONE_FS;
    }
    if flags & CLONE_VM != 0 {
        flags |= CLONE_SIGHAND;
    }
    if flags & CLONE_SIGHAND != 0 {
        flags |= CLONE_THREAD;
    }
    if flags & CLONE_NEWNS != 0 {
        flags |= CLONE_FS;
    }
    // A thread, a handler table or an address space cannot be left: they
    // may only be "unshared" when nothing else shares them.
    if flags & (CLONE_THREAD | CLONE_SIGHAND | CLONE_VM) != 0 && crate::task::fork::has_threads() {
        return Err(Errno::EINVAL);
    }
    if flags & (CLONE_SIGHAND | CLONE_VM) != 0 && Arc::strong_count(&p.signals) > 1 {
        return Err(Errno::EINVAL);
    }
    if flags & CLONE_VM != 0
        && (crate::task::fork::lent(crate::task::current_pid())
            || crate::task::mmshare::member(crate::task::current_tgid()))
    {
        return Err(Errno::EINVAL);
    }
    if flags & NAMESPACES != 0 {
        log::warn!("unshare flags {flags:#x}: namespaces are not supported (EPERM)");
        return Err(Errno::EPERM);
    }
    if flags & CLONE_FS != 0 {
        crate::fs::cwd::unshare(&mut p.fs);
    }
    if flags & CLONE_FILES != 0 {
        crate::fs::files::unshare(&mut p.files);
    }
    // CLONE_SYSVSEM: there are no semaphore undo lists to detach.
    Ok(0)
}
