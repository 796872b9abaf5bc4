//! `qrun exec [--process FILE] [--detach] [--pid-file F] [--env K=V]...
//! [--cwd DIR] [--user UID[:GID]] [--additional-gids G]... <id> [CMD ARGS...]`:
//! runs another process in a running container, as `runc exec` (docs/exec.md).
//!
//! The process starts inside the guest (a task of the guest kernel whose
//! parent is nobody there); its stdin, stdout and stderr are this
//! command's own, passed to the sandbox over its control socket. Without
//! `--detach` this command waits and exits with the process's status
//! (128 + N for a signal), forwarding the signals it gets to it. With
//! `--detach` a waiter process (`qrun exec-wait`, a child of this one)
//! takes over the connection and this command returns at once: the waiter
//! exits with the process's status and forwards its signals, and killing
//! it kills the process, so the pid written to `--pid-file` behaves as
//! the process's own for a caller that waits for it or signals it
//! (containerd's shim reaps it as an orphan of `runc exec`).
//!
//! Defaults come from the bundle's `config.json` `process` (env, cwd,
//! user), as runc's; errors are runc's (exit status 255).

use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use qvisor::exec::{ExecClient, ExecError, ExecSpec};
use serde_json::Value;

use super::{CliError, Globals};
use crate::cli::{self, Flag};
use crate::container::{Container, ContainerError, Status};

const FLAGS: &[Flag] = &[
    Flag::value("process", &["p"]),
    Flag::switch("detach", &["d"]),
    Flag::value("pid-file", &[]),
    Flag::value("env", &["e"]),
    Flag::value("cwd", &[]),
    Flag::value("user", &["u"]),
    Flag::value("additional-gids", &["g"]),
    Flag::switch("tty", &["t"]),
    Flag::value("console-socket", &[]),
    Flag::switch("ignore-paused", &[]),
    // Accepted as runc does; they mean nothing for a guest process.
    Flag::value("process-label", &[]),
    Flag::value("apparmor", &[]),
    Flag::switch("no-new-privs", &[]),
    Flag::value("cap", &["c"]),
    Flag::value("preserve-fds", &[]),
    Flag::value("cgroup", &[]),
];

/// runc's exit status for every `exec` failure.
const FAILED: i32 = 255;

/// Signals forwarded to the process (runc's signal proxy forwards every
/// catchable one; these are the ones a caller sends).
const FORWARDED: &[Signal] = &[
    Signal::SIGHUP,
    Signal::SIGINT,
    Signal::SIGQUIT,
    Signal::SIGTERM,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGALRM,
    Signal::SIGWINCH,
];

pub fn run(g: &Globals, args: &[String]) -> Result<i32, CliError> {
    let p = cli::parse_head(args, FLAGS)?;
    let Some((id, cmd)) = p.positionals.split_first() else {
        return Err(CliError::Usage(
            "usage: exec [flags] <id> [command args...]".into(),
        ));
    };
    match exec(g, &p, id, cmd) {
        Ok(status) => Ok(status),
        Err(msg) => {
            eprintln!("qrun exec: exec failed: {msg}");
            g.log.write("error", &format!("exec failed: {msg}"));
            Ok(FAILED)
        }
    }
}

/// `qrun exec-wait` (internal): the detached waiter; its stdin is the exec
/// connection.
pub fn run_waiter() -> i32 {
    let stream = match std::io::stdin().as_fd().try_clone_to_owned() {
        Ok(fd) => UnixStream::from(fd),
        Err(_) => return FAILED,
    };
    // Nothing of the caller's stays open here (its pipes see EOF when the
    // process closes them).
    if let Ok(null) = std::fs::File::open("/dev/null") {
        let _ = nix::unistd::dup2_stdin(&null);
    }
    wait(ExecClient::from_stream(stream))
}

/// A terminal for the process: the master goes to the console socket,
/// the slave (raw: the guest's line discipline does echo and signals) is
/// its stdio.
fn terminal(socket: &std::path::Path) -> Result<OwnedFd, String> {
    use nix::sys::termios::{SetArg, cfmakeraw, tcgetattr, tcsetattr};
    let slave = crate::container::console(socket).map_err(|e| e.to_string())?;
    let mut t = tcgetattr(&slave).map_err(|e| format!("terminal: {e}"))?;
    cfmakeraw(&mut t);
    tcsetattr(&slave, SetArg::TCSANOW, &t).map_err(|e| format!("terminal: {e}"))?;
    Ok(slave)
}

fn exec(g: &Globals, p: &cli::Parsed, id: &str, cmd: &[String]) -> Result<i32, String> {
    let c = match Container::load(&g.root, id) {
        Ok(c) => c,
        Err(ContainerError::NotFound(_)) => return Err("container does not exist".into()),
        Err(e) => return Err(e.to_string()),
    };
    match c.status() {
        Status::Stopped => return Err("cannot exec in a stopped container".into()),
        Status::Paused if !p.has("ignore-paused") => {
            return Err(
                "cannot exec in a paused container (use --ignore-paused to override)".into(),
            );
        }
        _ => {}
    }
    let spec = spec(&c, p, cmd)?;
    let detach = p.has("detach");
    let terminal = match (spec.terminal, p.value("console-socket")) {
        (true, Some(sock)) => Some(terminal(std::path::Path::new(sock))?),
        (true, None) => {
            return Err(
                "--tty needs --console-socket (qrun exec makes no terminal of its own)".into(),
            );
        }
        (false, Some(_)) => {
            return Err("cannot use console socket if runc will not provide a tty".into());
        }
        (false, None) => None,
    };
    let (i, o, e) = (std::io::stdin(), std::io::stdout(), std::io::stderr());
    let stdio = match &terminal {
        Some(slave) => [slave.as_fd(); 3],
        None => [i.as_fd(), o.as_fd(), e.as_fd()],
    };
    let socket = c.ctl_path().map_err(|e| e.to_string())?;
    c.wait_for_ctl(&socket.0);
    let arg0 = spec.args.first().cloned().unwrap_or_default();
    let client = match start_when_listening(&c, &socket.0, &spec, stdio) {
        Ok((client, _pid)) => client,
        Err(ExecError::Refused {
            message,
            errno,
            cwd,
        }) => {
            return Err(refusal(&spec.cwd, &arg0, &message, errno, cwd));
        }
        Err(e) => return Err(format!("unable to start container process: {e}")),
    };
    drop(socket);
    if !detach {
        if let Some(f) = p.value("pid-file") {
            write_pid_file(f, std::process::id())?;
        }
        return Ok(wait(client));
    }
    let exe = std::env::current_exe().map_err(|e| format!("finding qrun: {e}"))?;
    let waiter = Command::new(exe)
        .arg("exec-wait")
        .stdin(Stdio::from(OwnedFd::from(client.into_stream())))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("starting the exec waiter: {e}"))?;
    if let Some(f) = p.value("pid-file") {
        write_pid_file(f, waiter.id())?;
    }
    Ok(0)
}

/// runc's wording for a process the guest could not start.
/// `qvisor::exec::start`, retried for up to two seconds while the sandbox
/// process lives when the socket is missing or refuses: right after
/// `start` the VMM may still be binding it (critest execs within a
/// millisecond of the start).
fn start_when_listening(
    c: &Container,
    socket: &std::path::Path,
    spec: &ExecSpec,
    stdio: [std::os::fd::BorrowedFd<'_>; 3],
) -> Result<(ExecClient, u32), ExecError> {
    use std::io::ErrorKind::{ConnectionRefused, NotFound};
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        match qvisor::exec::start(socket, spec, stdio) {
            Err(ExecError::Io(_, e))
                if matches!(e.kind(), NotFound | ConnectionRefused)
                    && std::time::Instant::now() < deadline
                    && c.alive() =>
            {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            r => return r,
        }
    }
}

fn refusal(cwd: &str, arg0: &str, message: &str, errno: i32, cwd_failed: bool) -> String {
    let what = if cwd_failed {
        format!(
            "chdir to cwd ({cwd:?}) set in config.json failed: {}",
            strerror(errno, message)
        )
    } else if errno == libc::ENOENT && !arg0.contains('/') {
        format!("exec: {arg0:?}: executable file not found in $PATH")
    } else if errno == libc::ENOENT {
        format!("exec: {arg0:?}: stat {arg0}: no such file or directory")
    } else {
        format!("exec: {arg0:?}: {}", strerror(errno, message))
    };
    format!("unable to start container process: {what}")
}

/// Go's lower-case errno text (`permission denied`).
fn strerror(errno: i32, fallback: &str) -> String {
    let text = std::io::Error::from_raw_os_error(errno).to_string();
    let text = text.split(" (os error").next().unwrap_or(fallback);
    let mut s = text.to_owned();
    if let Some(first) = s.get_mut(..1) {
        first.make_ascii_lowercase();
    }
    s
}

fn write_pid_file(path: &str, pid: u32) -> Result<(), String> {
    // As runc: written whole, then renamed into place.
    let tmp = format!("{path}.tmp");
    std::fs::write(&tmp, pid.to_string())
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| format!("writing pid file {path}: {e}"))
}

/// Waits for the process's exit, forwarding signals; returns its status.
fn wait(mut client: ExecClient) -> i32 {
    let mut set = SigSet::empty();
    for s in FORWARDED {
        set.add(*s);
    }
    let sfd = set
        .thread_block()
        .ok()
        .and_then(|()| SignalFd::with_flags(&set, SfdFlags::SFD_CLOEXEC).ok());
    loop {
        let ready = match &sfd {
            Some(sfd) => {
                let mut fds = [
                    PollFd::new(client.as_fd(), PollFlags::POLLIN),
                    PollFd::new(sfd.as_fd(), PollFlags::POLLIN),
                ];
                if poll(&mut fds, PollTimeout::NONE).is_err() {
                    continue;
                }
                let conn = fds[0].any().unwrap_or(true);
                let sig = fds[1].any().unwrap_or(false);
                (conn, sig)
            }
            None => (true, false),
        };
        if ready.1
            && let Some(Ok(Some(info))) = sfd.as_ref().map(SignalFd::read_signal)
        {
            let _ = client.signal(info.ssi_signo as i32);
        }
        if ready.0 {
            return match client.wait() {
                Ok(status) => status,
                // The sandbox went away with the process in it: it was
                // killed with the container (runc's exec reports 137).
                Err(ExecError::Closed) => 128 + libc::SIGKILL,
                Err(e) => {
                    let _ = writeln!(std::io::stderr(), "qrun exec: {e}");
                    FAILED
                }
            };
        }
    }
}

/// The process to run: `--process FILE`, or the container's process with
/// the command line's command and overrides.
fn spec(c: &Container, p: &cli::Parsed, cmd: &[String]) -> Result<ExecSpec, String> {
    let process: Value = match p.value("process") {
        Some(f) => {
            let text = std::fs::read(f).map_err(|e| format!("reading {f}: {e}"))?;
            serde_json::from_slice(&text).map_err(|e| format!("parsing {f}: {e}"))?
        }
        None => {
            let config = c.state.bundle.join("config.json");
            let v: Value = std::fs::read(&config)
                .ok()
                .and_then(|t| serde_json::from_slice(&t).ok())
                .unwrap_or_default();
            let mut process = v["process"].clone();
            if process.is_null() {
                process = Value::Object(Default::default());
            }
            process["args"] = cmd.iter().map(|a| Value::from(a.as_str())).collect();
            process
        }
    };
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut spec = ExecSpec {
        args: strings(&process["args"]),
        env: strings(&process["env"]),
        cwd: process["cwd"].as_str().unwrap_or("/").to_owned(),
        uid: process["user"]["uid"].as_u64().unwrap_or(0) as u32,
        gid: process["user"]["gid"].as_u64().unwrap_or(0) as u32,
        additional_gids: process["user"]["additionalGids"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|g| g.as_u64().map(|g| g as u32))
                    .collect()
            })
            .unwrap_or_default(),
        terminal: p.has("tty") || process["terminal"].as_bool() == Some(true),
    };
    if spec.args.is_empty() {
        return Err("args must not be empty".into());
    }
    for e in p.values("env") {
        set_env(&mut spec.env, e);
    }
    if let Some(cwd) = p.value("cwd") {
        spec.cwd = cwd.to_owned();
    }
    if !spec.cwd.starts_with('/') {
        return Err(format!("cwd {:?} is not an absolute path", spec.cwd));
    }
    if let Some(user) = p.value("user") {
        let (u, g) = user.split_once(':').unwrap_or((user, "0"));
        spec.uid = u
            .parse()
            .map_err(|_| format!("invalid user {user:?} (uid[:gid])"))?;
        spec.gid = g
            .parse()
            .map_err(|_| format!("invalid user {user:?} (uid[:gid])"))?;
    }
    for g in p.values("additional-gids") {
        spec.additional_gids
            .push(g.parse().map_err(|_| format!("invalid group {g:?}"))?);
    }
    if !spec.env.iter().any(|e| e.starts_with("HOME=")) {
        // runc sets HOME from the user's passwd entry, "/" without one.
        spec.env.push("HOME=/".into());
    }
    Ok(spec)
}

/// Sets `K=V` in `env`, replacing an earlier `K`.
fn set_env(env: &mut Vec<String>, kv: &str) {
    let key = kv.split_once('=').map_or(kv, |(k, _)| k);
    env.retain(|e| e.split_once('=').map_or(e.as_str(), |(k, _)| k) != key);
    env.push(kv.to_owned());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_overrides_replace() {
        let mut env = vec!["PATH=/bin".to_string(), "A=1".to_string()];
        set_env(&mut env, "A=2");
        set_env(&mut env, "B=3");
        assert_eq!(env, ["PATH=/bin", "A=2", "B=3"]);
    }

    #[test]
    fn refusals_read_as_runcs() {
        assert_eq!(
            refusal("/", "nosuch", "", libc::ENOENT, false),
            "unable to start container process: exec: \"nosuch\": executable file not found in $PATH"
        );
        assert_eq!(
            refusal("/", "/bin", "", libc::EACCES, false),
            "unable to start container process: exec: \"/bin\": permission denied"
        );
        assert_eq!(
            refusal("/nope", "true", "", libc::ENOENT, true),
            "unable to start container process: chdir to cwd (\"/nope\") set in config.json failed: no such file or directory"
        );
    }
}
