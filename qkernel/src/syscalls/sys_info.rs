//! System information and accounting: `sysinfo`, `getrusage`, `times`,
//! `getcpu`, `personality`, `statfs`/`fstatfs`, and the calls a container
//! may not make (`clock_settime`, `settimeofday`, `syslog`: `EPERM`).

use qlib::io_abi::{STATFS_SIZE, fd as fdop};

use super::attrs::ATTRS;
use super::cputime;
use crate::errno::{Errno, SysResult};
use crate::fs::path::{self, AT_FDCWD};
use crate::fs::procfs::{self, USER_HZ};
use crate::fs::special::{self, Node};
use crate::fs::{Backing, host};
use crate::hostcall;
use crate::mm::uaccess;
use crate::process::Process;
use crate::task::{self, cpu, cpu::Times};
use crate::time;

const NS_PER_S: u64 = 1_000_000_000;

fn put_u64s(buf: &mut [u8], at: usize, vals: &[u64]) {
    for (i, v) in vals.iter().enumerate() {
        buf[at + i * 8..at + i * 8 + 8].copy_from_slice(&v.to_le_bytes());
    }
}

/// `sysinfo(info)`: uptime, load, memory (in bytes, `mem_unit` 1), one
/// process.
pub fn sysinfo(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let (total, free, _) = procfs::memory();
    // SI_LOAD_SHIFT is 16, Linux's load fixed point 11.
    let loads = cputime::loadavg().map(|l| l << 5);
    let mut buf = [0u8; 112];
    let up = time::uptime_ns().div_ceil(NS_PER_S);
    put_u64s(
        &mut buf,
        0,
        &[up, loads[0], loads[1], loads[2], total, free],
    );
    // sharedram, bufferram, totalswap, freeswap: 0.
    buf[80..82].copy_from_slice(&1u16.to_le_bytes()); // procs
    buf[104..108].copy_from_slice(&1u32.to_le_bytes()); // mem_unit
    uaccess::copy_out(&mut p.mm, a[0], &buf)?;
    Ok(0)
}

/// ns as a `struct timeval`'s two words.
fn timeval(ns: u64) -> [u64; 2] {
    [ns / NS_PER_S, ns % NS_PER_S / 1000]
}

const RUSAGE_SELF: i32 = 0;
const RUSAGE_CHILDREN: i32 = -1;
const RUSAGE_THREAD: i32 = 1;

/// A `struct rusage` with CPU times `t` and the largest resident set
/// `maxrss_kb`; the other counters are 0.
pub(super) fn rusage(t: Times, maxrss_kb: u64) -> [u8; 144] {
    let mut buf = [0u8; 144];
    let [us, uu] = timeval(t.user);
    let [ss, su] = timeval(t.sys);
    put_u64s(&mut buf, 0, &[us, uu, ss, su, maxrss_kb]);
    buf
}

/// `getrusage(who, usage)`: the CPU time `task::cpu` charged to the
/// process, the thread or the reaped children; the resident set from the
/// page allocator.
pub fn getrusage(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let g = task::current_tgid();
    let buf = match a[0] as i32 {
        RUSAGE_SELF => rusage(cpu::group_times(g), procfs::memory().2 >> 10),
        RUSAGE_THREAD => rusage(
            cpu::task_times(task::current_pid()).0,
            procfs::memory().2 >> 10,
        ),
        RUSAGE_CHILDREN => rusage(cpu::children_times(g), 0),
        _ => return Err(Errno::EINVAL),
    };
    uaccess::copy_out(&mut p.mm, a[1], &buf)?;
    Ok(0)
}

/// `times(buf)`: the process's and its reaped children's CPU times in
/// clock ticks; returns ticks since boot.
pub fn times(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let tick = NS_PER_S / USER_HZ;
    if a[0] != 0 {
        let g = task::current_tgid();
        let (me, kids) = (cpu::group_times(g), cpu::children_times(g));
        let mut buf = [0u8; 32];
        put_u64s(
            &mut buf,
            0,
            &[
                me.user / tick,
                me.sys / tick,
                kids.user / tick,
                kids.sys / tick,
            ],
        );
        uaccess::copy_out(&mut p.mm, a[0], &buf)?;
    }
    Ok((time::uptime_ns() / tick) as usize)
}

/// `getcpu(cpu, node, cache)`: the vCPU the caller runs on, node 0. The
/// kernel runs on vCPU 0 only, so this is the vCPU the caller's user
/// mode last ran on: a secondary's for a task that entered from one
/// (`task::offload`; docs/smp.md).
pub fn getcpu(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let cpu = crate::task::stints::last_cpu();
    for (addr, v) in [(a[0], cpu), (a[1], 0u32)] {
        if addr != 0 {
            uaccess::write(&mut p.mm, addr, &v)?;
        }
    }
    Ok(0)
}

/// `personality(persona)`: 0xffffffff queries; any other value is set
/// (as Linux does); returns the previous one. The flags are recorded
/// only (`ADDR_NO_RANDOMIZE` does not change the layout of a new exec).
pub fn personality(_p: &mut Process, a: &[u64; 6]) -> SysResult {
    let new = a[0] as u32;
    let mut attrs = ATTRS.lock();
    let old = attrs.personality;
    if new != u32::MAX {
        attrs.personality = new;
    }
    Ok(old as usize)
}

/// `clock_settime`, `settimeofday`, `adjtimex`-style setters: a
/// container lacks `CAP_SYS_TIME`.
pub fn set_time(_p: &mut Process, _a: &[u64; 6]) -> SysResult {
    Err(Errno::EPERM)
}

/// `syslog(type, buf, len)`: the kernel log is not the container's
/// (`CAP_SYSLOG`, `dmesg_restrict`).
pub fn syslog(_p: &mut Process, _a: &[u64; 6]) -> SysResult {
    Err(Errno::EPERM)
}

const PROC_SUPER_MAGIC: u64 = 0x9fa0;
const TMPFS_MAGIC: u64 = 0x0102_1994;
const SYSFS_MAGIC: u64 = 0x6265_6572;

/// Linux's `PIPEFS_MAGIC`: the filesystem of guest pipes.
const PIPEFS_MAGIC: u64 = 0x5049_5045;
/// Linux's `SOCKFS_MAGIC`: the filesystem of sockets.
const SOCKFS_MAGIC: u64 = 0x534f_434b;

/// The `struct statfs` of the kernel's own filesystem holding absolute
/// path `abs` (`/proc`, `/dev` or `/sys`).
fn kernel_statfs(abs: &str) -> [u8; STATFS_SIZE] {
    let (magic, ro) = if abs.starts_with("/proc") {
        (PROC_SUPER_MAGIC, false)
    } else if abs.starts_with("/sys") {
        (SYSFS_MAGIC, true)
    } else {
        (TMPFS_MAGIC, false)
    };
    statfs_buf(magic, ro)
}

/// A `struct statfs` of a kernel filesystem with `magic`.
fn statfs_buf(magic: u64, ro: bool) -> [u8; STATFS_SIZE] {
    let mut b = [0u8; STATFS_SIZE];
    // f_type, f_bsize; blocks and files 0; f_namelen 255 at 64, f_frsize
    // at 72, f_flags at 80 (ST_VALID 0x20, ST_RDONLY, ST_NOSUID ...).
    put_u64s(&mut b, 0, &[magic, 4096]);
    let flags = 0x20 | 0x2 | u64::from(ro);
    put_u64s(&mut b, 64, &[255, 4096, flags]);
    b
}

/// `statfs` of what the absolute path `abs` names; the links of `/proc`
/// and `/dev` (`/proc/self/fd/N`, `/dev/stdin`, `/proc/self/exe`) are
/// followed, as Linux follows them.
fn statfs_abs(p: &mut Process, abs: &str) -> Result<[u8; STATFS_SIZE], Errno> {
    let norm = path::normalize(abs);
    match special::lookup(&norm) {
        Node::Host => procfs::host_statfs(abs),
        Node::Missing => Err(Errno::ENOENT),
        node if special::is_link(&node) => match special::follow(p, &node) {
            Some(special::Target::File(f)) => statfs_file(&f),
            Some(special::Target::Path(to)) => statfs_abs(p, &to),
            None => Err(Errno::ENOENT),
        },
        _ => Ok(kernel_statfs(&norm)),
    }
}

/// `statfs` of the filesystem holding open file `fd`.
fn statfs_fd(p: &Process, fd: u64) -> Result<[u8; STATFS_SIZE], Errno> {
    statfs_file(&*p.files.get(fd)?)
}

/// `statfs` of the filesystem holding open file `f`.
fn statfs_file(f: &crate::fs::File) -> Result<[u8; STATFS_SIZE], Errno> {
    Ok(match &f.backing {
        Backing::Host { fd, .. } => {
            let buf = [0u8; STATFS_SIZE];
            let (gpa, _) = hostcall::buf(&buf);
            host::fd_op(fdop::FSTATFS, *fd, gpa, 0, 0, 0)?;
            // SAFETY: the VMM wrote the buffer behind the compiler's back.
            unsafe { core::ptr::read_volatile(&buf) }
        }
        Backing::Special(_) | Backing::Tty(_) => kernel_statfs(&f.path),
        Backing::Pipe(_) => statfs_buf(PIPEFS_MAGIC, false),
        Backing::Netlink(_) => statfs_buf(SOCKFS_MAGIC, false),
        // Linux's `MQUEUE_MAGIC`.
        Backing::MQueue(_) => statfs_buf(0x1980_0202, false),
    })
}

/// `statfs(path, buf)`.
pub fn statfs(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let abs = path::user_absolute(p, AT_FDCWD, a[0])?;
    let st = statfs_abs(p, &abs)?;
    uaccess::copy_out(&mut p.mm, a[1], &st)?;
    Ok(0)
}

/// `fstatfs(fd, buf)`.
pub fn fstatfs(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let st = statfs_fd(p, a[0])?;
    uaccess::copy_out(&mut p.mm, a[1], &st)?;
    Ok(0)
}
