//! The sandbox process (`qrun sandbox-init`, started by `create`): it
//! isolates itself, tells `create` it is ready, waits for `start`, then
//! runs the sandbox and records the program's exit status.
//!
//! ```text
//! create                            sandbox-init (pid 1 of its pid ns if asked)
//!   cgroups, pid ns, spawn ───────>  reopen the sync pipe, read plan.json
//!   (moves the child into cgroups)   namespaces (setns / unshare), lo up,
//!                                    sysctls (sysctl.rs), hostname,
//!                                    mounts (rootfs.rs)
//!   prestart, createRuntime <─────── "hooks" (only when there are any)
//!   hooks, then "go" ─────────────>  createContainer hooks, pivot_root,
//!                                    /dev/kvm; a user namespace:
//!   write uid_map, gid_map <──────── "userns" (userns.rs)
//!   then "go" ────────────────────>  ids, capabilities, no_new_privs
//!   read "ok" / "error: …" <──────── report on the sync pipe, close it
//!   state.json, pid file, exit      open exec.fifo for writing (blocks)
//! start: read exec.fifo ──────────>  seccomp, Sandbox::run(...)
//!                                    write sandbox/exit, exit with status
//! ```

pub mod loopback;
pub mod mountinfo;
pub mod namespaces;
pub mod privileges;
pub mod rootfs;
pub mod seccomp;
pub mod sysctl;
pub mod userns;

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
pub fn init(dir: &Path, sync_fd: i32, resume_fd: Option<i32>, debug: bool) -> i32 {
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
    let resume = match resume_fd.map(reopen).transpose() {
        Ok(r) => r,
        Err(e) => {
            let _ = writeln!(sync, "error: resume fd: {e}");
            return 1;
        }
    };
    let (plan, kvm) = match prepare(dir, &mut sync, resume) {
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
    let status = run(&plan, &state, kvm, debug);
    let _ = crate::container::state_file::write_atomic(
        &state.join("exit"),
        format!("{status}\n").as_bytes(),
    );
    status
}

/// Our own descriptor for the inherited `fd` (closed), close-on-exec.
fn reopen(fd: i32) -> std::io::Result<std::fs::File> {
    let f = std::fs::File::open(format!("/proc/self/fd/{fd}"))?;
    let _ = nix::unistd::close(fd);
    Ok(f)
}

/// The hooks at the point runc runs them, after the mounts and before
/// pivot_root: first the runtime's (prestart, createRuntime: we tell
/// `create` on the sync pipe and wait for its "go" on `resume`), then
/// createContainer here, in the container's namespaces, with the view of
/// the rootfs as working directory.
fn hook_point(
    plan: &Plan,
    sync: &mut std::fs::File,
    resume: Option<&std::fs::File>,
    rootfs_view: &Path,
) -> Result<(), IsolationError> {
    use std::io::BufRead;
    if let Some(r) = resume.filter(|_| plan.hooks.runtime_create()) {
        writeln!(sync, "hooks").map_err(IsolationError::io("sync pipe"))?;
        let mut line = String::new();
        std::io::BufReader::new(r)
            .read_line(&mut line)
            .map_err(IsolationError::io("resume pipe"))?;
        if line.trim() != "go" {
            return Err(IsolationError::Setup(
                "create went away while running hooks".into(),
            ));
        }
    }
    if plan.hooks.create_container.is_empty() {
        return Ok(());
    }
    // As runc: the pid as the container sees it.
    let pid = nix::unistd::getpid().as_raw();
    let state =
        crate::container::spec_state(&plan.id, "creating", pid, &plan.bundle, &plan.annotations);
    crate::hooks::run_all(
        crate::hooks::Kind::CreateContainer,
        &plan.hooks.create_container,
        &state,
        Some(rootfs_view),
    )
    .map_err(|e| IsolationError::Setup(e.to_string()))
}

/// Isolates the sandbox process; returns its plan and the open /dev/kvm
/// (opened before the process becomes the container's user, who may not
/// open it: the VMM keeps only the descriptor).
fn prepare(
    dir: &Path,
    sync: &mut std::fs::File,
    resume: Option<std::fs::File>,
) -> Result<(Plan, std::fs::File), IsolationError> {
    let text = std::fs::read_to_string(dir.join("plan.json"))
        .map_err(IsolationError::io("reading plan.json"))?;
    let mut plan: Plan = serde_json::from_str(&text)
        .map_err(|e| IsolationError::Setup(format!("plan.json: {e}")))?;
    namespaces::enter(&plan)?;
    if plan.new_namespace(NsKind::Network) {
        loopback::up()?;
    }
    sysctl::write(&plan)?;
    let joined = sysctl::joined(&plan);
    plan.sysctl.extend(joined);
    if let Some(h) = &plan.hostname
        && plan.has_namespace(NsKind::Uts)
    {
        nix::unistd::sethostname(h).map_err(IsolationError::sys("sethostname"))?;
    }
    rootfs::pivot(&plan, dir, &mut |view| {
        hook_point(&plan, sync, resume.as_ref(), view)
    })?;
    let kvm = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .map_err(IsolationError::io("opening /dev/kvm"))?;
    userns::enter(&plan, sync, resume.as_ref())?;
    privileges::drop(&plan)?;
    Ok((plan, kvm))
}

/// Blocks until `start` opens the exec fifo, then hands it a byte and
/// removes the fifo, before the program can run: the fifo's presence is
/// what says "created" (`Container::status`). `start` removed it only
/// after reading the byte, so under load a program already running could
/// be taken for one not started, and `kill TERM` then ended its sandbox
/// with SIGKILL (`init_signals.rs`: 137 instead of 42 or 143, 1 run in 80).
/// Where the sandbox may not remove it, `start` still does, as before.
fn wait_for_start(state: &Path) -> std::io::Result<()> {
    let path = state.join("exec.fifo");
    let mut fifo = std::fs::OpenOptions::new().write(true).open(&path)?;
    fifo.write_all(b"0")?;
    // Quietly: this process's stderr is the program's from here on.
    let _ = std::fs::remove_file(&path);
    Ok(())
}

fn run(plan: &Plan, state: &Path, kvm: std::fs::File, debug: bool) -> i32 {
    let bind_mounts = plan.capabilities.iter().any(|c| c == "CAP_SYS_ADMIN");
    if let Err(e) = seccomp::apply(bind_mounts) {
        eprintln!("qrun: {}", crate::report::chain(&e));
        return 1;
    }
    let mut config = qvisor::SandboxConfig::new(plan.argv.clone());
    config.program = plan.program.clone();
    config.rootfs = rootfs::ROOTFS.into();
    config.memory = plan.memory;
    config.memory_at_least_minimum = true;
    config.cpus = plan.resources.vcpus();
    config.env = plan.env.clone();
    config.cwd = plan.cwd.clone();
    match &plan.hostname {
        Some(h) => config.hostname = h.clone(),
        // As under runc, a container without `hostname` has its UTS
        // namespace's name: a joined one's (the CRI's containers join their
        // pod's, which has the pod's hostname) or the one it copied.
        None => {
            if let Some(h) = nix::unistd::gethostname()
                .ok()
                .and_then(|h| h.into_string().ok())
            {
                config.hostname = h;
            }
        }
    }
    config.control_socket = Some(state.join("ctl.sock"));
    config.state_dir = Some(state.to_owned());
    config.log_level = if debug { 4 } else { 0 };
    config.seccomp = plan.seccomp.clone();
    config.kvm = Some(std::sync::Arc::new(kvm));
    // In a network namespace of its own (made or joined) the abstract
    // AF_UNIX names are the container's; in the host's they are tagged.
    config.private_abstract = !plan.has_namespace(NsKind::Network);
    // The program is the init of a pid namespace it makes, as under runc.
    // One that joins a namespace (the CRI's containers join the pause
    // container's) or stays in the host's is an ordinary process there:
    // no init semantics, so SIGTERM without a handler ends it.
    config.init = plan.new_namespace(NsKind::Pid);
    config.console = plan.terminal;
    config.creds = Some(plan.guest_creds());
    config.no_new_privs = plan.no_new_privs;
    config.sysctl = plan.sysctl.clone();
    config.devices = plan.devices.clone();
    if plan.new_namespace(NsKind::User) {
        config.id_maps = vec![
            userns::map_text(&plan.uid_mappings),
            userns::map_text(&plan.gid_mappings),
        ];
    }
    config.mounts = mountinfo::own();
    match qvisor::Sandbox::run(&config) {
        Ok(report) => report.status,
        Err(e) => {
            eprintln!("qrun: {}", crate::report::chain(&e));
            e.exit_status()
        }
    }
}
