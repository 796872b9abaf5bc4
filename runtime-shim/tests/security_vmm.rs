//! The VMM under hostile or starved conditions: a hibernation whose swap
//! or REAP file cannot be created, a guest holding every fd it may open, a
//! container pids limit smaller than the VMM's thread count, and SIGKILL
//! of the sandbox process in the middle of a hibernation or a wake.
//!
//! Every request has a deadline: a hang fails the test (and kills what it
//! started) instead of stalling the suite. Every test needs /dev/kvm and
//! root (mounts, cgroups): without /dev/kvm it says SKIPPED loudly, and
//! fails under `CI=true`.

#![forbid(unsafe_code)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use common::bundle::{bundle, sleep_bundle_with};
use common::tmp::TempDir;
use common::{Outcome, require_kvm, shell_status};
use serde_json::Value;

/// What any single request or command may take here.
const DEADLINE: Duration = Duration::from_secs(10);

/// Runs `cmd` (stdin from /dev/null, in its own process group) to the end;
/// panics, killing the group, if it takes longer than `limit`.
fn run_within(mut cmd: Command, limit: Duration) -> Outcome {
    let shown = format!("{cmd:?}");
    let dir = TempDir::new("vmm-out");
    let (out, err) = (dir.join("out"), dir.join("err"));
    cmd.stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).expect("output file"))
        .stderr(std::fs::File::create(&err).expect("output file"))
        .process_group(0);
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{shown}: {e}"));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            break s;
        }
        if Instant::now() > deadline {
            kill_group(child.id());
            let _ = child.wait();
            panic!("{shown} did not finish within {limit:?} (hung)");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Outcome {
        stdout: std::fs::read(&out).unwrap_or_default(),
        stderr: std::fs::read(&err).unwrap_or_default(),
        status: shell_status(status),
    }
}

fn kill_group(pgid: u32) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pgid}")])
        .stderr(Stdio::null())
        .status();
}

/// `qrun ctl SOCKET REQ` within [`DEADLINE`]: the status, or the error.
fn ctl(socket: &Path, req: &str) -> Result<Value, String> {
    let mut cmd = Command::new(common::qrun());
    cmd.arg("ctl").arg(socket).args(req.split(' '));
    let out = run_within(cmd, DEADLINE);
    if out.status == 0 {
        serde_json::from_slice(&out.stdout).map_err(|e| format!("status JSON: {e}"))
    } else {
        Err(common::stderr(&out))
    }
}

/// `qrun --root ROOT ARGS` within `limit`.
fn qrun_within(root: &Path, args: &[&str], limit: Duration) -> Outcome {
    let mut cmd = Command::new(common::qrun());
    cmd.arg("--root").arg(root).args(args);
    run_within(cmd, limit)
}

/// A `qrun do` sandbox driven over stdin, its stdout read line by line;
/// its process group is killed when dropped.
struct Guest {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    socket: PathBuf,
}

impl Guest {
    /// Spawns `cmd` (which ends by running `qrun do --control-socket
    /// SOCKET ...`) and waits for its first line, which must start with
    /// `first`.
    fn spawn(mut cmd: Command, socket: &Path, first: &str) -> Self {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .process_group(0);
        let mut child = cmd.spawn().expect("spawning the sandbox");
        let stdin = child.stdin.take();
        let out = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut g = Self {
            child,
            stdin,
            lines,
            socket: socket.to_owned(),
        };
        let line = g.line();
        assert!(line.starts_with(first), "first line {line:?}");
        common::wait_for_socket(socket);
        g
    }

    /// The next stdout line (panics after [`DEADLINE`]).
    fn line(&mut self) -> String {
        self.lines
            .recv_timeout(DEADLINE)
            .unwrap_or_else(|e| panic!("no line from the sandbox: {e:?}"))
    }

    /// Sends a command line and returns the answer.
    fn cmd(&mut self, c: &str) -> String {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin
            .write_all(format!("{c}\n").as_bytes())
            .and_then(|()| stdin.flush())
            .expect("writing a command");
        self.line()
    }

    fn ctl(&self, req: &str) -> Result<Value, String> {
        ctl(&self.socket, req)
    }

    fn state(&self) -> String {
        let st = self.ctl("status").expect("status");
        st["state"].as_str().expect("state").to_owned()
    }

    /// Waits for the sandbox to end; its status.
    fn exit(&mut self) -> i32 {
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Some(s) = self.child.try_wait().expect("try_wait") {
                return shell_status(s);
            }
            assert!(
                Instant::now() < deadline,
                "the sandbox did not exit within {DEADLINE:?} (its status would be lost)"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Guest {
    fn drop(&mut self) {
        kill_group(self.child.id());
        let _ = self.child.wait();
    }
}

/// `hib_pattern 8` in a sandbox whose state directory is a fresh tmpfs
/// mounted with `opts` in a private mount namespace.
fn on_tmpfs(dir: &TempDir, opts: &str) -> Guest {
    let (state, socket) = (dir.join("state"), dir.join("ctl.sock"));
    std::fs::create_dir(&state).expect("state dir");
    let mut cmd = Command::new("unshare");
    cmd.args(["-m", "--propagation", "private", "sh", "-c"])
        .arg(r#"mount -t tmpfs -o "$1" qrun-test "$2" && shift 2 && exec "$@""#)
        .args(["sh", opts])
        .arg(&state)
        .arg(common::qrun())
        .args(["do", "--memory", "256M", "--control-socket"])
        .arg(&socket)
        .arg("--state-dir")
        .arg(&state)
        .arg("--")
        .arg(test_apps::path("hib_pattern"))
        .arg("8");
    Guest::spawn(cmd, &socket, "ready ")
}

/// A state directory where the REAP file (read-only filesystem) or the
/// swap file (no inode left after the REAP file's) cannot be created: the
/// hibernation aborts with the reason, the program carries on untouched,
/// later requests are served and the exit status comes out. (Before: the
/// request never answered, nor did any later one, and the sandbox process
/// never exited.)
#[test]
fn hibernation_without_room_for_its_files_aborts() {
    if !require_kvm() {
        return;
    }
    for (opts, reason) in [
        ("ro,size=1m", "Read-only file system"),
        ("nr_inodes=2,size=64m", "swap.qswap"),
    ] {
        let dir = TempDir::new("vmm-nofile");
        let mut g = on_tmpfs(&dir, opts);
        let sum = g.cmd("verify");
        assert!(sum.starts_with("ok "), "{sum}");
        for round in 0..2 {
            let e = g.ctl("hibernate").expect_err("no file, no hibernation");
            assert!(
                e.contains("aborted") && e.contains(reason),
                "{opts}, round {round}: {e}"
            );
            assert_eq!(g.state(), "running", "{opts}");
            assert_eq!(g.cmd("verify"), sum, "{opts}: the program's memory");
        }
        g.ctl("signal 15").expect("a signal after the failures");
        assert_eq!(g.exit(), 128 + 15, "{opts}: the exit status");
    }
}

/// A program holding every fd it may open (files, sockets, pipes, until
/// EMFILE as natively) does not starve the VMM: status, hibernate, wake
/// and signal requests are still served, many times over, and the program
/// gets its fds back after closing them. (Before: the control socket could
/// not accept, every request hung.)
#[test]
fn a_guest_holding_every_fd_does_not_block_control_requests() {
    if !require_kvm() {
        return;
    }
    let hog = test_apps::path("fd_hog");
    let limited = r#"ulimit -n 256 && exec "$@""#;
    let mut native = Command::new("sh");
    native.args(["-c", limited, "sh"]).arg(&hog).arg(&hog);
    let native = run_within(native, DEADLINE);
    assert_eq!(common::stdout(&native), "full EMFILE\n", "{native:?}");

    let dir = TempDir::new("vmm-fds");
    let socket = dir.join("ctl.sock");
    let mut cmd = Command::new("sh");
    cmd.args(["-c", limited, "sh"])
        .arg(common::qrun())
        .args(["do", "--control-socket"])
        .arg(&socket)
        .arg("--state-dir")
        .arg(dir.join("state"))
        .arg("--")
        .arg(&hog)
        .arg(&hog);
    let mut g = Guest::spawn(cmd, &socket, "full EMFILE");
    for _ in 0..50 {
        assert_eq!(g.state(), "running");
    }
    for round in 0..3 {
        let st = g.ctl("hibernate").expect("hibernate with every fd taken");
        assert_eq!(st["state"], "hibernated", "round {round}: {st}");
        if round % 2 == 0 {
            g.ctl("wake").expect("wake");
        }
        assert_eq!(g.cmd("ping"), "pong", "round {round}");
    }
    assert_eq!(g.cmd("close"), "reopened");
    g.ctl("signal 15").expect("signal");
    assert_eq!(g.exit(), 128 + 15);
}

/// `linux.resources.pids.limit` from 1 to 6: the VMM's own threads are
/// not the container's processes, so every one of these containers starts,
/// hibernates on SIGSTOP, wakes on SIGCONT and is killed and deleted, each
/// step within the deadline. (Before: 1-4 died at start with "failed to
/// spawn thread"; 5-6 panicked the control thread on SIGSTOP and hung.)
#[test]
fn small_pids_limits_leave_the_sandbox_working() {
    if !require_kvm() {
        return;
    }
    for limit in 1..=6 {
        let (b, root) = (TempDir::new("vmm-pids-b"), TempDir::new("vmm-pids-root"));
        sleep_bundle_with(&b.0, "30", |c| {
            c["linux"]["resources"] = serde_json::json!({"pids": {"limit": limit}});
        });
        let ok = |args: &[&str]| {
            let out = qrun_within(&root.0, args, DEADLINE);
            assert_eq!(out.status, 0, "pids.limit {limit}: qrun {args:?}: {out:?}");
        };
        ok(&["create", "--bundle", b.str(), "p"]);
        ok(&["start", "p"]);
        ok(&["kill", "p", "SIGSTOP"]);
        let s = common::bundle::state(&root.0, "p").expect("state");
        assert_eq!(s["status"], "running", "pids.limit {limit}: {s}");
        assert_eq!(
            s["annotations"]["qrun.hibernation"], "hibernated",
            "pids.limit {limit}: {s}"
        );
        ok(&["kill", "p", "SIGCONT"]);
        let s = common::bundle::state(&root.0, "p").expect("state");
        assert_eq!(
            s["annotations"]["qrun.hibernation"], "running",
            "pids.limit {limit}: {s}"
        );
        ok(&["kill", "p", "SIGKILL"]);
        ok(&["delete", "p"]);
    }
}

/// A container running `hib_pattern MIB` with its stdin on a pipe the test
/// holds (commands) and its stdout in a file (answers).
struct Container {
    root: TempDir,
    _bundle: TempDir,
    stdin: ChildStdin,
    out: PathBuf,
    /// Answer lines read so far.
    seen: usize,
    _creator: Child,
}

impl Container {
    fn start(mib: &str) -> Self {
        let (b, root) = (TempDir::new("vmm-kill-b"), TempDir::new("vmm-kill-root"));
        let hp = test_apps::path("hib_pattern");
        bundle(
            &b.0,
            &[("/hib_pattern", &hp)],
            &["/hib_pattern", mib],
            |_| {},
        );
        let out = b.join("stdout");
        let mut creator = Command::new(common::qrun())
            .arg("--root")
            .arg(&root.0)
            .args(["create", "--bundle", b.str(), "k"])
            .stdin(Stdio::piped())
            .stdout(std::fs::File::create(&out).expect("stdout file"))
            .stderr(Stdio::inherit())
            .spawn()
            .expect("qrun create");
        let stdin = creator.stdin.take().expect("stdin");
        let deadline = Instant::now() + DEADLINE;
        while creator.try_wait().expect("try_wait").is_none() {
            assert!(Instant::now() < deadline, "create hung");
            std::thread::sleep(Duration::from_millis(5));
        }
        let mut c = Self {
            root,
            _bundle: b,
            stdin,
            out,
            seen: 0,
            _creator: creator,
        };
        c.ok(&["start", "k"]);
        let ready = c.answer();
        assert!(ready.starts_with("ready "), "{ready}");
        c
    }

    fn ok(&self, args: &[&str]) {
        let out = qrun_within(&self.root.0, args, DEADLINE);
        assert_eq!(out.status, 0, "qrun {args:?}: {out:?}");
    }

    fn answer(&mut self) -> String {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let text = std::fs::read_to_string(&self.out).unwrap_or_default();
            if let Some(l) = text.lines().nth(self.seen)
                && text.ends_with('\n')
            {
                self.seen += 1;
                return l.to_owned();
            }
            assert!(Instant::now() < deadline, "no answer; output {text:?}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn cmd(&mut self, c: &str) -> String {
        self.stdin
            .write_all(format!("{c}\n").as_bytes())
            .expect("command");
        self.answer()
    }

    fn state_dir(&self) -> PathBuf {
        self.root.join("k").join("sandbox")
    }

    /// SIGKILL now; then `state` says stopped, `delete` works and leaves
    /// nothing (no swap or REAP file).
    fn kill_and_delete(self, stage: &str) {
        self.ok(&["kill", "k", "SIGKILL"]);
        let s = common::bundle::state(&self.root.0, "k").expect("state after SIGKILL");
        assert_eq!(s["status"], "stopped", "{stage}: {s}");
        self.ok(&["delete", "k"]);
        assert!(
            !self.root.join("k").exists(),
            "{stage}: delete left {:?}",
            common::dir_names(&self.state_dir())
        );
        assert!(common::bundle::state(&self.root.0, "k").is_none());
    }
}

/// Polls until `path` is a file of at least `len` bytes.
fn wait_file(path: &Path, len: u64) -> bool {
    let deadline = Instant::now() + DEADLINE;
    while Instant::now() < deadline {
        if std::fs::metadata(path).is_ok_and(|m| m.len() >= len) {
            return true;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    false
}

/// SIGKILL while the swap file is being written (first hibernation: all
/// of 160 MiB goes there) and while the REAP file is read back (a wake
/// after a second hibernation): `state` and `delete` work, and nothing is
/// left behind.
#[test]
fn sigkill_during_hibernation_and_wake_leaves_state_and_delete_working() {
    if !require_kvm() {
        return;
    }
    // During the hibernation.
    let c = Container::start("160");
    let root = c.root.0.clone();
    let stop = std::thread::spawn(move || qrun_within(&root, &["kill", "k", "SIGSTOP"], DEADLINE));
    assert!(
        wait_file(&c.state_dir().join("swap.qswap"), 4096),
        "the swap file never appeared"
    );
    c.kill_and_delete("during hibernation");
    let out = stop.join().expect("SIGSTOP thread");
    eprintln!("SIGSTOP vs SIGKILL: {out:?}");
    interrupted_clearly(&out);

    // During the wake.
    let mut c = Container::start("160");
    c.ok(&["kill", "k", "SIGSTOP"]);
    let sum = c.cmd("verify");
    assert!(sum.starts_with("ok "), "{sum}");
    c.ok(&["kill", "k", "SIGSTOP"]);
    let reap = c.state_dir().join("reap.qreap");
    assert!(
        wait_file(&reap, 100 << 20),
        "the working set went to the REAP file"
    );
    let root = c.root.0.clone();
    let cont = std::thread::spawn(move || qrun_within(&root, &["kill", "k", "SIGCONT"], DEADLINE));
    std::thread::sleep(Duration::from_millis(15));
    c.kill_and_delete("during wake");
    let out = cont.join().expect("SIGCONT thread");
    eprintln!("SIGCONT vs SIGKILL: {out:?}");
    interrupted_clearly(&out);
}

/// A request the SIGKILL cut short failed with a clear reason (or it had
/// finished first, or came after the end: runc's "container not running").
fn interrupted_clearly(out: &Outcome) {
    let err = common::stderr(out);
    assert!(
        out.status == 0
            || err.contains("without an answer")
            || err.contains("container not running"),
        "{out:?}"
    );
}
