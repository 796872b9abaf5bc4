//! The sandbox plan: everything `sandbox-init` needs, decided by `create`
//! from the bundle and written to `<state dir>/plan.json`, so that the
//! sandbox process never parses the bundle itself.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plan {
    pub id: String,
    pub bundle: PathBuf,
    /// The container's root on the host (absolute, symlinks resolved).
    pub rootfs: PathBuf,
    pub readonly_root: bool,
    /// `linux.rootfsPropagation` (`shared`, `slave`, `private`,
    /// `unbindable`, or their `r` forms), applied to the rootfs view.
    #[serde(default)]
    pub rootfs_propagation: Option<String>,
    /// The program as a path inside the rootfs (absolute, symlinks
    /// resolved); `argv[0]` stays what the config said.
    pub program: String,
    pub argv: Vec<String>,
    pub env: Vec<String>,
    pub cwd: String,
    pub hostname: Option<String>,
    /// Guest RAM in bytes.
    pub memory: u64,
    pub uid: u32,
    pub gid: u32,
    pub additional_gids: Vec<u32>,
    pub terminal: bool,
    pub namespaces: Vec<Namespace>,
    pub mounts: Vec<MountPlan>,
    pub resources: Resources,
    pub cgroups_path: Option<String>,
    /// Capabilities the VMM keeps (`CAP_*` names).
    pub capabilities: Vec<String>,
    /// `linux.seccomp` compiled for the guest kernel (`qlib::seccomp`
    /// format); empty for none.
    #[serde(default)]
    pub seccomp: Vec<u8>,
    pub annotations: BTreeMap<String, String>,
    /// The config's hooks (`crate::hooks`).
    #[serde(default)]
    pub hooks: crate::hooks::Hooks,
    /// `linux.maskedPaths`: hidden from the program (a file reads as
    /// /dev/null, a directory as an empty read-only tmpfs).
    #[serde(default)]
    pub masked_paths: Vec<String>,
    /// `linux.readonlyPaths`: made read-only.
    #[serde(default)]
    pub readonly_paths: Vec<String>,
    /// `process.capabilities` for the guest program: bounding, effective,
    /// permitted, inheritable, ambient (bit n = capability n); `None`
    /// when the config has none.
    #[serde(default)]
    pub guest_caps: Option<[u64; 5]>,
    /// `process.rlimits` as (resource number, soft, hard).
    #[serde(default)]
    pub rlimits: Vec<[u64; 3]>,
    /// `process.noNewPrivileges`.
    #[serde(default)]
    pub no_new_privs: bool,
    /// `linux.sysctl` for the guest's `/proc/sys`: `sys/a/b=value`.
    #[serde(default)]
    pub sysctl: Vec<String>,
    /// `linux.devices` for the guest's `/dev`: `path type major minor
    /// mode uid gid` records (`bundle::devices`).
    #[serde(default)]
    pub devices: Vec<String>,
    /// `linux.uidMappings` of a new user namespace: (container id, host
    /// id, size).
    #[serde(default)]
    pub uid_mappings: Vec<[u32; 3]>,
    /// `linux.gidMappings`, as `uid_mappings`.
    #[serde(default)]
    pub gid_mappings: Vec<[u32; 3]>,
}

/// The host's resources by Linux's number (`RLIMIT_CPU` 0 ..
/// `RLIMIT_RTTIME` 15).
const HOST_RLIMITS: [nix::sys::resource::Resource; 16] = {
    use nix::sys::resource::Resource as R;
    [
        R::RLIMIT_CPU,
        R::RLIMIT_FSIZE,
        R::RLIMIT_DATA,
        R::RLIMIT_STACK,
        R::RLIMIT_CORE,
        R::RLIMIT_RSS,
        R::RLIMIT_NPROC,
        R::RLIMIT_NOFILE,
        R::RLIMIT_MEMLOCK,
        R::RLIMIT_AS,
        R::RLIMIT_LOCKS,
        R::RLIMIT_SIGPENDING,
        R::RLIMIT_MSGQUEUE,
        R::RLIMIT_NICE,
        R::RLIMIT_RTPRIO,
        R::RLIMIT_RTTIME,
    ]
};

impl Plan {
    /// What the guest kernel gets of the process's credentials and
    /// limits (`qlib::abi::Creds`). Groups beyond the ABI's room are
    /// left out of the guest's list (the host's has them all).
    pub fn guest_creds(&self) -> qlib::abi::Creds {
        use qlib::abi::{CREDS_MAX_GROUPS, Creds};
        let mut c = Creds::EMPTY;
        c.caps = self.guest_caps.unwrap_or([0; 5]);
        // As runc's process, the program inherits the runtime's limits
        // for what the config does not set.
        for (i, res) in HOST_RLIMITS.iter().enumerate() {
            if let Ok((soft, hard)) = nix::sys::resource::getrlimit(*res) {
                c.rlimits[i] = [soft, hard];
                c.rlimit_mask |= 1 << i;
            }
        }
        for [res, soft, hard] in &self.rlimits {
            if let Some(slot) = c.rlimits.get_mut(*res as usize) {
                *slot = [*soft, *hard];
                c.rlimit_mask |= 1 << res;
            }
        }
        let mut groups: Vec<u32> = self.additional_gids.clone();
        groups.sort_unstable();
        groups.truncate(CREDS_MAX_GROUPS);
        c.ngroups = groups.len() as u64;
        c.groups[..groups.len()].copy_from_slice(&groups);
        c
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum NsKind {
    Mount,
    Pid,
    Ipc,
    Uts,
    Network,
    Cgroup,
    User,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Namespace {
    pub kind: NsKind,
    /// Join this namespace instead of making a new one.
    pub path: Option<PathBuf>,
}

/// A mount the guest needs, made inside the sandbox's own view of the
/// rootfs (the host never sees it; a bind mount receives the host's new
/// mounts under its source unless its propagation is private).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MountPlan {
    /// Path inside the rootfs.
    pub destination: String,
    pub kind: MountKind,
    pub readonly: bool,
    pub nosuid: bool,
    pub nodev: bool,
    pub noexec: bool,
    /// Filesystem data (`size=...,mode=...`) for tmpfs.
    pub data: String,
    /// The propagation option (`rprivate`, `rslave`, `rshared` …) given
    /// last, applied once the mount is made.
    #[serde(default)]
    pub propagation: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum MountKind {
    /// A bind mount of a host path (recursive when `rbind`).
    Bind {
        source: PathBuf,
        recursive: bool,
    },
    Tmpfs,
}

/// Cgroup limits from `linux.resources`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resources {
    /// Bytes for the whole sandbox process (guest RAM plus VMM overhead).
    pub memory_limit: Option<i64>,
    pub cpu_quota: Option<i64>,
    pub cpu_period: Option<u64>,
    pub cpu_shares: Option<u64>,
    pub pids_limit: Option<i64>,
    /// `cpu.cpus` and `cpu.mems` (cpuset lists such as `0-1`).
    #[serde(default)]
    pub cpuset_cpus: Option<String>,
    #[serde(default)]
    pub cpuset_mems: Option<String>,
    /// `blockIO.weight` (10..1000).
    #[serde(default)]
    pub blkio_weight: Option<u16>,
}

impl Resources {
    /// The sandbox's vCPUs from `linux.resources.cpu`: the quota
    /// (`ceil(quota / period)`, period 100 ms if unset) and the cpuset's
    /// CPU count, the smaller of the two; without either the host's CPUs
    /// ([`host_vcpus`]); at most `qvisor::MAX_CPUS` (docs/smp.md).
    pub fn vcpus(&self) -> usize {
        self.vcpus_or(host_vcpus())
    }

    /// [`Resources::vcpus`] with `default` for a sandbox without limits.
    fn vcpus_or(&self, default: usize) -> usize {
        let quota = self.cpu_quota.filter(|q| *q > 0).map(|q| {
            let period = self.cpu_period.filter(|p| *p > 0).unwrap_or(100_000);
            (q as u64).div_ceil(period).max(1) as usize
        });
        let set = self.cpuset_cpus.as_deref().and_then(cpuset_count);
        let n = match (quota, set) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => default,
        };
        n.clamp(1, qvisor::MAX_CPUS)
    }
}

/// The vCPUs of a sandbox given no CPU limit (a bundle without quota or
/// cpuset, `qrun do` without `--cpus`): the CPUs this process may run on
/// (`available_parallelism`: the affinity mask and the cgroup quota), 1
/// if that cannot be read, at most `qvisor::MAX_CPUS` (docs/smp.md,
/// "How many").
pub fn host_vcpus() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, qvisor::MAX_CPUS)
}

/// CPUs in a cpuset list (`0-3,6`); None if it does not parse.
fn cpuset_count(list: &str) -> Option<usize> {
    let mut n = 0usize;
    for part in list.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (
                a.trim().parse::<usize>().ok()?,
                b.trim().parse::<usize>().ok()?,
            ),
            None => {
                let a = part.trim().parse::<usize>().ok()?;
                (a, a)
            }
        };
        n = n.checked_add(b.checked_sub(a)? + 1)?;
    }
    (n > 0).then_some(n)
}

impl Plan {
    pub fn new_namespace(&self, kind: NsKind) -> bool {
        self.namespaces
            .iter()
            .any(|n| n.kind == kind && n.path.is_none())
    }

    pub fn has_namespace(&self, kind: NsKind) -> bool {
        self.namespaces.iter().any(|n| n.kind == kind)
    }

    /// The host uid and gid the sandbox process runs as: `process.user`'s
    /// ids, through the mappings of a user namespace the config makes
    /// (`None` when the user's ids are not mapped).
    pub fn host_user(&self) -> Option<(u32, u32)> {
        if !self.new_namespace(NsKind::User) {
            return Some((self.uid, self.gid));
        }
        Some((
            crate::bundle::host_id(&self.uid_mappings, self.uid)?,
            crate::bundle::host_id(&self.gid_mappings, self.gid)?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(quota: Option<i64>, period: Option<u64>, cpus: Option<&str>) -> Resources {
        Resources {
            cpu_quota: quota,
            cpu_period: period,
            cpuset_cpus: cpus.map(String::from),
            ..Resources::default()
        }
    }

    #[test]
    fn vcpus_from_quota_and_cpuset() {
        assert_eq!(res(None, None, None).vcpus_or(1), 1);
        assert_eq!(res(None, None, None).vcpus_or(3), 3);
        assert_eq!(res(None, None, None).vcpus_or(64), qvisor::MAX_CPUS);
        assert_eq!(res(None, None, None).vcpus(), host_vcpus());
        assert_eq!(res(Some(100_000), None, None).vcpus_or(4), 1);
        assert_eq!(res(Some(200_000), Some(100_000), None).vcpus(), 2);
        assert_eq!(res(Some(150_000), Some(100_000), None).vcpus(), 2);
        assert_eq!(res(Some(50_000), Some(100_000), None).vcpus(), 1);
        assert_eq!(res(Some(300_000), None, None).vcpus(), 3);
        assert_eq!(res(None, None, Some("0-3")).vcpus(), 4);
        assert_eq!(res(None, None, Some("0,2,4-5")).vcpus(), 4);
        assert_eq!(res(Some(400_000), Some(100_000), Some("1")).vcpus(), 1);
        assert_eq!(res(Some(-1), None, Some("0-63")).vcpus(), qvisor::MAX_CPUS);
        assert_eq!(res(None, None, Some("bad")).vcpus_or(1), 1);
        assert_eq!(res(None, None, Some("3-1")).vcpus_or(2), 2);
    }

    #[test]
    fn host_vcpus_follow_the_host() {
        let host = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(host_vcpus(), host.min(qvisor::MAX_CPUS));
    }
}
