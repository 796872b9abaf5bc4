//! An OCI container's program is pid 1 of its pid namespace, and Linux
//! (pid_namespaces(7)) gives it init semantics: a signal it has no handler
//! for is dropped, whether another process of the container, the program
//! itself or the runtime sent it, except SIGKILL (and SIGSTOP) from an
//! ancestor namespace; faults still end it. So `kill TERM` to a `sleep`
//! container does nothing under runc and `docker stop` waits, then
//! SIGKILLs (137). The same bundle (`init_sig MODE`) runs under runc and
//! qrun (`RT --root DIR run`) and must end the same way.
//!
//! Needs /dev/kvm (qrun's side) and runc: without /dev/kvm a test says
//! SKIPPED loudly, and fails under `CI=true`.

#![forbid(unsafe_code)]

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::bundle::bundle;
use common::require_kvm;
use common::server::Server;
use common::tmp::TempDir;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rt {
    Runc,
    Qrun,
}

const BOTH: [Rt; 2] = [Rt::Runc, Rt::Qrun];

impl Rt {
    fn program(self) -> std::path::PathBuf {
        match self {
            Rt::Runc => "runc".into(),
            Rt::Qrun => common::qrun(),
        }
    }

    fn cmd(self, root: &Path) -> Command {
        let mut c = Command::new(self.program());
        c.arg("--root").arg(root);
        c
    }

    /// `RT --root ROOT ARGS`: its shell status.
    fn run(self, root: &Path, args: &[&str]) -> i32 {
        self.run_err(root, args).0
    }

    /// As [`Rt::run`], with what the runtime wrote on stderr.
    fn run_err(self, root: &Path, args: &[&str]) -> (i32, String) {
        let out = self
            .cmd(root)
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("{self:?} {args:?}: {e} (runc: scripts/deps.sh)"));
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        (common::shell_status(out.status), err)
    }

    /// The container's status (`state`), or `<none>`.
    fn status(self, root: &Path, id: &str) -> String {
        let out = self.cmd(root).args(["state", id]).output().expect("state");
        serde_json::from_slice::<serde_json::Value>(&out.stdout)
            .ok()
            .and_then(|v| v["status"].as_str().map(str::to_owned))
            .unwrap_or_else(|| "<none>".into())
    }
}

/// A container running `init_sig MODE` in the foreground (`run`), once it
/// printed "ready"; it is force-deleted when dropped.
struct Running {
    rt: Rt,
    root: TempDir,
    id: String,
    server: Server,
    /// The pid the program printed.
    pid: String,
}

impl Running {
    fn start(rt: Rt, bundle: &Path, mode: &str) -> Running {
        let c = Self::start_any_pid(rt, bundle, mode);
        assert_eq!(c.pid, "1", "{rt:?}: the program is pid 1");
        c
    }

    /// As [`Running::start`], whatever the program's pid.
    fn start_any_pid(rt: Rt, bundle: &Path, mode: &str) -> Running {
        let root = TempDir::new("init-sig-root");
        // Unique per container: tests run at once, and an id names
        // host-wide things (the cgroup).
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let id = format!("init-{mode}-{}-{n}", std::process::id());
        let mut cmd = rt.cmd(&root.0);
        cmd.args(["run", "--bundle"]).arg(bundle).arg(&id);
        let mut server = Server::spawn(cmd);
        let pid = server.wait_line("ready pid ", Duration::from_secs(15));
        Running {
            rt,
            root,
            id,
            server,
            pid,
        }
    }

    fn kill(&mut self, sig: &str) {
        let (st, err) = self.rt.run_err(&self.root.0, &["kill", &self.id, sig]);
        if st != 0 {
            // What `run` printed says why the container is gone.
            let run = self.server.kill();
            panic!("{:?} kill {sig}: status {st}: {err}; run: {run}", self.rt);
        }
    }

    /// The exit status of `run` (the program's).
    fn exit(&mut self) -> i32 {
        self.server.wait_exit(Duration::from_secs(15)).0
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.rt.run(&self.root.0, &["delete", "--force", &self.id]);
    }
}

fn init_bundle(dir: &Path, mode: &str) {
    let prog = test_apps::path("init_sig");
    bundle(dir, &[("/init_sig", &prog)], &["/init_sig", mode], |_| {});
}

/// No SIGTERM handler: `kill TERM` leaves the container running, `kill
/// KILL` ends it with 137, under runc and qrun alike. (Before init
/// semantics qrun's program died of SIGTERM at once: 143.)
#[test]
fn sigterm_without_a_handler_leaves_pid_1_running() {
    if !require_kvm() {
        return;
    }
    let b = TempDir::new("init-sig-wait");
    init_bundle(&b.0, "wait");
    for rt in BOTH {
        let mut c = Running::start(rt, &b.0, "wait");
        c.kill("TERM");
        c.kill("INT");
        c.kill("HUP");
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(
            rt.status(&c.root.0, &c.id),
            "running",
            "{rt:?}: pid 1 without handlers survives TERM, INT and HUP"
        );
        c.kill("KILL");
        assert_eq!(c.exit(), 137, "{rt:?}: SIGKILL from the runtime is forced");
    }
}

/// A program that joins a pid namespace (a path in the spec, as the CRI
/// gives every container of a pod: the pause container's namespace) is
/// not its init: SIGTERM with no handler ends it (143), so `crictl stop`
/// does not wait for its timeout. (qrun gave it init semantics, and the
/// stop took the whole timeout and a SIGKILL.)
#[test]
fn a_program_in_a_joined_pid_namespace_dies_of_sigterm() {
    if !require_kvm() {
        return;
    }
    let b = TempDir::new("init-sig-joined");
    let prog = test_apps::path("init_sig");
    let ns = format!("/proc/{}/ns/pid", std::process::id());
    bundle(&b.0, &[("/init_sig", &prog)], &["/init_sig", "wait"], |c| {
        let list = c["linux"]["namespaces"].as_array_mut().expect("namespaces");
        for n in list.iter_mut() {
            if n["type"] == "pid" {
                n["path"] = ns.clone().into();
            }
        }
    });
    for rt in BOTH {
        let mut c = Running::start_any_pid(rt, &b.0, "wait");
        c.kill("TERM");
        assert_eq!(
            c.exit(),
            143,
            "{rt:?}: SIGTERM ends a program that is not init"
        );
    }
}

/// A SIGTERM handler runs: the program exits 42 from it.
#[test]
fn sigterm_with_a_handler_reaches_pid_1() {
    if !require_kvm() {
        return;
    }
    let b = TempDir::new("init-sig-handler");
    init_bundle(&b.0, "handler");
    for rt in BOTH {
        let mut c = Running::start(rt, &b.0, "handler");
        c.kill("TERM");
        assert_eq!(c.exit(), 42, "{rt:?}: the handler ran");
    }
}

/// Signals from inside the container do not end pid 1 either, SIGKILL
/// included: sent by pid 1 itself (`self`: exits 7) or by a child
/// (`child`: exits 8).
#[test]
fn signals_from_inside_do_not_end_pid_1() {
    if !require_kvm() {
        return;
    }
    for (mode, want) in [("self", 7), ("child", 8)] {
        let b = TempDir::new("init-sig-inside");
        init_bundle(&b.0, mode);
        for rt in BOTH {
            let mut c = Running::start(rt, &b.0, mode);
            assert_eq!(c.exit(), want, "{rt:?} {mode}");
        }
    }
}

/// `abort()` still ends pid 1: its SIGABRT is dropped, then musl's crash
/// instruction faults, and a fault is forced (139 under runc and qrun).
#[test]
fn abort_still_ends_pid_1() {
    if !require_kvm() {
        return;
    }
    let b = TempDir::new("init-sig-abort");
    init_bundle(&b.0, "abort");
    let got: Vec<i32> = BOTH
        .iter()
        .map(|&rt| Running::start(rt, &b.0, "abort").exit())
        .collect();
    assert_eq!(got[0], got[1], "runc vs qrun: {got:?}");
    assert_eq!(got[0], 139, "runc: abort() as pid 1 dies of the fault");
}
