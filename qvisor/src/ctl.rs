//! The sandbox's control socket: how `qrun` (and tests) talk to a running
//! sandbox process.
//!
//! Protocol: a client connects to the Unix stream socket at
//! [`crate::SandboxConfig::control_socket`], writes one request line and
//! reads one response line, then the connection closes.
//!
//! ```text
//! request  = "status" | "hibernate" | "wake" | "signal " <1..=64>
//! response = JSON object: {"ok": true, "status": Status}
//!                       | {"ok": false, "error": "<message>"}
//! ```
//! A request line is at most [`MAX_REQUEST`] bytes, but for `exec`
//! ([`crate::exec`]), whose connection stays open until its process ends.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::control::ControlChannel;
use crate::exec::{ExecSpec, Execs};

/// Longest request line a server reads.
pub const MAX_REQUEST: u64 = 256;

/// A control request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// Report [`Status`].
    Status,
    /// Deflate the sandbox (DESIGN.md "Hibernation").
    Hibernate,
    /// Bring a hibernated sandbox back.
    Wake,
    /// Send a signal (Linux number) to the container's program.
    Signal(i32),
}

impl Request {
    /// The request's line on the wire, without the newline.
    pub fn encode(&self) -> String {
        match self {
            Self::Status => "status".into(),
            Self::Hibernate => "hibernate".into(),
            Self::Wake => "wake".into(),
            Self::Signal(n) => format!("signal {n}"),
        }
    }

    /// Parses one request line.
    pub fn parse(line: &str) -> Result<Self, String> {
        let line = line.trim();
        match line {
            "status" => Ok(Self::Status),
            "hibernate" => Ok(Self::Hibernate),
            "wake" => Ok(Self::Wake),
            _ => {
                let Some(n) = line.strip_prefix("signal ") else {
                    return Err(format!("unknown request {line:?}"));
                };
                match n.trim().parse::<i32>() {
                    Ok(n) if (1..=64).contains(&n) => Ok(Self::Signal(n)),
                    _ => Err(format!("bad signal number {n:?}")),
                }
            }
        }
    }
}

/// What a sandbox reports about itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// `running`, `hibernating`, `hibernated` or `waking`.
    pub state: String,
    /// Bytes written to the swap and REAP files by the last hibernation.
    pub swapped_out_bytes: u64,
    /// Bytes read back from them since the last wake began.
    pub read_back_bytes: u64,
    /// Swap-in faults since the last wake.
    pub swap_faults: u64,
    /// Hibernations completed.
    pub hibernations: u64,
    /// How long the last hibernation took, request to commit (µs).
    #[serde(default)]
    pub hibernate_us: u64,
    /// How long the last wake took (REAP read included, µs).
    #[serde(default)]
    pub wake_us: u64,
    /// Bytes the last hibernation wrote to the REAP file.
    #[serde(default)]
    pub reap_bytes: u64,
    /// Bytes of free guest memory the last wake faulted back in (it was
    /// resident when the hibernation dropped it).
    #[serde(default)]
    pub warm_free_bytes: u64,
}

#[derive(Debug, Serialize, Deserialize)]
struct Response {
    ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    status: Option<Status>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// Why a control request failed.
#[derive(Debug, Error)]
pub enum CtlError {
    /// The socket could not be reached or the exchange broke.
    #[error("control socket {path}")]
    Io {
        /// The socket path.
        path: String,
        /// What went wrong.
        #[source]
        source: std::io::Error,
    },
    /// The sandbox closed the connection without answering (it ended, or
    /// was killed, while serving the request).
    #[error(
        "control socket {0}: the sandbox closed the connection without an answer (did it exit?)"
    )]
    Closed(String),
    /// The sandbox answered with something that is not a response.
    #[error("control socket {0}: malformed response")]
    Malformed(String),
    /// The sandbox refused the request.
    #[error("{0}")]
    Refused(String),
}

/// Sends `request` to the sandbox listening at `path` and waits (at most
/// `timeout`) for its answer.
pub fn request(path: &Path, request: Request, timeout: Duration) -> Result<Status, CtlError> {
    let io = |source| CtlError::Io {
        path: path.display().to_string(),
        source,
    };
    let mut stream = UnixStream::connect(path).map_err(io)?;
    stream.set_read_timeout(Some(timeout)).map_err(io)?;
    stream.set_write_timeout(Some(timeout)).map_err(io)?;
    stream
        .write_all(format!("{}\n", request.encode()).as_bytes())
        .map_err(io)?;
    let mut line = String::new();
    let read = BufReader::new(stream.take(64 * 1024)).read_line(&mut line);
    if let Err(e) = read {
        if e.kind() != std::io::ErrorKind::ConnectionReset {
            return Err(io(e));
        }
        line.clear();
    }
    if line.is_empty() {
        return Err(CtlError::Closed(path.display().to_string()));
    }
    let response: Response =
        serde_json::from_str(&line).map_err(|_| CtlError::Malformed(path.display().to_string()))?;
    match response {
        Response {
            ok: true,
            status: Some(s),
            ..
        } => Ok(s),
        Response { error: Some(e), .. } => Err(CtlError::Refused(e)),
        _ => Err(CtlError::Malformed(path.display().to_string())),
    }
}

/// What the control thread does with an `exec` request.
pub(crate) struct ExecHandler<'a> {
    pub execs: &'a Execs,
    /// Tells the guest orders wait (waking it if it is hibernated).
    pub post: &'a dyn Fn(),
}

/// Reads one request from `stream` and answers it with `handle` (and
/// closes), or hands an `exec` over to `exec`. Needs no fd but the
/// connection's (and an exec's three).
fn serve_one(
    stream: UnixStream,
    handle: &mut dyn FnMut(Request) -> Result<Status, String>,
    exec: &ExecHandler<'_>,
) {
    let _ = stream.set_read_timeout(Some(crate::exec::READ_TIMEOUT));
    let result = match crate::exec::read_request(&stream) {
        Ok((line, fds)) => {
            let line = String::from_utf8_lossy(&line).into_owned();
            if let Some(json) = line.strip_prefix("exec ") {
                match serde_json::from_str::<ExecSpec>(json) {
                    Ok(spec) if !spec.args.is_empty() => {
                        log::info!("control request: exec {:?}", spec.args);
                        exec.execs.submit(stream, spec, fds);
                        (exec.post)();
                        return;
                    }
                    Ok(_) => Err("exec: args must not be empty".into()),
                    Err(e) => Err(format!("exec: bad process: {e}")),
                }
            } else if line.len() as u64 > MAX_REQUEST {
                Err("request too long".into())
            } else {
                Request::parse(&line).and_then(|r| {
                    log::info!("control request: {}", r.encode());
                    handle(r)
                })
            }
        }
        Err(e) => Err(format!("reading request: {e}")),
    };
    let response = match result {
        Ok(status) => Response {
            ok: true,
            status: Some(status),
            error: None,
        },
        Err(e) => Response {
            ok: false,
            status: None,
            error: Some(e),
        },
    };
    let mut stream = stream;
    if let Ok(text) = serde_json::to_string(&response) {
        let _ = stream.write_all(format!("{text}\n").as_bytes());
    }
}

/// Serves control requests on `listener` with `handle` until `channel`
/// shuts down, and watches the connections of running execs; the socket
/// file is removed at the end. `answered` runs after each answer.
pub(crate) fn serve(
    listener: &UnixListener,
    path: &Path,
    channel: &ControlChannel,
    handle: &mut dyn FnMut(Request) -> Result<Status, String>,
    exec: &ExecHandler<'_>,
    answered: &dyn Fn(),
) {
    if let Err(e) = listener.set_nonblocking(true) {
        log::warn!("control socket: {e}");
    }
    loop {
        let watched = exec.execs.watched();
        let mut fds: Vec<i32> = vec![listener.as_raw_fd(), exec.execs.changed_fd()];
        fds.extend(watched.iter().map(|w| w.1));
        let Some(ready) = channel.wait_any(&fds) else {
            break;
        };
        if ready[1] {
            exec.execs.drain_changed();
        }
        let mut post = false;
        for (w, r) in watched.iter().zip(&ready[2..]) {
            if *r {
                post |= exec.execs.readable(w.0);
            }
        }
        if post {
            (exec.post)();
        }
        if !ready[0] {
            continue;
        }
        match listener.accept() {
            Ok((stream, _)) => {
                let _ = stream.set_nonblocking(false);
                serve_one(stream, handle, exec);
                answered();
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => {
                // No fd for the connection (the guest's fds are kept
                // below a reserve, so only something else could take
                // them): the request waits in the backlog; retry soon
                // rather than spin on a listener that stays readable.
                log::warn!("control socket: accept: {e}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
    let _ = std::fs::remove_file(path);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip() {
        for r in [
            Request::Status,
            Request::Hibernate,
            Request::Wake,
            Request::Signal(15),
        ] {
            assert_eq!(Request::parse(&r.encode()), Ok(r));
        }
    }

    #[test]
    fn bad_requests_are_refused() {
        assert!(Request::parse("signal 0").is_err());
        assert!(Request::parse("signal 65").is_err());
        assert!(Request::parse("signal x").is_err());
        assert!(Request::parse("reboot").is_err());
    }
}
