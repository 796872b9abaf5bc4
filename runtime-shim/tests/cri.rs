//! Kubernetes' CRI drives qrun as it drives runc (issue 17): a containerd
//! of our own with the CRI plugin and both runtime handlers, and `crictl`
//! (cri-tools v1.30) running a pod's whole life under each handler:
//! `runp`, `create`, `start`, `exec`, `logs`, a container that exits on its
//! own, `stop` of a container that handles SIGTERM, of one without a
//! handler in the pod's pid namespace (SIGTERM ends it) and of one that is
//! the init of its own pid namespace (SIGKILL at the timeout), `rm`,
//! `stopp`, `rmp`; the pod's hostname inside a container. The same steps run
//! under `runc` (the reference) and `qrun` at once, on the same image, and
//! must give the same outputs, states and exit codes.
//!
//! The pod uses the host's network (namespace_options network NODE), so
//! no CNI network is needed.

mod common;

use std::time::{Duration, Instant};

use common::cri::{Containerd, RUNC_ROOT, require_cri_tools};
use common::{qrun, require_kvm};
use serde_json::json;

/// What one handler's run gave, compared between runc and qrun.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    exec_out: String,
    exec_status: Option<i32>,
    exec_missing_fails: bool,
    hostname: String,
    logs_out: String,
    logs_err: String,
    quitter_exit: i64,
    quitter_logs: String,
    stop_exit: i64,
    stop_logs: String,
    plain_exit: i64,
    stubborn_exit: i64,
}

#[test]
fn crictl_runs_a_pod_under_qrun_as_under_runc() {
    if !require_kvm() {
        return;
    }
    let Some(tools) = require_cri_tools() else {
        return;
    };
    let c = Containerd::start(&tools);
    let (runc, qrun) = std::thread::scope(|s| {
        let runc = s.spawn(|| pod_life(&c, "runc"));
        let qrun = s.spawn(|| pod_life(&c, "qrun"));
        (runc.join(), qrun.join())
    });
    let runc = runc.unwrap_or_else(|_| panic!("the runc run failed (see above)"));
    let qrun = qrun.unwrap_or_else(|_| panic!("the qrun run failed (see above)"));
    eprintln!("runc: {runc:?}\nqrun: {qrun:?}");
    assert_eq!(qrun, runc, "qrun under the CRI differs from runc");
    // And what runc gave is what a pod should see.
    assert_eq!(qrun.exec_out, "from exec\n");
    assert_ne!(qrun.exec_status, Some(0), "crictl exec of `exit 3`");
    assert!(qrun.exec_missing_fails, "crictl exec of a missing program");
    let host = host_hostname();
    assert_eq!(
        qrun.hostname,
        format!("{host}\n"),
        "the pod's hostname is the host's"
    );
    assert_eq!(
        (qrun.logs_out.as_str(), qrun.logs_err.as_str()),
        ("started\n", "to-stderr\n")
    );
    assert_eq!(
        (qrun.quitter_exit, qrun.quitter_logs.as_str()),
        (7, "bye\n")
    );
    assert_eq!(
        (qrun.stop_exit, qrun.stop_logs.as_str()),
        (0, "started\ngot TERM\n")
    );
    assert_eq!((qrun.plain_exit, qrun.stubborn_exit), (143, 137));
}

/// Runs a pod through its whole life with runtime handler `handler`,
/// asserting what must hold under any runtime; returns what may be
/// compared with runc.
fn pod_life(c: &Containerd, handler: &str) -> Seen {
    let dir = c.dir.join(handler);
    std::fs::create_dir_all(dir.join("logs")).expect("mkdir");
    let pod_config = dir.join("pod.json");
    let pod = json!({
        "metadata": {
            "name": format!("cri-{handler}"),
            "namespace": "default",
            "uid": format!("uid-{handler}-{}", std::process::id()),
            "attempt": 0,
        },
        "log_directory": dir.join("logs"),
        "linux": {"security_context": {"namespace_options": {"network": 2}}},
    });
    std::fs::write(&pod_config, pod.to_string()).expect("pod.json");
    let pod_config = pod_config.to_str().expect("UTF-8 path");

    let pod_id = c.ok(&["runp", "--runtime", handler, pod_config]);
    let pod_id = pod_id.trim();
    let p = c.inspect("inspectp", pod_id);
    assert_eq!(p["status"]["state"], "SANDBOX_READY", "{handler}: {p}");
    if handler == "qrun" {
        // The pause container is a qrun sandbox.
        qrun_state(pod_id).expect("qrun knows the pause container");
    }

    // `pid`: the container's namespace_options.pid (1: CONTAINER, a pid
    // namespace of its own; by default the pod's).
    let create = |name: &str, command: &[&str], pid: Option<i32>| {
        let config = dir.join(format!("{name}.json"));
        let spec = json!({
            "metadata": {"name": name},
            "image": {"image": common::cri::IMAGE},
            "command": command,
            "log_path": format!("{name}.log"),
            "linux": {"security_context": {"namespace_options": {"pid": pid.unwrap_or(0)}}},
        });
        std::fs::write(&config, spec.to_string()).expect("container.json");
        let config = config.to_str().expect("UTF-8 path");
        let id = c.ok(&["create", pod_id, config, pod_config]);
        let id = id.trim().to_owned();
        c.ok(&["start", &id]);
        id
    };

    // A container that handles SIGTERM: exec, logs, a prompt stop.
    let main = create(
        "main",
        &[
            "/bin/sh",
            "-c",
            "trap 'echo got TERM; exit 0' TERM; echo started; echo to-stderr >&2; \
             while true; do sleep 1; done",
        ],
        None,
    );
    c.wait_state(&main, "CONTAINER_RUNNING");
    let exec = c.crictl(&["exec", &main, "/bin/echo", "from exec"]);
    let exec_out = String::from_utf8_lossy(&exec.stdout).into_owned();
    let exec = c.crictl(&["exec", &main, "/bin/sh", "-c", "exit 3"]);
    let exec_status = exec.status.code();
    let exec_missing_fails = !c.crictl(&["exec", &main, "/nope"]).status.success();
    // The pod's hostname: a host-network pod shares the host's UTS
    // namespace (and the CRI sets no hostname), so the host's.
    let hostname = c.ok(&["exec", &main, "hostname"]);
    let logs = c.crictl(&["logs", &main]);
    let (logs_out, logs_err) = (
        String::from_utf8_lossy(&logs.stdout).into_owned(),
        String::from_utf8_lossy(&logs.stderr).into_owned(),
    );
    assert_eq!(c.state(&main), "CONTAINER_RUNNING", "{handler}: after exec");

    // A container that ends on its own must be seen to end (the issue:
    // under qrun it stayed Running forever).
    let quitter = create("quitter", &["/bin/sh", "-c", "echo bye; exit 7"], None);
    c.wait_state(&quitter, "CONTAINER_EXITED");
    let quitter_exit = exit_code(c, &quitter);
    let quitter_logs = c.ok(&["logs", &quitter]);
    c.ok(&["rm", &quitter]);

    // `crictl stop` within its timeout: SIGTERM to a handler ends it at
    // once; a pid 1 without a handler ignores SIGTERM (init semantics) and
    // is SIGKILLed when the timeout runs out.
    let t = Instant::now();
    c.ok(&["stop", "--timeout", "20", &main]);
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "{handler}: stop of a SIGTERM handler took {:?}",
        t.elapsed()
    );
    assert_eq!(c.state(&main), "CONTAINER_EXITED", "{handler}");
    let stop_exit = exit_code(c, &main);
    let stop_logs = c.ok(&["logs", &main]);
    c.ok(&["rm", &main]);

    // The pod's containers share its pid namespace (the pause container
    // is its init), so a `sleep` without a handler dies of SIGTERM at once
    // (143); in a pid namespace of its own (pid CONTAINER) it is init,
    // ignores SIGTERM and is SIGKILLed when the timeout runs out (137).
    let plain = create("plain", &["/bin/sleep", "300"], None);
    c.wait_state(&plain, "CONTAINER_RUNNING");
    let t = Instant::now();
    c.ok(&["stop", "--timeout", "20", &plain]);
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "{handler}: stop of sleep in the pod's pid namespace took {:?}",
        t.elapsed()
    );
    let plain_exit = exit_code(c, &plain);
    c.ok(&["rm", &plain]);

    let stubborn = create("stubborn", &["/bin/sleep", "300"], Some(1));
    c.wait_state(&stubborn, "CONTAINER_RUNNING");
    let t = Instant::now();
    c.ok(&["stop", "--timeout", "2", &stubborn]);
    let took = t.elapsed();
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(10),
        "{handler}: stop -t 2 of a pid 1 that ignores SIGTERM took {took:?}"
    );
    let stubborn_exit = exit_code(c, &stubborn);
    c.ok(&["rm", &stubborn]);

    // The pod: stop, remove, gone; no runtime state left behind.
    c.ok(&["stopp", pod_id]);
    let p = c.inspect("inspectp", pod_id);
    assert_eq!(p["status"]["state"], "SANDBOX_NOTREADY", "{handler}: {p}");
    c.ok(&["rmp", pod_id]);
    assert!(
        !c.crictl(&["inspectp", pod_id]).status.success(),
        "{handler}: the pod is still there after rmp"
    );
    if handler == "qrun" {
        for id in [pod_id, &main, &plain, &stubborn] {
            assert!(qrun_state(id).is_err(), "qrun still has {id}");
        }
    }
    Seen {
        exec_out,
        exec_status,
        exec_missing_fails,
        hostname,
        logs_out,
        logs_err,
        quitter_exit,
        quitter_logs,
        stop_exit,
        stop_logs,
        plain_exit,
        stubborn_exit,
    }
}

/// The host's hostname (`/proc/sys/kernel/hostname`).
fn host_hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .expect("the hostname")
        .trim()
        .to_owned()
}

/// A container's `status.exitCode` (-1 when there is none).
#[track_caller]
fn exit_code(c: &Containerd, id: &str) -> i64 {
    c.inspect("inspect", id)["status"]["exitCode"]
        .as_i64()
        .unwrap_or(-1)
}

/// `qrun state ID` under the shim's root: the state, or qrun's error.
fn qrun_state(id: &str) -> Result<serde_json::Value, String> {
    let out = std::process::Command::new(qrun())
        .args(["--root", RUNC_ROOT, "state", id])
        .output()
        .expect("qrun state");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())
}
