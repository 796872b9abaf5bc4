//! The container's cgroups: one directory in every cgroup hierarchy
//! mounted on the host (each v1 controller's, named ones such as
//! `name=systemd`, and the v2 hierarchy, unified or hybrid), at the
//! config's `cgroupsPath` as runc places it: an absolute path from each
//! hierarchy's root, a relative one under this process's own cgroup in
//! that hierarchy (the default, `qrun/<id>`, is relative).
//!
//! | limit | v1 file | v2 file |
//! |---|---|---|
//! | memory | `memory.limit_in_bytes` | `memory.max` |
//! | cpu quota | `cpu.cfs_period_us`, `cpu.cfs_quota_us` | `cpu.max` |
//! | cpu shares | `cpu.shares` | `cpu.weight` (converted) |
//! | cpuset | `cpuset.cpus`, `cpuset.mems` | the same |
//! | blkio weight | `blkio.bfq.weight` or `blkio.weight` | `io.bfq.weight` or `io.weight` (converted) |
//! | pids | `pids.max` | `pids.max` |
//! | pause | `freezer.state` | `cgroup.freeze` |
//!
//! The pids limit counts the guest's processes; the VMM's own threads
//! ([`qvisor::HOST_THREADS`]) are host tasks in the cgroup too, so they are
//! added to it (as the memory limit gets the VMM's share added in
//! `bundle`): a container with `pids.limit` 1 still starts. A blkio weight
//! on a host whose block cgroup has no weight file is skipped, as runc
//! does. Limits go to v2 only on a unified host (on a hybrid one the v1
//! controllers hold them).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::plan::Resources;

const ROOT: &str = "/sys/fs/cgroup";

#[derive(Debug, Error)]
pub enum CgroupError {
    #[error("cgroup path {0:?}: must not contain '.' or '..' components")]
    BadPath(String),
    #[error("cgroup: cannot read the cgroup hierarchies ({0})")]
    NoHierarchy(String),
    #[error("cgroup {0}: {1}")]
    Io(PathBuf, #[source] std::io::Error),
    #[error("cgroup {0}: the freezer did not settle")]
    Freeze(PathBuf),
}

/// The container's cgroup directories (one per hierarchy).
#[derive(Debug, Clone, Default)]
pub struct Cgroups {
    leaves: Vec<PathBuf>,
}

fn write(dir: &Path, file: &str, value: &str) -> Result<(), CgroupError> {
    let path = dir.join(file);
    std::fs::write(&path, value).map_err(|e| CgroupError::Io(path, e))
}

fn unified() -> bool {
    Path::new(ROOT).join("cgroup.controllers").exists()
}

/// Where the container's cgroups go in each hierarchy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CgroupPath {
    /// From each hierarchy's root (`cgroupsPath` starting with '/').
    Absolute(String),
    /// Under this process's own cgroup in each hierarchy.
    Relative(String),
}

impl CgroupPath {
    fn rel(&self) -> &str {
        match self {
            Self::Absolute(p) | Self::Relative(p) => p,
        }
    }
}

/// The cgroup path for a container: the config's `cgroupsPath`
/// (systemd's `slice:prefix:name` form is not ours: the default then), or
/// `qrun/<id>` under our own cgroup.
pub fn container_path(config: Option<&str>, id: &str) -> Result<CgroupPath, CgroupError> {
    let p = match config {
        Some(p) if !p.is_empty() && !p.contains(':') => p,
        _ => return Ok(CgroupPath::Relative(format!("qrun/{id}"))),
    };
    let parts: Vec<&str> = p.split('/').filter(|c| !c.is_empty()).collect();
    if parts.is_empty() || parts.iter().any(|c| *c == ".." || *c == ".") {
        return Err(CgroupError::BadPath(p.to_owned()));
    }
    let joined = parts.join("/");
    Ok(if p.starts_with('/') {
        CgroupPath::Absolute(joined)
    } else {
        CgroupPath::Relative(joined)
    })
}

/// One mounted cgroup hierarchy.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Hierarchy {
    /// Where it is mounted.
    mount: PathBuf,
    /// Its controllers (`memory`, `name=systemd`, ...); empty for v2.
    controllers: Vec<String>,
    /// This process's cgroup in it, relative to the mount.
    own: String,
}

impl Hierarchy {
    fn has(&self, controller: &str) -> bool {
        self.controllers.iter().any(|c| c == controller)
    }
}

/// The hierarchies this process is in that are mounted, from
/// `/proc/self/cgroup` (`ID:CONTROLLERS:PATH`) and `/proc/self/mountinfo`.
fn hierarchies() -> Result<Vec<Hierarchy>, CgroupError> {
    let read = |p: &str| {
        std::fs::read_to_string(p).map_err(|e| CgroupError::NoHierarchy(format!("{p}: {e}")))
    };
    Ok(match_hierarchies(
        &read("/proc/self/cgroup")?,
        &read("/proc/self/mountinfo")?,
    ))
}

fn match_hierarchies(cgroup: &str, mountinfo: &str) -> Vec<Hierarchy> {
    // (mount point, root, fs type, super options) of cgroup mounts.
    let mounts: Vec<(String, String, &str, Vec<&str>)> = mountinfo
        .lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let f: Vec<&str> = left.split(' ').collect();
            let r: Vec<&str> = right.split(' ').collect();
            let fstype = *r.first()?;
            if fstype != "cgroup" && fstype != "cgroup2" {
                return None;
            }
            let opts = r.get(2).map_or_else(Vec::new, |o| o.split(',').collect());
            Some((unescape(f.get(4)?), unescape(f.get(3)?), fstype, opts))
        })
        .collect();
    let mut out: Vec<Hierarchy> = Vec::new();
    for line in cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(ctrls), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let controllers: Vec<String> = ctrls
            .split(',')
            .filter(|c| !c.is_empty())
            .map(str::to_owned)
            .collect();
        let found = mounts.iter().find(|(_, _, fstype, opts)| {
            if controllers.is_empty() {
                *fstype == "cgroup2"
            } else {
                *fstype == "cgroup" && controllers.iter().all(|c| opts.contains(&c.as_str()))
            }
        });
        let Some((mount, root, _, _)) = found else {
            continue;
        };
        // A mount of a sub-tree (a cgroup namespace's view) shows paths
        // from its root.
        let own = path
            .strip_prefix(root.as_str())
            .filter(|_| root != "/")
            .unwrap_or(path);
        let h = Hierarchy {
            mount: PathBuf::from(mount),
            controllers,
            own: own.trim_matches('/').to_owned(),
        };
        if !out.iter().any(|o| o.mount == h.mount) {
            out.push(h);
        }
    }
    out
}

/// Undoes mountinfo's octal escapes (`\040` for a space).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let oct = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], oct) {
            (b'\\', Some(d)) => {
                out.push(
                    d.iter()
                        .fold(0u8, |n, c| n.wrapping_mul(8).wrapping_add(c - b'0')),
                );
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Cgroups {
    pub fn from_dirs(leaves: Vec<PathBuf>) -> Self {
        Self { leaves }
    }

    pub fn dirs(&self) -> &[PathBuf] {
        &self.leaves
    }

    /// Makes the container's cgroup `path` in every hierarchy and applies
    /// `res`; returns them and the directories made (deepest first), for
    /// [`remove_dirs`].
    pub fn create(path: &CgroupPath, res: &Resources) -> Result<(Self, Vec<PathBuf>), CgroupError> {
        let mut made = Vec::new();
        let result = Self::create_inner(path, res, &mut made);
        made.reverse();
        match result {
            Ok(c) => Ok((c, made)),
            Err(e) => {
                remove_dirs(&made);
                Err(e)
            }
        }
    }

    fn create_inner(
        path: &CgroupPath,
        res: &Resources,
        made: &mut Vec<PathBuf>,
    ) -> Result<Self, CgroupError> {
        let all = hierarchies()?;
        if all.is_empty() {
            return Err(CgroupError::NoHierarchy("none is mounted".into()));
        }
        let pure_v2 = unified();
        let mut leaves = Vec::new();
        for h in &all {
            let base = match path {
                CgroupPath::Absolute(_) => h.mount.clone(),
                CgroupPath::Relative(_) => h.mount.join(&h.own),
            };
            let v2 = h.controllers.is_empty();
            let leaf = mkdirs(&base, path.rel(), made, v2 && pure_v2, h.has("cpuset"))?;
            if v2 {
                if pure_v2 {
                    apply_v2(&leaf, res)?;
                }
            } else {
                apply_v1(h, &leaf, res)?;
            }
            leaves.push(leaf);
        }
        Ok(Self { leaves })
    }

    /// Moves `pid` into every one of the container's cgroups.
    pub fn add(&self, pid: i32) -> Result<(), CgroupError> {
        self.leaves
            .iter()
            .try_for_each(|d| write(d, "cgroup.procs", &pid.to_string()))
    }

    /// The freezer: v1's `freezer.state` if there is one (a hybrid host
    /// also has v2's `cgroup.freeze`, which v1 controllers do not see).
    fn freezer(&self) -> Option<(&Path, bool)> {
        let find = |file: &str| self.leaves.iter().find(|d| d.join(file).exists());
        find("freezer.state")
            .map(|d| (d.as_path(), true))
            .or_else(|| find("cgroup.freeze").map(|d| (d.as_path(), false)))
    }

    pub fn frozen(&self) -> bool {
        match self.freezer() {
            Some((d, true)) => {
                std::fs::read_to_string(d.join("freezer.state")).is_ok_and(|s| s.trim() != "THAWED")
            }
            Some((d, false)) => {
                std::fs::read_to_string(d.join("cgroup.freeze")).is_ok_and(|s| s.trim() == "1")
            }
            None => false,
        }
    }

    /// Freezes or thaws the container and waits until that took effect.
    pub fn freeze(&self, on: bool) -> Result<(), CgroupError> {
        let Some((dir, v1)) = self.freezer() else {
            return Err(CgroupError::Io(
                ROOT.into(),
                std::io::Error::other("no freezer controller"),
            ));
        };
        let (file, value, done) = match (v1, on) {
            (true, true) => ("freezer.state", "FROZEN", "FROZEN"),
            (true, false) => ("freezer.state", "THAWED", "THAWED"),
            (false, true) => ("cgroup.freeze", "1", "frozen 1"),
            (false, false) => ("cgroup.freeze", "0", "frozen 0"),
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            write(dir, file, value)?;
            let now = if v1 {
                std::fs::read_to_string(dir.join(file)).unwrap_or_default()
            } else {
                std::fs::read_to_string(dir.join("cgroup.events")).unwrap_or_default()
            };
            if now.lines().any(|l| l.trim() == done) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(CgroupError::Freeze(dir.to_owned()));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The host pids in the container's cgroup.
    pub fn pids(&self) -> Vec<i32> {
        self.leaves
            .first()
            .and_then(|d| std::fs::read_to_string(d.join("cgroup.procs")).ok())
            .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect())
            .unwrap_or_default()
    }
}

fn apply_v1(h: &Hierarchy, leaf: &Path, res: &Resources) -> Result<(), CgroupError> {
    if h.has("memory")
        && let Some(l) = res.memory_limit
    {
        write(leaf, "memory.limit_in_bytes", &l.to_string())?;
    }
    if h.has("cpu") {
        if let Some(p) = res.cpu_period {
            write(leaf, "cpu.cfs_period_us", &p.to_string())?;
        }
        if let Some(q) = res.cpu_quota {
            write(leaf, "cpu.cfs_quota_us", &q.to_string())?;
        }
        if let Some(s) = res.cpu_shares {
            write(leaf, "cpu.shares", &s.to_string())?;
        }
    }
    if h.has("cpuset") {
        apply_cpuset(leaf, res)?;
    }
    if h.has("blkio")
        && let Some(w) = res.blkio_weight
        && let Some(file) = ["blkio.bfq.weight", "blkio.weight"]
            .into_iter()
            .find(|f| leaf.join(f).exists())
    {
        write(leaf, file, &w.to_string())?;
    }
    if h.has("pids")
        && let Some(l) = res.pids_limit
    {
        write(leaf, "pids.max", &pids_max(l))?;
    }
    Ok(())
}

fn apply_cpuset(leaf: &Path, res: &Resources) -> Result<(), CgroupError> {
    if let Some(c) = &res.cpuset_cpus {
        write(leaf, "cpuset.cpus", c)?;
    }
    if let Some(m) = &res.cpuset_mems {
        write(leaf, "cpuset.mems", m)?;
    }
    Ok(())
}

/// Makes `rel` under `base`, one level at a time (recording what it
/// made). On v2, each level first delegates the controllers; on v1
/// cpuset, an empty level takes its parent's cpus and mems (a cpuset
/// with none takes no process).
fn mkdirs(
    base: &Path,
    rel: &str,
    made: &mut Vec<PathBuf>,
    v2: bool,
    cpuset: bool,
) -> Result<PathBuf, CgroupError> {
    let mut dir = base.to_owned();
    for part in rel.split('/').filter(|p| !p.is_empty()) {
        if v2 {
            // Let the child level use the controllers we set limits with;
            // best effort, one by one (a cgroup holding processes cannot
            // delegate, and a missing controller fails the whole write).
            for c in ["+cpuset", "+cpu", "+io", "+memory", "+pids"] {
                let _ = write(&dir, "cgroup.subtree_control", c);
            }
        }
        let parent = dir.clone();
        dir.push(part);
        match std::fs::create_dir(&dir) {
            Ok(()) => made.push(dir.clone()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(CgroupError::Io(dir, e)),
        }
        if cpuset {
            for f in ["cpuset.cpus", "cpuset.mems"] {
                let now = std::fs::read_to_string(dir.join(f)).unwrap_or_default();
                if now.trim().is_empty() {
                    let from = std::fs::read_to_string(parent.join(f))
                        .map_err(|e| CgroupError::Io(parent.join(f), e))?;
                    write(&dir, f, from.trim())?;
                }
            }
        }
    }
    Ok(dir)
}

fn apply_v2(leaf: &Path, res: &Resources) -> Result<(), CgroupError> {
    if let Some(l) = res.memory_limit {
        write(leaf, "memory.max", &l.to_string())?;
    }
    if res.cpu_quota.is_some() || res.cpu_period.is_some() {
        let quota = res.cpu_quota.map_or("max".to_owned(), |q| q.to_string());
        let period = res.cpu_period.unwrap_or(100_000);
        write(leaf, "cpu.max", &format!("{quota} {period}"))?;
    }
    if let Some(s) = res.cpu_shares {
        // The conversion runc and crun use: shares 2..262144 -> weight 1..10000.
        let weight = 1 + (s.clamp(2, 262_144) - 2) * 9999 / 262_142;
        write(leaf, "cpu.weight", &weight.to_string())?;
    }
    if let Some(l) = res.pids_limit {
        write(leaf, "pids.max", &pids_max(l))?;
    }
    apply_cpuset(leaf, res)?;
    if let Some(w) = res.blkio_weight {
        if leaf.join("io.bfq.weight").exists() {
            write(leaf, "io.bfq.weight", &w.to_string())?;
        } else if leaf.join("io.weight").exists() {
            // The conversion runc uses: blkio 10..1000 -> io 1..10000.
            let w = u64::from(w.clamp(10, 1000));
            write(leaf, "io.weight", &(1 + (w - 10) * 9999 / 990).to_string())?;
        }
    }
    Ok(())
}

/// `pids.max` for a container whose `pids.limit` is `limit` (> 0): the
/// limit plus the sandbox process's own threads.
fn pids_max(limit: i64) -> String {
    limit
        .saturating_add(i64::from(qvisor::HOST_THREADS))
        .to_string()
}

/// Removes cgroup directories (deepest first), retrying while the kernel
/// still counts an exiting process in them; parents still in use by
/// others are left alone.
pub fn remove_dirs(dirs: &[PathBuf]) {
    for d in dirs {
        let deadline = Instant::now() + Duration::from_secs(2);
        while d.exists() {
            match std::fs::remove_dir(d) {
                Ok(()) => break,
                Err(e)
                    if e.raw_os_error() == Some(libc::EBUSY)
                        && !has_subdirs(d)
                        && Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(2));
                }
                Err(_) => break,
            }
        }
    }
}

fn has_subdirs(d: &Path) -> bool {
    std::fs::read_dir(d).is_ok_and(|mut it| it.any(|e| e.is_ok_and(|e| e.path().is_dir())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_paths() {
        let rel = |p: &str| CgroupPath::Relative(p.into());
        let abs = |p: &str| CgroupPath::Absolute(p.into());
        assert_eq!(container_path(None, "c").ok(), Some(rel("qrun/c")));
        assert_eq!(
            container_path(Some("/default/c/"), "c").ok(),
            Some(abs("default/c"))
        );
        assert_eq!(container_path(Some("k8s/c"), "c").ok(), Some(rel("k8s/c")));
        assert_eq!(
            container_path(Some("system.slice:qrun:c"), "c").ok(),
            Some(rel("qrun/c"))
        );
        assert!(container_path(Some("/a/../b"), "c").is_err());
        assert!(container_path(Some("/"), "c").is_err());
    }

    #[test]
    fn hierarchies_from_proc() {
        let cgroup = "9:name=systemd:/\n4:memory:/api/x\n1:cpu,cpuacct:/\n3:rdma:/\n0::/u\n";
        let mountinfo = "\
31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 /api /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/sys\\040temd rw - cgroup cgroup rw,xattr,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw
";
        let hs = match_hierarchies(cgroup, mountinfo);
        let got: Vec<(String, String)> = hs
            .iter()
            .map(|h| (h.mount.display().to_string(), h.own.clone()))
            .collect();
        let want = [
            ("/sys/fs/cgroup/sys temd", ""),
            // A mount of a sub-tree: paths are from its root.
            ("/sys/fs/cgroup/memory", "x"),
            ("/sys/fs/cgroup/cpu,cpuacct", ""),
            ("/sys/fs/cgroup/unified", "u"),
        ];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(m, o)| (m.to_string(), o.to_string()))
            .collect();
        // rdma is not mounted: not joined.
        assert_eq!(got, want);
        assert!(hs[2].has("cpuacct") && hs[2].has("cpu") && !hs[2].has("memory"));
    }

    #[test]
    fn the_vmm_threads_are_added_to_the_pids_limit() {
        let extra = i64::from(qvisor::HOST_THREADS);
        assert_eq!(pids_max(1), (1 + extra).to_string());
        assert_eq!(pids_max(i64::MAX), i64::MAX.to_string());
    }
}
