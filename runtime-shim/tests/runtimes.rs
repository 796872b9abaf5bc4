//! Real language runtimes as HTTP servers in `qrun do` (issue 14): the
//! FunctionBench hello servers in Go (functionbench/hello_go, built here
//! with `CGO_ENABLED=0`), Node.js (functionbench/hello.js), Java
//! (functionbench/Hello.java, compiled here with `javac`) and Python's
//! `ThreadingHTTPServer`. Each starts in a sandbox, answers `GET /` over
//! loopback, is hibernated through the control socket, answers again (the
//! connection wakes it), and exits 0 after `GET /quit`.
//!
//! The runtimes come from the host (`go`, `node`, `javac`/`java`,
//! `python3`; scripts/deps.sh installs node, go and
//! `openjdk-17-jdk-headless`). A missing one is
//! SKIPPED loudly, and fails under `CI=true`, as /dev/kvm does.

#![forbid(unsafe_code)]

mod common;

use std::ffi::OsString;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::http::get;
use common::server::Server;
use common::tmp::TempDir;

/// A runtime's start-up in the sandbox (a JVM takes a few seconds here).
const START: Duration = Duration::from_secs(30);

/// The repository's functionbench directory.
fn functionbench() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../functionbench")
}

/// Whether `prog` is on the PATH; if not, says SKIPPED (or fails under
/// `CI=true`).
fn have(prog: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(prog))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        let msg = format!("{prog} is not installed (scripts/deps.sh installs it)");
        assert!(std::env::var("CI").as_deref() != Ok("true"), "{msg}");
        eprintln!("SKIPPED: {msg}");
    }
    found
}

/// A port nobody listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// Runs `argv PORT` in `qrun do` with a control socket: `GET /` answers
/// "hello..." before and after a hibernation, `GET /quit` ends it with 0.
fn serve_hibernate_wake(name: &str, argv: &[OsString]) {
    let dir = TempDir::new(name);
    let socket = dir.join("ctl.sock");
    let state_dir = dir.join("state");
    let port = free_port();
    let mut cmd = common::qrun_do_controlled(&socket, &state_dir);
    cmd.args(argv).arg(port.to_string()).env_clear();
    if let Some(path) = std::env::var_os("PATH") {
        cmd.env("PATH", path);
    }
    let t = Instant::now();
    let mut server = Server::spawn(cmd);
    server.wait_line("listening on", START);
    let hello = |what: &str| {
        let (code, body) = get(port, "/");
        assert_eq!(code, 200, "{name} {what}: {body}");
        assert!(body.starts_with("hello"), "{name} {what}: {body:?}");
    };
    hello("first request");
    eprintln!("{name}: started and answered in {:?}", t.elapsed());
    // The first connection's teardown first: a server that half-closes
    // waits for the client's FIN, and that fd, ready when the sandbox
    // hibernates, would wake it at once (docs/threads.md).
    std::thread::sleep(Duration::from_millis(200));

    let st = common::ctl(&socket, "hibernate").expect("hibernate");
    assert_eq!(st["state"], "hibernated", "{name}: {st}");
    let t = Instant::now();
    hello("after hibernation");
    eprintln!("{name}: woken and answered in {:?}", t.elapsed());
    let st = common::ctl(&socket, "status").expect("status");
    assert_eq!(st["state"], "running", "{name}: {st}");

    assert_eq!(get(port, "/quit"), (200, "bye\n".to_owned()), "{name}");
    let (status, stderr) = server.wait_exit(Duration::from_secs(20));
    assert_eq!(
        status, 0,
        "{name}: exit status after /quit; stderr: {stderr}"
    );
}

/// Builds the Go program in `src` once (kept in the test target dir as
/// `name`, rebuilt when its main.go changes).
fn build_go(go: &Path, src: &Path, name: &str) -> PathBuf {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let newer = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if newer(&out).is_some() && newer(&out) >= newer(&src.join("main.go")) {
        return out;
    }
    let st = Command::new(go)
        .args(["build", "-trimpath", "-o"])
        .arg(&out)
        .arg(".")
        .current_dir(src)
        .env("CGO_ENABLED", "0")
        .env("GOFLAGS", "-buildvcs=false")
        .status()
        .expect("running go build");
    assert!(st.success(), "go build of {} failed", src.display());
    out
}

#[test]
fn go_http_server() {
    if !common::require_kvm() {
        return;
    }
    let Some(go) = have("go") else { return };
    let bin = build_go(&go, &functionbench().join("hello_go"), "hello_go");
    serve_hibernate_wake("go", &[bin.into()]);
}

/// Go's runtime finds the vDSO with its own ELF parser
/// (`runtime/vdso_linux.go`): `test-apps/go/vdso_time` (time.Now and
/// time.Since against the raw clock_gettime system call, and 300,000
/// time.Now calls taking no system time) prints the same natively and in
/// the sandbox (docs/vdso.md).
#[test]
fn go_time_through_the_vdso() {
    if !common::require_kvm() {
        return;
    }
    let Some(go) = have("go") else { return };
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../test-apps/go/vdso_time");
    let bin = build_go(&go, &src, "vdso_time");
    let out = common::compare_programs(&bin, &[], &[]);
    assert_eq!(out.status, 0, "{out:?}");
    assert_eq!(
        common::stdout(&out),
        "time.Since and clock_gettime never go backwards: yes\n\
         Go's interval within the syscall's: yes\n\
         time.Now within 50 ms of gettimeofday: yes\n\
         time.Now x 300000: system time < 20 ms: yes true\n"
    );
}

/// Two goroutines spin without a syscall while the server answers: time
/// slices give the network poller and the handler their turn (without
/// them `GET /` never answers). Not hibernated: a sandbox hibernated while
/// it computes wakes on the control socket or SIGCONT only, not on a
/// connection to a socket another task is parked on (docs/threads.md).
#[test]
fn go_http_server_with_spinning_goroutines() {
    if !common::require_kvm() {
        return;
    }
    let Some(go) = have("go") else { return };
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../test-apps/go/busy_http");
    let bin = build_go(&go, &src, "busy_http");
    let port = free_port();
    let mut cmd = Command::new(common::qrun());
    cmd.args(["do", "--"]).arg(bin).arg(port.to_string());
    let mut server = Server::spawn(cmd);
    server.wait_line("listening on", START);
    // Answers come while the spinners spin: both must have started (they
    // may not have had a turn yet at the first request).
    let mut both = 0;
    for _ in 0..50 {
        let t = Instant::now();
        let (code, body) = get(port, "/");
        assert_eq!(code, 200, "{body}");
        eprintln!("{body:?} in {:?}", t.elapsed());
        if body == "hello, spinners running: true\n" {
            both += 1;
            if both == 3 {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(both, 3, "the spinners never both ran");
    assert_eq!(get(port, "/quit"), (200, "bye\n".to_owned()));
    let (status, stderr) = server.wait_exit(Duration::from_secs(20));
    assert_eq!(status, 0, "exit status after /quit; stderr: {stderr}");
}

/// Node.js hibernated right after a request is often still computing
/// (hibernated from the kick, no thread waiting on the socket): the
/// connection after the hibernation hung until the hibernated sandbox
/// waited on its listening sockets too (docs/threads.md).
#[test]
fn node_http_server() {
    if !common::require_kvm() {
        return;
    }
    let Some(node) = have("node") else { return };
    serve_hibernate_wake(
        "node",
        &[node.into(), functionbench().join("hello.js").into()],
    );
}

/// The JVM used to die at start in about 3 runs in 100 (25 in 40 with
/// half-millisecond slices) of registers lost at a preemptive switch: the
/// kernel saved only FXSAVE, not the AVX/AVX-512 state the JIT's code
/// uses (docs/threads.md, "Java"). Fixed; 20 runs in a row passed, and 60
/// starts with `QVISOR_SLICE_US=500` did not crash.
#[test]
fn java_http_server() {
    if !common::require_kvm() {
        return;
    }
    let (Some(javac), Some(java)) = (have("javac"), have("java")) else {
        return;
    };
    let classes = Path::new(env!("CARGO_TARGET_TMPDIR")).join("java-hello");
    let st = Command::new(javac)
        .args(["--release", "17", "-d"])
        .arg(&classes)
        .arg(functionbench().join("Hello.java"))
        .status()
        .expect("running javac");
    assert!(st.success(), "javac Hello.java failed");
    // `java` is a symlink chain into the JDK: it finds libjli.so through
    // `$ORIGIN`, which needs /proc/self/exe resolved to the real file.
    serve_hibernate_wake(
        "java",
        &[java.into(), "-cp".into(), classes.into(), "Hello".into()],
    );
}

/// Python's threading server: one thread per connection, `/quit` shuts
/// it down from another thread.
const PY_SERVER: &str = r#"
import http.server, sys, threading
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        quit = self.path == "/quit"
        body = b"bye\n" if quit else b"hello from %s\n" % threading.current_thread().name.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        if quit:
            threading.Thread(target=self.server.shutdown).start()
    def log_message(self, *args):
        pass
port = int(sys.argv[1])
s = http.server.ThreadingHTTPServer(("127.0.0.1", port), H)
print("listening on", port, flush=True)
s.serve_forever()
"#;

#[test]
fn python_threading_http_server() {
    if !common::require_kvm() {
        return;
    }
    // The system's Python, not a version manager's shim script.
    let system = PathBuf::from("/usr/bin/python3");
    let Some(python) = system
        .is_file()
        .then_some(system)
        .or_else(|| have("python3"))
    else {
        return;
    };
    serve_hibernate_wake("python", &[python.into(), "-c".into(), PY_SERVER.into()]);
}

/// `/proc/self/exe` names the file with every symlink resolved, as on
/// Linux (`java` finds `libjli.so` through `$ORIGIN`, which the dynamic
/// loader takes from there): run through a symlinked directory, then
/// through a symlink to the file.
#[test]
fn proc_self_exe_resolves_symlinks() {
    if !common::require_kvm() {
        return;
    }
    let dir = TempDir::new("exe-link");
    std::os::unix::fs::symlink("/usr/bin", dir.join("bin")).expect("symlink");
    std::os::unix::fs::symlink("bin/readlink", dir.join("rl")).expect("symlink");
    for prog in [dir.join("bin/readlink"), dir.join("rl")] {
        let native = common::run_native(&prog, &["/proc/self/exe"], &[]);
        assert!(
            !common::stdout(&native).contains(dir.str()),
            "native: {native:?}"
        );
        let sandboxed = common::run_sandboxed(&prog, &["/proc/self/exe"], &[]);
        common::assert_same(&format!("{prog:?}"), &native, &sandboxed);
    }
}
