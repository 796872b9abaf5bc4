//! The sandbox process (`qrun sandbox-init`, started by `create`): it
//! isolates itself, tells `create` it is ready, waits for `start`, then
//! runs the sandbox and records the program's exit status.
//!
//! ```text
//! create                            sandbox-init (pid 1 of its pid ns if asked)
//!   cgroups, pid ns, spawn ───────>  reopen the sync pipe, read plan.json
//!   (moves the child into cgroups)   namespaces (setns / unshare), lo up,
//!                                    hostname, pivot_root (rootfs.rs),
//!                                    ids, capabilities, no_new_privs
//!   read "ok" / "error: …" <──────── report on the sync pipe, close it
//!   state.json, pid file, exit      open exec.fifo for writing (blocks)
//! start: read exec.fifo ──────────>  seccomp, Sandbox::run(...)
//!                                    write sandbox/exit, exit with status
//! ```

pub mod loopback;
pub mod namespaces;
pub mod privileges;
pub mod rootfs;
pub mod seccomp;

use std::io::Write;
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::plan::{NsKind, Plan};

#[derive(Debug, Error)]
pub enum IsolationError {
    #[error("{what}: {source}")]
    Sys {
        what: String,
        #[source]
        source: nix::Error,
    },
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Setup(String),
}

impl IsolationError {
    pub fn sys(what: impl Into<String>) -> impl FnOnce(nix::Error) -> Self {
        let what = what.into();
        move |source| Self::Sys { what, source }
    }

    pub fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let what = what.into();
        move |source| Self::Io { what, source }
    }
}

/// Runs the sandbox process for the container whose state directory is
/// `dir`; `sync_fd` is the write end of `create`'s pipe. Returns the exit
/// status.
pub fn init(dir: &Path, sync_fd: i32, debug: bool) -> i32 {
    let mut sync = match std::fs::OpenOptions::new()
        .write(true)
        .open(format!("/proc/self/fd/{sync_fd}"))
    {
        Ok(f) => f,
        Err(e) => {
            eprintln!("qrun sandbox-init: sync fd {sync_fd}: {e}");
            return 1;
        }
    };
    // Our own copy now; the inherited descriptor must not outlive it.
    let _ = nix::unistd::close(sync_fd);
    let plan = match prepare(dir) {
        Ok(p) => p,
        Err(e) => {
            let _ = writeln!(sync, "error: {}", crate::report::chain(&e));
            return 1;
        }
    };
    let _ = writeln!(sync, "ok");
    drop(sync);
    let state = PathBuf::from(rootfs::STATE);
    if let Err(e) = wait_for_start(&state) {
        eprintln!("qrun: waiting for start: {e}");
        return 1;
    }
    let status = run(&plan, &state, debug);
    let _ = crate::container::state_file::write_atomic(
        &state.join("exit"),
        format!("{status}\n").as_bytes(),
    );
    status
}

fn prepare(dir: &Path) -> Result<Plan, IsolationError> {
    let text = std::fs::read_to_string(dir.join("plan.json"))
        .map_err(IsolationError::io("reading plan.json"))?;
    let plan: Plan = serde_json::from_str(&text)
        .map_err(|e| IsolationError::Setup(format!("plan.json: {e}")))?;
    namespaces::enter(&plan)?;
    if plan.new_namespace(NsKind::Network) {
        loopback::up()?;
    }
    if let Some(h) = &plan.hostname
        && plan.has_namespace(NsKind::Uts)
    {
        nix::unistd::sethostname(h).map_err(IsolationError::sys("sethostname"))?;
    }
    rootfs::pivot(&plan, dir)?;
    privileges::drop(&plan)?;
    Ok(plan)
}

/// Blocks until `start` opens the exec fifo, then hands it a byte.
fn wait_for_start(state: &Path) -> std::io::Result<()> {
    let mut fifo = std::fs::OpenOptions::new()
        .write(true)
        .open(state.join("exec.fifo"))?;
    fifo.write_all(b"0")
}

fn run(plan: &Plan, state: &Path, debug: bool) -> i32 {
    if let Err(e) = seccomp::apply() {
        eprintln!("qrun: {}", crate::report::chain(&e));
        return 1;
    }
    let mut config = qvisor::SandboxConfig::new(plan.argv.clone());
    config.program = plan.program.clone();
    config.rootfs = rootfs::ROOTFS.into();
    config.memory = plan.memory;
    config.env = plan.env.clone();
    config.cwd = plan.cwd.clone();
    if let Some(h) = &plan.hostname {
        config.hostname = h.clone();
    }
    config.control_socket = Some(state.join("ctl.sock"));
    config.state_dir = Some(state.to_owned());
    config.log_level = if debug { 4 } else { 0 };
    config.seccomp = plan.seccomp.clone();
    // In a network namespace of its own (made or joined) the abstract
    // AF_UNIX names are the container's; in the host's they are tagged.
    config.private_abstract = !plan.has_namespace(NsKind::Network);
    match qvisor::Sandbox::run(&config) {
        Ok(report) => report.status,
        Err(e) => {
            eprintln!("qrun: {}", crate::report::chain(&e));
            e.exit_status()
        }
    }
}
