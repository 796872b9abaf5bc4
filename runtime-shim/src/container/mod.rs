//! The library that owns container state: one directory per container
//! under the runtime root (see [`state_file`] for the layout), the
//! lifecycle table ([`lifecycle`]) and the operations the commands call.

mod create;
mod error;
pub mod lifecycle;
mod ops;
pub mod process;
pub mod signal;
pub mod state_file;

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

pub use create::{CreateOptions, console, create};
pub use error::ContainerError;
pub use lifecycle::Status;
pub use ops::{delete, kill, pause, resume, start};
use state_file::StateFile;

use crate::cgroup::Cgroups;

/// The OCI runtime-spec version of the state we report.
pub const OCI_VERSION: &str = "1.0.2";
/// Annotation carrying the hibernation state (the control socket's
/// `Status.state`) while the container runs.
pub const HIBERNATION_ANNOTATION: &str = "qrun.hibernation";
/// Annotation carrying the program's exit status once stopped.
pub const EXIT_ANNOTATION: &str = "qrun.exitStatus";
/// Bundle annotation that makes `pause` hibernate the sandbox and
/// `resume` wake it (value "true"), instead of the cgroup freezer.
pub const HIBERNATE_ON_PAUSE: &str = "qrun.hibernate-on-pause";
/// Default runtime root.
pub const DEFAULT_ROOT: &str = "/run/qrun";

/// A container known to the runtime.
pub struct Container {
    pub dir: PathBuf,
    pub state: StateFile,
}

/// Longest container id: it is a directory name under the runtime root
/// (`NAME_MAX`). runc has no limit of its own and fails at `mkdir` with
/// "file name too long"; qrun says so before doing anything.
pub const MAX_ID: usize = 255;

/// Checks an id the way runc does: no path tricks, the charset
/// `[A-Za-z0-9_.+-]` (and, stricter than runc, no leading '.'), at most
/// [`MAX_ID`] bytes.
pub fn validate_id(id: &str) -> Result<(), ContainerError> {
    if id.len() > MAX_ID {
        return Err(ContainerError::IdTooLong(id.len()));
    }
    let ok = !id.is_empty()
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.+-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(ContainerError::InvalidId(id.to_owned()))
    }
}

impl Container {
    /// The container `id` under `root`.
    pub fn load(root: &Path, id: &str) -> Result<Self, ContainerError> {
        validate_id(id)?;
        let dir = root.join(id);
        let path = dir.join("state.json");
        if !path.exists() {
            return Err(ContainerError::NotFound(id.to_owned()));
        }
        let state = StateFile::read(&path)?;
        Ok(Self { dir, state })
    }

    pub fn id(&self) -> &str {
        &self.state.id
    }

    pub fn save(&self) -> Result<(), ContainerError> {
        self.state.write(&self.dir.join("state.json"))
    }

    pub fn sandbox_dir(&self) -> PathBuf {
        self.dir.join("sandbox")
    }

    pub fn ctl_socket(&self) -> PathBuf {
        self.sandbox_dir().join("ctl.sock")
    }

    pub fn exec_fifo(&self) -> PathBuf {
        self.sandbox_dir().join("exec.fifo")
    }

    /// Present while the container is paused by hibernation
    /// ([`HIBERNATE_ON_PAUSE`]).
    pub fn hibernate_pause_marker(&self) -> PathBuf {
        self.sandbox_dir().join("paused")
    }

    /// Whether the bundle asks `pause` to hibernate ([`HIBERNATE_ON_PAUSE`]).
    pub fn hibernates_on_pause(&self) -> bool {
        self.state
            .annotations
            .get(HIBERNATE_ON_PAUSE)
            .is_some_and(|v| v == "true")
    }

    pub fn cgroups(&self) -> Cgroups {
        Cgroups::from_dirs(self.state.cgroups.clone())
    }

    /// Whether the sandbox process is still there.
    pub fn alive(&self) -> bool {
        process::alive(self.state.pid, self.state.pid_start_time)
    }

    /// The OCI status, derived from the sandbox process and its files.
    pub fn status(&self) -> Status {
        if !self.alive() {
            Status::Stopped
        } else if self.exec_fifo().exists() {
            Status::Created
        } else if self.hibernate_pause_marker().exists() || self.cgroups().frozen() {
            Status::Paused
        } else {
            Status::Running
        }
    }

    /// The program's exit status, once known.
    pub fn exit_status(&self) -> Option<i32> {
        let text = std::fs::read_to_string(self.sandbox_dir().join("exit")).ok();
        text.and_then(|t| t.trim().parse().ok())
            .or(self.state.exit_status)
    }

    /// The hibernation state from the control socket, if it answers.
    pub fn hibernation(&self) -> Option<String> {
        let req = qvisor::ctl::Request::Status;
        self.ctl(req, Duration::from_secs(2)).ok().map(|s| s.state)
    }

    /// One control request. Right after `start` the VMM may still be
    /// booting and not yet listening: while the sandbox process lives, a
    /// missing or refusing socket is retried for up to two seconds.
    pub fn ctl(
        &self,
        req: qvisor::ctl::Request,
        timeout: Duration,
    ) -> Result<qvisor::ctl::Status, ContainerError> {
        use std::io::ErrorKind::{ConnectionRefused, NotFound};
        let (socket, _dir) = self.ctl_path()?;
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        loop {
            match qvisor::ctl::request(&socket, req, timeout) {
                Err(qvisor::ctl::CtlError::Io { source, .. })
                    if matches!(source.kind(), NotFound | ConnectionRefused)
                        && std::time::Instant::now() < deadline
                        && self.alive() =>
                {
                    std::thread::sleep(Duration::from_millis(2));
                }
                r => {
                    return r.map_err(|source| ContainerError::Control {
                        id: self.id().to_owned(),
                        source,
                    });
                }
            }
        }
    }

    /// The control socket's path for a connect: a socket address holds at
    /// most 107 bytes; a long root or id makes the socket's path longer,
    /// so it is then reached through a descriptor of its directory (the
    /// kernel follows /proc's link), which the returned file holds.
    pub fn ctl_path(&self) -> Result<(PathBuf, Option<std::fs::File>), ContainerError> {
        let socket = self.ctl_socket();
        if crate::report::socket_path_problem(&socket).is_none() {
            return Ok((socket, None));
        }
        let d = self.sandbox_dir();
        let f = std::fs::File::open(&d)
            .map_err(ContainerError::io(format!("opening {}", d.display())))?;
        let path = format!("/proc/self/fd/{}/ctl.sock", f.as_raw_fd()).into();
        Ok((path, Some(f)))
    }

    /// Right after `start` the VMM may still be booting and not yet
    /// listening: waits (at most two seconds, while the sandbox process
    /// lives) for `socket` to exist.
    pub fn wait_for_ctl(&self, socket: &Path) {
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        while !socket.exists() && std::time::Instant::now() < deadline && self.alive() {
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// The state JSON of the OCI runtime spec (plus runc's extra fields).
    pub fn oci_state(&self) -> Value {
        let status = self.status();
        let mut annotations = self.state.annotations.clone();
        if status == Status::Running
            && let Some(h) = self.hibernation()
        {
            annotations.insert(HIBERNATION_ANNOTATION.into(), h);
        }
        if status == Status::Stopped
            && let Some(code) = self.exit_status()
        {
            annotations.insert(EXIT_ANNOTATION.into(), code.to_string());
        }
        let pid = if status == Status::Stopped {
            0
        } else {
            self.state.pid
        };
        let mut state = spec_state(
            &self.state.id,
            status.as_str(),
            pid,
            &self.state.bundle,
            &annotations,
        );
        state["rootfs"] = json!(self.state.rootfs);
        state["created"] = json!(self.state.created);
        state["owner"] = json!(self.state.owner);
        state
    }

    /// The hooks of the container's config (none when its plan cannot be
    /// read: a create that died half-way).
    pub fn hooks(&self) -> crate::hooks::Hooks {
        #[derive(serde::Deserialize)]
        struct HooksOnly {
            #[serde(default)]
            hooks: crate::hooks::Hooks,
        }
        let path = self.dir.join("plan.json");
        std::fs::read(path)
            .ok()
            .and_then(|t| serde_json::from_slice::<HooksOnly>(&t).ok())
            .map(|h| h.hooks)
            .unwrap_or_default()
    }
}

/// The state of the runtime spec (`runtime.md`, "State"): what `state`
/// prints (it adds runc's extra fields) and what hooks read on stdin.
pub fn spec_state(
    id: &str,
    status: &str,
    pid: i32,
    bundle: &Path,
    annotations: &std::collections::BTreeMap<String, String>,
) -> Value {
    json!({
        "ociVersion": OCI_VERSION,
        "id": id,
        "status": status,
        "pid": pid,
        "bundle": bundle,
        "annotations": annotations,
    })
}

/// Every container under `root`, by id; unreadable entries are skipped.
pub fn list(root: &Path) -> Vec<Container> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut out: Vec<Container> = entries
        .flatten()
        .filter_map(|e| Container::load(root, &e.file_name().to_string_lossy()).ok())
        .collect();
    out.sort_by(|a, b| a.state.id.cmp(&b.state.id));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids() {
        for ok in ["a", "ctr-1", "x_y.z+1"] {
            assert!(validate_id(ok).is_ok(), "{ok}");
        }
        for bad in ["", ".", "..", "a/b", ".hidden", "a b", "ü", "a\0b"] {
            assert!(validate_id(bad).is_err(), "{bad}");
        }
        assert!(validate_id(&"a".repeat(MAX_ID)).is_ok());
        let e = validate_id(&"a".repeat(MAX_ID + 1)).expect_err("too long");
        assert!(e.to_string().contains("256 characters is too long"), "{e}");
    }
}
