//! An OCI bundle: `config.json` (parsed with `oci-spec`) and the rootfs,
//! turned into a [`Plan`] for the sandbox.
//!
//! What the config means here: `process.args[0]` is found in the rootfs
//! (`PATH` search, symlinks followed inside it) and becomes the guest's
//! program; `env`, `cwd`, `user`, `terminal`, `hostname` and
//! `linux.namespaces` apply; `linux.resources` gives the cgroup limits and
//! the memory limit sizes guest RAM; bind and tmpfs mounts are made in
//! the sandbox's private view of the rootfs (see [`mounts`] for the ones
//! the guest kernel provides and the ones refused). What qrun cannot do
//! is refused with one line, never skipped. `linux.seccomp` is
//! compiled for the guest kernel (`seccomp`). `hooks` are checked here
//! and run by `crate::hooks`.

mod checks;
mod devices;
mod idmap;
pub use checks::bad_env_entry;
pub use idmap::host_id;
#[cfg(test)]
mod fuzz;
mod mounts;
pub use mounts::SHM;
pub mod resolve;
mod seccomp;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use oci_spec::runtime::{LinuxNamespaceType, Spec};
use thiserror::Error;

use crate::plan::{Namespace, NsKind, Plan, Resources};

/// Largest config.json read.
const MAX_CONFIG: u64 = 4 << 20;
/// Host memory the VMM itself needs on top of guest RAM; the cgroup memory
/// limit is the config's limit plus this.
pub const VMM_OVERHEAD: i64 = 64 << 20;
/// Capabilities the VMM exercises on the guest's behalf (files and
/// sockets of the container); it keeps those the config grants.
const VMM_CAPS: &[&str] = &[
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_NET_BIND_SERVICE",
    // Bridges made and removed for the guest (`SIOCBRADDBR`), in the
    // sandbox's network namespace, as the container itself could.
    "CAP_NET_ADMIN",
    // The guest's bind mounts (`mount --bind` in a privileged container),
    // made in the sandbox's mount namespace.
    "CAP_SYS_ADMIN",
];

#[derive(Debug, Error)]
pub enum BundleError {
    #[error("bundle {0}: {1}")]
    Read(PathBuf, #[source] std::io::Error),
    #[error("{0}: {1}")]
    Parse(PathBuf, String),
    #[error("config.json: {0} is missing")]
    Missing(&'static str),
    #[error("rootfs {0}: {1}")]
    Rootfs(PathBuf, #[source] std::io::Error),
    #[error("rootfs {0} is not a directory")]
    RootfsNotDir(PathBuf),
    #[error("process.args[0] {0:?}: no such executable file in the rootfs")]
    Program(String),
    #[error("mount {0}: source {1}: {2}")]
    MountSource(String, PathBuf, #[source] std::io::Error),
    #[error("config.json: {0} is not supported by qrun")]
    Unsupported(String),
    #[error("config.json: {0}")]
    Invalid(String),
    /// As runc: "cannot allocate tty if runc will detach without setting
    /// console socket".
    #[error(
        "config.json: process.terminal is true but no --console-socket was given (qrun does not make a terminal of its own)"
    )]
    TerminalWithoutConsole,
    /// As runc: "cannot use console socket if runc will not detach or
    /// allocate tty".
    #[error("--console-socket was given but config.json's process.terminal is false")]
    ConsoleWithoutTerminal,
}

/// Reads `<bundle>/config.json` and plans the sandbox for container `id`.
pub fn load(bundle: &Path, id: &str) -> Result<Plan, BundleError> {
    let bundle = std::fs::canonicalize(bundle).map_err(|e| BundleError::Read(bundle.into(), e))?;
    let path = bundle.join("config.json");
    let text = read_config(&path)?;
    // Parsing a Spec takes more stack than a small `ulimit -s` gives.
    crate::stack::with_stack(|| from_text(&text, &path, &bundle, id))
}

/// Parses and checks the text of `config_path` (in the canonical
/// directory `bundle`) and plans the sandbox.
pub fn from_text(
    text: &str,
    config_path: &Path,
    bundle: &Path,
    id: &str,
) -> Result<Plan, BundleError> {
    let spec: Spec = serde_json::from_str(text)
        .map_err(|e| BundleError::Parse(config_path.to_owned(), e.to_string()))?;
    plan(&spec, bundle, id)
}

fn read_config(path: &Path) -> Result<String, BundleError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    // O_NONBLOCK: a FIFO must not wait for a writer; only a regular file goes.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| BundleError::Read(path.into(), e))?;
    let meta = file
        .metadata()
        .map_err(|e| BundleError::Read(path.into(), e))?;
    if !meta.is_file() {
        return Err(BundleError::Parse(path.into(), "not a regular file".into()));
    }
    let mut text = String::new();
    file.take(MAX_CONFIG + 1)
        .read_to_string(&mut text)
        .map_err(|e| BundleError::Read(path.into(), e))?;
    if text.len() as u64 > MAX_CONFIG {
        return Err(BundleError::Parse(path.into(), "larger than 4 MiB".into()));
    }
    Ok(text)
}

fn plan(spec: &Spec, bundle: &Path, id: &str) -> Result<Plan, BundleError> {
    if spec.version().is_empty() {
        return Err(BundleError::Missing("ociVersion"));
    }
    let root = spec.root().as_ref().ok_or(BundleError::Missing("root"))?;
    if root.path().as_os_str().is_empty() {
        return Err(BundleError::Missing("root.path"));
    }
    let rootfs = bundle.join(root.path());
    let rootfs = std::fs::canonicalize(&rootfs).map_err(|e| BundleError::Rootfs(rootfs, e))?;
    if !rootfs.is_dir() {
        return Err(BundleError::RootfsNotDir(rootfs));
    }
    let process = spec
        .process()
        .as_ref()
        .ok_or(BundleError::Missing("process"))?;
    let argv = process
        .args()
        .clone()
        .filter(|a| !a.is_empty())
        .ok_or(BundleError::Missing("process.args"))?;
    checks::args(&argv)?;
    let env = process.env().clone().unwrap_or_default();
    checks::env(&env)?;
    let cwd = process.cwd().to_string_lossy().into_owned();
    checks::cwd(&cwd)?;
    let hostname = spec.hostname().clone().filter(|h| !h.is_empty());
    if let Some(h) = &hostname {
        checks::hostname(h)?;
    }
    let program = resolve::program(&rootfs, &argv[0], &env, &cwd)
        .ok_or_else(|| BundleError::Program(argv[0].clone()))?;
    let user = process.user();
    let namespaces = namespaces(spec)?;
    // runc's rule: a hostname needs a UTS namespace (made or joined), or
    // it would be the host's that changes.
    if hostname.is_some() && !namespaces.iter().any(|n| n.kind == NsKind::Uts) {
        return Err(BundleError::Invalid(
            "unable to set hostname without a private UTS namespace".into(),
        ));
    }
    let (uid_mappings, gid_mappings) = idmap::plan(spec, &namespaces)?;
    if !uid_mappings.is_empty()
        && (idmap::host_id(&uid_mappings, user.uid()).is_none()
            || idmap::host_id(&gid_mappings, user.gid()).is_none())
    {
        return Err(BundleError::Invalid(format!(
            "process.user {}:{} is not mapped by linux.uidMappings and gidMappings",
            user.uid(),
            user.gid()
        )));
    }
    let linux = spec.linux().as_ref();
    let resources = linux.and_then(|l| l.resources().as_ref());
    let memory_limit = resources
        .and_then(|r| r.memory().as_ref())
        .and_then(|m| m.limit());
    Ok(Plan {
        id: id.to_owned(),
        bundle: bundle.to_owned(),
        rootfs,
        readonly_root: root.readonly().unwrap_or(false),
        rootfs_propagation: linux
            .and_then(|l| l.rootfs_propagation().clone())
            .filter(|p| mounts::PROPAGATION.contains(&p.as_str())),
        program,
        argv,
        env,
        cwd,
        hostname,
        memory: guest_memory(memory_limit)?,
        uid: user.uid(),
        gid: user.gid(),
        additional_gids: user.additional_gids().clone().unwrap_or_default(),
        terminal: process.terminal().unwrap_or(false),
        namespaces: namespaces.clone(),
        mounts: mounts::plan(spec, bundle)?,
        resources: cgroup_resources(spec),
        cgroups_path: linux
            .and_then(|l| l.cgroups_path().as_ref())
            .map(|p| p.to_string_lossy().into_owned()),
        capabilities: vmm_capabilities(spec),
        seccomp: match linux.and_then(|l| l.seccomp().as_ref()) {
            Some(s) => seccomp::compile(s)?,
            None => Vec::new(),
        },
        annotations: spec
            .annotations()
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect::<BTreeMap<_, _>>(),
        hooks: crate::hooks::from_spec(spec)?,
        masked_paths: linux
            .and_then(|l| l.masked_paths().clone())
            .unwrap_or_default(),
        readonly_paths: linux
            .and_then(|l| l.readonly_paths().clone())
            .unwrap_or_default(),
        guest_caps: guest_caps(spec),
        rlimits: rlimits(spec)?,
        no_new_privs: process.no_new_privileges().unwrap_or(false),
        sysctl: sysctls(spec, &namespaces)?,
        devices: devices::plan(spec)?,
        uid_mappings,
        gid_mappings,
    })
}

/// IPC sysctls runc lets a container with its own IPC namespace set
/// (besides `fs.mqueue.*`).
const IPC_SYSCTLS: &[&str] = &[
    "kernel.msgmax",
    "kernel.msgmnb",
    "kernel.msgmni",
    "kernel.sem",
    "kernel.shmall",
    "kernel.shmmax",
    "kernel.shmmni",
    "kernel.shm_rmid_forced",
];

/// `linux.sysctl` checked as runc 1.1 checks it: only sysctls of a
/// namespace the container has (IPC, network, `kernel.domainname` with
/// UTS), each one the host kernel knows (runc writes the file and fails
/// on a missing one). The guest shows them under `/proc/sys`; returned as
/// `sys/a/b=value` paths under `/proc/`.
fn sysctls(spec: &Spec, namespaces: &[Namespace]) -> Result<Vec<String>, BundleError> {
    let Some(map) = spec.linux().as_ref().and_then(|l| l.sysctl().as_ref()) else {
        return Ok(Vec::new());
    };
    let has = |k: NsKind| namespaces.iter().any(|n| n.kind == k);
    let mut out = Vec::new();
    for (key, value) in map {
        let bad = |why: String| Err(BundleError::Invalid(why));
        if IPC_SYSCTLS.contains(&key.as_str()) || key.starts_with("fs.mqueue.") {
            if !has(NsKind::Ipc) {
                return bad(format!(
                    "sysctl {key:?} is not allowed in the hosts ipc namespace"
                ));
            }
        } else if key.starts_with("net.") {
            if !has(NsKind::Network) {
                return bad(format!(
                    "sysctl {key:?} is not allowed in the hosts network namespace"
                ));
            }
        } else if has(NsKind::Uts) && key == "kernel.hostname" {
            return bad(format!(
                "sysctl {key:?} is not allowed as it conflicts with the OCI \"hostname\" field"
            ));
        } else if !(has(NsKind::Uts) && key == "kernel.domainname") {
            return bad(format!(
                "sysctl {key:?} is not in a separate kernel namespace"
            ));
        }
        let path = format!("sys/{}", key.replace('.', "/"));
        if key.contains("..") || key.contains('/') || value.contains('\0') || key.contains('\0') {
            return bad(format!("sysctl {key:?}: bad name or value"));
        }
        if !Path::new("/proc").join(&path).exists() {
            return bad(format!(
                "write sysctl key {key}: open /proc/{path}: no such file or directory"
            ));
        }
        out.push(format!("{path}={value}"));
    }
    out.sort();
    Ok(out)
}

/// `process.capabilities` as five masks (bounding, effective, permitted,
/// inheritable, ambient); a capability this host does not know is left
/// out, as runc leaves it out with a warning.
fn guest_caps(spec: &Spec) -> Option<[u64; 5]> {
    use std::str::FromStr;
    let c = spec.process().as_ref()?.capabilities().as_ref()?;
    let mask = |set: &Option<oci_spec::runtime::Capabilities>| -> u64 {
        set.iter()
            .flatten()
            .filter_map(|cap| {
                let name = cap.to_string().to_ascii_uppercase();
                let name = if name.starts_with("CAP_") {
                    name
                } else {
                    format!("CAP_{name}")
                };
                caps::Capability::from_str(&name).ok()
            })
            .filter(|cap| cap.index() < 64)
            .fold(0, |m, cap| m | 1 << cap.index())
    };
    Some([
        mask(c.bounding()),
        mask(c.effective()),
        mask(c.permitted()),
        mask(c.inheritable()),
        mask(c.ambient()),
    ])
}

/// `process.rlimits` as (resource, soft, hard); a soft limit above the
/// hard one is refused, as Linux's setrlimit refuses it in runc.
fn rlimits(spec: &Spec) -> Result<Vec<[u64; 3]>, BundleError> {
    use oci_spec::runtime::PosixRlimitType as T;
    let list = spec
        .process()
        .as_ref()
        .and_then(|p| p.rlimits().clone())
        .unwrap_or_default();
    let mut out = Vec::new();
    for r in list {
        let res = match r.typ() {
            T::RlimitCpu => 0,
            T::RlimitFsize => 1,
            T::RlimitData => 2,
            T::RlimitStack => 3,
            T::RlimitCore => 4,
            T::RlimitRss => 5,
            T::RlimitNproc => 6,
            T::RlimitNofile => 7,
            T::RlimitMemlock => 8,
            T::RlimitAs => 9,
            T::RlimitLocks => 10,
            T::RlimitSigpending => 11,
            T::RlimitMsgqueue => 12,
            T::RlimitNice => 13,
            T::RlimitRtprio => 14,
            T::RlimitRttime => 15,
        };
        if r.soft() > r.hard() {
            return Err(BundleError::Invalid(format!(
                "error setting rlimit type {}: invalid argument",
                r.typ()
            )));
        }
        out.push([res, r.soft(), r.hard()]);
    }
    Ok(out)
}

/// Guest RAM from the memory limit: the limit itself, at least the
/// smallest sandbox and at most what the VMM supports;
/// [`qvisor::DEFAULT_OCI_MEMORY`] without one. A limit below what the
/// program boots in (runc takes e.g. critest's 15 MiB) gets the least it
/// boots in (the VMM raises it, `memory_at_least_minimum`): the guest
/// kernel takes part of it, so programs get less than the limit and one
/// that outgrows it is killed as the OOM killer kills (SIGKILL).
fn guest_memory(limit: Option<i64>) -> Result<u64, BundleError> {
    use qlib::layout::{MAX_MEM, MIN_MEM};
    let Some(limit) = limit.filter(|l| *l > 0) else {
        return Ok(qvisor::DEFAULT_OCI_MEMORY);
    };
    let limit = u64::try_from(limit).unwrap_or(u64::MAX);
    Ok(limit.clamp(MIN_MEM, MAX_MEM))
}

fn namespaces(spec: &Spec) -> Result<Vec<Namespace>, BundleError> {
    let list = spec
        .linux()
        .as_ref()
        .and_then(|l| l.namespaces().clone())
        .unwrap_or_default();
    let mut out: Vec<Namespace> = Vec::new();
    for ns in list {
        let kind = match ns.typ() {
            LinuxNamespaceType::Mount => NsKind::Mount,
            LinuxNamespaceType::Pid => NsKind::Pid,
            LinuxNamespaceType::Ipc => NsKind::Ipc,
            LinuxNamespaceType::Uts => NsKind::Uts,
            LinuxNamespaceType::Network => NsKind::Network,
            LinuxNamespaceType::Cgroup => NsKind::Cgroup,
            LinuxNamespaceType::User => NsKind::User,
            other => {
                return Err(BundleError::Unsupported(format!("the {other} namespace")));
            }
        };
        if out.iter().any(|n| n.kind == kind) {
            return Err(BundleError::Invalid(format!(
                "namespace {kind:?} listed twice"
            )));
        }
        out.push(Namespace {
            kind,
            path: ns.path().clone(),
        });
    }
    Ok(out)
}

fn cgroup_resources(spec: &Spec) -> Resources {
    let Some(r) = spec.linux().as_ref().and_then(|l| l.resources().as_ref()) else {
        return Resources::default();
    };
    let cpu = r.cpu().as_ref();
    Resources {
        memory_limit: r
            .memory()
            .as_ref()
            .and_then(|m| m.limit())
            .filter(|l| *l > 0)
            .map(|l| l.saturating_add(VMM_OVERHEAD)),
        cpu_quota: cpu.and_then(|c| c.quota()).filter(|q| *q > 0),
        cpu_period: cpu.and_then(|c| c.period()).filter(|p| *p > 0),
        cpu_shares: cpu.and_then(|c| c.shares()).filter(|s| *s > 0),
        pids_limit: r.pids().as_ref().map(|p| p.limit()).filter(|l| *l > 0),
        cpuset_cpus: cpu.and_then(|c| c.cpus().clone()).filter(|c| !c.is_empty()),
        cpuset_mems: cpu.and_then(|c| c.mems().clone()).filter(|m| !m.is_empty()),
        blkio_weight: r
            .block_io()
            .as_ref()
            .and_then(|b| b.weight())
            .filter(|w| *w > 0),
    }
}

fn vmm_capabilities(spec: &Spec) -> Vec<String> {
    let granted: Vec<String> = spec
        .process()
        .as_ref()
        .and_then(|p| p.capabilities().as_ref())
        .and_then(|c| c.effective().as_ref())
        .map(|set| {
            set.iter()
                .map(|c| format!("CAP_{c}").to_ascii_uppercase())
                .collect()
        })
        .unwrap_or_default();
    VMM_CAPS
        .iter()
        .filter(|c| {
            granted
                .iter()
                .any(|g| g == *c || g.trim_start_matches("CAP_") == **c)
        })
        .map(|c| (*c).to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_limits_size_guest_ram() {
        assert_eq!(guest_memory(None).ok(), Some(qvisor::DEFAULT_OCI_MEMORY));
        assert_eq!(guest_memory(Some(128 << 20)).ok(), Some(128 << 20));
        assert_eq!(
            guest_memory(Some(64 << 30)).ok(),
            Some(qlib::layout::MAX_MEM)
        );
        assert_eq!(
            guest_memory(Some(15 << 20)).ok(),
            Some(qlib::layout::MIN_MEM)
        );
    }
}
