//! The container's cgroups, made under the cgroup `qrun` itself is in
//! (never anywhere else), on v1 controllers (the hybrid layout of our
//! machines: memory, cpu, pids, freezer) or on a unified v2 hierarchy.
//!
//! | limit | v1 file | v2 file |
//! |---|---|---|
//! | memory | `memory.limit_in_bytes` | `memory.max` |
//! | cpu quota | `cpu.cfs_period_us`, `cpu.cfs_quota_us` | `cpu.max` |
//! | cpu shares | `cpu.shares` | `cpu.weight` (converted) |
//! | pids | `pids.max` | `pids.max` |
//!
//! The pids limit counts the guest's processes; the VMM's own threads
//! ([`qvisor::HOST_THREADS`]) are host tasks in the cgroup too, so they are
//! added to it (as the memory limit gets the VMM's share added in
//! `bundle`): a container with `pids.limit` 1 still starts.
//! | pause | `freezer.state` | `cgroup.freeze` |

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::plan::Resources;

const ROOT: &str = "/sys/fs/cgroup";
const V1_CONTROLLERS: &[&str] = &["memory", "cpu", "pids", "freezer"];

#[derive(Debug, Error)]
pub enum CgroupError {
    #[error("cgroup path {0:?}: must be relative, without '..'")]
    BadPath(String),
    #[error("cgroup: cannot find this process's {0} cgroup")]
    NoOwnCgroup(String),
    #[error("cgroup {0}: {1}")]
    Io(PathBuf, #[source] std::io::Error),
    #[error("cgroup {0}: the freezer did not settle")]
    Freeze(PathBuf),
}

/// The container's cgroup directories (one per v1 controller, or one v2).
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

/// This process's cgroup path for `controller` ("" for v2).
fn own_path(controller: &str) -> Result<String, CgroupError> {
    let text = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| CgroupError::Io("/proc/self/cgroup".into(), e))?;
    text.lines()
        .find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, ctrls, path) = (parts.next()?, parts.next()?, parts.next()?);
            let hit = if controller.is_empty() {
                ctrls.is_empty()
            } else {
                ctrls.split(',').any(|c| c == controller)
            };
            hit.then(|| path.trim_start_matches('/').to_owned())
        })
        .ok_or_else(|| CgroupError::NoOwnCgroup(controller.to_owned()))
}

/// The relative cgroup path for a container: the config's `cgroupsPath`
/// (systemd's `slice:prefix:name` form is not ours: the default then), or
/// `qrun/<id>`.
pub fn relative_path(config: Option<&str>, id: &str) -> Result<String, CgroupError> {
    let p = match config {
        Some(p) if !p.is_empty() && !p.contains(':') => p.trim_start_matches('/'),
        _ => return Ok(format!("qrun/{id}")),
    };
    if p.is_empty() || p.split('/').any(|c| c == ".." || c == ".") {
        return Err(CgroupError::BadPath(p.to_owned()));
    }
    Ok(p.trim_end_matches('/').to_owned())
}

impl Cgroups {
    pub fn from_dirs(leaves: Vec<PathBuf>) -> Self {
        Self { leaves }
    }

    pub fn dirs(&self) -> &[PathBuf] {
        &self.leaves
    }

    /// Makes the cgroups `rel` under our own and applies `res`; returns
    /// them and the directories made (deepest first), for [`remove_dirs`].
    pub fn create(rel: &str, res: &Resources) -> Result<(Self, Vec<PathBuf>), CgroupError> {
        let mut made = Vec::new();
        let result = Self::create_inner(rel, res, &mut made);
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
        rel: &str,
        res: &Resources,
        made: &mut Vec<PathBuf>,
    ) -> Result<Self, CgroupError> {
        if unified() {
            let base = Path::new(ROOT).join(own_path("")?);
            let leaf = mkdirs(&base, rel, made, true)?;
            apply_v2(&leaf, res)?;
            return Ok(Self { leaves: vec![leaf] });
        }
        let mut leaves = Vec::new();
        for c in V1_CONTROLLERS {
            let mount = Path::new(ROOT).join(c);
            if !mount.is_dir() {
                continue;
            }
            let base = mount.join(own_path(c)?);
            let leaf = mkdirs(&base, rel, made, false)?;
            match *c {
                "memory" => {
                    if let Some(l) = res.memory_limit {
                        write(&leaf, "memory.limit_in_bytes", &l.to_string())?;
                    }
                }
                "cpu" => {
                    if let Some(p) = res.cpu_period {
                        write(&leaf, "cpu.cfs_period_us", &p.to_string())?;
                    }
                    if let Some(q) = res.cpu_quota {
                        write(&leaf, "cpu.cfs_quota_us", &q.to_string())?;
                    }
                    if let Some(s) = res.cpu_shares {
                        write(&leaf, "cpu.shares", &s.to_string())?;
                    }
                }
                "pids" => {
                    if let Some(l) = res.pids_limit {
                        write(&leaf, "pids.max", &pids_max(l))?;
                    }
                }
                _ => {}
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

    fn freezer(&self) -> Option<(&Path, bool)> {
        self.leaves.iter().find_map(|d| {
            if d.join("freezer.state").exists() {
                Some((d.as_path(), true))
            } else if d.join("cgroup.freeze").exists() {
                Some((d.as_path(), false))
            } else {
                None
            }
        })
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

fn mkdirs(
    base: &Path,
    rel: &str,
    made: &mut Vec<PathBuf>,
    v2: bool,
) -> Result<PathBuf, CgroupError> {
    let mut dir = base.to_owned();
    for part in rel.split('/').filter(|p| !p.is_empty()) {
        if v2 {
            // Let the child level use the controllers we set limits with;
            // best effort (a cgroup holding processes cannot delegate).
            let _ = write(&dir, "cgroup.subtree_control", "+memory +cpu +pids");
        }
        dir.push(part);
        match std::fs::create_dir(&dir) {
            Ok(()) => made.push(dir.clone()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(CgroupError::Io(dir, e)),
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
    fn relative_paths() {
        assert_eq!(relative_path(None, "c").ok().as_deref(), Some("qrun/c"));
        assert_eq!(
            relative_path(Some("/default/c"), "c").ok().as_deref(),
            Some("default/c")
        );
        assert_eq!(
            relative_path(Some("system.slice:qrun:c"), "c")
                .ok()
                .as_deref(),
            Some("qrun/c")
        );
        assert!(relative_path(Some("/a/../b"), "c").is_err());
    }

    #[test]
    fn the_vmm_threads_are_added_to_the_pids_limit() {
        let extra = i64::from(qvisor::HOST_THREADS);
        assert_eq!(pids_max(1), (1 + extra).to_string());
        assert_eq!(pids_max(i64::MAX), i64::MAX.to_string());
    }
}
