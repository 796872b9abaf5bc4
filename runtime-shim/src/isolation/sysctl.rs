//! Namespaced sysctls, as runc handles them. The config's `linux.sysctl`
//! (checked by `bundle`: only those of a namespace the container has) is
//! written into the sandbox process's namespaces, as runc writes it into
//! the container's, so a container that later joins them sees the values:
//! the CRI sets a pod's sysctls on its pause container, whose IPC and
//! network namespaces the pod's containers join.
//!
//! The guest's `/proc/sys` shows what the boot information lists
//! (`Plan::sysctl`, `sys/a/b=value`): the config's own entries, and for a
//! namespace joined by path the values found in it at start: every IPC
//! sysctl, and the files directly under `net/core`, `net/ipv4`,
//! `net/ipv6` and `net/unix`. A namespace the sandbox makes holds the
//! kernel's defaults, which are not read (no cost at a plain start).

use std::path::Path;

use super::IsolationError;
use crate::plan::{NsKind, Plan};

/// The IPC namespace's sysctl files, under `/proc/sys/`.
const IPC_FILES: &[&str] = &[
    "kernel/msgmax",
    "kernel/msgmnb",
    "kernel/msgmni",
    "kernel/sem",
    "kernel/shmall",
    "kernel/shmmax",
    "kernel/shmmni",
    "kernel/shm_rmid_forced",
    "fs/mqueue/msg_default",
    "fs/mqueue/msg_max",
    "fs/mqueue/msgsize_default",
    "fs/mqueue/msgsize_max",
    "fs/mqueue/queues_max",
];

/// The network namespace's sysctl directories whose files are read.
const NET_DIRS: &[&str] = &["net/core", "net/ipv4", "net/ipv6", "net/unix"];

/// Writes the plan's sysctls into the namespaces the sandbox process is
/// in now (after `namespaces::enter`), as runc does; a value the kernel
/// refuses fails the container as under runc.
pub fn write(plan: &Plan) -> Result<(), IsolationError> {
    for entry in &plan.sysctl {
        let Some((path, value)) = entry.split_once('=') else {
            continue;
        };
        let file = Path::new("/proc").join(path);
        std::fs::write(&file, value.as_bytes()).map_err(|e| {
            let key = path.trim_start_matches("sys/").replace('/', ".");
            IsolationError::Setup(format!("write sysctl key {key}: {e}"))
        })?;
    }
    Ok(())
}

/// The sysctls of the namespaces `plan` joins by path, as `sys/a/b=value`
/// entries, leaving out those the config sets itself.
pub fn joined(plan: &Plan) -> Vec<String> {
    let joins = |kind: NsKind| {
        plan.namespaces
            .iter()
            .any(|n| n.kind == kind && n.path.is_some())
    };
    let mut files: Vec<String> = Vec::new();
    if joins(NsKind::Ipc) {
        files.extend(IPC_FILES.iter().map(|f| (*f).to_owned()));
    }
    if joins(NsKind::Network) {
        for dir in NET_DIRS {
            files.extend(dir_files(dir));
        }
    }
    let own = |f: &str| {
        plan.sysctl.iter().any(|e| {
            e.split_once('=')
                .is_some_and(|(p, _)| p == format!("sys/{f}"))
        })
    };
    files
        .iter()
        .filter(|f| !own(f))
        .filter_map(|f| {
            let text = std::fs::read_to_string(Path::new("/proc/sys").join(f)).ok()?;
            let value = text.strip_suffix('\n').unwrap_or(&text);
            (!value.contains('\0')).then(|| format!("sys/{f}={value}"))
        })
        .collect()
}

/// The readable regular files directly under `/proc/sys/DIR`, as paths
/// under `/proc/sys/`, sorted.
fn dir_files(dir: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(Path::new("/proc/sys").join(dir)) else {
        return Vec::new();
    };
    let mut out: Vec<String> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| Some(format!("{dir}/{}", e.file_name().to_str()?)))
        .collect();
    out.sort();
    out
}
