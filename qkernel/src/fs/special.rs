//! The kernel's own files: `/dev` (null, zero, full, random, urandom, the
//! stdio aliases, ptmx, tty and pts/ of `fs::tty`), `/proc` (self/exe, self/fd, self/cmdline, self/mounts,
//! self/mountinfo, and the system files of `procfs`: cpuinfo, meminfo,
//! loadavg, uptime, stat, mounts, version, sys/...) and a `/sys` with
//! the online CPUs and `class/net/` (one directory per interface, empty:
//! enough for `brctl`, which starts in it). Nothing under these three reaches
//! the host: a rootfs's `/proc/self/root` and host devices stay out of
//! reach even when the rootfs is the host's `/`.

use alloc::string::{String, ToString};
use alloc::sync::Arc;
use alloc::vec::Vec;

use spin::Mutex;

use super::stat::{S_IFCHR, S_IFDIR, S_IFLNK, S_IFREG, STATX_SIZE, synthetic_statx};
use super::{Backing, File};
use super::{procfs, procpid};
use crate::errno::Errno;
use crate::process::Process;
use crate::task;

/// A kernel-provided open file.
#[derive(Debug)]
pub enum Special {
    /// `/dev/null`.
    Null,
    /// `/dev/zero`.
    Zero,
    /// `/dev/full`.
    Full,
    /// `/dev/random`, `/dev/urandom`.
    Random,
    /// A read-only text file with its read offset.
    Text(Vec<u8>, Mutex<usize>),
    /// A directory listing (name, `DT_*` type) with its read position.
    Dir(Vec<(String, u8)>, Mutex<usize>),
}

impl Special {
    /// For files with a position: their length and position.
    pub fn seekable(&self) -> Option<(usize, &Mutex<usize>)> {
        match self {
            Special::Text(d, pos) => Some((d.len(), pos)),
            Special::Dir(e, pos) => Some((e.len(), pos)),
            _ => None,
        }
    }
}

/// What a kernel path names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// Not a kernel path: the VMM resolves it in the rootfs.
    Host,
    /// Under `/dev`, `/proc` or `/sys` but absent.
    Missing,
    /// A device: (name, major, minor).
    Device(&'static str, u32, u32),
    /// A generated text file.
    Text(&'static str),
    /// A generated directory.
    Dir(&'static str),
    /// A file of `/proc/<pid>/`.
    PidText(u32, &'static str),
    /// `/proc/<pid>/` (`""`) or `/proc/<pid>/fd`.
    PidDir(u32, &'static str),
    /// A symlink to an open fd of a task (`/proc/<pid>/fd/N`,
    /// `/dev/stdin` …).
    FdLink(u32, u64),
    /// `/proc/<pid>/exe`, `cwd` or `root`.
    Link(u32, &'static str),
    /// `/proc/self` (a link to `/proc/<pid>`).
    SelfLink(u32),
    /// A pty slave, `/dev/pts/N` (`fs::tty`).
    Pts(u32),
    /// One of the symlinks runc makes in a container's `/dev`: (name,
    /// target), [`DEV_LINKS`].
    DevLink(&'static str, &'static str),
    /// A device of the config's `linux.devices`, by its index
    /// (`fs::config_dev`).
    ConfigDev(u16),
}

/// The symlinks runc makes in a container's `/dev` (`/dev/core` only
/// when the host has `/proc/kcore`; the guest has none, so it is left
/// out). A relative target is relative to `/dev`: `/dev/ptmx` is the
/// devpts instance's `ptmx`, as in every container runc makes (the
/// runtime spec's "dev symbolic links").
const DEV_LINKS: &[(&str, &str)] = &[
    ("fd", "/proc/self/fd"),
    ("ptmx", "pts/ptmx"),
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
];

/// What a kernel link leads to.
pub enum Target {
    /// An absolute path (in the rootfs or the kernel's own).
    Path(String),
    /// An open file.
    File(Arc<File>),
}

/// The open file at fd `fd` of task `pid`.
fn task_file(p: &mut Process, pid: u32, fd: u64) -> Option<Arc<File>> {
    if !procpid::may_access(p, pid) {
        return None;
    }
    procpid::with_proc(p, pid, |_, q| q.and_then(|q| q.files.get(fd).ok())).flatten()
}

/// Where link `node` leads (`None`: not a link, or a link to nothing).
pub fn follow(p: &mut Process, node: &Node) -> Option<Target> {
    match *node {
        Node::FdLink(pid, fd) => task_file(p, pid, fd).map(Target::File),
        Node::Link(pid, which) => procpid::link(p, pid, which).map(Target::Path),
        Node::SelfLink(pid) => Some(Target::Path(alloc::format!("/proc/{pid}"))),
        Node::DevLink(_, to) if to.starts_with('/') => Some(Target::Path(to.into())),
        Node::DevLink(_, to) => Some(Target::Path(alloc::format!("/dev/{to}"))),
        _ => None,
    }
}

/// The text `readlink` returns for link `node`.
pub fn link_text(p: &mut Process, node: &Node) -> Option<String> {
    match *node {
        Node::FdLink(pid, fd) => task_file(p, pid, fd).map(|f| f.path.clone()),
        Node::Link(pid, which) => procpid::link(p, pid, which),
        Node::SelfLink(pid) => Some(pid.to_string()),
        Node::DevLink(_, to) => Some(to.into()),
        _ => None,
    }
}

/// Whether `node` is a link.
pub fn is_link(node: &Node) -> bool {
    matches!(
        node,
        Node::FdLink(..) | Node::Link(..) | Node::SelfLink(_) | Node::DevLink(..)
    )
}

const DT_DIR: u8 = 4;
const DT_CHR: u8 = 2;
const DT_REG: u8 = 8;
const DT_LNK: u8 = 10;

const DEVICES: &[(&str, u32, u32)] = &[
    ("null", 1, 3),
    ("zero", 1, 5),
    ("full", 1, 7),
    ("random", 1, 8),
    ("urandom", 1, 9),
];

/// Classifies a normalised absolute path.
pub fn lookup(path: &str) -> Node {
    let me = task::current_pid();
    let rest = |prefix: &str| {
        path.strip_prefix(prefix)
            .filter(|r| r.is_empty() || r.starts_with('/'))
    };
    if let Some(r) = rest("/dev") {
        return match r.trim_start_matches('/') {
            "" => Node::Dir("dev"),
            name if DEV_LINKS.iter().any(|l| l.0 == name) => DEV_LINKS
                .iter()
                .find(|l| l.0 == name)
                .map_or(Node::Missing, |l| Node::DevLink(l.0, l.1)),
            "pts/ptmx" => Node::Device("ptmx", 5, 2),
            "tty" => Node::Device("tty", 5, 0),
            "pts" => Node::Dir("dev/pts"),
            "mqueue" => Node::Dir("dev/mqueue"),
            name if name.starts_with("pts/") => name[4..]
                .parse::<u32>()
                .ok()
                .filter(|n| name[4..] == n.to_string() && super::tty::numbers().contains(n))
                .map_or(Node::Missing, Node::Pts),
            name => match name.strip_prefix("fd/") {
                Some(n) => n.parse().map_or(Node::Missing, |n| Node::FdLink(me, n)),
                // Other names under /dev are the rootfs's: the runtime's
                // bind mounts there (Kubernetes' /dev/termination-log).
                // The sandbox's root is mounted nodev, so a device node in
                // an image opens no host device.
                None => match DEVICES.iter().find(|d| d.0 == name) {
                    Some(d) => Node::Device(d.0, d.1, d.2),
                    None => super::config_dev::find(path)
                        .map(Node::ConfigDev)
                        .or_else(|| super::config_dev::dir(path).map(Node::Dir))
                        .unwrap_or(Node::Host),
                },
            },
        };
    }
    if let Some(r) = rest("/proc") {
        return proc_lookup(r.trim_matches('/'));
    }
    if let Some(r) = rest("/sys") {
        // sysfs (read-only in a container): the online CPUs (glibc's
        // `get_nprocs` reads them) and the interfaces' names.
        return match r.trim_matches('/') {
            "" => Node::Dir("sys"),
            "devices/system/cpu/online" | "devices/system/cpu/possible" => Node::Text("cpu-online"),
            "class" => Node::Dir("sysfs/class"),
            "class/net" => Node::Dir("sysfs/class/net"),
            other => match other.strip_prefix("class/net/") {
                Some(name) if net_links().iter().any(|l| l == name) => {
                    Node::Dir("sysfs/class/net/link")
                }
                _ => Node::Missing,
            },
        };
    }
    Node::Host
}

/// Classifies `rest` under `/proc/<pid>/`; with `top`, also `task/` and
/// `task/<tid>/...` (one thread per process: the tid is the pid).
fn pid_entry(pid: u32, rest: &str, top: bool) -> Node {
    match rest {
        "" if top => Node::PidDir(pid, ""),
        // `task/<tid>/`: as the process's directory, without `task`.
        "" => Node::PidDir(pid, "thread"),
        "fd" => Node::PidDir(pid, "fd"),
        "task" if top => Node::PidDir(pid, "task"),
        _ => {
            if let Some(n) = rest.strip_prefix("fd/") {
                n.parse().map_or(Node::Missing, |n| Node::FdLink(pid, n))
            } else if let Some(t) = rest.strip_prefix("task/").filter(|_| top) {
                let (tid, sub) = t.split_once('/').unwrap_or((t, ""));
                if tid == pid.to_string() {
                    pid_entry(pid, sub, false)
                } else {
                    Node::Missing
                }
            } else if let Some(f) = procpid::PID_FILES.iter().find(|f| **f == rest) {
                Node::PidText(pid, f)
            } else if let Some(l) = procpid::PID_LINKS.iter().find(|l| **l == rest) {
                Node::Link(pid, l)
            } else {
                Node::Missing
            }
        }
    }
}

/// Classifies a path under `/proc/` (without the leading `/proc/`).
fn proc_lookup(r: &str) -> Node {
    if r.is_empty() {
        return Node::Dir("proc");
    }
    let (first, rest) = r.split_once('/').unwrap_or((r, ""));
    let pid = match first {
        "self" | "thread-self" if rest.is_empty() => {
            return Node::SelfLink(task::current_pid());
        }
        "self" | "thread-self" => Some(task::current_pid()),
        n => n
            .parse::<u32>()
            .ok()
            .filter(|n| n.to_string() == first && procpid::exists(*n)),
    };
    if let Some(pid) = pid {
        return pid_entry(pid, rest, true);
    }
    if let Some(f) = procfs::PROC_FILES.iter().find(|f| **f == r) {
        return Node::Text(f);
    }
    match procfs::sys_entry(r) {
        Some((e, true)) => Node::Dir(e),
        Some((e, false)) => Node::Text(e),
        None => Node::Missing,
    }
}

/// The names of the sandbox's network interfaces (`/sys/class/net`).
fn net_links() -> Vec<String> {
    let info = super::netlink::fetch();
    info.link[..info.links as usize]
        .iter()
        .map(|l| {
            let n = l.name.iter().position(|&b| b == 0).unwrap_or(l.name.len());
            String::from_utf8_lossy(&l.name[..n]).into_owned()
        })
        .collect()
}

fn dir_entries(which: &str) -> Vec<(String, u8)> {
    let mut v: Vec<(String, u8)> = alloc::vec![(".".into(), DT_DIR), ("..".into(), DT_DIR)];
    match which {
        "dev" => {
            v.extend(DEVICES.iter().map(|d| (d.0.to_string(), DT_CHR)));
            v.extend(DEV_LINKS.iter().map(|l| (l.0.to_string(), DT_LNK)));
            v.push(("tty".into(), DT_CHR));
            v.push(("pts".into(), DT_DIR));
            v.push(("mqueue".into(), DT_DIR));
            // The config's devices (and directories of nested ones) but
            // for the names the kernel serves itself (a config may list
            // /dev/tty).
            v.extend(
                super::config_dev::children("dev")
                    .into_iter()
                    .filter(|(name, _)| {
                        matches!(
                            lookup(&alloc::format!("/dev/{name}")),
                            Node::ConfigDev(_) | Node::Dir(_)
                        ) && !matches!(name.as_str(), "pts" | "mqueue")
                    }),
            );
        }
        // The message queues' names (their own stat is not kept).
        "dev/mqueue" => v.extend(super::mqueue::names().into_iter().map(|n| (n, DT_REG))),
        "proc" => {
            v.push(("self".into(), DT_LNK));
            v.push(("thread-self".into(), DT_LNK));
            v.push(("sys".into(), DT_DIR));
            v.push(("net".into(), DT_DIR));
            v.extend(procfs::PROC_FILES.iter().map(|f| (f.to_string(), DT_REG)));
            v.extend(procpid::pids().into_iter().map(|n| (n.to_string(), DT_DIR)));
        }
        "dev/pts" => {
            v.push(("ptmx".into(), DT_CHR));
            v.extend(
                super::tty::numbers()
                    .into_iter()
                    .map(|n| (n.to_string(), DT_CHR)),
            );
        }
        "sys" => v.push(("class".into(), DT_DIR)),
        "sysfs/class" => v.push(("net".into(), DT_DIR)),
        "sysfs/class/net" => v.extend(net_links().into_iter().map(|n| (n, DT_DIR))),
        dir if dir.starts_with("dev/") => v.extend(super::config_dev::children(dir)),
        dir if dir.starts_with("sys/") || dir.starts_with("net/") => {
            let kind = |d: bool| if d { DT_DIR } else { DT_REG };
            v.extend(
                procfs::sys_children(dir)
                    .into_iter()
                    .map(|(n, d)| (n.to_string(), kind(d))),
            );
        }
        _ => {}
    }
    v
}

fn pid_dir_entries(p: &mut Process, pid: u32, which: &str) -> Vec<(String, u8)> {
    let mut v: Vec<(String, u8)> = alloc::vec![(".".into(), DT_DIR), ("..".into(), DT_DIR)];
    if which == "fd" {
        v.extend(
            procpid::fds(p, pid)
                .into_iter()
                .map(|n| (n.to_string(), DT_LNK)),
        );
    } else if which == "task" {
        v.push((pid.to_string(), DT_DIR));
    } else {
        v.push(("fd".into(), DT_DIR));
        if which.is_empty() {
            v.push(("task".into(), DT_DIR));
        }
        v.extend(procpid::PID_FILES.iter().map(|f| (f.to_string(), DT_REG)));
        v.extend(procpid::PID_LINKS.iter().map(|f| (f.to_string(), DT_LNK)));
    }
    v
}

/// Opens a kernel node (not `Host`, `Missing`, or the links, which the
/// caller resolves).
pub fn open(p: &mut Process, node: &Node, flags: u32, path: &str) -> Result<Arc<File>, Errno> {
    if let Node::PidText(pid, "environ") | Node::PidDir(pid, "fd") = *node
        && !procpid::may_access(p, pid)
    {
        return Err(Errno::EACCES);
    }
    let special = match node {
        Node::Device("ptmx", ..) => return super::tty_ioctl::open_ptmx(flags),
        Node::Device("tty", ..) => return super::tty_ioctl::open_tty(flags),
        Node::Pts(n) => return super::tty_ioctl::open_pts(*n, flags),
        Node::ConfigDev(_) => return Err(Errno::ENXIO),
        Node::Device("null", ..) => Special::Null,
        Node::Device("zero", ..) => Special::Zero,
        Node::Device("full", ..) => Special::Full,
        Node::Device(..) => Special::Random,
        Node::Text(which) => Special::Text(procfs::text(which).into_bytes(), Mutex::new(0)),
        Node::Dir(which) => Special::Dir(dir_entries(which), Mutex::new(0)),
        Node::PidText(pid, which) => Special::Text(procpid::text(p, *pid, which), Mutex::new(0)),
        Node::PidDir(pid, which) => Special::Dir(pid_dir_entries(p, *pid, which), Mutex::new(0)),
        _ => return Err(Errno::ENOENT),
    };
    if matches!(special, Special::Text(..) | Special::Dir(..))
        && flags & super::O_ACCMODE != super::O_RDONLY
    {
        return Err(if matches!(special, Special::Dir(..)) {
            Errno::EISDIR
        } else {
            Errno::EACCES
        });
    }
    Ok(File::new(Backing::Special(special), flags, path.into()))
}

/// statx of a kernel node that is not a link.
pub fn statx(p: &mut Process, node: &Node) -> Result<[u8; STATX_SIZE], Errno> {
    let ids = match node {
        Node::PidText(pid, _)
        | Node::PidDir(pid, _)
        | Node::FdLink(pid, _)
        | Node::Link(pid, _) => procpid::owner(p, *pid),
        _ => p.ids,
    };
    Ok(match node {
        Node::Device(_, maj, min) => synthetic_statx(
            S_IFCHR | 0o666,
            0,
            (*maj, *min),
            0x100 + u64::from(*min),
            ids,
        ),
        Node::Text(_) => synthetic_statx(S_IFREG | 0o444, 0, (0, 0), 0x200, ids),
        Node::Dir(_) => synthetic_statx(S_IFDIR | 0o555, 0, (0, 0), 0x300, ids),
        Node::PidText(pid, f) => {
            let i = procpid::PID_FILES.iter().position(|x| x == f).unwrap_or(0) as u64;
            let mode = if *f == "environ" { 0o400 } else { 0o444 };
            synthetic_statx(S_IFREG | mode, 0, (0, 0), pid_ino(*pid, 2 + i), ids)
        }
        Node::PidDir(pid, f) => synthetic_statx(
            S_IFDIR | if *f == "fd" { 0o500 } else { 0o555 },
            0,
            (0, 0),
            pid_ino(
                *pid,
                ["", "fd", "task", "thread"]
                    .iter()
                    .position(|x| x == f)
                    .unwrap_or(0) as u64,
            ),
            ids,
        ),
        Node::FdLink(pid, fd) => {
            synthetic_statx(S_IFLNK | 0o700, 0, (0, 0), pid_ino(*pid, 0x100 + fd), ids)
        }
        Node::Link(pid, _) => synthetic_statx(S_IFLNK | 0o777, 0, (0, 0), pid_ino(*pid, 0x40), ids),
        Node::SelfLink(_) => synthetic_statx(S_IFLNK | 0o777, 0, (0, 0), 0x400, ids),
        Node::Pts(n) => synthetic_statx(S_IFCHR | 0o600, 0, (136, *n), pts_ino(*n), ids),
        Node::DevLink(name, to) => {
            let i = DEV_LINKS.iter().position(|l| l.0 == *name).unwrap_or(0) as u64;
            synthetic_statx(S_IFLNK | 0o777, to.len() as u64, (0, 0), 0x500 + i, ids)
        }
        Node::ConfigDev(i) => {
            let d = super::config_dev::get(*i).ok_or(Errno::ENOENT)?;
            let (uid, gid) = d.owner;
            synthetic_statx(
                d.kind | d.perm,
                0,
                d.rdev,
                0x600 + u64::from(*i),
                [uid, uid, gid, gid],
            )
        }
        Node::Host | Node::Missing => return Err(Errno::ENOENT),
    })
}

/// The inode number of `/dev/pts/N`.
fn pts_ino(n: u32) -> u64 {
    0x10_0000 + u64::from(n)
}

/// statx of an open pty end: the master is `/dev/ptmx`, a slave
/// `/dev/pts/N`, or `/dev/tty` when it was opened by that name.
pub fn statx_tty(p: &mut Process, end: &super::tty::TtyEnd, path: &str) -> [u8; STATX_SIZE] {
    let node = if end.master {
        Node::Device("ptmx", 5, 2)
    } else if path == "/dev/tty" {
        Node::Device("tty", 5, 0)
    } else {
        Node::Pts(end.pty.index())
    };
    statx(p, &node).unwrap_or([0; STATX_SIZE])
}

/// A distinct inode number for entry `i` of `/proc/<pid>/`.
fn pid_ino(pid: u32, i: u64) -> u64 {
    (u64::from(pid) << 20) | (i & 0xf_ffff)
}

/// statx of an open kernel file.
pub fn statx_open(p: &mut Process, s: &Special) -> [u8; STATX_SIZE] {
    let node = match s {
        Special::Null => Node::Device("null", 1, 3),
        Special::Zero => Node::Device("zero", 1, 5),
        Special::Full => Node::Device("full", 1, 7),
        Special::Random => Node::Device("urandom", 1, 9),
        Special::Text(..) => Node::Text(""),
        Special::Dir(..) => Node::Dir(""),
    };
    statx(p, &node).unwrap_or([0; STATX_SIZE])
}
