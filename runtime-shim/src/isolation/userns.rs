//! A user namespace the config makes (`linux.uidMappings`,
//! `gidMappings`), entered last: the mounts, `pivot_root` and the other
//! namespaces are made by root on the host first (their owner stays the
//! host's user namespace) and /dev/kvm is open; then the sandbox process
//! moves into a new user namespace and asks `create` (on the sync pipe:
//! "userns") to write its `uid_map` and `gid_map`, as runc's parent
//! writes its child's, and waits for "go" on the resume pipe. From then
//! on the VMM is the container's user as the mappings make it on the host
//! (container root is host uid 1000 for `0 1000 N`), with capabilities
//! only over what the new namespace owns, as runc's process is.

use std::io::{BufRead, Write};

use nix::sched::{CloneFlags, unshare};

use super::IsolationError;
use crate::plan::{NsKind, Plan};

/// The text of a `uid_map` or `gid_map` for `maps`, as Linux prints
/// one (and takes it).
pub fn map_text(maps: &[[u32; 3]]) -> String {
    maps.iter()
        .map(|[c, h, s]| format!("{c:>10} {h:>10} {s:>10}\n"))
        .collect()
}

/// Enters the plan's new user namespace, if any, once `create` (reading
/// `sync`, answering on `resume`) has written its mappings.
pub fn enter(
    plan: &Plan,
    sync: &mut std::fs::File,
    resume: Option<&std::fs::File>,
) -> Result<(), IsolationError> {
    if !plan.new_namespace(NsKind::User) {
        return Ok(());
    }
    let resume = resume.ok_or_else(|| IsolationError::Setup("no resume pipe".into()))?;
    unshare(CloneFlags::CLONE_NEWUSER).map_err(IsolationError::sys("unshare user namespace"))?;
    writeln!(sync, "userns").map_err(IsolationError::io("sync pipe"))?;
    let mut line = String::new();
    std::io::BufReader::new(resume)
        .read_line(&mut line)
        .map_err(IsolationError::io("resume pipe"))?;
    if line.trim() != "go" {
        return Err(IsolationError::Setup(format!(
            "writing the user namespace's mappings failed: {}",
            line.trim()
        )));
    }
    Ok(())
}

/// Writes the `uid_map` and `gid_map` of sandbox process `pid` (by
/// `create`, from the host's user namespace).
pub fn write_maps(plan: &Plan, pid: i32) -> std::io::Result<()> {
    std::fs::write(format!("/proc/{pid}/uid_map"), map_text(&plan.uid_mappings))?;
    std::fs::write(format!("/proc/{pid}/gid_map"), map_text(&plan.gid_mappings))
}
