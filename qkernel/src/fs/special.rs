//! The kernel's own files: `/dev` (null, zero, full, random, urandom, the
//! stdio aliases), `/proc` (self/exe, self/fd, self/cmdline, self/mounts,
//! self/mountinfo, and the system files of `procfs`: cpuinfo, meminfo,
//! loadavg, uptime, stat, mounts, version, sys/...) and an empty `/sys`. Nothing under these three reaches
//! the host: a rootfs's `/proc/self/root` and host devices stay out of
//! reach even when the rootfs is the host's `/`.

use alloc::string::{String, ToString};
use alloc::sync::Arc;
use alloc::vec::Vec;

use spin::Mutex;

use super::procfs;
use super::stat::{S_IFCHR, S_IFDIR, S_IFLNK, S_IFREG, STATX_SIZE, synthetic_statx};
use super::{Backing, File};
use crate::errno::Errno;
use crate::process::Process;

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
    /// A symlink to an open fd (`/proc/self/fd/N`, `/dev/stdin` …).
    FdLink(u64),
    /// `/proc/self/exe`.
    Exe,
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
    let rest = |prefix: &str| {
        path.strip_prefix(prefix)
            .filter(|r| r.is_empty() || r.starts_with('/'))
    };
    if let Some(r) = rest("/dev") {
        return match r.trim_start_matches('/') {
            "" => Node::Dir("dev"),
            "stdin" => Node::FdLink(0),
            "stdout" => Node::FdLink(1),
            "stderr" => Node::FdLink(2),
            "fd" => Node::Dir("fd"),
            name => match name.strip_prefix("fd/") {
                Some(n) => n.parse().map_or(Node::Missing, Node::FdLink),
                // Other names under /dev are the rootfs's: the runtime's
                // bind mounts there (Kubernetes' /dev/termination-log).
                // The sandbox's root is mounted nodev, so a device node in
                // an image opens no host device.
                None => DEVICES
                    .iter()
                    .find(|d| d.0 == name)
                    .map_or(Node::Host, |d| Node::Device(d.0, d.1, d.2)),
            },
        };
    }
    if let Some(r) = rest("/proc") {
        let r = r.trim_start_matches('/');
        let r = r
            .strip_prefix("self")
            .or_else(|| r.strip_prefix("1"))
            .or_else(|| r.strip_prefix("thread-self"))
            .filter(|s| s.is_empty() || s.starts_with('/'))
            .map(|s| ("self", s.trim_start_matches('/')));
        return match r {
            Some((_, "")) => Node::Dir("self"),
            Some((_, "exe")) => Node::Exe,
            Some((_, "fd")) => Node::Dir("fd"),
            Some((_, "cmdline")) => Node::Text("cmdline"),
            Some((_, "mounts")) => Node::Text("mounts"),
            Some((_, "mountinfo")) => Node::Text("mountinfo"),
            Some((_, s)) => s
                .strip_prefix("fd/")
                .and_then(|n| n.parse().ok())
                .map_or(Node::Missing, Node::FdLink),
            None => match path.trim_start_matches("/proc").trim_start_matches('/') {
                "" => Node::Dir("proc"),
                name => {
                    let name = name.trim_end_matches('/');
                    if let Some(f) = procfs::PROC_FILES.iter().find(|f| **f == name) {
                        Node::Text(f)
                    } else {
                        match procfs::sys_entry(name) {
                            Some((e, true)) => Node::Dir(e),
                            Some((e, false)) => Node::Text(e),
                            None => Node::Missing,
                        }
                    }
                }
            },
        };
    }
    if let Some(r) = rest("/sys") {
        // An empty directory (sysfs, read-only in a container).
        return if r.trim_start_matches('/').is_empty() {
            Node::Dir("sys")
        } else {
            Node::Missing
        };
    }
    Node::Host
}

fn dir_entries(p: &Process, which: &str) -> Vec<(String, u8)> {
    let mut v: Vec<(String, u8)> = alloc::vec![(".".into(), DT_DIR), ("..".into(), DT_DIR)];
    match which {
        "dev" => {
            v.extend(DEVICES.iter().map(|d| (d.0.to_string(), DT_CHR)));
            v.push(("fd".into(), DT_DIR));
            for s in ["stdin", "stdout", "stderr"] {
                v.push((s.into(), DT_LNK));
            }
        }
        "proc" => {
            v.push(("self".into(), DT_LNK));
            v.push(("sys".into(), DT_DIR));
            v.extend(procfs::PROC_FILES.iter().map(|f| (f.to_string(), DT_REG)));
        }
        "self" => {
            for (n, t) in [
                ("exe", DT_LNK),
                ("fd", DT_DIR),
                ("cmdline", DT_REG),
                ("mounts", DT_REG),
                ("mountinfo", DT_REG),
            ] {
                v.push((n.into(), t));
            }
        }
        "sys" => {}
        dir if dir.starts_with("sys/") => {
            let kind = |d: bool| if d { DT_DIR } else { DT_REG };
            v.extend(procfs::sys_children(dir).map(|(n, d)| (n.to_string(), kind(d))));
        }
        _ => v.extend(p.files.numbers().map(|n| (n.to_string(), DT_LNK))),
    }
    v
}

fn text(p: &Process, which: &str) -> Vec<u8> {
    match which {
        "cmdline" => p.cmdline.clone(),
        other => procfs::text(other).into_bytes(),
    }
}

/// Opens a kernel node (not `Host`, `Missing`, or the links, which the
/// caller resolves).
pub fn open(p: &Process, node: &Node, flags: u32, path: &str) -> Result<Arc<File>, Errno> {
    let special = match node {
        Node::Device("null", ..) => Special::Null,
        Node::Device("zero", ..) => Special::Zero,
        Node::Device("full", ..) => Special::Full,
        Node::Device(..) => Special::Random,
        Node::Text(which) => Special::Text(text(p, which), Mutex::new(0)),
        Node::Dir(which) => Special::Dir(dir_entries(p, which), Mutex::new(0)),
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
pub fn statx(p: &Process, node: &Node) -> Result<[u8; STATX_SIZE], Errno> {
    let ids = p.ids;
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
        Node::FdLink(_) | Node::Exe => synthetic_statx(S_IFLNK | 0o777, 0, (0, 0), 0x400, ids),
        Node::Host | Node::Missing => return Err(Errno::ENOENT),
    })
}

/// statx of an open kernel file.
pub fn statx_open(p: &Process, s: &Special) -> [u8; STATX_SIZE] {
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
