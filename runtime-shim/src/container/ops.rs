//! `start`, `kill`, `delete`, `pause`, `resume` on an existing container.
//! Each checks the lifecycle table first, so a refused operation changes
//! nothing.

use std::io::Read;
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::time::{Duration, Instant};

use nix::fcntl::OFlag;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use qvisor::ctl::Request;

use super::lifecycle::{Op, check};
use super::signal::{SIGCONT, SIGKILL, SIGSTOP};
use super::{Container, ContainerError, Status, process};
use crate::cgroup;
use crate::hooks::{self, Kind};

/// How long `start` waits for the sandbox process to take the fifo.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a hibernation or wake may take (it writes or reads memory).
const CTL_TIMEOUT: Duration = Duration::from_secs(120);
/// Signals whose default action is to do nothing.
const IGNORED_BY_DEFAULT: &[i32] = &[17, 18, 23, 28];

/// Lets the sandbox process run the program.
pub fn start(c: &Container) -> Result<(), ContainerError> {
    check(c.id(), Op::Start, c.status())?;
    let path = c.exec_fifo();
    let fifo = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(OFlag::O_NONBLOCK.bits())
        .open(&path)
        .map_err(ContainerError::io(format!("opening {}", path.display())))?;
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        let mut fds = [PollFd::new(fifo.as_fd(), PollFlags::POLLIN)];
        let n = poll(&mut fds, PollTimeout::from(100u16)).map_err(ContainerError::sys("poll"))?;
        if n > 0 {
            break;
        }
        if !c.alive() {
            return Err(ContainerError::Sandbox(format!(
                "container {}: the sandbox process is gone",
                c.id()
            )));
        }
        if Instant::now() >= deadline {
            return Err(ContainerError::Sandbox(format!(
                "container {}: the sandbox process did not take the start signal",
                c.id()
            )));
        }
    }
    let mut byte = [0u8; 1];
    let got = (&fifo).read(&mut byte).unwrap_or(0);
    let _ = std::fs::remove_file(&path);
    if got != 1 {
        return Err(ContainerError::Sandbox(format!(
            "container {}: the sandbox process went away before starting",
            c.id()
        )));
    }
    let hooks = c.hooks();
    if !hooks.poststart.is_empty() {
        let state = super::spec_state(
            c.id(),
            Status::Running.as_str(),
            c.state.pid,
            &c.state.bundle,
            &c.state.annotations,
        );
        hooks::run_warn(Kind::Poststart, &hooks.poststart, &state);
    }
    Ok(())
}

fn host_kill(c: &Container, sig: i32) -> Result<(), ContainerError> {
    let signal = Signal::try_from(sig).map_err(ContainerError::sys(format!("signal {sig}")))?;
    nix::sys::signal::kill(Pid::from_raw(c.state.pid), signal)
        .map_err(ContainerError::sys(format!("kill {}", c.state.pid)))
}

/// Records `status` as the exit status unless the sandbox wrote one.
fn record_exit(c: &mut Container, status: i32) -> Result<(), ContainerError> {
    if c.exit_status().is_none() {
        c.state.exit_status = Some(status);
        c.save()?;
    }
    Ok(())
}

/// [`record_exit`] after this command's SIGKILL ended the sandbox. A
/// foreground `qrun run` deletes the container (its state directory with
/// it) as soon as the sandbox ends: then nothing is left to record, and
/// the kill still worked (runc answers 0 there too; `kill` used to say
/// "container not running" about 1 time in 8 in `init_signals.rs`). The
/// deletion may be half done when the write fails (state.json removed,
/// the directory not yet, as `remove_dir_retrying` waits out this
/// command's temporary file), so the state file is what is checked.
fn record_killed(c: &mut Container, status: i32) -> Result<(), ContainerError> {
    match record_exit(c, status) {
        Err(_) if !c.dir.join("state.json").exists() => Ok(()),
        r => r,
    }
}

/// Sends `sig` the container's way: SIGSTOP hibernates, SIGCONT wakes,
/// SIGKILL ends the sandbox process, others reach the program. With
/// `all` (`kill --all`), a stopped container is no error (as runc).
pub fn kill(c: &mut Container, sig: i32, all: bool) -> Result<(), ContainerError> {
    let status = c.status();
    check(c.id(), if all { Op::KillAll } else { Op::Kill }, status)?;
    if status == Status::Stopped {
        return Ok(());
    }
    let op = if all { Op::KillAll } else { Op::Kill };
    match deliver(c, sig, status) {
        // It stopped meanwhile: answer as for a stopped container.
        Err(_) if !c.alive() => check(c.id(), op, Status::Stopped).map_err(Into::into),
        r => r,
    }
}

fn deliver(c: &mut Container, sig: i32, status: Status) -> Result<(), ContainerError> {
    let ctl = |c: &Container, req| c.ctl(req, CTL_TIMEOUT);
    match (sig, status) {
        // Before start there is nothing to hibernate or wake: runc stops
        // or continues its init process and the container stays created.
        (SIGSTOP | SIGCONT, Status::Created) => Ok(()),
        (SIGSTOP, _) => {
            check(c.id(), Op::Hibernation, status)?;
            hibernation(c, Request::Hibernate, &["hibernated", "hibernating"])
        }
        (SIGCONT, _) => {
            check(c.id(), Op::Hibernation, status)?;
            hibernation(c, Request::Wake, &["running", "waking"])
        }
        (SIGKILL, _) => {
            host_kill(c, SIGKILL)?;
            if status == Status::Paused {
                let _ = c.cgroups().freeze(false);
            }
            process::wait_gone(c.state.pid, c.state.pid_start_time, Duration::from_secs(5));
            record_killed(c, 128 + SIGKILL)
        }
        (_, Status::Created) => {
            // The program has not started: a signal that would end it
            // ends the sandbox; one it would ignore does nothing.
            if IGNORED_BY_DEFAULT.contains(&sig) {
                return Ok(());
            }
            host_kill(c, SIGKILL)?;
            process::wait_gone(c.state.pid, c.state.pid_start_time, Duration::from_secs(5));
            record_killed(c, 128 + sig)
        }
        // Frozen: the VMM cannot answer; the signal waits in the host.
        (_, Status::Paused) if !c.hibernate_pause_marker().exists() => host_kill(c, sig),
        _ => ctl(c, Request::Signal(sig)).map(drop),
    }
}

/// Asks the VMM to hibernate or wake. Like SIGSTOP to a stopped process
/// or SIGCONT to a running one, asking for the state the sandbox is
/// already in (or moving to, `done`) is a no-op success: a connection
/// may have woken it since, or another `kill` hibernated it.
fn hibernation(c: &Container, req: Request, done: &[&str]) -> Result<(), ContainerError> {
    match c.ctl(req, CTL_TIMEOUT) {
        Ok(_) => Ok(()),
        Err(
            e @ ContainerError::Control {
                source: qvisor::ctl::CtlError::Refused(_),
                ..
            },
        ) => match c.ctl(Request::Status, Duration::from_secs(2)) {
            Ok(s) if done.contains(&s.state.as_str()) => Ok(()),
            _ => Err(e),
        },
        Err(e) => Err(e),
    }
}

/// Removes the container; a running one only with `force` (it is killed).
pub fn delete(c: &Container, force: bool) -> Result<(), ContainerError> {
    let status = c.status();
    check(
        c.id(),
        if force { Op::ForceDelete } else { Op::Delete },
        status,
    )?;
    if status != Status::Stopped {
        host_kill(c, SIGKILL)?;
        if status == Status::Paused {
            let _ = c.cgroups().freeze(false);
        }
        if !process::wait_gone(c.state.pid, c.state.pid_start_time, Duration::from_secs(5)) {
            return Err(ContainerError::Sandbox(format!(
                "container {}: the sandbox process {} does not die",
                c.id(),
                c.state.pid
            )));
        }
    }
    let hooks = c.hooks();
    if c.state.cgroup_dirs.is_empty() {
        cgroup::remove_dirs(&c.state.cgroups);
    } else {
        cgroup::remove_dirs(&c.state.cgroup_dirs);
    }
    remove_dir_retrying(&c.dir)
        .map_err(ContainerError::io(format!("removing {}", c.dir.display())))?;
    if !hooks.poststop.is_empty() {
        // No pid: the spec asks for one only while created or running,
        // and runc gives poststop hooks none.
        let mut state = super::spec_state(
            c.id(),
            Status::Stopped.as_str(),
            0,
            &c.state.bundle,
            &c.state.annotations,
        );
        if let Some(o) = state.as_object_mut() {
            o.remove("pid");
        }
        hooks::run_warn(Kind::Poststop, &hooks.poststop, &state);
    }
    Ok(())
}

/// Pauses the container: the cgroup freezer, or with the annotation
/// `qrun.hibernate-on-pause` hibernation (the state says paused until
/// `resume`, whose wake the marker file records).
pub fn pause(c: &Container) -> Result<(), ContainerError> {
    check(c.id(), Op::Pause, c.status())?;
    if !c.hibernates_on_pause() {
        return Ok(c.cgroups().freeze(true)?);
    }
    hibernation(c, Request::Hibernate, &["hibernated", "hibernating"])?;
    let marker = c.hibernate_pause_marker();
    std::fs::write(&marker, b"hibernated\n")
        .map_err(ContainerError::io(format!("writing {}", marker.display())))
}

/// Resumes a paused container: thaws it, or wakes a hibernated one.
pub fn resume(c: &Container) -> Result<(), ContainerError> {
    check(c.id(), Op::Resume, c.status())?;
    let marker = c.hibernate_pause_marker();
    if !marker.exists() {
        return Ok(c.cgroups().freeze(false)?);
    }
    hibernation(c, Request::Wake, &["running", "waking"])?;
    std::fs::remove_file(&marker)
        .map_err(ContainerError::io(format!("removing {}", marker.display())))
}

/// `remove_dir_all`, retried for a moment while it finds the directory not
/// empty: a concurrent `qrun kill` or `state` may be writing its temporary
/// state file into it as the container ends (`run` then failed with
/// "Directory not empty" instead of the program's status).
fn remove_dir_retrying(dir: &std::path::Path) -> std::io::Result<()> {
    let mut tries = 0;
    loop {
        match std::fs::remove_dir_all(dir) {
            Err(e) if e.raw_os_error() == Some(libc::ENOTEMPTY) && tries < 50 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && tries > 0 => return Ok(()),
            r => return r,
        }
    }
}
