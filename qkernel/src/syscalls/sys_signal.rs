//! Signal syscalls: dispositions, the mask and the alternate stack are
//! recorded so programs that set them up run; delivery comes later.

use crate::errno::{Errno, SysResult};
use crate::mm::uaccess;
use crate::process::{Process, SigAction};

const SIGKILL: u64 = 9;
const SIGSTOP: u64 = 19;
const UNBLOCKABLE: u64 = (1 << (SIGKILL - 1)) | (1 << (SIGSTOP - 1));

/// `rt_sigaction(sig, act, oldact, sigsetsize)`.
pub fn rt_sigaction(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let sig = a[0];
    if !(1..=64).contains(&sig) || a[3] != 8 {
        return Err(Errno::EINVAL);
    }
    if a[1] != 0 && (sig == SIGKILL || sig == SIGSTOP) {
        return Err(Errno::EINVAL);
    }
    let idx = (sig - 1) as usize;
    if a[2] != 0 {
        let old = p.signals.actions[idx];
        for (i, v) in [old.handler, old.flags, old.restorer, old.mask]
            .iter()
            .enumerate()
        {
            uaccess::write(&mut p.mm, a[2] + i as u64 * 8, v)?;
        }
    }
    if a[1] != 0 {
        let mut w = [0u64; 4];
        for (i, v) in w.iter_mut().enumerate() {
            *v = uaccess::read(&mut p.mm, a[1] + i as u64 * 8)?;
        }
        crate::signal::set_disposition(sig, w[0]);
        p.signals.actions[idx] = SigAction {
            handler: w[0],
            flags: w[1],
            restorer: w[2],
            mask: w[3] & !UNBLOCKABLE,
        };
    }
    Ok(0)
}

/// `rt_sigprocmask(how, set, oldset, sigsetsize)`.
pub fn rt_sigprocmask(p: &mut Process, a: &[u64; 6]) -> SysResult {
    if a[3] != 8 {
        return Err(Errno::EINVAL);
    }
    let old = p.signals.mask;
    if a[1] != 0 {
        let set: u64 = uaccess::read(&mut p.mm, a[1])?;
        p.signals.mask = match a[0] {
            0 => old | set,  // SIG_BLOCK
            1 => old & !set, // SIG_UNBLOCK
            2 => set,        // SIG_SETMASK
            _ => return Err(Errno::EINVAL),
        } & !UNBLOCKABLE;
    }
    if a[2] != 0 {
        uaccess::write(&mut p.mm, a[2], &old)?;
    }
    Ok(0)
}

const SS_DISABLE: i32 = 2;
const MINSIGSTKSZ: u64 = 2048;

/// `sigaltstack(ss, old)`.
pub fn sigaltstack(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let (sp, flags, size) = p.signals.altstack;
    if a[1] != 0 {
        uaccess::write(&mut p.mm, a[1], &sp)?;
        uaccess::write(&mut p.mm, a[1] + 8, &flags)?;
        uaccess::write(&mut p.mm, a[1] + 16, &size)?;
    }
    if a[0] != 0 {
        let sp: u64 = uaccess::read(&mut p.mm, a[0])?;
        let flags: i32 = uaccess::read(&mut p.mm, a[0] + 8)?;
        let size: u64 = uaccess::read(&mut p.mm, a[0] + 16)?;
        if flags & !SS_DISABLE & !(1 << 31) != 0 {
            return Err(Errno::EINVAL);
        }
        if flags & SS_DISABLE == 0 && size < MINSIGSTKSZ {
            return Err(Errno::ENOMEM);
        }
        p.signals.altstack = (sp, flags, size);
    }
    Ok(0)
}
