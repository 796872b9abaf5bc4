//! The vCPU kick: control requests reach a program that spins in user
//! mode without system calls (`spin`). SIGTERM to `qrun do` must run its
//! handler (or end it with status 143) within seconds, as natively; a
//! hibernation requested over the control socket must happen (the guest
//! deflates from the kick interrupt), and after the wake the program's
//! checksum over its memory must still be right.
//!
//! Every test needs /dev/kvm: without it a test says SKIPPED loudly, and
//! fails under `CI=true`.

#![forbid(unsafe_code)]

mod common;

use std::process::Command;
use std::time::Duration;

use common::ready::{kill_term, run_after_ready, spawn};
use common::{Outcome, assert_same, require_kvm};

/// Time for the program to get from "ready" into its loop.
const SETTLE: Duration = Duration::from_millis(200);

fn sigterm(mode: &str, sandboxed: bool) -> Outcome {
    let cmd = if sandboxed {
        let mut c = Command::new(common::qrun());
        c.args(["do", "--"]).arg(test_apps::path("spin")).arg(mode);
        c
    } else {
        let mut c = Command::new(test_apps::path("spin"));
        c.arg(mode);
        c
    };
    // Natively the end takes ~2 ms and sandboxed ~20 ms on an idle
    // machine; the deadline leaves room for a loaded 2-CPU machine (a
    // program the kick does not reach never ends at all).
    let (out, took) = run_after_ready(spawn(cmd), SETTLE, Duration::from_secs(5), kill_term);
    eprintln!("spin {mode} (sandboxed: {sandboxed}): ended {took:?} after SIGTERM");
    out
}

fn compare(mode: &str) -> Outcome {
    let native = sigterm(mode, false);
    let sandboxed = sigterm(mode, true);
    assert_same(&format!("spin {mode}"), &native, &sandboxed);
    native
}

/// A handler that sets a flag the loop polls: it must run.
#[test]
fn sigterm_reaches_a_spinning_program() {
    if !require_kvm() {
        return;
    }
    let native = compare("handler");
    assert_eq!(String::from_utf8_lossy(&native.stdout), "ready\ngraceful\n");
    assert_eq!(native.status, 0);
}

/// No handler: SIGTERM's default action ends it, status 143.
#[test]
fn sigterm_ends_a_spinning_program() {
    if !require_kvm() {
        return;
    }
    let native = compare("plain");
    assert_eq!(native.status, 143);
}

/// Hibernate and wake a program that computes checksums over 16 MiB of
/// its memory without a system call: the guest deflates from the kick
/// interrupt (no blocking call to do it in), stays parked until the wake,
/// and the checksum still matches afterwards.
#[test]
fn hibernate_a_spinning_program() {
    if !require_kvm() {
        return;
    }
    let dir = common::tmp::TempDir::new("kick-hib");
    let socket = dir.join("ctl.sock");
    let mut cmd = common::qrun_do_controlled(&socket, &dir.join("state"));
    cmd.arg(test_apps::path("spin")).args(["checksum", "1500"]);
    let (out, _) = run_after_ready(spawn(cmd), SETTLE, Duration::from_secs(60), |_| {
        common::wait_for_socket(&socket);
        let st = common::ctl(&socket, "hibernate").expect("hibernate a spinning program");
        assert_eq!(st["state"], "hibernated", "{st}");
        assert!(
            st["swapped_out_bytes"].as_u64().unwrap_or(0) >= 16 << 20,
            "the 16 MiB buffer was not swapped out: {st}"
        );
        // Parked: still hibernated a while later (the program does not run).
        std::thread::sleep(Duration::from_millis(300));
        let st = common::ctl(&socket, "status").expect("status");
        assert_eq!(st["state"], "hibernated", "{st}");
        let st = common::ctl(&socket, "wake").expect("wake");
        assert_eq!(st["state"], "running", "{st}");
    });
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "ready\nchecksum ok\n",
        "{out:?}"
    );
    assert_eq!(out.status, 0, "{out:?}");
}
