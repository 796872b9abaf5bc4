//! The first entry to user mode gives the program no more rights than any
//! later return (issue 12, critical): programs whose *very first
//! instruction* is privileged (`mov cr3` both ways, `hlt`, `cli`, `out` to
//! the host-call doorbell) or reads kernel memory (the direct map of guest
//! RAM, the kernel image) must die of SIGSEGV (status 139) as natively,
//! under `qrun do` and under `qrun run`; a program that spins before its
//! first system call must still get SIGTERM and be hibernated and woken.
//! The programs are bare assembly (`test-apps/asm/`): no C library runs
//! before them.
//!
//! Every test needs /dev/kvm: without it a test says SKIPPED loudly, and
//! fails under `CI=true`.

#![forbid(unsafe_code)]

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::bundle::{bundle, qrun_at};
use common::tmp::TempDir;
use common::{Outcome, assert_same, require_kvm, run_native, run_sandboxed};

/// First instructions that Linux answers with SIGSEGV.
const PRIVILEGED: &[&str] = &[
    "first_cr3_read",
    "first_cr3_write",
    "first_hlt",
    "first_cli",
    "first_out",
    "first_kread",
];

fn check_segv(name: &str, sandboxed: &Outcome) {
    assert_eq!(sandboxed.status, 139, "{name}: {sandboxed:?}");
    assert!(
        sandboxed.stdout.is_empty(),
        "{name} printed through a path it must not have: {sandboxed:?}"
    );
    let err = String::from_utf8_lossy(&sandboxed.stderr);
    assert!(
        !err.contains("vCPU failed") && !err.contains("panicked"),
        "{name}: the sandbox failed instead of the program: {err}"
    );
}

#[test]
fn bare_programs_run_at_all() {
    if !require_kvm() {
        return;
    }
    let prog = test_apps::path("first_write");
    let native = run_native(&prog, &[], &[]);
    assert_eq!(native.stdout, b"ok\n");
    assert_same("first_write", &native, &run_sandboxed(&prog, &[], &[]));
}

#[test]
fn privileged_first_instructions_fault_under_qrun_do() {
    if !require_kvm() {
        return;
    }
    for name in PRIVILEGED {
        let prog = test_apps::path(name);
        let native = run_native(&prog, &[], &[]);
        assert_eq!(native.status, 139, "{name} natively: {native:?}");
        let sandboxed = run_sandboxed(&prog, &[], &[]);
        check_segv(name, &sandboxed);
        assert_same(name, &native, &sandboxed);
    }
}

#[test]
fn privileged_first_instructions_fault_under_qrun_run() {
    if !require_kvm() {
        return;
    }
    let root = TempDir::new("first-root");
    for name in PRIVILEGED {
        let b = TempDir::new("first-bundle");
        bundle(
            &b.0,
            &[("/prog", &test_apps::path(name))],
            &["/prog"],
            |_| {},
        );
        let out = qrun_at(
            &root.0,
            &[
                "run",
                "--bundle",
                &b.0.to_string_lossy(),
                &format!("f-{name}"),
            ],
        );
        check_segv(name, &out);
    }
}

/// A `qrun do` of `first_spin`; SIGKILLed when dropped, so that a failing
/// test leaves no spinning sandbox behind.
struct Spinner(std::process::Child);

impl Drop for Spinner {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `qrun do` of `first_spin`, after it had time to spin.
fn spawn_spinner(extra: &[&str]) -> Spinner {
    let mut cmd = Command::new(common::qrun());
    cmd.arg("do").args(extra).arg("--");
    cmd.arg(test_apps::path("first_spin"));
    let child = common::ready::spawn(cmd);
    std::thread::sleep(Duration::from_millis(300));
    Spinner(child)
}

fn wait_with_deadline(mut s: Spinner, deadline: Duration) -> i32 {
    let t0 = Instant::now();
    loop {
        if let Some(st) = s.0.try_wait().expect("try_wait") {
            return common::shell_status(st);
        }
        assert!(
            t0.elapsed() <= deadline,
            "the spinning program did not end within {deadline:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn sigterm_reaches_a_program_spinning_before_its_first_syscall() {
    if !require_kvm() {
        return;
    }
    let child = spawn_spinner(&[]);
    common::ready::kill_term(&child.0);
    assert_eq!(wait_with_deadline(child, Duration::from_secs(2)), 143);
}

#[test]
fn control_requests_reach_a_program_spinning_before_its_first_syscall() {
    if !require_kvm() {
        return;
    }
    let dir = TempDir::new("first-spin");
    let socket = dir.join("ctl.sock");
    let state = dir.join("state");
    let child = spawn_spinner(&[
        "--control-socket",
        &socket.to_string_lossy(),
        "--state-dir",
        &state.to_string_lossy(),
    ]);
    common::wait_for_socket(&socket);
    let st = common::ctl(&socket, "hibernate").expect("hibernate");
    assert_eq!(st["state"], "hibernated", "{st}");
    let st = common::ctl(&socket, "wake").expect("wake");
    assert_eq!(st["state"], "running", "{st}");
    common::ctl(&socket, "signal 9").expect("signal 9");
    assert_eq!(wait_with_deadline(child, Duration::from_secs(2)), 137);
}
