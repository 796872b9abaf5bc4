//! Identity and priority syscalls: supplementary groups, the saved ids,
//! nice values, I/O priorities and scheduling policies. Privileges are the
//! process's effective capabilities (`Process::caps`): `CAP_SETUID`,
//! `CAP_SETGID`; without `CAP_SYS_NICE` (runc's default set lacks it)
//! raising a priority or choosing a real-time policy is refused as Linux
//! refuses it then.

use alloc::vec::Vec;

use super::attrs::ATTRS;
use crate::creds::{CAP_SETGID, CAP_SETUID};
use crate::errno::{Errno, SysResult};
use crate::mm::uaccess;
use crate::process::Process;

/// Linux's `NGROUPS_MAX`.
const NGROUPS_MAX: u64 = 65536;

/// Whether `who` (a pid, pgid or sid argument) names this process.
fn is_self(who: u64) -> bool {
    matches!(who as u32, 0 | 1)
}

/// `getgroups(size, list)`.
pub fn getgroups(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let size = a[0] as i32;
    if size < 0 {
        return Err(Errno::EINVAL);
    }
    let g = p.groups.clone();
    if size == 0 {
        return Ok(g.len());
    }
    if (size as usize) < g.len() {
        return Err(Errno::EINVAL);
    }
    let bytes: Vec<u8> = g.iter().flat_map(|v| v.to_le_bytes()).collect();
    uaccess::copy_out(&mut p.mm, a[1], &bytes)?;
    Ok(g.len())
}

/// `setgroups(size, list)`: needs `CAP_SETGID`.
pub fn setgroups(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let size = a[0] as i32;
    if size < 0 || size as u64 > NGROUPS_MAX {
        return Err(Errno::EINVAL);
    }
    if !p.caps.has(CAP_SETGID) {
        return Err(Errno::EPERM);
    }
    let mut bytes = alloc::vec![0u8; size as usize * 4];
    uaccess::copy_in(&mut p.mm, a[1], &mut bytes)?;
    let mut g: Vec<u32> = bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    // Linux keeps them sorted (groups_sort), which getgroups shows.
    g.sort_unstable();
    p.groups = g;
    Ok(0)
}

fn put_three(p: &mut Process, a: &[u64; 6], v: [u32; 3]) -> SysResult {
    for (addr, v) in a[..3].iter().zip(v) {
        uaccess::write(&mut p.mm, *addr, &v)?;
    }
    Ok(0)
}

/// `getresuid(ruid, euid, suid)`: the saved uid is the effective one.
pub fn getresuid(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let ids = p.ids;
    put_three(p, a, [ids[0], ids[1], ids[1]])
}

/// `getresgid(rgid, egid, sgid)`.
pub fn getresgid(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let ids = p.ids;
    put_three(p, a, [ids[2], ids[3], ids[3]])
}

/// Sets the real and effective ids at `at` (0: uids, 2: gids) from
/// `real` and `eff` (-1: unchanged); the saved id is not kept apart from
/// the effective one (as `getresuid` reports it), so `saved` must be -1 or
/// a value `eff` could take. With `CAP_SETUID` (uids) or `CAP_SETGID`
/// (gids) any value; otherwise only the current real or effective id.
fn set_ids(p: &mut Process, at: usize, real: u64, eff: u64, saved: u64) -> SysResult {
    let privileged = p.caps.has(if at == 0 { CAP_SETUID } else { CAP_SETGID });
    let old = p.ids;
    let cur = [p.ids[at], p.ids[at + 1]];
    let arg = |v: u64| (v as u32 != u32::MAX).then_some(v as u32);
    for v in [arg(real), arg(eff), arg(saved)].into_iter().flatten() {
        if !privileged && !cur.contains(&v) {
            return Err(Errno::EPERM);
        }
    }
    if let Some(v) = arg(real) {
        p.ids[at] = v;
    }
    if let Some(v) = arg(eff) {
        p.ids[at + 1] = v;
    }
    uids_changed(p, &old);
    Ok(0)
}

/// Applies capabilities(7)'s rules for uid changes to `p`'s sets.
fn uids_changed(p: &mut Process, old: &[u32; 4]) {
    let keepcaps = ATTRS.lock().keepcaps;
    p.caps = p.caps.after_setuid(old, &p.ids, keepcaps);
}

/// `setresuid(ruid, euid, suid)` (glibc's `posix_spawn` calls it with the
/// current ids for `POSIX_SPAWN_RESETIDS`, e.g. GNU make).
pub fn setresuid(p: &mut Process, a: &[u64; 6]) -> SysResult {
    set_ids(p, 0, a[0], a[1], a[2])
}

/// `setresgid(rgid, egid, sgid)`.
pub fn setresgid(p: &mut Process, a: &[u64; 6]) -> SysResult {
    set_ids(p, 2, a[0], a[1], a[2])
}

/// `setreuid(ruid, euid)` (-1: unchanged).
pub fn setreuid(p: &mut Process, a: &[u64; 6]) -> SysResult {
    set_ids(p, 0, a[0], a[1], u64::from(u32::MAX))
}

/// `setregid(rgid, egid)`.
pub fn setregid(p: &mut Process, a: &[u64; 6]) -> SysResult {
    set_ids(p, 2, a[0], a[1], u64::from(u32::MAX))
}

/// `setuid`/`setgid` of the ids at `at` to `v`: with the capability all
/// of them; without, only the effective one, to the real or saved id.
fn set_one(p: &mut Process, at: usize, v: u64) -> SysResult {
    let v = v as u32;
    if v == u32::MAX {
        return Err(Errno::EINVAL);
    }
    let old = p.ids;
    if p.caps.has(if at == 0 { CAP_SETUID } else { CAP_SETGID }) {
        p.ids[at] = v;
        p.ids[at + 1] = v;
    } else if p.ids[at] == v || p.ids[at + 1] == v {
        p.ids[at + 1] = v;
    } else {
        return Err(Errno::EPERM);
    }
    uids_changed(p, &old);
    Ok(0)
}

/// `setuid(uid)`.
pub fn setuid(p: &mut Process, a: &[u64; 6]) -> SysResult {
    set_one(p, 0, a[0])
}

/// `setgid(gid)`.
pub fn setgid(p: &mut Process, a: &[u64; 6]) -> SysResult {
    set_one(p, 2, a[0])
}

const PRIO_PROCESS: u64 = 0;
const PRIO_PGRP: u64 = 1;
const PRIO_USER: u64 = 2;

/// Checks a `getpriority`/`setpriority` target.
fn prio_target(p: &Process, which: u64, who: u64) -> Result<(), Errno> {
    let found = match which {
        PRIO_PROCESS | PRIO_PGRP => is_self(who),
        PRIO_USER => who as u32 == 0 || who as u32 == p.ids[0],
        _ => return Err(Errno::EINVAL),
    };
    found.then_some(()).ok_or(Errno::ESRCH)
}

/// `getpriority(which, who)`: the raw syscall returns `20 - nice`.
pub fn getpriority(p: &mut Process, a: &[u64; 6]) -> SysResult {
    prio_target(p, a[0], a[1])?;
    Ok((20 - ATTRS.lock().nice) as usize)
}

/// `setpriority(which, who, prio)`: lowering the nice value needs
/// `CAP_SYS_NICE` (`RLIMIT_NICE` is 0).
pub fn setpriority(p: &mut Process, a: &[u64; 6]) -> SysResult {
    prio_target(p, a[0], a[1])?;
    let nice = (a[2] as i32).clamp(-20, 19);
    let mut attrs = ATTRS.lock();
    if nice < attrs.nice {
        return Err(Errno::EACCES);
    }
    attrs.nice = nice;
    Ok(0)
}

const IOPRIO_WHO_PROCESS: u64 = 1;
const IOPRIO_WHO_PGRP: u64 = 2;
const IOPRIO_WHO_USER: u64 = 3;
const IOPRIO_CLASS_SHIFT: u32 = 13;
const IOPRIO_CLASS_NONE: u32 = 0;
const IOPRIO_CLASS_RT: u32 = 1;
const IOPRIO_CLASS_BE: u32 = 2;
const IOPRIO_CLASS_IDLE: u32 = 3;

fn ioprio_target(p: &Process, which: u64, who: u64) -> Result<(), Errno> {
    let found = match which {
        IOPRIO_WHO_PROCESS | IOPRIO_WHO_PGRP => is_self(who),
        IOPRIO_WHO_USER => who as u32 == 0 || who as u32 == p.ids[0],
        _ => return Err(Errno::EINVAL),
    };
    found.then_some(()).ok_or(Errno::ESRCH)
}

/// `ioprio_get(which, who)`.
pub fn ioprio_get(p: &mut Process, a: &[u64; 6]) -> SysResult {
    ioprio_target(p, a[0], a[1])?;
    // Never set: IOPRIO_CLASS_NONE (0), as Linux 6.x reports it.
    Ok(ATTRS.lock().ioprio as usize)
}

/// `ioprio_set(which, who, ioprio)`: the real-time class needs
/// `CAP_SYS_ADMIN`.
pub fn ioprio_set(p: &mut Process, a: &[u64; 6]) -> SysResult {
    ioprio_target(p, a[0], a[1])?;
    let v = a[2] as u32;
    // Bits 0-2 are the level, 3-12 hints (which Linux does not check).
    let (class, level) = (v >> IOPRIO_CLASS_SHIFT, v & 0x7);
    match class {
        IOPRIO_CLASS_NONE if level == 0 => {}
        IOPRIO_CLASS_RT => return Err(Errno::EPERM),
        IOPRIO_CLASS_BE | IOPRIO_CLASS_IDLE => {}
        _ => return Err(Errno::EINVAL),
    }
    ATTRS.lock().ioprio = v;
    Ok(0)
}

const SCHED_OTHER: u32 = 0;
const SCHED_FIFO: u32 = 1;
const SCHED_RR: u32 = 2;
const SCHED_BATCH: u32 = 3;
const SCHED_IDLE: u32 = 5;
const SCHED_DEADLINE: u32 = 6;
const SCHED_RESET_ON_FORK: u32 = 0x4000_0000;

/// Checks a `sched_*` pid argument.
fn sched_target(pid: u64) -> Result<(), Errno> {
    match pid as i32 {
        0 | 1 => Ok(()),
        n if n < 0 => Err(Errno::EINVAL),
        _ => Err(Errno::ESRCH),
    }
}

/// `sched_getscheduler(pid)`.
pub fn sched_getscheduler(_p: &mut Process, a: &[u64; 6]) -> SysResult {
    sched_target(a[0])?;
    Ok(ATTRS.lock().policy as usize)
}

/// Applies `policy` with static priority `prio`: the normal policies take
/// priority 0 only; the real-time ones need `CAP_SYS_NICE`.
fn set_policy(policy: u32, prio: i32) -> SysResult {
    match policy & !SCHED_RESET_ON_FORK {
        SCHED_OTHER | SCHED_BATCH | SCHED_IDLE if prio == 0 => {
            ATTRS.lock().policy = policy;
            Ok(0)
        }
        SCHED_FIFO | SCHED_RR if (1..=99).contains(&prio) => Err(Errno::EPERM),
        SCHED_DEADLINE => Err(Errno::EINVAL),
        _ => Err(Errno::EINVAL),
    }
}

/// `sched_setscheduler(pid, policy, param)`.
pub fn sched_setscheduler(p: &mut Process, a: &[u64; 6]) -> SysResult {
    if a[2] == 0 || (a[0] as i32) < 0 {
        return Err(Errno::EINVAL);
    }
    let prio: i32 = uaccess::read(&mut p.mm, a[2])?;
    sched_target(a[0])?;
    set_policy(a[1] as u32, prio)
}

/// `sched_getparam(pid, param)`: the static priority, 0 for the normal
/// policies (the only ones a process here can have).
pub fn sched_getparam(p: &mut Process, a: &[u64; 6]) -> SysResult {
    if a[1] == 0 || (a[0] as i32) < 0 {
        return Err(Errno::EINVAL);
    }
    sched_target(a[0])?;
    uaccess::write(&mut p.mm, a[1], &0i32)?;
    Ok(0)
}

/// `sched_setparam(pid, param)`.
pub fn sched_setparam(p: &mut Process, a: &[u64; 6]) -> SysResult {
    if a[1] == 0 || (a[0] as i32) < 0 {
        return Err(Errno::EINVAL);
    }
    let prio: i32 = uaccess::read(&mut p.mm, a[1])?;
    sched_target(a[0])?;
    let policy = ATTRS.lock().policy;
    set_policy(policy, prio)
}

/// `sched_get_priority_max(policy)`.
pub fn sched_get_priority_max(_p: &mut Process, a: &[u64; 6]) -> SysResult {
    match a[0] as u32 {
        SCHED_FIFO | SCHED_RR => Ok(99),
        SCHED_OTHER | SCHED_BATCH | SCHED_IDLE | SCHED_DEADLINE => Ok(0),
        _ => Err(Errno::EINVAL),
    }
}

/// `sched_get_priority_min(policy)`.
pub fn sched_get_priority_min(_p: &mut Process, a: &[u64; 6]) -> SysResult {
    match a[0] as u32 {
        SCHED_FIFO | SCHED_RR => Ok(1),
        SCHED_OTHER | SCHED_BATCH | SCHED_IDLE | SCHED_DEADLINE => Ok(0),
        _ => Err(Errno::EINVAL),
    }
}

/// `sched_rr_get_interval(pid, ts)`: Linux's 100 ms round-robin slice
/// (what it reports for the fair policies varies with the load).
pub fn sched_rr_get_interval(p: &mut Process, a: &[u64; 6]) -> SysResult {
    if (a[0] as i32) < 0 {
        return Err(Errno::EINVAL);
    }
    sched_target(a[0])?;
    uaccess::write(&mut p.mm, a[1], &0u64)?;
    uaccess::write(&mut p.mm, a[1] + 8, &100_000_000u64)?;
    Ok(0)
}
