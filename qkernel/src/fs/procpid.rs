//! The per-process directories of `/proc`: `/proc/<pid>/` for every task
//! in the task table, and `/proc/self` (a link to the running task's).
//! Each holds `stat`, `statm`, `status`, `cmdline`, `comm`, `environ`,
//! `maps`, `limits`, `mounts`, `mountinfo`, the links `exe`, `cwd` and
//! `root`, `fd/` (a link per open fd) and `task/<pid>/` (one thread per
//! process). The text is generated at open time from the task table and
//! the process's own state (the running one in `process::PROCESS`, the
//! others in their `Task`); it names only rootfs paths and sandbox pids.
//! Another uid's `environ`, `fd/` and links are refused ([`may_access`]).
//! A zombie keeps its directory (its `stat` says `Z`) and its name, but
//! has no other process state left: its command line and memory are
//! empty.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt::Write as _;

use crate::mm::vma::VmaKind;
use crate::process::Process;
use crate::signal::SigState;
use crate::task::{self, KERNEL, State};

/// Files of a `/proc/<pid>/` directory.
pub const PID_FILES: &[&str] = &[
    "cmdline",
    "comm",
    "environ",
    "limits",
    "maps",
    "mountinfo",
    "mounts",
    "stat",
    "statm",
    "status",
    "uid_map",
    "gid_map",
];

/// Links of a `/proc/<pid>/` directory.
pub const PID_LINKS: &[&str] = &["cwd", "exe", "root"];

/// Whether task `pid` exists (zombies included).
pub fn exists(pid: u32) -> bool {
    pid == task::current_pid() || KERNEL.lock().tasks.contains_key(&pid)
}

/// Every pid, ascending.
pub fn pids() -> Vec<u32> {
    KERNEL.lock().tasks.keys().copied().collect()
}

/// The task-table view of a process.
pub struct TaskView {
    pub pid: u32,
    pub ppid: u32,
    pub pgid: u32,
    pub sid: u32,
    /// `R`, `S`, `T` or `Z`.
    pub state: char,
    pub exit_signal: u32,
    /// The exit status word of a zombie.
    pub exit_code: i32,
    pub sig: SigState,
    /// A zombie's name (a live process's is its `Process`'s).
    pub comm: [u8; 16],
}

/// Runs `f` on task `pid`'s view and process (`None` for a zombie);
/// `None` if there is no such task. `cur` is the running process.
pub fn with_proc<R>(
    cur: &mut Process,
    pid: u32,
    f: impl FnOnce(&TaskView, Option<&mut Process>) -> R,
) -> Option<R> {
    let me = task::current_pid();
    let mut k = KERNEL.lock();
    let stopped = k
        .tasks
        .get(&pid)
        .is_some_and(|t| task::jobctl::stopped(&k, t.tgid));
    // A process sharing its space (CLONE_VM) holds it only while it runs
    // or ran last of its group (`task::mmshare`): it gets it for the look.
    task::mmshare::hand_to(&mut k, pid);
    let lend = pid != me && task::mmshare::holder(pid) == Some(task::current_tgid());
    let t = k.tasks.get_mut(&pid)?;
    let (state, exit_code) = match t.state {
        // A stopped group's threads blocked in the kernel stop when
        // their wait ends: the group shows stopped (`task::jobctl`).
        State::Stopped => ('T', 0),
        State::Blocked if stopped => ('T', 0),
        State::Running | State::Runnable => ('R', 0),
        State::Blocked => ('S', 0),
        State::Zombie(st) => ('Z', st.wait_status()),
        // A leader whose thread ended while other threads go on: Linux
        // shows it as a zombie too.
        State::Dead(st) => ('Z', st.wait_status()),
    };
    let view = TaskView {
        pid,
        ppid: t.ppid,
        pgid: t.pgid,
        sid: t.sid,
        state: if pid == me { 'R' } else { state },
        exit_signal: t.exit_signal,
        exit_code,
        sig: if pid == me {
            SigState::save()
        } else {
            t.sig.clone()
        },
        comm: t.comm,
    };
    if pid == me {
        drop(k);
        Some(f(&view, Some(cur)))
    } else if lend && let Some(q) = t.proc.as_mut() {
        // The running process holds the space: lent for the look.
        core::mem::swap(&mut cur.mm, &mut q.mm);
        let r = f(&view, Some(&mut *q));
        core::mem::swap(&mut cur.mm, &mut q.mm);
        Some(r)
    } else {
        Some(f(&view, t.proc.as_mut()))
    }
}

/// The uid and gid (as `[uid, euid, gid, egid]`) that own `/proc/<pid>`.
pub fn owner(cur: &mut Process, pid: u32) -> [u32; 4] {
    let fallback = cur.ids;
    with_proc(cur, pid, |_, p| p.map_or(fallback, |p| p.ids)).unwrap_or(fallback)
}

/// Whether the running process may look into task `pid`'s private
/// entries (`environ`, `fd/`, the links), as Linux's ptrace access check
/// for a process without `CAP_SYS_PTRACE` (a container's root lacks it):
/// its effective uid must be the target's real and effective uid.
pub fn may_access(cur: &mut Process, pid: u32) -> bool {
    let me = cur.ids[1];
    let target = owner(cur, pid);
    pid == task::current_pid() || target[0] == me && target[1] == me
}

/// The open fds of task `pid`.
pub fn fds(cur: &mut Process, pid: u32) -> Vec<usize> {
    with_proc(cur, pid, |_, p| {
        p.map(|p| p.files.numbers()).unwrap_or_default()
    })
    .unwrap_or_default()
}

/// The target of link `which` (`exe`, `cwd`, `root`) of task `pid`.
pub fn link(cur: &mut Process, pid: u32, which: &str) -> Option<String> {
    if !may_access(cur, pid) {
        return None;
    }
    let target = with_proc(cur, pid, |_, p| {
        let p = p?;
        Some(match which {
            "exe" => p.exe.clone(),
            "cwd" => p.fs.cwd(),
            _ => "/".into(),
        })
    })
    .flatten()?;
    if which != "exe" {
        return Some(target);
    }
    // Linux shows the file with every symlink resolved (the dynamic
    // loader's `$ORIGIN` comes from `/proc/self/exe`): one `readlink` host
    // call per component, made with no task lock held.
    Some(super::path::canonical(&target, super::host::readlink).unwrap_or(target))
}

/// Memory figures in pages: (size of every mapping, resident, of which
/// the stack, the heap and the data).
struct Mem {
    size: u64,
    rss: u64,
    stack: u64,
    data: u64,
}

fn memory(p: &mut Process) -> Mem {
    let vmas: Vec<_> = p.mm.vmas.iter_range(0, u64::MAX).copied().collect();
    let mut m = Mem {
        size: 0,
        rss: 0,
        stack: 0,
        data: 0,
    };
    for v in &vmas {
        if v.kind == VmaKind::Kernel {
            continue;
        }
        let pages = (v.end - v.start) / 4096;
        m.size += pages;
        match v.kind {
            VmaKind::Stack => m.stack += pages,
            VmaKind::Heap
            | VmaKind::Anon
            | VmaKind::SharedAnon { .. }
            | VmaKind::SharedFile { .. }
                if v.prot & 2 != 0 =>
            {
                m.data += pages
            }
            _ => {}
        }
        // Count present leaf entries; skip a whole 2 MiB when its page
        // table does not exist.
        let mut va = v.start;
        while va < v.end {
            match p.mm.pt.leaf(va, false) {
                Some(e) => {
                    // SAFETY: `leaf` returns a pointer into a live
                    // page-table page of this address space.
                    if unsafe { *e } & 1 != 0 {
                        m.rss += 1;
                    }
                    va += 4096;
                }
                None => va = (va | 0x1f_ffff) + 1,
            }
        }
    }
    m
}

/// The name of a process (Linux's `comm`): its own, or a zombie's.
fn comm(t: &TaskView, p: Option<&Process>) -> String {
    let n = p.map_or(t.comm, |p| p.comm);
    let end = n.iter().position(|&b| b == 0).unwrap_or(n.len());
    String::from_utf8_lossy(&n[..end]).into()
}

/// `uid_map` (`which` 0) or `gid_map` (1): the container's user
/// namespace's mappings (`BootInfo::id_maps`), or the identity map of
/// the initial namespace. One namespace for the whole sandbox.
fn id_map(which: usize) -> Vec<u8> {
    let maps = crate::boot_slice(crate::boot_info().id_maps);
    maps.split(|&c| c == 0)
        .nth(which)
        .filter(|m| !m.is_empty())
        .map_or_else(
            || b"         0          0 4294967295\n".to_vec(),
            <[u8]>::to_vec,
        )
}

/// The text of file `which` of `/proc/<pid>/` (empty if the task is gone).
pub fn text(cur: &mut Process, pid: u32, which: &str) -> Vec<u8> {
    match which {
        "mounts" => return super::procfs::text("mounts").into_bytes(),
        "mountinfo" => return super::procfs::text("mountinfo").into_bytes(),
        "limits" => return limits().into_bytes(),
        "uid_map" => return id_map(0),
        "gid_map" => return id_map(1),
        _ => {}
    }
    with_proc(cur, pid, |t, p| match which {
        "cmdline" => p.map(|p| p.cmdline.clone()).unwrap_or_default(),
        "environ" => p.map(|p| p.environ.clone()).unwrap_or_default(),
        "comm" => format!("{}\n", comm(t, p.as_deref())).into_bytes(),
        "stat" => stat(t, p).into_bytes(),
        "statm" => {
            let m = facts(t, p).mem;
            format!("{} {} 0 0 0 {} 0\n", m.size, m.rss, m.data + m.stack).into_bytes()
        }
        "status" => status(t, p).into_bytes(),
        "maps" => p.map(maps).unwrap_or_default().into_bytes(),
        _ => Vec::new(),
    })
    .unwrap_or_default()
}

/// What `stat` and `status` show of a live process.
struct Facts {
    comm: String,
    mem: Mem,
    brk: u64,
    caught: u64,
    ignored: u64,
    ids: [u32; 4],
    umask: u32,
    fds: usize,
    caps: crate::creds::Caps,
    groups: alloc::vec::Vec<u32>,
}

fn facts(t: &TaskView, p: Option<&mut Process>) -> Facts {
    match p {
        Some(p) => {
            let (caught, ignored) = dispositions(p);
            Facts {
                comm: comm(t, Some(p)),
                mem: memory(p),
                brk: p.mm.brk_start,
                caught,
                ignored,
                ids: p.ids,
                umask: p.fs.umask(),
                fds: p.files.count(),
                caps: p.caps,
                groups: p.groups.clone(),
            }
        }
        None => Facts {
            comm: comm(t, None),
            mem: Mem {
                size: 0,
                rss: 0,
                stack: 0,
                data: 0,
            },
            brk: 0,
            caught: 0,
            ignored: 0,
            ids: [0; 4],
            umask: 0o022,
            fds: 0,
            caps: crate::creds::Caps {
                bounding: 0,
                effective: 0,
                permitted: 0,
                inheritable: 0,
                ambient: 0,
            },
            groups: alloc::vec::Vec::new(),
        },
    }
}

fn stat(t: &TaskView, p: Option<&mut Process>) -> String {
    // A process's line counts all its threads, as Linux's.
    let tick = 1_000_000_000 / super::procfs::USER_HZ;
    let (_, start) = task::cpu::task_times(t.pid);
    let own = task::cpu::group_times(t.pid);
    let kids = task::cpu::children_times(t.pid);
    let (utime, stime, start) = (own.user / tick, own.sys / tick, start / tick);
    let (cutime, cstime) = (kids.user / tick, kids.sys / tick);
    let f = facts(t, p);
    format!(
        "{pid} ({comm}) {st} {ppid} {pgid} {sid} 0 -1 4194304 0 0 0 0 {utime} {stime} {cutime} {cstime} 20 0 1 0 \
         {start} {vsize} {rss} 18446744073709551615 0 0 0 0 0 {pend} {blk} {ign} {caught} \
         0 0 0 {exsig} 0 0 0 0 0 0 0 0 {brk} 0 0 0 0 {code}\n",
        pid = t.pid,
        comm = f.comm,
        st = t.state,
        ppid = t.ppid,
        pgid = t.pgid,
        sid = t.sid,
        vsize = f.mem.size * 4096,
        rss = f.mem.rss,
        pend = t.sig.pending,
        blk = t.sig.blocked,
        ign = f.ignored,
        caught = f.caught,
        exsig = t.exit_signal,
        brk = f.brk,
        code = t.exit_code,
    )
}

fn status(t: &TaskView, p: Option<&mut Process>) -> String {
    let live = p.is_some();
    let f = facts(t, p);
    let state = match t.state {
        'R' => "R (running)",
        'S' => "S (sleeping)",
        'T' => "T (stopped)",
        _ => "Z (zombie)",
    };
    let [uid, euid, gid, egid] = f.ids;
    let c = f.caps;
    // Linux writes the groups apart by spaces and then one more space.
    let mut groups: String = f
        .groups
        .iter()
        .map(|g| format!("{g}"))
        .collect::<alloc::vec::Vec<_>>()
        .join(" ");
    groups.push(' ');
    let kb = |pages: u64| pages * 4;
    let mut s = String::new();
    let _ = write!(
        s,
        "Name:\t{}\nUmask:\t{:04o}\nState:\t{state}\nTgid:\t{pid}\nNgid:\t0\nPid:\t{pid}\n\
         PPid:\t{}\nTracerPid:\t0\nUid:\t{uid}\t{euid}\t{euid}\t{euid}\n\
         Gid:\t{gid}\t{egid}\t{egid}\t{egid}\nFDSize:\t{}\nGroups:\t{groups}\n",
        f.comm,
        f.umask,
        t.ppid,
        f.fds.next_multiple_of(64).max(64),
        pid = t.pid,
    );
    if live {
        let m = &f.mem;
        for (name, v) in [
            ("VmPeak", m.size),
            ("VmSize", m.size),
            ("VmLck", 0),
            ("VmPin", 0),
            ("VmHWM", m.rss),
            ("VmRSS", m.rss),
            ("RssAnon", m.rss),
            ("RssFile", 0),
            ("RssShmem", 0),
            ("VmData", m.data),
            ("VmStk", m.stack),
            ("VmExe", 0),
            ("VmLib", 0),
            ("VmPTE", 0),
            ("VmSwap", 0),
        ] {
            let _ = writeln!(s, "{name}:\t{:>8} kB", kb(v));
        }
    }
    let _ = write!(
        s,
        "Threads:\t1\nSigQ:\t0/{}\nSigPnd:\t{:016x}\nShdPnd:\t{:016x}\nSigBlk:\t{:016x}\n\
         SigIgn:\t{:016x}\nSigCgt:\t{:016x}\nCapInh:\t{:016x}\nCapPrm:\t{:016x}\n\
         CapEff:\t{:016x}\nCapBnd:\t{:016x}\nCapAmb:\t{:016x}\nNoNewPrivs:\t{nnp}\n\
         Seccomp:\t{seccomp}\nSeccomp_filters:\t{filters}\nCpus_allowed:\t1\nCpus_allowed_list:\t0\n\
         voluntary_ctxt_switches:\t0\nnonvoluntary_ctxt_switches:\t0\n",
        task::MAX_TASKS,
        t.sig.pending,
        0,
        t.sig.blocked,
        f.ignored,
        f.caught,
        c.inheritable,
        c.permitted,
        c.effective,
        c.bounding,
        c.ambient,
        nnp = u8::from(crate::syscalls::no_new_privs()),
        // Mode 2 (filter) and one filter while the container's profile is
        // installed, as Linux shows it under runc.
        seccomp = if crate::seccomp::active() { 2 } else { 0 },
        filters = u8::from(crate::seccomp::active()),
    );
    s
}

/// Longest `maps` text (the kernel heap is small; Linux has no limit).
const MAPS_MAX: usize = 512 << 10;

fn maps(p: &mut Process) -> String {
    let mut s = String::new();
    let vmas: Vec<_> = p.mm.vmas.iter_range(0, u64::MAX).copied().collect();
    for v in vmas {
        if s.len() >= MAPS_MAX {
            break;
        }
        let perm = |bit: u32, c: char| if v.prot & bit != 0 { c } else { '-' };
        let name = match v.kind {
            VmaKind::Heap => "[heap]",
            VmaKind::Stack => "[stack]",
            VmaKind::Kernel => crate::vdso::name(v.start),
            _ => "",
        };
        let line = format!(
            "{:08x}-{:08x} {}{}{}{} 00000000 00:00 0",
            v.start,
            v.end,
            perm(1, 'r'),
            perm(2, 'w'),
            perm(4, 'x'),
            if v.kind.is_shared() { 's' } else { 'p' },
        );
        if name.is_empty() {
            let _ = writeln!(s, "{line} ");
        } else {
            let _ = writeln!(s, "{line:<72} {name}");
        }
    }
    s
}

fn limits() -> String {
    const ROWS: &[(&str, u64, &str)] = &[
        ("Max cpu time", 0, "seconds"),
        ("Max file size", 1, "bytes"),
        ("Max data size", 2, "bytes"),
        ("Max stack size", 3, "bytes"),
        ("Max core file size", 4, "bytes"),
        ("Max resident set", 5, "bytes"),
        ("Max processes", 6, "processes"),
        ("Max open files", 7, "files"),
        ("Max locked memory", 8, "bytes"),
        ("Max address space", 9, "bytes"),
        ("Max file locks", 10, "locks"),
        ("Max pending signals", 11, "signals"),
        ("Max msgqueue size", 12, "bytes"),
        ("Max nice priority", 13, ""),
        ("Max realtime priority", 14, ""),
        ("Max realtime timeout", 15, "us"),
    ];
    let mut s = format!(
        "{:<25} {:<20} {:<20} {:<10}\n",
        "Limit", "Soft Limit", "Hard Limit", "Units"
    );
    let show = |v: u64| {
        if v == u64::MAX {
            "unlimited".to_string()
        } else {
            v.to_string()
        }
    };
    for &(name, res, unit) in ROWS {
        let (soft, hard) = crate::syscalls::rlimit(res).unwrap_or((u64::MAX, u64::MAX));
        let _ = writeln!(
            s,
            "{name:<25} {:<20} {:<20} {unit:<10}",
            show(soft),
            show(hard)
        );
    }
    s
}

/// (caught, ignored) signal masks from the dispositions.
fn dispositions(p: &Process) -> (u64, u64) {
    let mut caught = 0u64;
    let mut ignored = 0u64;
    for (i, a) in p.signals.lock().actions.iter().enumerate() {
        match a.handler {
            0 => {}
            1 => ignored |= 1 << i,
            _ => caught |= 1 << i,
        }
    }
    (caught, ignored)
}
