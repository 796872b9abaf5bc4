//! Signal syscalls: dispositions, the mask, the alternate stack and
//! `rt_sigpending`. Sending (`kill`...) and waiting are in `sys_kill`.

use crate::errno::{Errno, SysResult};
use crate::mm::uaccess;
use crate::process::{Process, SigAction};
use crate::signal::{self, UNBLOCKABLE};

const SIGKILL: u64 = 9;
const SIGSTOP: u64 = 19;

/// `rt_sigaction(sig, act, oldact, sigsetsize)`.
pub fn rt_sigaction(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let sig = a[0];
    if !signal::valid(sig) || a[3] != 8 {
        return Err(Errno::EINVAL);
    }
    if a[1] != 0 && (sig == SIGKILL || sig == SIGSTOP) {
        return Err(Errno::EINVAL);
    }
    let idx = (sig - 1) as usize;
    let old = p.signals.lock().actions[idx];
    let mut new = None;
    if a[1] != 0 {
        let mut w = [0u64; 4];
        for (i, v) in w.iter_mut().enumerate() {
            *v = uaccess::read(&mut p.mm, a[1] + i as u64 * 8)?;
        }
        new = Some(SigAction {
            handler: w[0],
            flags: w[1],
            restorer: w[2],
            mask: w[3] & !UNBLOCKABLE,
        });
    }
    if a[2] != 0 {
        for (i, v) in [old.handler, old.flags, old.restorer, old.mask]
            .iter()
            .enumerate()
        {
            uaccess::write(&mut p.mm, a[2] + i as u64 * 8, v)?;
        }
    }
    if let Some(act) = new {
        p.signals.lock().actions[idx] = act;
        signal::set_disposition(sig as u32, act.handler);
        if sig == u64::from(signal::SIGCHLD) {
            signal::set_nocldstop(act.flags & signal::SA_NOCLDSTOP != 0);
        }
    }
    Ok(0)
}

/// `rt_sigreturn()`: never reached through the table (the trap handler
/// serves it with the registers; `signal::sigreturn`).
pub fn rt_sigreturn(_p: &mut Process, _a: &[u64; 6]) -> SysResult {
    Err(Errno::ENOSYS)
}

/// `rt_sigprocmask(how, set, oldset, sigsetsize)`. Signals it unblocks
/// are delivered on the way back to user mode.
pub fn rt_sigprocmask(p: &mut Process, a: &[u64; 6]) -> SysResult {
    if a[3] != 8 {
        return Err(Errno::EINVAL);
    }
    let old = signal::blocked();
    let mut new = None;
    if a[1] != 0 {
        let set: u64 = uaccess::read(&mut p.mm, a[1])?;
        new = Some(match a[0] {
            0 => old | set,  // SIG_BLOCK
            1 => old & !set, // SIG_UNBLOCK
            2 => set,        // SIG_SETMASK
            _ => return Err(Errno::EINVAL),
        });
    }
    if a[2] != 0 {
        uaccess::write(&mut p.mm, a[2], &old)?;
    }
    if let Some(m) = new {
        signal::set_blocked(m);
    }
    Ok(0)
}

/// `rt_sigpending(set, sigsetsize)`: the pending signals that are blocked.
pub fn rt_sigpending(p: &mut Process, a: &[u64; 6]) -> SysResult {
    if a[1] > 8 {
        return Err(Errno::EINVAL);
    }
    let set = signal::pending() & signal::blocked();
    let bytes = set.to_le_bytes();
    uaccess::copy_out(&mut p.mm, a[0], &bytes[..a[1] as usize])?;
    Ok(0)
}

const SS_ONSTACK: i32 = 1;
const SS_DISABLE: i32 = 2;
const SS_AUTODISARM: i32 = 1 << 31;
const MINSIGSTKSZ: u64 = 2048;

/// `sigaltstack(ss, old)`. `SS_AUTODISARM` is accepted and ignored.
pub fn sigaltstack(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let (sp, flags, size) = crate::process::thread().altstack;
    if a[1] != 0 {
        uaccess::write(&mut p.mm, a[1], &sp)?;
        uaccess::write(&mut p.mm, a[1] + 8, &flags)?;
        uaccess::write(&mut p.mm, a[1] + 16, &size)?;
    }
    if a[0] != 0 {
        let sp: u64 = uaccess::read(&mut p.mm, a[0])?;
        let flags: i32 = uaccess::read(&mut p.mm, a[0] + 8)?;
        let size: u64 = uaccess::read(&mut p.mm, a[0] + 16)?;
        let mode = flags & !SS_AUTODISARM;
        if mode != 0 && mode != SS_DISABLE && mode != SS_ONSTACK {
            return Err(Errno::EINVAL);
        }
        if mode == SS_DISABLE {
            crate::process::thread().altstack = (0, SS_DISABLE, 0);
        } else {
            if size < MINSIGSTKSZ {
                return Err(Errno::ENOMEM);
            }
            crate::process::thread().altstack = (sp, flags & SS_AUTODISARM, size);
        }
    }
    Ok(0)
}
