//! containerd (Debian's, its daemon started here with a private root,
//! state and socket) runs containers through `qrun` as its runc binary:
//! `ctr run --runc-binary <qrun> --rootfs DIR ID CMD`, end to end, and
//! `ctr task kill --signal SIGSTOP` / `SIGCONT` hibernate and wake it;
//! `ctr task exec` runs more processes in it (`qrun exec --detach
//! --pid-file`, the shim reaping the waiter).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::tmp::TempDir;
use common::{qrun, require_kvm};

/// containerd and ctr, or a loud skip (a failure under CI=true).
fn require_containerd() -> bool {
    let have = |b: &str| {
        Command::new(b)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if have("containerd") && have("ctr") {
        return true;
    }
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    assert!(
        !ci,
        "containerd/ctr are not installed and CI=true (scripts/deps.sh installs them)"
    );
    eprintln!(
        "\n**** SKIPPED: containerd/ctr not installed (scripts/deps.sh installs them); this test did NOT run ****\n"
    );
    false
}

/// A containerd daemon of our own, killed on drop.
struct Daemon {
    child: Child,
    socket: PathBuf,
    dir: TempDir,
}

impl Daemon {
    fn start() -> Self {
        let dir = TempDir::new("containerd");
        let d = &dir.0;
        let config = format!(
            "version = 2\nroot = \"{r}/root\"\nstate = \"{r}/state\"\n\
             disabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n\
             [grpc]\n  address = \"{r}/c.sock\"\n[ttrpc]\n  address = \"{r}/c.sock.ttrpc\"\n\
             [debug]\n  address = \"{r}/debug.sock\"\n",
            r = d.display()
        );
        std::fs::write(d.join("config.toml"), config).expect("writing config.toml");
        let log = std::fs::File::create(d.join("containerd.log")).expect("log");
        let child = Command::new("containerd")
            .arg("--config")
            .arg(d.join("config.toml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("dup"))
            .stderr(log)
            .spawn()
            .expect("starting containerd");
        let socket = d.join("c.sock");
        let deadline = Instant::now() + Duration::from_secs(20);
        let me = Self { child, socket, dir };
        while me
            .ctr(&["version"])
            .map(|o| !o.status.success())
            .unwrap_or(true)
        {
            assert!(
                Instant::now() < deadline,
                "containerd did not come up: {}",
                me.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        me
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.0.join("containerd.log")).unwrap_or_default()
    }

    fn ctr(&self, args: &[&str]) -> std::io::Result<Output> {
        Command::new("timeout")
            .arg("60")
            .arg("ctr")
            .arg("--address")
            .arg(&self.socket)
            .args(args)
            .stdin(Stdio::null())
            .output()
    }

    #[track_caller]
    fn ok(&self, args: &[&str]) -> String {
        let o = self.ctr(args).expect("running ctr");
        assert!(
            o.status.success(),
            "ctr {args:?}: {}\nstdout: {}\nstderr: {}",
            o.status,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn task_status(&self, id: &str) -> String {
        let list = self.ok(&["task", "ls"]);
        list.lines()
            .find(|l| l.split_whitespace().next() == Some(id))
            .and_then(|l| l.split_whitespace().nth(2))
            .unwrap_or("")
            .to_owned()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn rootfs(dir: &Path) -> PathBuf {
    let root = dir.join("rootfs");
    std::fs::create_dir_all(root.join("bin")).expect("mkdir");
    std::fs::copy(test_apps::path("hello"), root.join("hello")).expect("copy hello");
    std::fs::copy("/bin/busybox", root.join("bin/busybox")).expect("copy busybox");
    root
}

#[test]
fn ctr_runs_qrun_and_sigstop_hibernates() {
    if !require_kvm() || !require_containerd() {
        return;
    }
    let d = Daemon::start();
    let root = rootfs(&d.dir.0);
    let (q, r) = (qrun(), root.to_string_lossy().into_owned());
    let q = q.to_string_lossy().into_owned();
    // The shim keeps runc state under /run/containerd/runc/<namespace>,
    // shared by every containerd: ids unique to this run.
    let hello = format!("qhello-{}", std::process::id());
    let sleep = format!("qsleep-{}", std::process::id());
    let (hello, sleep) = (hello.as_str(), sleep.as_str());

    // End to end: containerd -> shim -> qrun create/start -> sandbox.
    let out = d.ok(&["run", "--runc-binary", &q, "--rootfs", &r, hello, "/hello"]);
    assert_eq!(out, "hello from a static binary\n");
    d.ok(&["container", "rm", hello]);

    d.ok(&[
        "run",
        "-d",
        "--runc-binary",
        &q,
        "--rootfs",
        &r,
        sleep,
        "/bin/busybox",
        "sleep",
        "60",
    ]);
    assert_eq!(d.task_status(sleep), "RUNNING");

    // `ctr task exec`: the shim runs `qrun exec --detach --pid-file` and
    // reports the process's output and exit status as runc's.
    let out = d.ok(&[
        "task",
        "exec",
        "--exec-id",
        "x1",
        sleep,
        "/bin/busybox",
        "echo",
        "from exec",
    ]);
    assert_eq!(out, "from exec\n");
    let o = d
        .ctr(&[
            "task",
            "exec",
            "--exec-id",
            "x2",
            sleep,
            "/bin/busybox",
            "sh",
            "-c",
            "exit 3",
        ])
        .expect("ctr task exec");
    assert_eq!(o.status.code(), Some(3), "exit status of the exec: {o:?}");
    let o = d
        .ctr(&["task", "exec", "--exec-id", "x3", sleep, "/nope"])
        .expect("ctr task exec");
    assert!(!o.status.success(), "exec of a missing binary: {o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no such file or directory"),
        "runc's error for a missing binary: {o:?}"
    );
    assert_eq!(d.task_status(sleep), "RUNNING");

    // SIGSTOP becomes a hibernate request on the sandbox's control socket,
    // SIGCONT a wake; qrun's state (kept where containerd's runc shim
    // points `--root`) shows each as the `qrun.hibernation` annotation.
    d.ok(&["task", "kill", "--signal", "SIGSTOP", sleep]);
    assert_eq!(hibernation(sleep), "hibernated");
    d.ok(&["task", "kill", "--signal", "SIGCONT", sleep]);
    assert_eq!(hibernation(sleep), "running");
    assert_eq!(d.task_status(sleep), "RUNNING");

    d.ok(&["task", "pause", sleep]);
    assert_eq!(d.task_status(sleep), "PAUSED");
    let o = d
        .ctr(&[
            "task",
            "exec",
            "--exec-id",
            "x4",
            sleep,
            "/bin/busybox",
            "true",
        ])
        .expect("ctr task exec");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("cannot exec in a paused state"),
        "exec into a paused task is refused: {o:?}"
    );
    d.ok(&["task", "resume", sleep]);

    d.ok(&["task", "kill", "--signal", "SIGKILL", sleep]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while d.task_status(sleep) != "STOPPED" {
        assert!(Instant::now() < deadline, "{sleep} did not stop");
        std::thread::sleep(Duration::from_millis(50));
    }
    d.ok(&["task", "delete", sleep]);
    d.ok(&["container", "rm", sleep]);
}

/// The `qrun.hibernation` annotation of container `id`, from `qrun state`
/// under the root containerd's runc shim uses (namespace `default`).
fn hibernation(id: &str) -> String {
    let root = Path::new("/run/containerd/runc/default");
    let out = Command::new(qrun())
        .arg("--root")
        .arg(root)
        .args(["state", id])
        .output()
        .expect("qrun state");
    assert!(out.status.success(), "qrun state {id}: {out:?}");
    let state: serde_json::Value = serde_json::from_slice(&out.stdout).expect("state JSON");
    state["annotations"]["qrun.hibernation"]
        .as_str()
        .unwrap_or_else(|| panic!("no hibernation annotation: {state}"))
        .to_owned()
}
