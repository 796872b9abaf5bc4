//! `qrun exec`: processes started inside a running sandbox from outside.
//!
//! Protocol on the control socket ([`crate::ctl`]): the client sends one
//! line `exec <ExecSpec as JSON>` in one `sendmsg` carrying its stdin,
//! stdout and stderr (`SCM_RIGHTS`, three fds). The sandbox answers
//! `{"ok":true,"pid":N}` once the guest started the process (N is its
//! guest pid) or `{"ok":false,"error":..,"errno":E}`; later
//! `{"ok":true,"exit":S}` when it ends (S as a shell reports it, 128 + N
//! for a signal). Meanwhile the client may send `signal N` lines, which
//! go to the process; when the client closes its end before the exit,
//! the process gets SIGKILL (so killing a detached `qrun exec` waiter
//! kills the process, as killing the pid `runc exec --pid-file` wrote
//! would).
//!
//! The VMM side: the control thread queues an order ([`Execs::submit`])
//! and posts `control::EXEC`; the guest takes it with `Call::Exec`
//! (`qlib::exec_order`), which is where the fds become the sandbox's host
//! fds ([`crate::hostcall`]), and reports back `STARTED` and `EXITED`.

use std::collections::{HashMap, VecDeque};
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use qlib::exec_order::SpawnSpec;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Longest request line (an exec's argv and environment).
pub const MAX_LINE: usize = 128 << 10;

/// What to run (`runc exec`'s process: args, env, cwd, user).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecSpec {
    pub args: Vec<String>,
    #[serde(default)]
    pub env: Vec<String>,
    #[serde(default = "root")]
    pub cwd: String,
    #[serde(default)]
    pub uid: u32,
    #[serde(default)]
    pub gid: u32,
    #[serde(default)]
    pub additional_gids: Vec<u32>,
    /// The stdio is the slave of a host terminal (`--tty`): the process
    /// gets a guest pty relayed to it (docs/terminal.md).
    #[serde(default)]
    pub terminal: bool,
}

fn root() -> String {
    "/".into()
}

impl ExecSpec {
    fn to_spawn(&self) -> SpawnSpec {
        SpawnSpec {
            uid: self.uid,
            gid: self.gid,
            groups: self.additional_gids.clone(),
            cwd: self.cwd.clone(),
            argv: self.args.clone(),
            env: self.env.clone(),
            terminal: self.terminal,
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Answer {
    ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    exit: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    errno: Option<i32>,
    /// `"cwd"` when the working directory is what failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stage: Option<String>,
}

/// Why `qrun exec` failed.
#[derive(Debug, Error)]
pub enum ExecError {
    /// The socket could not be reached or the exchange broke.
    #[error("control socket {0}: {1}")]
    Io(String, #[source] std::io::Error),
    /// The sandbox ended (or dropped the connection) before answering.
    #[error("the container stopped before the process ended")]
    Closed,
    /// The sandbox answered with something that is not an answer.
    #[error("malformed answer from the sandbox")]
    Malformed,
    /// The guest could not start the process (`errno` as `execve`'s;
    /// `cwd`: the working directory is the problem).
    #[error("{message}")]
    Refused {
        message: String,
        errno: i32,
        cwd: bool,
    },
}

/// The client's end of one exec.
pub struct ExecClient {
    stream: UnixStream,
    buf: Vec<u8>,
}

/// Starts `spec` in the sandbox listening at `socket` with `stdio` as its
/// fds 0-2; returns once the guest started it (with its guest pid).
pub fn start(
    socket: &Path,
    spec: &ExecSpec,
    stdio: [BorrowedFd<'_>; 3],
) -> Result<(ExecClient, u32), ExecError> {
    let io = |e| ExecError::Io(socket.display().to_string(), e);
    let stream = UnixStream::connect(socket).map_err(io)?;
    let line = format!(
        "exec {}\n",
        serde_json::to_string(spec).map_err(|_| ExecError::Malformed)?
    );
    if line.len() > MAX_LINE {
        return Err(ExecError::Refused {
            message: "argument list too long".into(),
            errno: libc::E2BIG,
            cwd: false,
        });
    }
    send_with_fds(&stream, line.as_bytes(), &stdio.map(|f| f.as_raw_fd())).map_err(io)?;
    let mut c = ExecClient {
        stream,
        buf: Vec::new(),
    };
    let a = c.answer()?;
    match a {
        Answer {
            ok: true,
            pid: Some(pid),
            ..
        } => Ok((c, pid)),
        Answer {
            error: Some(message),
            errno,
            stage,
            ..
        } => Err(ExecError::Refused {
            message,
            errno: errno.unwrap_or(0),
            cwd: stage.as_deref() == Some("cwd"),
        }),
        _ => Err(ExecError::Malformed),
    }
}

impl ExecClient {
    fn answer(&mut self) -> Result<Answer, ExecError> {
        loop {
            if let Some(nl) = self.buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=nl).collect();
                return serde_json::from_slice(&line).map_err(|_| ExecError::Malformed);
            }
            // A byte at a time: nothing past the line is taken from the
            // socket, so a caller polling it (or a waiter it is handed to)
            // sees the next answer arrive.
            let mut chunk = [0u8; 1];
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err(ExecError::Closed),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return Err(ExecError::Closed),
            }
        }
    }

    /// Waits for the process to end; returns its status (128 + N for a
    /// signal).
    pub fn wait(&mut self) -> Result<i32, ExecError> {
        match self.answer()? {
            Answer {
                ok: true,
                exit: Some(s),
                ..
            } => Ok(s),
            _ => Err(ExecError::Malformed),
        }
    }

    /// Sends signal `signo` to the process.
    pub fn signal(&self, signo: i32) -> std::io::Result<()> {
        (&self.stream).write_all(format!("signal {signo}\n").as_bytes())
    }

    /// The connection, to hand to another process (a detached waiter).
    pub fn into_stream(self) -> UnixStream {
        self.stream
    }

    /// The client of a connection whose process has started (a detached
    /// waiter's, from [`ExecClient::into_stream`]).
    pub fn from_stream(stream: UnixStream) -> Self {
        Self {
            stream,
            buf: Vec::new(),
        }
    }
}

impl std::os::fd::AsFd for ExecClient {
    /// The connection (readable when the exit status arrives).
    fn as_fd(&self) -> BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(&self.stream)
    }
}

fn send_with_fds(stream: &UnixStream, bytes: &[u8], fds: &[RawFd; 3]) -> std::io::Result<()> {
    let space = cmsg_space(fds.len());
    let mut control = vec![0u8; space];
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    // SAFETY: msghdr is plain data; all-zero is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: `msg` points at a control buffer of CMSG_SPACE for three
    // fds; the first header is filled within it.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN((fds.len() * 4) as u32) as _;
        std::ptr::copy_nonoverlapping(
            fds.as_ptr().cast::<u8>(),
            libc::CMSG_DATA(cmsg),
            fds.len() * 4,
        );
    }
    // SAFETY: a valid socket and a msghdr whose buffers live until return.
    let n = unsafe { libc::sendmsg(stream.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // The fds went with the first byte; the rest of a long line follows.
    let mut rest = &bytes[n as usize..];
    while !rest.is_empty() {
        let w = (&*stream).write(rest)?;
        rest = &rest[w..];
    }
    Ok(())
}

fn cmsg_space(fds: usize) -> usize {
    // SAFETY: CMSG_SPACE is arithmetic.
    unsafe { libc::CMSG_SPACE((fds * 4) as u32) as usize }
}

/// Reads one request line from `stream` with the fds that came with it
/// (at most three are kept; more are closed). The line is at most
/// [`MAX_LINE`] bytes.
pub(crate) fn read_request(stream: &UnixStream) -> std::io::Result<(Vec<u8>, Vec<OwnedFd>)> {
    let mut line = Vec::new();
    let mut fds = Vec::new();
    let mut chunk = vec![0u8; 4096];
    let space = cmsg_space(8);
    let mut control = vec![0u8; space];
    loop {
        let mut iov = libc::iovec {
            iov_base: chunk.as_mut_ptr().cast(),
            iov_len: chunk.len(),
        };
        // SAFETY: msghdr is plain data; all-zero is a valid empty header.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        // SAFETY: valid socket; buffers live until return.
        let n = unsafe { libc::recvmsg(stream.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        // SAFETY: walks the control headers the kernel wrote within
        // `msg_controllen`; SCM_RIGHTS data are whole `int`s, each a new fd
        // of ours.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
            while !cmsg.is_null() {
                if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                    let data = libc::CMSG_DATA(cmsg);
                    let len = (*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                    for i in 0..len / 4 {
                        let fd = std::ptr::read_unaligned(data.add(i * 4).cast::<i32>());
                        fds.push(OwnedFd::from_raw_fd(fd));
                    }
                }
                cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
            }
        }
        let n = n as usize;
        line.extend_from_slice(&chunk[..n]);
        if let Some(nl) = line.iter().position(|&b| b == b'\n') {
            line.truncate(nl);
            break;
        }
        if n == 0 || line.len() > MAX_LINE {
            break;
        }
    }
    fds.truncate(3);
    Ok((line, fds))
}

/// A queued order.
enum Pending {
    Spawn {
        id: u64,
        spec: ExecSpec,
        fds: Vec<OwnedFd>,
    },
    Signal {
        pid: u32,
        signo: u32,
    },
}

/// One exec's connection.
struct Conn {
    stream: UnixStream,
    /// The guest pid, once started.
    pid: Option<u32>,
    /// Bytes of `signal N` lines not yet complete.
    partial: Vec<u8>,
}

#[derive(Default)]
struct Inner {
    next_id: u64,
    orders: VecDeque<Pending>,
    conns: HashMap<u64, Conn>,
}

/// The sandbox's execs: orders waiting for the guest and connections
/// waiting for an answer.
pub struct Execs {
    inner: Mutex<Inner>,
    /// Readable when the set of watched connections changed (a process
    /// started): the control thread polls it.
    changed: (UnixStream, UnixStream),
}

/// What the guest's `TAKE` gets.
pub(crate) enum Taken {
    /// No order.
    None,
    /// A spawn whose fds the caller must adopt, then [`Execs::encode`].
    Spawn {
        id: u64,
        spec: ExecSpec,
        fds: Vec<OwnedFd>,
    },
    /// An encoded signal order.
    Bytes(Vec<u8>),
}

fn send_answer(stream: &UnixStream, a: &Answer) {
    if let Ok(text) = serde_json::to_string(a) {
        // The client may be gone or stuck: never block the vCPU on it.
        let _ = stream.set_nonblocking(true);
        let _ = (&*stream).write_all(format!("{text}\n").as_bytes());
    }
}

impl Execs {
    /// No exec yet.
    pub fn new() -> std::io::Result<Self> {
        let changed = UnixStream::pair()?;
        changed.0.set_nonblocking(true)?;
        changed.1.set_nonblocking(true)?;
        Ok(Self {
            inner: Mutex::default(),
            changed,
        })
    }

    /// The fd the control thread polls along with [`Execs::watched`];
    /// [`Execs::drain_changed`] empties it.
    pub(crate) fn changed_fd(&self) -> RawFd {
        self.changed.1.as_raw_fd()
    }

    /// Empties [`Execs::changed_fd`].
    pub(crate) fn drain_changed(&self) {
        let mut buf = [0u8; 64];
        while matches!((&self.changed.1).read(&mut buf), Ok(n) if n > 0) {}
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a spawn for `stream`'s request (control thread).
    pub(crate) fn submit(&self, stream: UnixStream, spec: ExecSpec, fds: Vec<OwnedFd>) {
        let mut i = self.lock();
        i.next_id += 1;
        let id = i.next_id;
        i.orders.push_back(Pending::Spawn { id, spec, fds });
        i.conns.insert(
            id,
            Conn {
                stream,
                pid: None,
                partial: Vec::new(),
            },
        );
    }

    /// The next order (vCPU thread).
    pub(crate) fn take(&self) -> Taken {
        match self.lock().orders.pop_front() {
            None => Taken::None,
            Some(Pending::Spawn { id, spec, fds }) => Taken::Spawn { id, spec, fds },
            Some(Pending::Signal { pid, signo }) => {
                Taken::Bytes(qlib::exec_order::encode_signal(pid, signo))
            }
        }
    }

    /// The encoded spawn order.
    pub(crate) fn encode(id: u64, spec: &ExecSpec, stdio: [i32; 3]) -> Vec<u8> {
        qlib::exec_order::encode_spawn(id, stdio, &spec.to_spawn())
    }

    /// The guest started order `id` (`ret` = pid or `-errno`).
    pub(crate) fn started(&self, id: u64, ret: i64) {
        let mut i = self.lock();
        if ret < 0 {
            if let Some(c) = i.conns.remove(&id) {
                let mut errno = (-ret) as i32;
                let cwd = errno > qlib::exec_order::op::CWD_FAILED;
                if cwd {
                    errno -= qlib::exec_order::op::CWD_FAILED;
                }
                send_answer(
                    &c.stream,
                    &Answer {
                        ok: false,
                        pid: None,
                        exit: None,
                        error: Some(std::io::Error::from_raw_os_error(errno).to_string()),
                        errno: Some(errno),
                        stage: cwd.then(|| "cwd".into()),
                    },
                );
            }
            return;
        }
        let pid = ret as u32;
        let gone = match i.conns.get_mut(&id) {
            Some(c) => {
                c.pid = Some(pid);
                let _ = (&self.changed.0).write(&[1]);
                send_answer(
                    &c.stream,
                    &Answer {
                        ok: true,
                        pid: Some(pid),
                        exit: None,
                        error: None,
                        errno: None,
                        stage: None,
                    },
                );
                false
            }
            None => true,
        };
        if gone {
            // The client left before the start: nobody waits for it.
            i.orders.push_back(Pending::Signal {
                pid,
                signo: libc::SIGKILL as u32,
            });
        }
    }

    /// Refuses order `id` before the guest saw it (it did not fit).
    pub(crate) fn refuse(&self, id: u64, errno: i32) {
        self.started(id, -i64::from(errno));
    }

    /// Process of order `id` ended with `status`.
    pub(crate) fn exited(&self, id: u64, status: i32) {
        if let Some(c) = self.lock().conns.remove(&id) {
            send_answer(
                &c.stream,
                &Answer {
                    ok: true,
                    pid: None,
                    exit: Some(status),
                    error: None,
                    errno: None,
                    stage: None,
                },
            );
        }
    }

    /// The connections of running processes, for the control thread to
    /// watch: (id, fd).
    pub(crate) fn watched(&self) -> Vec<(u64, RawFd)> {
        self.lock()
            .conns
            .iter()
            .filter(|(_, c)| c.pid.is_some())
            .map(|(&id, c)| (id, c.stream.as_raw_fd()))
            .collect()
    }

    /// Connection `id` is readable: `signal N` lines become orders; an
    /// end kills the process. Returns whether orders were queued.
    pub(crate) fn readable(&self, id: u64) -> bool {
        let mut i = self.lock();
        let Some(c) = i.conns.get_mut(&id) else {
            return false;
        };
        let Some(pid) = c.pid else { return false };
        let _ = c.stream.set_nonblocking(true);
        let mut chunk = [0u8; 256];
        let mut signals = Vec::new();
        let mut closed = false;
        loop {
            match (&c.stream).read(&mut chunk) {
                Ok(0) => {
                    closed = true;
                    break;
                }
                Ok(n) => c.partial.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    closed = true;
                    break;
                }
            }
            if c.partial.len() > 4096 {
                closed = true;
                break;
            }
        }
        while let Some(nl) = c.partial.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = c.partial.drain(..=nl).collect();
            let n = std::str::from_utf8(&line)
                .ok()
                .and_then(|l| l.trim().strip_prefix("signal "))
                .and_then(|n| n.trim().parse::<u32>().ok())
                .filter(|n| (1..=64).contains(n));
            match n {
                Some(n) => signals.push(n),
                None => log::warn!("exec: bad line from client"),
            }
        }
        if closed {
            log::info!("exec: client of guest pid {pid} left: SIGKILL");
            i.conns.remove(&id);
            signals.push(libc::SIGKILL as u32);
        }
        let any = !signals.is_empty();
        for signo in signals {
            i.orders.push_back(Pending::Signal { pid, signo });
        }
        any
    }

    /// The sandbox ends: clients waiting for an exit see the connection
    /// close.
    pub(crate) fn close_all(&self) {
        let mut i = self.lock();
        i.conns.clear();
        i.orders.clear();
    }
}

/// How long the control thread waits for a request line.
pub(crate) const READ_TIMEOUT: Duration = Duration::from_secs(5);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_line_carries_three_fds() {
        let (a, b) = UnixStream::pair().expect("pair");
        let f = std::fs::File::open("/dev/null").expect("null");
        let fd = f.as_raw_fd();
        let spec = ExecSpec {
            args: vec!["echo".into(), "x".repeat(20000)],
            cwd: "/".into(),
            ..ExecSpec::default()
        };
        let line = format!("exec {}\n", serde_json::to_string(&spec).expect("json"));
        let t = std::thread::spawn(move || send_with_fds(&a, line.as_bytes(), &[fd, fd, fd]));
        let (got, fds) = read_request(&b).expect("read");
        t.join().expect("join").expect("send");
        assert_eq!(fds.len(), 3);
        let text = std::str::from_utf8(&got).expect("utf8");
        let back: ExecSpec =
            serde_json::from_str(text.strip_prefix("exec ").expect("prefix")).expect("parse");
        assert_eq!(back, spec);
    }

    #[test]
    fn a_client_leaving_kills_the_process() {
        let execs = Execs::new().expect("socketpair");
        let (a, b) = UnixStream::pair().expect("pair");
        execs.submit(b, ExecSpec::default(), Vec::new());
        assert!(matches!(execs.take(), Taken::Spawn { id: 1, .. }));
        execs.started(1, 42);
        (&a).write_all(b"signal 15\n").expect("write");
        drop(a);
        assert!(execs.readable(1));
        let mut got = Vec::new();
        while let Taken::Bytes(b) = execs.take() {
            got.push(b);
        }
        assert_eq!(
            got,
            vec![
                qlib::exec_order::encode_signal(42, 15),
                qlib::exec_order::encode_signal(42, 9)
            ]
        );
        assert!(execs.watched().is_empty());
    }
}
