//! Process syscalls: identity, exit, thread-area, limits, randomness,
//! affinity and the single-threaded `futex`.

use crate::arch;
use crate::errno::{Errno, SysResult};
use crate::mm::uaccess;
use crate::process::Process;
use crate::random;

/// `getuid()`.
pub fn getuid(p: &mut Process, _a: &[u64; 6]) -> SysResult {
    Ok(p.ids[0] as usize)
}

/// `geteuid()`.
pub fn geteuid(p: &mut Process, _a: &[u64; 6]) -> SysResult {
    Ok(p.ids[1] as usize)
}

/// `getgid()`.
pub fn getgid(p: &mut Process, _a: &[u64; 6]) -> SysResult {
    Ok(p.ids[2] as usize)
}

/// `getegid()`.
pub fn getegid(p: &mut Process, _a: &[u64; 6]) -> SysResult {
    Ok(p.ids[3] as usize)
}

/// `set_tid_address(tidptr)`: returns the caller's tid, as Linux (musl
/// takes its main thread's tid from it).
pub fn set_tid_address(_p: &mut Process, a: &[u64; 6]) -> SysResult {
    crate::process::thread().clear_child_tid = a[0];
    Ok(crate::task::current_pid() as usize)
}

/// `rseq(...)`: not supported; `ENOSYS` tells glibc to run without it
/// (it is in the table so the refusal is not logged as unimplemented).
pub fn rseq(_p: &mut Process, _a: &[u64; 6]) -> SysResult {
    Err(Errno::ENOSYS)
}

/// `set_robust_list(head, len)`.
pub fn set_robust_list(_p: &mut Process, a: &[u64; 6]) -> SysResult {
    if a[1] != 24 {
        return Err(Errno::EINVAL);
    }
    crate::process::thread().robust_list = a[0];
    Ok(0)
}

const ARCH_SET_GS: u64 = 0x1001;
const ARCH_SET_FS: u64 = 0x1002;
const ARCH_GET_FS: u64 = 0x1003;
const ARCH_GET_GS: u64 = 0x1004;

/// `arch_prctl(code, addr)`.
pub fn arch_prctl(p: &mut Process, a: &[u64; 6]) -> SysResult {
    match a[0] {
        ARCH_SET_FS if arch::user_base_ok(a[1]) => arch::set_fs_base(a[1]),
        ARCH_SET_GS if arch::user_base_ok(a[1]) => arch::set_gs_base(a[1]),
        ARCH_SET_FS | ARCH_SET_GS => return Err(Errno::EPERM),
        ARCH_GET_FS => uaccess::write(&mut p.mm, a[1], &arch::fs_base())?,
        ARCH_GET_GS => uaccess::write(&mut p.mm, a[1], &arch::gs_base())?,
        _ => return Err(Errno::EINVAL),
    }
    Ok(0)
}

/// `uname(buf)`.
pub fn uname(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let host = crate::boot_slice(crate::boot_info().hostname);
    let fields: [&[u8]; 6] = [
        b"Linux",
        &host[..host.len().min(64)],
        b"6.6.0-qkernel",
        b"#1 SMP qkernel",
        b"x86_64",
        b"(none)",
    ];
    let mut buf = [0u8; 65 * 6];
    for (i, f) in fields.iter().enumerate() {
        buf[i * 65..i * 65 + f.len()].copy_from_slice(f);
    }
    uaccess::copy_out(&mut p.mm, a[0], &buf)?;
    Ok(0)
}

const RLIM_INFINITY: u64 = u64::MAX;

/// Resource limit `res` as (soft, hard), or `None` for an unknown one.
pub fn rlimit(res: u64) -> Option<(u64, u64)> {
    Some(match res {
        3 => (8 << 20, RLIM_INFINITY), // RLIMIT_STACK
        7 => (1024, 4096),             // RLIMIT_NOFILE
        4 => (0, RLIM_INFINITY),       // RLIMIT_CORE
        0..=15 => (RLIM_INFINITY, RLIM_INFINITY),
        _ => return None,
    })
}

/// `prlimit64(pid, resource, new, old)`.
pub fn prlimit64(p: &mut Process, a: &[u64; 6]) -> SysResult {
    if a[0] != 0 && a[0] != 1 {
        return Err(Errno::ESRCH);
    }
    let limit = rlimit(a[1]).ok_or(Errno::EINVAL)?;
    if a[3] != 0 {
        uaccess::write(&mut p.mm, a[3], &limit.0)?;
        uaccess::write(&mut p.mm, a[3] + 8, &limit.1)?;
    }
    if a[2] != 0 {
        let soft: u64 = uaccess::read(&mut p.mm, a[2])?;
        let hard: u64 = uaccess::read(&mut p.mm, a[2] + 8)?;
        if soft > hard {
            return Err(Errno::EINVAL);
        }
    }
    Ok(0)
}

/// `sched_yield()`.
pub fn sched_yield(_p: &mut Process, _a: &[u64; 6]) -> SysResult {
    Ok(0)
}

/// `getrandom(buf, len, flags)`.
pub fn getrandom(p: &mut Process, a: &[u64; 6]) -> SysResult {
    if a[2] & !0x7 != 0 {
        return Err(Errno::EINVAL);
    }
    let len = a[1].min(1 << 25);
    let mut chunk = [0u8; 256];
    let mut done = 0u64;
    while done < len {
        let n = (len - done).min(chunk.len() as u64) as usize;
        random::fill(&mut chunk[..n]);
        uaccess::copy_out(&mut p.mm, a[0] + done, &chunk[..n])?;
        done += n as u64;
    }
    Ok(len as usize)
}
