//! The generated system files of `/proc`: `loadavg`, `uptime`, `meminfo`,
//! `cpuinfo`, `stat`, `version`, `mounts` (and `self/mounts`,
//! `self/mountinfo`), `filesystems` and the few `sys/` entries programs
//! read. Every file is made from the kernel's own state (clocks, CPU-time
//! accounting, the page allocator, CPUID, the boot information), is a few
//! KiB at most, and names no host path or host pid: the rootfs appears as
//! `/`, with the type of filesystem the host keeps it on.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write as _;

use qlib::bitmap_alloc::CHUNK_SIZE;
use qlib::io_abi::{STATFS_SIZE, path as pathop};

use crate::arch;
use crate::fs::host;
use crate::hostcall;
use crate::syscalls::cputime;
use crate::time;

/// `uname -r`, `/proc/version` and `/proc/sys/kernel/osrelease`.
pub const OSRELEASE: &str = "6.6.0-qkernel";
/// `uname -v`.
pub const VERSION: &str = "#1 SMP qkernel";
/// Linux's `USER_HZ`: clock ticks of `/proc/stat` and `times`.
pub const USER_HZ: u64 = 100;
/// `/proc/sys/fs/pipe-max-size` (Linux's default).
pub const PIPE_MAX_SIZE: u64 = 1 << 20;

/// Generated files directly under `/proc` (name, `DT_*` is regular).
pub const PROC_FILES: &[&str] = &[
    "cpuinfo",
    "filesystems",
    "loadavg",
    "meminfo",
    "mounts",
    "stat",
    "uptime",
    "version",
];

/// The `/proc/sys` tree: directories (ending in `/`) and files, as paths
/// under `/proc/`.
pub const SYS_TREE: &[&str] = &[
    "sys/",
    "sys/fs/",
    "sys/fs/pipe-max-size",
    "sys/kernel/",
    "sys/kernel/cap_last_cap",
    "sys/kernel/hostname",
    "sys/kernel/osrelease",
    "sys/kernel/ostype",
    "sys/kernel/pid_max",
    "sys/kernel/version",
    "sys/vm/",
    "sys/vm/overcommit_memory",
    // The network namespace's files, from the VMM (`net_file`).
    "net/",
    "net/dev",
    "net/if_inet6",
    "net/route",
    "net/tcp",
    "net/tcp6",
    "net/udp",
    "net/udp6",
    "net/unix",
];

/// The entry of `SYS_TREE` named by `rest` (a path under `/proc/`,
/// without trailing slash): (its static name, whether a directory).
pub fn sys_entry(rest: &str) -> Option<(&'static str, bool)> {
    SYS_TREE
        .iter()
        .find_map(|e| match e.strip_suffix('/') {
            Some(d) if d == rest => Some((*e, true)),
            None if *e == rest => Some((*e, false)),
            _ => None,
        })
        .or_else(|| {
            config_sysctls().find_map(|(path, _)| {
                if path == rest {
                    return Some((path, false));
                }
                let dir = path.get(..rest.len() + 1)?;
                (dir.strip_suffix('/') == Some(rest)).then_some((dir, true))
            })
        })
}

/// The config's `linux.sysctl` entries the guest shows (`BootInfo::
/// sysctl`): (path under `/proc/`, value), e.g. (`sys/kernel/shmmax`,
/// `"4096"`). The runtime let through only those of the namespaces a
/// container has, as runc does; they read as set and cannot be written.
fn config_sysctls() -> impl Iterator<Item = (&'static str, &'static str)> {
    let b = crate::boot_slice(crate::boot_info().sysctl);
    b.split(|&c| c == 0)
        .filter_map(|e| core::str::from_utf8(e).ok())
        .filter_map(|e| e.split_once('='))
        .filter(|(k, _)| k.starts_with("sys/") && !k.ends_with('/'))
}

/// The children of `SYS_TREE` directory `dir` (e.g. `sys/kernel/`):
/// (name, is a directory).
pub fn sys_children(dir: &str) -> Vec<(&'static str, bool)> {
    let child = |e: &'static str| {
        let rest = e.strip_prefix(dir)?;
        let (name, is_dir) = match rest.split_once('/') {
            Some((name, _)) => (name, true),
            None => (rest, false),
        };
        (!name.is_empty()).then_some((name, is_dir))
    };
    let mut v: Vec<(&'static str, bool)> = SYS_TREE
        .iter()
        .filter_map(|e| child(e))
        .chain(config_sysctls().filter_map(|(path, _)| child(path)))
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The text of generated file `which` (a `PROC_FILES` name, a
/// `SYS_TREE` file, or `mountinfo`).
pub fn text(which: &str) -> String {
    match which {
        "loadavg" => loadavg(),
        "uptime" => uptime(),
        "meminfo" => meminfo(),
        "cpuinfo" => cpuinfo(),
        "stat" => stat(),
        "version" => format!("Linux version {OSRELEASE} (qkernel) {VERSION}\n"),
        "mounts" => mounts(false),
        "mountinfo" => mounts(true),
        "filesystems" => "nodev\tsysfs\nnodev\ttmpfs\nnodev\tproc\n".into(),
        "sys/fs/pipe-max-size" => format!("{PIPE_MAX_SIZE}\n"),
        // `/sys/devices/system/cpu/online` and `possible`.
        "cpu-online" => match crate::task::offload::cpus() {
            1 => "0\n".into(),
            n => format!("0-{}\n", n - 1),
        },
        "sys/kernel/hostname" => {
            format!("{}\n", String::from_utf8_lossy(&crate::uts::hostname()))
        }
        // Go's runtimetest (runtime-tools) and libcap read it first.
        "sys/kernel/cap_last_cap" => {
            format!("{}\n", crate::creds::CAP_LAST_CAP)
        }
        "sys/kernel/osrelease" => format!("{OSRELEASE}\n"),
        "sys/kernel/ostype" => "Linux\n".into(),
        "sys/kernel/pid_max" => "4194304\n".into(),
        "sys/kernel/version" => format!("{VERSION}\n"),
        "sys/vm/overcommit_memory" => "0\n".into(),
        n if n.starts_with("net/") => net_file(&n[4..]),
        other => config_sysctls()
            .find(|(path, _)| *path == other)
            .map(|(_, v)| format!("{v}\n"))
            .unwrap_or_default(),
    }
}

/// `/proc/net/NAME`: the host's file for the sandbox's network namespace
/// (its sockets are host sockets there), through `Call::NetFile`; empty
/// if the VMM has none.
fn net_file(name: &str) -> String {
    use qlib::netinfo;
    let Some(which) = netinfo::net_file(name) else {
        return String::new();
    };
    let mut buf = alloc::vec![0u8; netinfo::NET_FILE_MAX];
    let gpa = crate::mm::kva_to_gpa(buf.as_mut_ptr() as u64);
    let n = hostcall::call(
        qlib::abi::Call::NetFile,
        [which as u64, gpa, buf.len() as u64, 0, 0, 0],
    );
    let Ok(n) = usize::try_from(n) else {
        return String::new();
    };
    buf.truncate(n.min(netinfo::NET_FILE_MAX));
    String::from_utf8_lossy(&buf).into_owned()
}

/// Nanoseconds as `seconds.hundredths`.
fn centis(ns: u64) -> String {
    format!(
        "{}.{:02}",
        ns / 1_000_000_000,
        ns % 1_000_000_000 / 10_000_000
    )
}

fn loadavg() -> String {
    let mut s = String::new();
    for v in cputime::loadavg() {
        let (i, f) = cputime::load_parts(v);
        let _ = write!(s, "{i}.{f:02} ");
    }
    let (running, total, last) = tasks();
    let _ = writeln!(s, "{running}/{total} {last}");
    s
}

/// Tasks now: (runnable or running, all but zombies, the last pid
/// handed out).
pub fn tasks() -> (usize, usize, u32) {
    use crate::task::{KERNEL, State};
    let k = KERNEL.lock();
    let live = k
        .tasks
        .values()
        .filter(|t| !matches!(t.state, State::Zombie(_)));
    let total = live.clone().count();
    let running = k
        .tasks
        .values()
        .filter(|t| matches!(t.state, State::Running | State::Runnable))
        .count();
    let last = k
        .tasks
        .keys()
        .copied()
        .max()
        .unwrap_or(1)
        .max(k.next_pid.saturating_sub(1));
    (running.max(1), total.max(1), last)
}

fn uptime() -> String {
    let up = time::uptime_ns();
    let idle = up.saturating_sub(cputime::cpu_ns());
    format!("{} {}\n", centis(up), centis(idle))
}

/// Memory facts in bytes: (total, free, in use by user pages).
pub fn memory() -> (u64, u64, u64) {
    unsafe extern "C" {
        static __kernel_end: u8;
    }
    let info = crate::boot_info();
    let chunk = CHUNK_SIZE as u64;
    // The page allocator's pool: RAM between the kernel image and the
    // boot data, in whole chunks (as `mm::frames::init` takes it).
    let kernel_end = crate::mm::kva_to_gpa(&raw const __kernel_end as u64);
    let pool =
        (info.boot_data_gpa & !(chunk - 1)).saturating_sub(kernel_end.next_multiple_of(chunk));
    let s = crate::mm::frames::stats();
    let held = (s.chunks as u64).saturating_mul(chunk);
    let free = pool.saturating_sub(held) + s.pages_free as u64 * 4096;
    (
        info.mem_size,
        free.min(info.mem_size),
        s.pages_in_use as u64 * 4096,
    )
}

fn meminfo() -> String {
    let (total, free, used) = memory();
    let kb = |b: u64| b >> 10;
    let rows: [(&str, u64, bool); 24] = [
        ("MemTotal", kb(total), true),
        ("MemFree", kb(free), true),
        ("MemAvailable", kb(free), true),
        ("Buffers", 0, true),
        ("Cached", 0, true),
        ("SwapCached", 0, true),
        ("Active", kb(used), true),
        ("Inactive", 0, true),
        ("SwapTotal", 0, true),
        ("SwapFree", 0, true),
        ("Dirty", 0, true),
        ("Writeback", 0, true),
        ("AnonPages", kb(used), true),
        ("Mapped", 0, true),
        ("Shmem", 0, true),
        ("Slab", 0, true),
        ("SReclaimable", 0, true),
        ("SUnreclaim", 0, true),
        ("CommitLimit", kb(total), true),
        ("Committed_AS", kb(used), true),
        ("HugePages_Total", 0, false),
        ("HugePages_Free", 0, false),
        ("Hugepagesize", 2048, true),
        ("Hugetlb", 0, true),
    ];
    let mut s = String::new();
    for (name, v, unit) in rows {
        let label = format!("{name}:");
        let _ = writeln!(s, "{label:<16}{v:>8}{}", if unit { " kB" } else { "" });
    }
    s
}

/// CPUID feature bits and Linux's names for them: (leaf, register
/// index (eax, ebx, ecx, edx), bit, name).
const FLAGS: &[(u32, u8, u8, &str)] = &[
    (1, 3, 0, "fpu"),
    (1, 3, 1, "vme"),
    (1, 3, 2, "de"),
    (1, 3, 3, "pse"),
    (1, 3, 4, "tsc"),
    (1, 3, 5, "msr"),
    (1, 3, 6, "pae"),
    (1, 3, 7, "mce"),
    (1, 3, 8, "cx8"),
    (1, 3, 9, "apic"),
    (1, 3, 11, "sep"),
    (1, 3, 12, "mtrr"),
    (1, 3, 13, "pge"),
    (1, 3, 14, "mca"),
    (1, 3, 15, "cmov"),
    (1, 3, 16, "pat"),
    (1, 3, 17, "pse36"),
    (1, 3, 19, "clflush"),
    (1, 3, 23, "mmx"),
    (1, 3, 24, "fxsr"),
    (1, 3, 25, "sse"),
    (1, 3, 26, "sse2"),
    (1, 3, 27, "ss"),
    (1, 3, 28, "ht"),
    (0x8000_0001, 3, 11, "syscall"),
    (0x8000_0001, 3, 20, "nx"),
    (0x8000_0001, 3, 26, "pdpe1gb"),
    (0x8000_0001, 3, 27, "rdtscp"),
    (0x8000_0001, 3, 29, "lm"),
    (1, 2, 0, "pni"),
    (1, 2, 1, "pclmulqdq"),
    (1, 2, 9, "ssse3"),
    (1, 2, 12, "fma"),
    (1, 2, 13, "cx16"),
    (1, 2, 19, "sse4_1"),
    (1, 2, 20, "sse4_2"),
    (1, 2, 21, "x2apic"),
    (1, 2, 22, "movbe"),
    (1, 2, 23, "popcnt"),
    (1, 2, 24, "tsc_deadline_timer"),
    (1, 2, 25, "aes"),
    (1, 2, 26, "xsave"),
    (1, 2, 28, "avx"),
    (1, 2, 29, "f16c"),
    (1, 2, 30, "rdrand"),
    (1, 2, 31, "hypervisor"),
    (0x8000_0001, 2, 0, "lahf_lm"),
    (0x8000_0001, 2, 5, "abm"),
    (0x8000_0001, 2, 6, "sse4a"),
    (0x8000_0001, 2, 8, "3dnowprefetch"),
    (7, 1, 0, "fsgsbase"),
    (7, 1, 3, "bmi1"),
    (7, 1, 4, "hle"),
    (7, 1, 5, "avx2"),
    (7, 1, 7, "smep"),
    (7, 1, 8, "bmi2"),
    (7, 1, 9, "erms"),
    (7, 1, 10, "invpcid"),
    (7, 1, 11, "rtm"),
    (7, 1, 16, "avx512f"),
    (7, 1, 17, "avx512dq"),
    (7, 1, 18, "rdseed"),
    (7, 1, 19, "adx"),
    (7, 1, 20, "smap"),
    (7, 1, 21, "avx512ifma"),
    (7, 1, 23, "clflushopt"),
    (7, 1, 24, "clwb"),
    (7, 1, 28, "avx512cd"),
    (7, 1, 29, "sha_ni"),
    (7, 1, 30, "avx512bw"),
    (7, 1, 31, "avx512vl"),
    (7, 2, 1, "avx512vbmi"),
    (7, 2, 2, "umip"),
    (7, 2, 3, "pku"),
    (7, 2, 6, "avx512_vbmi2"),
    (7, 2, 8, "gfni"),
    (7, 2, 9, "vaes"),
    (7, 2, 10, "vpclmulqdq"),
    (7, 2, 11, "avx512_vnni"),
    (7, 2, 12, "avx512_bitalg"),
    (7, 2, 14, "avx512_vpopcntdq"),
    (7, 2, 22, "rdpid"),
    (7, 3, 4, "fsrm"),
    (7, 3, 10, "md_clear"),
    (7, 3, 26, "flush_l1d"),
    (7, 3, 29, "arch_capabilities"),
];

fn reg(r: (u32, u32, u32, u32), i: u8) -> u32 {
    match i {
        0 => r.0,
        1 => r.1,
        2 => r.2,
        _ => r.3,
    }
}

/// The CPU's brand string (CPUID 0x80000002..4), trimmed.
fn model_name(max_ext: u32) -> String {
    if max_ext < 0x8000_0004 {
        return "unknown".into();
    }
    let mut bytes = [0u8; 48];
    for (i, leaf) in (0x8000_0002u32..=0x8000_0004).enumerate() {
        let r = arch::cpuid(leaf);
        for (j, v) in [r.0, r.1, r.2, r.3].iter().enumerate() {
            bytes[i * 16 + j * 4..][..4].copy_from_slice(&v.to_le_bytes());
        }
    }
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).trim().into()
}

fn cpuinfo() -> String {
    let l0 = arch::cpuid(0);
    let max = l0.0;
    let mut vendor = [0u8; 12];
    vendor[..4].copy_from_slice(&l0.1.to_le_bytes());
    vendor[4..8].copy_from_slice(&l0.3.to_le_bytes());
    vendor[8..].copy_from_slice(&l0.2.to_le_bytes());
    let max_ext = arch::cpuid(0x8000_0000).0;
    let l1 = arch::cpuid(1);
    let base_family = (l1.0 >> 8) & 0xf;
    let family = if base_family == 0xf {
        base_family + ((l1.0 >> 20) & 0xff)
    } else {
        base_family
    };
    let mut model = (l1.0 >> 4) & 0xf;
    if base_family == 0x6 || base_family == 0xf {
        model |= ((l1.0 >> 16) & 0xf) << 4;
    }
    let clflush = ((l1.1 >> 8) & 0xff) * 8;
    let mut flags = String::new();
    for &(leaf, r, bit, name) in FLAGS {
        let supported = if leaf >= 0x8000_0000 {
            leaf <= max_ext
        } else {
            leaf <= max
        };
        if supported && reg(arch::cpuid(leaf), r) >> bit & 1 == 1 {
            if !flags.is_empty() {
                flags.push(' ');
            }
            flags.push_str(name);
        }
    }
    let bits = if max_ext >= 0x8000_0008 {
        arch::cpuid(0x8000_0008).0
    } else {
        0x3028
    };
    let khz = time::tsc_khz();
    let mut s = String::new();
    // One entry per vCPU that runs tasks.
    let n = crate::task::offload::cpus();
    for i in 0..n {
        let _ = write!(
            s,
            "processor\t: {i}\nvendor_id\t: {}\ncpu family\t: {family}\nmodel\t\t: {model}\n\
         model name\t: {}\nstepping\t: {}\ncpu MHz\t\t: {}.{:03}\n\
         physical id\t: 0\nsiblings\t: {n}\ncore id\t\t: {i}\ncpu cores\t: {n}\n\
         apicid\t\t: {i}\ninitial apicid\t: {i}\nfpu\t\t: yes\nfpu_exception\t: yes\n\
         cpuid level\t: {max}\nwp\t\t: yes\nflags\t\t: {flags}\n\
         bogomips\t: {}.{:02}\nclflush size\t: {clflush}\ncache_alignment\t: {clflush}\n\
         address sizes\t: {} bits physical, {} bits virtual\npower management:\n\n",
            String::from_utf8_lossy(&vendor),
            model_name(max_ext),
            l1.0 & 0xf,
            khz / 1000,
            khz % 1000,
            khz * 2 / 1000,
            khz * 2 % 1000 / 10,
            bits & 0xff,
            (bits >> 8) & 0xff,
        );
    }
    s
}

fn stat() -> String {
    let up = time::uptime_ns();
    let (user, sys) = cputime::user_sys_ns();
    let idle = up.saturating_sub(user + sys);
    let t = |ns: u64| ns / (1_000_000_000 / USER_HZ);
    let cpu = format!("{} 0 {} {} 0 0 0 0 0 0", t(user), t(sys), t(idle));
    let btime = time::realtime_ns().saturating_sub(up) / 1_000_000_000;
    let (running, _, last) = tasks();
    // Every vCPU that runs tasks has a line (glibc counts them for
    // `get_nprocs` without /sys); the times are all vCPU 0's.
    let mut cpu_lines = format!("cpu0 {cpu}\n");
    for i in 1..crate::task::offload::cpus() {
        let _ = writeln!(cpu_lines, "cpu{i} 0 0 0 0 0 0 0 0 0 0");
    }
    format!(
        "cpu  {cpu}\n{cpu_lines}intr 0\nctxt 0\nbtime {btime}\nprocesses {last}\n\
         procs_running {running}\nprocs_blocked 0\nsoftirq 0 0 0 0 0 0 0 0 0 0 0\n"
    )
}

/// Linux's name for a filesystem magic number (`statfs` `f_type`).
fn fs_name(magic: u64) -> &'static str {
    match magic {
        0xef53 => "ext4",
        0x5846_5342 => "xfs",
        0x9123_683e => "btrfs",
        0x0102_1994 => "tmpfs",
        0x794c_7630 => "overlay",
        0x6969 => "nfs",
        0x0102_1997 => "9p",
        0x6573_5546 => "fuse",
        0x2fc1_2fc1 => "zfs",
        0xf2f5_2010 => "f2fs",
        0x7371_7368 => "squashfs",
        _ => "rootfs",
    }
}

/// `statfs` of an absolute rootfs path, in the host's 120 bytes.
pub fn host_statfs(path: &str) -> Result<[u8; STATFS_SIZE], crate::errno::Errno> {
    let buf = [0u8; STATFS_SIZE];
    let (gpa, _) = hostcall::buf(&buf);
    host::path_op(pathop::STATFS, path, gpa, 0, 0)?;
    // SAFETY: the VMM wrote the buffer behind the compiler's back.
    Ok(unsafe { core::ptr::read_volatile(&buf) })
}

fn le64(b: &[u8], off: usize) -> u64 {
    let mut v = [0u8; 8];
    v.copy_from_slice(&b[off..off + 8]);
    u64::from_le_bytes(v)
}

/// `/proc/mounts` (`info` false) or `/proc/self/mountinfo`: the rootfs
/// and the kernel's own `/proc`, `/dev`, `/dev/pts`, `/dev/mqueue` and
/// `/sys`.
fn mounts(info: bool) -> String {
    let (fstype, ro) = match host_statfs("/") {
        // f_type at 0, f_flags at 80 (ST_RDONLY = 1).
        Ok(st) => (fs_name(le64(&st, 0)), le64(&st, 80) & 1 != 0),
        Err(_) => ("rootfs", false),
    };
    let (maj, min) = host::statx_path("/", false).map_or((0, 0), |sx| {
        let u32_at = |o: usize| u32::from_le_bytes([sx[o], sx[o + 1], sx[o + 2], sx[o + 3]]);
        (u32_at(136), u32_at(140))
    });
    let rw = if ro { "ro" } else { "rw" };
    let root_opts = format!("{rw},relatime");
    let mut rows: Vec<(&str, &str, &str, &str, &str, String)> = alloc::vec![
        // Not "rootfs", which tools skip as the initramfs (busybox df).
        (
            "none",
            "/",
            fstype,
            root_opts.as_str(),
            rw,
            format!("{maj}:{min}"),
        ),
        (
            "proc",
            "/proc",
            "proc",
            "rw,nosuid,nodev,noexec,relatime",
            "rw",
            "0:81".into(),
        ),
        (
            "tmpfs",
            "/dev",
            "tmpfs",
            "rw,nosuid",
            "rw,mode=755",
            "0:81".into(),
        ),
        // The guest's own ptys (`fs::tty`), where runc's containers
        // mount a devpts: slaves are 0600 and /dev/ptmx 0666 here.
        (
            "devpts",
            "/dev/pts",
            "devpts",
            "rw,nosuid,noexec,relatime",
            "rw,mode=600,ptmxmode=666",
            "0:83".into(),
        ),
        (
            "sysfs",
            "/sys",
            "sysfs",
            "ro,nosuid,nodev,noexec,relatime",
            "ro",
            "0:81".into(),
        ),
    ];
    // An OCI container's /dev/shm is a tmpfs the runtime mounted in the
    // rootfs view (docs/oci.md, "/dev"); listed after /dev as under runc.
    let shm = host::statx_path("/dev/shm", false)
        .is_ok_and(|sx| super::stat::statx_mode(&sx) & super::stat::S_IFMT == super::stat::S_IFDIR);
    if shm {
        rows.insert(
            4,
            (
                "shm",
                "/dev/shm",
                "tmpfs",
                "rw,nosuid,nodev,noexec,relatime",
                "rw,size=65536k",
                "0:82".into(),
            ),
        );
    }
    // The guest's POSIX message queues (`fs::mqueue`), after /dev/shm as
    // under runc.
    let at = rows.len() - 1;
    rows.insert(
        at,
        (
            "mqueue",
            "/dev/mqueue",
            "mqueue",
            "rw,nosuid,nodev,noexec,relatime",
            "rw",
            "0:84".into(),
        ),
    );
    let mut s = String::new();
    for (i, (src, dir, ty, opts, sopts, dev)) in rows.iter().enumerate() {
        if info {
            // /dev's mount (the third row, id 4) holds /dev/pts, /dev/shm.
            let parent = match i {
                0 => 1,
                _ if dir.starts_with("/dev/") => 4,
                _ => 2,
            };
            let _ = writeln!(
                s,
                "{} {parent} {dev} / {dir} {opts} - {ty} {src} {sopts}",
                i + 2
            );
        } else {
            let mo = match *dir {
                "/dev" => "rw,nosuid,mode=755",
                "/dev/pts" => "rw,nosuid,noexec,relatime,mode=600,ptmxmode=666",
                _ => opts,
            };
            let _ = writeln!(s, "{src} {dir} {ty} {mo} 0 0");
        }
    }
    // The mounts the runtime made inside the rootfs (`BootInfo::mounts`),
    // after the kernel's own as under runc; each one's parent is the
    // nearest mount above it.
    let mut dirs: Vec<&str> = rows.iter().map(|r| r.1).collect();
    for m in runtime_mounts() {
        let id = dirs.len() + 2;
        let parent = dirs
            .iter()
            .rposition(|d| *d == "/" || m.dir.strip_prefix(d).is_some_and(|r| r.starts_with('/')))
            .map_or(1, |i| i + 2);
        if info {
            let _ = writeln!(
                s,
                "{id} {parent} {} {} {} {} - {} {} {}",
                m.dev, m.root, m.dir, m.opts, m.fstype, m.source, m.super_opts
            );
        } else {
            let _ = writeln!(s, "{} {} {} {} 0 0", m.source, m.dir, m.fstype, m.opts);
        }
        dirs.push(m.dir);
    }
    s
}

/// A mount of `BootInfo::mounts`, its fields as mountinfo writes them.
struct RuntimeMount {
    dir: &'static str,
    root: &'static str,
    fstype: &'static str,
    source: &'static str,
    opts: &'static str,
    super_opts: &'static str,
    dev: &'static str,
}

/// The mounts the runtime made inside the rootfs, in mount order.
fn runtime_mounts() -> impl Iterator<Item = RuntimeMount> {
    crate::boot_slice(crate::boot_info().mounts)
        .split(|&c| c == 0)
        .filter_map(|r| core::str::from_utf8(r).ok())
        .filter_map(|r| {
            let mut f = r.split(' ');
            let m = RuntimeMount {
                dir: f.next()?,
                root: f.next()?,
                fstype: f.next()?,
                source: f.next()?,
                opts: f.next()?,
                super_opts: f.next()?,
                dev: f.next()?,
            };
            m.dir.starts_with('/').then_some(m)
        })
}
