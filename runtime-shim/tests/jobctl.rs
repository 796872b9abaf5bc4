//! Job control in the guest (docs/processes.md, "Job control"): stop
//! signals raised inside the sandbox stop processes, SIGCONT continues
//! them, `wait4`/`waitid` and SIGCHLD report both, orphaned groups, and
//! SIGHUP when a terminal's session leader exits or its master closes
//! (`jobctl`, natively and sandboxed, the same output and status). A
//! process stopped inside the sandbox stays stopped across hibernation,
//! and the host's SIGCONT (a wake) does not continue it.
//!
//! Every test needs /dev/kvm: without it a test says SKIPPED loudly, and
//! fails under `CI=true`.

#![forbid(unsafe_code)]

mod common;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::controlled::Controlled;
use common::{assert_same, require_kvm, run_native, run_sandboxed, stdout};

#[test]
fn job_control_native_and_sandboxed() {
    if !require_kvm() {
        return;
    }
    let prog = test_apps::path("jobctl");
    let native = run_native(&prog, &[], &[]);
    let text = stdout(&native);
    assert!(
        text.ends_with("done\n") && !text.contains("WRONG") && !text.contains("MOVED"),
        "the native run already fails: {native:?}"
    );
    assert!(
        text.contains("stopped child: stat T, status T (stopped)"),
        "{text}"
    );
    assert_same("jobctl", &native, &run_sandboxed(&prog, &[], &[]));
}

/// The same on 2 vCPUs: the counting thread's user mode runs on the
/// secondary, which a stop must recall (`task::offload`).
#[test]
fn job_control_on_2_vcpus() {
    if !require_kvm() {
        return;
    }
    let prog = test_apps::path("jobctl");
    let native = run_native(&prog, &[], &[]);
    assert!(stdout(&native).ends_with("done\n"), "{native:?}");
    let sandboxed = common::run_sandboxed_with(&["--cpus", "2"], &prog, &[], &[]);
    assert_same("jobctl --cpus 2", &native, &sandboxed);
}

/// A child stopped by SIGSTOP inside the sandbox is a parked task: the
/// sandbox hibernates and wakes three times (the last wake by SIGCONT to
/// `qrun do`, which the VMM takes as a wake), and the child is still
/// stopped afterwards, with nothing reported to its parent meanwhile;
/// then the parent continues and reaps it.
#[test]
fn a_stopped_child_stays_stopped_across_hibernation() {
    if !require_kvm() {
        return;
    }
    let (mut c, line) = Controlled::start(
        "jobctl-hold",
        &test_apps::path("jobctl"),
        &["hold"],
        Stdio::piped(),
    );
    assert_eq!(line, "ready\n");
    for _ in 0..2 {
        c.hibernate();
        c.ctl("wake");
    }
    c.hibernate();
    let pid = c.child.id().to_string();
    let st = Command::new("kill")
        .args(["-CONT", &pid])
        .status()
        .expect("kill");
    assert!(st.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let s = c.ctl("status");
        if s["state"] == "running" {
            break;
        }
        assert!(Instant::now() < deadline, "SIGCONT did not wake: {s}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut stdin = c.child.stdin.take().expect("stdin");
    stdin.write_all(b"go\n").expect("write");
    drop(stdin);
    let (rest, code) = c.finish();
    assert_eq!(
        rest,
        "hold: wait4(WUNTRACED): stopped by 19\n\
         hold: after the line: stat T, status T (stopped)\n\
         hold: nothing reported meanwhile: nothing\n\
         hold: SIGCONT: continued\n\
         hold: exit: exited 5\n"
    );
    assert_eq!(code, 0);
}
