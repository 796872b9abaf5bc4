//! The on-disk record of one container, `<root>/<id>/state.json`.
//!
//! Layout of a container's directory (the *state directory*):
//! ```text
//! <root>/<id>/state.json     this record (host side only)
//! <root>/<id>/plan.json      what sandbox-init sets up (written by create)
//! <root>/<id>/newroot/       mount point of the sandbox process's tmpfs root
//! <root>/<id>/sandbox/       bind-mounted into the sandbox at /.qrun-state:
//!     exec.fifo              exists from create until start
//!     ctl.sock               the VMM's control socket while it runs
//!     exit                   the program's exit status, written at its end
//!     (swap and REAP files)  qvisor's per-sandbox files
//! ```
//! `state.json` is a JSON object, version 1 (field `version`), with the
//! fields of [`StateFile`] in camelCase. It is written atomically (a
//! temporary file in the same directory, then `rename`), so a reader sees
//! the old or the new record, never a mix. Readers accept at most
//! [`MAX_STATE`] bytes. The OCI status is not stored: it is derived from
//! the sandbox process and the files above each time it is asked for.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::ContainerError;

/// The format version this code writes and reads.
pub const VERSION: u32 = 1;
/// Largest state file a reader accepts.
pub const MAX_STATE: u64 = 1 << 20;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StateFile {
    pub version: u32,
    pub id: String,
    /// The sandbox process (host pid); 0 until known.
    pub pid: i32,
    /// Its start time, to tell it from a later process with the same pid.
    pub pid_start_time: u64,
    pub bundle: PathBuf,
    pub rootfs: PathBuf,
    /// RFC 3339.
    pub created: String,
    pub owner: String,
    pub annotations: BTreeMap<String, String>,
    /// The cgroup directories made for the container.
    pub cgroups: Vec<PathBuf>,
    /// Every cgroup directory `create` made, deepest first (removed by
    /// `delete`).
    #[serde(default)]
    pub cgroup_dirs: Vec<PathBuf>,
    /// An exit status the runtime itself recorded (a SIGKILL leaves the
    /// sandbox no chance to write `sandbox/exit`).
    #[serde(default)]
    pub exit_status: Option<i32>,
}

impl StateFile {
    pub fn read(path: &Path) -> Result<Self, ContainerError> {
        let text = read_capped(path, MAX_STATE)?;
        let state: Self = serde_json::from_str(&text)
            .map_err(|e| ContainerError::CorruptState(path.to_owned(), e.to_string()))?;
        if state.version != VERSION {
            return Err(ContainerError::CorruptState(
                path.to_owned(),
                format!("version {} (expected {VERSION})", state.version),
            ));
        }
        Ok(state)
    }

    pub fn write(&self, path: &Path) -> Result<(), ContainerError> {
        let text = serde_json::to_string_pretty(self).map_err(|e| ContainerError::Io {
            what: "encoding state".into(),
            source: std::io::Error::other(e),
        })?;
        write_atomic(path, text.as_bytes())
    }
}

/// Reads a small file whole, refusing one larger than `cap`.
pub fn read_capped(path: &Path, cap: u64) -> Result<String, ContainerError> {
    use std::io::Read;
    let file = std::fs::File::open(path)
        .map_err(ContainerError::io(format!("reading {}", path.display())))?;
    let mut text = String::new();
    file.take(cap + 1)
        .read_to_string(&mut text)
        .map_err(ContainerError::io(format!("reading {}", path.display())))?;
    if text.len() as u64 > cap {
        return Err(ContainerError::CorruptState(
            path.to_owned(),
            format!("larger than {cap} bytes"),
        ));
    }
    Ok(text)
}

/// Writes `bytes` to `path` atomically: a temporary file next to it, then
/// `rename` over it.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ContainerError> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    let what = || format!("writing {}", path.display());
    std::fs::write(&tmp, bytes).map_err(ContainerError::io(what()))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        ContainerError::Io {
            what: what(),
            source: e,
        }
    })
}
