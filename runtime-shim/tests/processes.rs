//! Several processes in one sandbox (docs/processes.md): fork with
//! copy-on-write, exit and wait, signals between processes, and busybox
//! shells that fork for `$(...)`, pipelines and subshells. Each case runs
//! natively and in `qrun do`; stdout, stderr and exit status must match.
//!
//! Every test needs /dev/kvm: without it a test says SKIPPED loudly, and
//! fails under `CI=true`.

#![forbid(unsafe_code)]

mod common;

use std::path::Path;

use common::{assert_same, require_kvm, run_native, run_sandboxed, stdout};

/// The forkwait program: fork, a copy-on-write write matrix, wait4/waitid
/// statuses (exit codes, SIGSEGV, SIGABRT, SIGKILL), getppid, zombies,
/// ECHILD, SIGCHLD ignored, kill to a child, vfork.
#[test]
fn forkwait() {
    if !require_kvm() {
        return;
    }
    let prog = test_apps::path("forkwait");
    let native = run_native(&prog, &[], &[]);
    let text = stdout(&native);
    assert!(
        !text.contains("WRONG") && text.contains("cow parent: own values"),
        "the native run already fails: {native:?}"
    );
    let sandboxed = run_sandboxed(&prog, &[], &[]);
    assert_same("forkwait", &native, &sandboxed);
}

const BUSYBOX: &str = "/bin/busybox";

/// `busybox sh -c script` natively and sandboxed (host rootfs); returns
/// the common stdout.
fn shell(script: &str) -> String {
    let native = run_native(Path::new(BUSYBOX), &["sh", "-c", script], &[]);
    let sandboxed = run_sandboxed(Path::new(BUSYBOX), &["sh", "-c", script], &[]);
    assert_same(&format!("sh -c {script:?}"), &native, &sandboxed);
    stdout(&native)
}

#[test]
fn shell_command_substitution() {
    if !require_kvm() {
        return;
    }
    assert_eq!(shell("echo $(echo hi)"), "hi\n");
    assert_eq!(shell("x=$(echo one; echo two); echo \"$x\""), "one\ntwo\n");
}

#[test]
fn shell_pipeline() {
    if !require_kvm() {
        return;
    }
    assert_eq!(shell("echo a | cat"), "a\n");
    assert_eq!(shell("echo a b c | wc -w | cat"), "3\n");
}

#[test]
fn shell_statuses() {
    if !require_kvm() {
        return;
    }
    assert_eq!(shell("true; false; echo $?"), "1\n");
    assert_eq!(shell("(exit 3); echo $?"), "3\n");
    assert_eq!(shell("sh -c 'kill -9 $$'; echo $?"), "137\n");
    // The script's own exit status through a child shell.
    let native = run_native(Path::new(BUSYBOX), &["sh", "-c", "(exit 5)"], &[]);
    let sandboxed = run_sandboxed(Path::new(BUSYBOX), &["sh", "-c", "(exit 5)"], &[]);
    assert_same("sh -c '(exit 5)'", &native, &sandboxed);
    assert_eq!(native.status, 5);
}
