//! Armed waits and guest timers (docs/processes.md): a blocking call of
//! one process (accept, connect, recv, poll, select, epoll_wait,
//! nanosleep, pause) lets the others run, SIGALRM reaches the process that
//! armed it, and a sandbox hibernates from any of these waits, stays
//! hibernated through its timers and wakes on a connection. The `waits`
//! test program does each; differential cases run natively too.
//!
//! Every test needs /dev/kvm: without it a test says SKIPPED loudly, and
//! fails under `CI=true`.

#![forbid(unsafe_code)]

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::Duration;

use common::controlled::Controlled;
use common::{assert_same, require_kvm, run_native, run_sandboxed, stdout};

fn waits() -> std::path::PathBuf {
    test_apps::path("waits")
}

/// A TCP client and server in two processes of one sandbox, over
/// loopback: the server's accept, poll, epoll_wait, select and recv park
/// while the client runs. Without armed waits the server's accept blocks
/// the vCPU and the client never connects (a deadlock).
#[test]
fn loopback_client_and_server_in_two_processes() {
    if !require_kvm() {
        return;
    }
    let native = run_native(&waits(), &["tcp"], &[]);
    assert!(
        stdout(&native).contains("server: client status 0"),
        "the native run already fails: {native:?}"
    );
    let sandboxed = run_sandboxed(&waits(), &["tcp"], &[]);
    assert_same("waits tcp", &native, &sandboxed);
}

/// A child's nanosleep does not stop the parent, which computes meanwhile.
#[test]
fn nanosleep_lets_another_process_compute() {
    if !require_kvm() {
        return;
    }
    let native = run_native(&waits(), &["sleep"], &[]);
    assert_eq!(stdout(&native), "slept and computed at once: yes\n");
    let sandboxed = run_sandboxed(&waits(), &["sleep"], &[]);
    assert_same("waits sleep", &native, &sandboxed);
}

/// A parked epoll_wait whose timeout expires returns 0 (the rerun after
/// the idle `Poll` found the fd not ready asks the host nothing more),
/// and one that a connection ends reports it.
#[test]
fn parked_epoll_wait_times_out_then_reports_a_connection() {
    if !require_kvm() {
        return;
    }
    let native = run_native(&waits(), &["epolltimeout"], &[]);
    assert_eq!(
        stdout(&native),
        "timeouts: 5 of 5\nthen ready: 1, data 9\nchild status 0\n"
    );
    let sandboxed = run_sandboxed(&waits(), &["epolltimeout"], &[]);
    assert_same("waits epolltimeout", &native, &sandboxed);
}

/// A blocking sendfile into a socket whose reader is another process
/// waits for it (parks) instead of holding the vCPU in the host.
#[test]
fn sendfile_to_a_socket_lets_its_reader_run() {
    if !require_kvm() {
        return;
    }
    let native = run_native(&waits(), &["sendfile"], &[]);
    assert_eq!(
        stdout(&native),
        "child read 4194304 bytes\nsent 4194304 bytes, offset 4194304\n"
    );
    let sandboxed = run_sandboxed(&waits(), &["sendfile"], &[]);
    assert_same("waits sendfile", &native, &sandboxed);
}

/// ITIMER_REAL is per process: the child's SIGALRM goes to the child (the
/// parent, which has no handler, would die of it), and the parent's own
/// alarm() to the parent.
#[test]
fn sigalrm_reaches_the_process_that_armed_it() {
    if !require_kvm() {
        return;
    }
    let native = run_native(&waits(), &["alarm"], &[]);
    assert!(
        stdout(&native).contains("parent: own alarm handled"),
        "the native run already fails: {native:?}"
    );
    let sandboxed = run_sandboxed(&waits(), &["alarm"], &[]);
    assert_same("waits alarm", &native, &sandboxed);
}

/// A sandbox under control, running `waits MODE`, which prints "port N".
struct Server {
    c: Controlled,
    port: u16,
}

impl Server {
    fn start(mode: &str) -> Server {
        let (c, line) =
            Controlled::start(&format!("waits-{mode}"), &waits(), &[mode], Stdio::null());
        let port = line
            .strip_prefix("port ")
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("no port line: {line:?}"));
        Server { c, port }
    }

    fn ctl(&self, req: &str) -> serde_json::Value {
        self.c.ctl(req)
    }

    fn hibernate(&self) -> serde_json::Value {
        self.c.hibernate()
    }

    /// Connects, sends a request, returns the answer.
    fn request(&self) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        s.write_all(b"hello").expect("send");
        let mut answer = String::new();
        s.read_to_string(&mut answer).expect("answer");
        answer
    }

    fn finish(self) -> (String, i32) {
        self.c.finish()
    }
}

/// A plain blocking-accept() server (one process) hibernates and the
/// connection wakes it; the answer comes from the woken program.
#[test]
fn blocking_accept_server_hibernates_and_answers() {
    if !require_kvm() {
        return;
    }
    let srv = Server::start("accept");
    srv.hibernate();
    assert_eq!(srv.request(), "accept server got 5 bytes\n");
    let (rest, code) = srv.finish();
    assert_eq!((rest.as_str(), code), ("", 0));
}

/// Three processes blocked in accept, read (a pipe) and wait4 hibernate
/// together and are all woken by one connection.
#[test]
fn three_processes_hibernate_in_accept_read_and_wait4() {
    if !require_kvm() {
        return;
    }
    let srv = Server::start("accept3");
    // Let both children reach their waits.
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..2 {
        srv.hibernate();
        srv.ctl("wake");
    }
    srv.hibernate();
    assert_eq!(srv.request(), "accept3 server got 5 bytes\n");
    let (rest, _) = srv.finish();
    assert_eq!(rest, "reader: 2 bytes from the pipe\nparent: reaped 2\n");
}

/// A server looping on poll(500 ms), as Python's serve_forever does, stays
/// hibernated: its timeouts do not wake the sandbox (no swap fault, state
/// hibernated after 5 s), and the connection does.
#[test]
fn poll_timeout_loop_stays_hibernated() {
    if !require_kvm() {
        return;
    }
    let srv = Server::start("pollserve");
    let before = srv.hibernate();
    std::thread::sleep(Duration::from_secs(5));
    let st = srv.ctl("status");
    assert_eq!(st["state"], "hibernated", "a timeout woke it: {st}");
    assert_eq!(
        st["swap_faults"], before["swap_faults"],
        "the program ran while hibernated: {st}"
    );
    assert_eq!(st["hibernations"], before["hibernations"]);
    assert_eq!(srv.request(), "poll server got 5 bytes\n");
    let (rest, code) = srv.finish();
    assert_eq!((rest.as_str(), code), ("", 0));
}

/// A Python `http.server` (the host's python3) in `serve_forever` with the
/// stdlib's default `poll_interval` of 0.5 s.
const PY_POLL_SERVER: &str = r#"import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"python server: " + self.path.encode() + b"\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print("port", s.server_address[1], flush=True)
s.serve_forever()
"#;

/// Issue 13: a Python `http.server` in `serve_forever` (its select loop
/// with the default 0.5 s poll interval) stays hibernated for 30 s with no
/// request: state `hibernated`, no swap fault and no new hibernation at
/// 10, 20 and 30 s; then a connection wakes it and gets the right answer.
/// This test takes about 35 s by design (the 30 s hibernated span).
#[test]
fn python_serve_forever_stays_hibernated_for_30_s() {
    if !require_kvm() {
        return;
    }
    let py = std::path::Path::new("/usr/bin/python3");
    assert!(py.is_file(), "the test needs /usr/bin/python3");
    let (c, line) = Controlled::start("waits-pyserve", py, &["-c", PY_POLL_SERVER], Stdio::null());
    let port: u16 = line
        .strip_prefix("port ")
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("no port line: {line:?}"));
    let mut srv = Server { c, port };
    // Let serve_forever reach its select loop.
    std::thread::sleep(Duration::from_millis(300));
    let before = srv.hibernate();
    for at in [10, 20, 30] {
        std::thread::sleep(Duration::from_secs(10));
        let st = srv.ctl("status");
        assert_eq!(st["state"], "hibernated", "woken before {at} s: {st}");
        assert_eq!(st["swap_faults"], 0, "the program ran before {at} s: {st}");
        assert_eq!(st["swap_faults"], before["swap_faults"], "{st}");
        assert_eq!(st["hibernations"], before["hibernations"], "{st}");
    }
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    s.write_all(b"GET /woken HTTP/1.0\r\n\r\n").expect("send");
    let mut answer = String::new();
    s.read_to_string(&mut answer).expect("answer");
    assert!(answer.starts_with("HTTP/1.0 200 OK\r\n"), "{answer:?}");
    assert!(
        answer.ends_with("\r\n\r\npython server: /woken\n"),
        "{answer:?}"
    );
    let st = srv.ctl("status");
    assert_ne!(st["state"], "hibernated", "{st}");
    srv.c.child.kill().expect("kill qrun");
    srv.c.child.wait().expect("wait qrun");
}
