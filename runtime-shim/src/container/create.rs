//! `create`: plan the sandbox from the bundle, make the state directory
//! and cgroups, spawn the sandbox process and wait until it is isolated
//! and waiting for `start` (see `isolation` for the other side).
//!
//! Nothing is left behind when create fails: the state directory, the
//! cgroups and the sandbox process go again.

use std::io::{BufRead, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use nix::fcntl::{FcntlArg, FdFlag, OFlag, fcntl};
use nix::sys::stat::Mode;

use super::state_file::{StateFile, VERSION, write_atomic};
use super::{Container, ContainerError, validate_id};
use crate::cgroup::{self, Cgroups};
use crate::isolation::namespaces;
use crate::plan::NsKind;
use crate::{bundle, timefmt};

pub struct CreateOptions<'a> {
    pub root: &'a Path,
    pub id: &'a str,
    pub bundle: &'a Path,
    pub pid_file: Option<&'a Path>,
    pub console_socket: Option<&'a Path>,
    pub debug: bool,
    /// The runtime log, passed on to the sandbox process.
    pub log: &'a crate::oci_log::Log,
}

/// Creates the container; returns it and the sandbox process (a child of
/// this process, which `run` waits for).
pub fn create(o: &CreateOptions) -> Result<(Container, Child), ContainerError> {
    validate_id(o.id)?;
    let plan = bundle::load(o.bundle, o.id)?;
    match (plan.terminal, o.console_socket) {
        (true, None) => return Err(bundle::BundleError::TerminalWithoutConsole.into()),
        (false, Some(_)) => return Err(bundle::BundleError::ConsoleWithoutTerminal.into()),
        _ => {}
    }
    std::fs::create_dir_all(o.root)
        .map_err(ContainerError::io(format!("making {}", o.root.display())))?;
    let dir = o.root.join(o.id);
    match std::fs::create_dir(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(ContainerError::Exists(o.id.to_owned()));
        }
        Err(e) => return Err(ContainerError::io(format!("making {}", dir.display()))(e)),
    }
    let mut made_cgroups = Vec::new();
    let mut child = None;
    let result = create_in(o, &plan, &dir, &mut made_cgroups, &mut child);
    if result.is_err() {
        if let Some(c) = child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
        cgroup::remove_dirs(&made_cgroups);
        let _ = std::fs::remove_dir_all(&dir);
    }
    let container = result?;
    Ok((container, child.expect("set when create_in succeeds")))
}

fn create_in(
    o: &CreateOptions,
    plan: &crate::plan::Plan,
    dir: &Path,
    made_cgroups: &mut Vec<PathBuf>,
    child_slot: &mut Option<Child>,
) -> Result<Container, ContainerError> {
    let sandbox = dir.join("sandbox");
    for d in [&sandbox, &dir.join("newroot")] {
        std::fs::create_dir(d).map_err(ContainerError::io(format!("making {}", d.display())))?;
    }
    let fifo = sandbox.join("exec.fifo");
    nix::unistd::mkfifo(&fifo, Mode::from_bits_truncate(0o600))
        .map_err(ContainerError::sys("making exec.fifo"))?;
    let (host_uid, host_gid) = plan
        .host_user()
        .ok_or_else(|| ContainerError::Sandbox("process.user is not mapped".into()))?;
    if host_uid != 0 || host_gid != 0 {
        // The VMM runs as the container's user and writes here.
        let (u, g) = (Some(host_uid), Some(host_gid));
        for p in [&sandbox, &fifo] {
            std::os::unix::fs::chown(p, u, g)
                .map_err(ContainerError::io(format!("chown {}", p.display())))?;
        }
    }
    let plan_text = serde_json::to_vec(plan).map_err(|e| ContainerError::Io {
        what: "encoding plan.json".into(),
        source: std::io::Error::other(e),
    })?;
    write_atomic(&dir.join("plan.json"), &plan_text)?;

    let path = cgroup::container_path(plan.cgroups_path.as_deref(), o.id)?;
    let (cgroups, made) = Cgroups::create(&path, &plan.resources)?;
    *made_cgroups = made;

    namespaces::enter_pid_for_children(plan)
        .map_err(|e| ContainerError::Sandbox(format!("pid namespace: {e}")))?;
    let stdio = match (plan.terminal, o.console_socket) {
        (true, Some(sock)) => Some(console(sock)?),
        _ => None,
    };
    let (sync_r, sync_w) =
        nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(ContainerError::sys("pipe"))?;
    // The sandbox process inherits the write end (and reopens it).
    fcntl(&sync_w, FcntlArg::F_SETFD(FdFlag::empty())).map_err(ContainerError::sys("fcntl"))?;
    // With prestart or createRuntime hooks, the sandbox process waits on
    // this pipe for them (it inherits the read end).
    // So does it, in a user namespace of its own, for its mappings
    // (`isolation::userns`).
    let resume = if plan.hooks.runtime_create() || plan.new_namespace(NsKind::User) {
        let (r, w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(ContainerError::sys("pipe"))?;
        fcntl(&r, FcntlArg::F_SETFD(FdFlag::empty())).map_err(ContainerError::sys("fcntl"))?;
        Some((r, w))
    } else {
        None
    };
    let exe = std::env::current_exe().map_err(ContainerError::io("finding the qrun binary"))?;
    let mut cmd = Command::new(exe);
    if o.debug {
        cmd.arg("--debug");
    }
    // The sandbox's VMM logs (hibernation, warnings) go to the runtime log.
    if let Some(path) = &o.log.path {
        let format = if o.log.json { "json" } else { "text" };
        cmd.arg("--log").arg(path).arg("--log-format").arg(format);
    }
    cmd.arg("sandbox-init")
        .arg(dir)
        .arg("--sync-fd")
        .arg(sync_w.as_raw_fd().to_string());
    if let Some((r, _)) = &resume {
        cmd.arg("--resume-fd").arg(r.as_raw_fd().to_string());
    }
    if let Some(slave) = &stdio {
        let dup = |f: &OwnedFd| f.try_clone().map(Stdio::from);
        let io = ContainerError::io("duplicating the terminal");
        let (i, out, err) = (dup(slave), dup(slave), dup(slave));
        cmd.stdin(i.map_err(io)?);
        cmd.stdout(out.map_err(ContainerError::io("duplicating the terminal"))?);
        cmd.stderr(err.map_err(ContainerError::io("duplicating the terminal"))?);
    }
    let child = cmd
        .spawn()
        .map_err(ContainerError::io("starting the sandbox process"))?;
    drop(sync_w);
    drop(stdio);
    let resume = resume.map(|(_, w)| w);
    let pid = i32::try_from(child.id()).map_err(|_| ContainerError::Sandbox("bad pid".into()))?;
    *child_slot = Some(child);
    // Hooks run in the runtime's pid namespace, not the container's.
    namespaces::leave_pid_for_children(plan)
        .map_err(|e| ContainerError::Sandbox(format!("pid namespace: {e}")))?;
    cgroups.add(pid)?;

    let mut sync = std::io::BufReader::new(std::fs::File::from(sync_r));
    let mut resume = resume.map(std::fs::File::from);
    let mut answer = String::new();
    let _ = sync.read_line(&mut answer);
    // Requests of the sandbox process during its setup, each answered on
    // the resume pipe: the runtime's hooks, then a user namespace's maps.
    while let Some(w) = resume.as_mut() {
        match answer.trim() {
            "hooks" => {
                runtime_hooks(o.id, plan, pid)?;
                let _ = w.write_all(b"go\n");
            }
            "userns" => {
                let reply = match crate::isolation::userns::write_maps(plan, pid) {
                    Ok(()) => "go".to_owned(),
                    Err(e) => format!("error: {e}"),
                };
                let _ = writeln!(w, "{reply}");
            }
            _ => break,
        }
        answer.clear();
        let _ = sync.read_line(&mut answer);
    }
    match answer.trim() {
        "ok" => {}
        msg => {
            let msg = msg.strip_prefix("error: ").unwrap_or(msg);
            let msg = if msg.is_empty() {
                "the sandbox process died during setup"
            } else {
                msg
            };
            return Err(ContainerError::Sandbox(format!("sandbox setup: {msg}")));
        }
    }
    let (start, _) = super::process::stat(pid)
        .ok_or_else(|| ContainerError::Sandbox("the sandbox process vanished".into()))?;
    let state = StateFile {
        version: VERSION,
        id: o.id.to_owned(),
        pid,
        pid_start_time: start,
        bundle: plan.bundle.clone(),
        rootfs: plan.rootfs.clone(),
        created: timefmt::rfc3339_now(),
        owner: String::new(),
        annotations: plan.annotations.clone(),
        cgroups: cgroups.dirs().to_vec(),
        cgroup_dirs: made_cgroups.clone(),
        exit_status: None,
    };
    let container = Container {
        dir: dir.to_owned(),
        state,
    };
    container.save()?;
    if let Some(p) = o.pid_file {
        write_atomic(p, pid.to_string().as_bytes())?;
    }
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711));
    Ok(container)
}

/// The prestart and createRuntime hooks (in that order, as runc), while
/// the sandbox process `pid` waits before pivot_root.
fn runtime_hooks(id: &str, plan: &crate::plan::Plan, pid: i32) -> Result<(), ContainerError> {
    use crate::hooks::{Kind, run_all};
    let state = super::spec_state(id, "creating", pid, &plan.bundle, &plan.annotations);
    run_all(Kind::Prestart, &plan.hooks.prestart, &state, None)?;
    run_all(
        Kind::CreateRuntime,
        &plan.hooks.create_runtime,
        &state,
        None,
    )?;
    Ok(())
}

/// A pseudo-terminal for the container (or a `qrun exec --tty` process):
/// the master goes to the console socket (as runc sends it), the slave
/// becomes the stdio (the VMM relays it to a guest pty, docs/terminal.md).
pub fn console(socket: &Path) -> Result<OwnedFd, ContainerError> {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    let pty = nix::pty::openpty(None, None).map_err(ContainerError::sys("openpty"))?;
    let stream = std::os::unix::net::UnixStream::connect(socket).map_err(ContainerError::io(
        format!("console socket {}", socket.display()),
    ))?;
    let name = b"/dev/ptmx";
    let iov = [std::io::IoSlice::new(name)];
    let fds = [pty.master.as_raw_fd()];
    sendmsg::<()>(
        stream.as_raw_fd(),
        &iov,
        &[ControlMessage::ScmRights(&fds)],
        MsgFlags::empty(),
        None,
    )
    .map_err(ContainerError::sys(
        "sending the terminal to the console socket",
    ))?;
    Ok(pty.slave)
}
