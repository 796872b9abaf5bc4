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

/// `get_robust_list(tid, head_ptr, len_ptr)`: the calling thread's (tid 0
/// or its own); another thread's would need ptrace rights: `EPERM`.
/// (musl asks it once to learn that the kernel has robust futexes.)
pub fn get_robust_list(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let tid = a[0] as u32;
    if tid != 0 && tid != crate::task::current_pid() {
        let exists = crate::task::KERNEL.lock().tasks.contains_key(&tid);
        return Err(if exists { Errno::EPERM } else { Errno::ESRCH });
    }
    let head = crate::process::thread().robust_list;
    uaccess::write(&mut p.mm, a[1], &head)?;
    uaccess::write(&mut p.mm, a[2], &24u64)?;
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
    let (host, domain) = (crate::uts::hostname(), crate::uts::domainname());
    let fields: [&[u8]; 6] = [
        b"Linux",
        &host,
        b"6.6.0-qkernel",
        b"#1 SMP qkernel",
        b"x86_64",
        &domain,
    ];
    let mut buf = [0u8; 65 * 6];
    for (i, f) in fields.iter().enumerate() {
        buf[i * 65..i * 65 + f.len()].copy_from_slice(f);
    }
    uaccess::copy_out(&mut p.mm, a[0], &buf)?;
    Ok(0)
}

const RLIM_INFINITY: u64 = u64::MAX;
const RLIMIT_NOFILE: usize = 7;
/// Linux's `fs.nr_open`: the highest `RLIMIT_NOFILE` may go.
const NR_OPEN: u64 = 1 << 20;

/// The sandbox's resource limits (shared by its processes: a
/// simplification, Linux keeps them per process and copies them at
/// fork), `None` until first used.
static RLIMITS: spin::Mutex<Option<[(u64, u64); 16]>> = spin::Mutex::new(None);

/// Linux's defaults, then the config's `process.rlimits`.
fn initial_rlimits() -> [(u64, u64); 16] {
    let mut r = [(RLIM_INFINITY, RLIM_INFINITY); 16];
    r[3] = (8 << 20, RLIM_INFINITY); // RLIMIT_STACK
    r[RLIMIT_NOFILE] = (1024, 4096);
    r[4] = (0, RLIM_INFINITY); // RLIMIT_CORE
    if let Some(c) = crate::creds::boot_creds() {
        for (i, slot) in r.iter_mut().enumerate() {
            if c.rlimit_mask >> i & 1 == 1 {
                *slot = (c.rlimits[i][0], c.rlimits[i][1]);
            }
        }
    }
    r
}

fn with_rlimits<R>(f: impl FnOnce(&mut [(u64, u64); 16]) -> R) -> R {
    let mut g = RLIMITS.lock();
    f(g.get_or_insert_with(initial_rlimits))
}

/// Resource limit `res` as (soft, hard), or `None` for an unknown one.
pub fn rlimit(res: u64) -> Option<(u64, u64)> {
    let i = usize::try_from(res).ok().filter(|i| *i < 16)?;
    Some(with_rlimits(|r| r[i]))
}

/// How many fds a process may hold: `RLIMIT_NOFILE`'s soft limit.
pub fn nofile() -> usize {
    with_rlimits(|r| r[RLIMIT_NOFILE].0).min(NR_OPEN) as usize
}

/// Sets limit `res` to `new` under Linux's rules: soft at most hard,
/// raising the hard limit needs `CAP_SYS_RESOURCE`, `RLIMIT_NOFILE` at
/// most `fs.nr_open`.
fn set_rlimit(p: &Process, res: usize, new: (u64, u64)) -> Result<(), Errno> {
    if new.0 > new.1 {
        return Err(Errno::EINVAL);
    }
    with_rlimits(|r| {
        if new.1 > r[res].1 && !p.caps.has(crate::creds::CAP_SYS_RESOURCE) {
            return Err(Errno::EPERM);
        }
        if res == RLIMIT_NOFILE && new.1 > NR_OPEN {
            return Err(Errno::EPERM);
        }
        r[res] = new;
        Ok(())
    })
}

/// `prlimit64(pid, resource, new, old)`.
pub fn prlimit64(p: &mut Process, a: &[u64; 6]) -> SysResult {
    if a[0] != 0 && a[0] != 1 && a[0] as u32 != crate::task::current_tgid() {
        return Err(Errno::ESRCH);
    }
    let limit = rlimit(a[1]).ok_or(Errno::EINVAL)?;
    let new = if a[2] != 0 {
        let soft: u64 = uaccess::read(&mut p.mm, a[2])?;
        let hard: u64 = uaccess::read(&mut p.mm, a[2] + 8)?;
        Some((soft, hard))
    } else {
        None
    };
    if let Some(new) = new {
        set_rlimit(p, a[1] as usize, new)?;
    }
    if a[3] != 0 {
        uaccess::write(&mut p.mm, a[3], &limit.0)?;
        uaccess::write(&mut p.mm, a[3] + 8, &limit.1)?;
    }
    Ok(0)
}

/// `getrlimit(resource, rlim)`.
pub fn getrlimit(p: &mut Process, a: &[u64; 6]) -> SysResult {
    prlimit64(p, &[0, a[0], 0, a[1], 0, 0])
}

/// `setrlimit(resource, rlim)`.
pub fn setrlimit(p: &mut Process, a: &[u64; 6]) -> SysResult {
    prlimit64(p, &[0, a[0], a[1], 0, 0, 0])
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
