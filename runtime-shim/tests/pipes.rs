//! Guest pipes (docs/processes.md, "Pipes"): `pipe`/`pipe2` inside the
//! sandbox make guest-kernel pipes. The `pipes` program checks their
//! semantics (flags, sizes, atomicity, EOF, EPIPE/SIGPIPE, FIONREAD,
//! fstat, /proc/self/fd links, fork/exec sharing, signals, poll, select,
//! epoll mixed with host fds) natively and sandboxed, and the two runs
//! must print the same. Hibernation with a task parked on a pipe, and a
//! task alone blocked on its own pipe, run under control.
//!
//! Every test needs /dev/kvm: without it a test says SKIPPED loudly, and
//! fails under `CI=true`.

#![forbid(unsafe_code)]

mod common;

use std::io::Write;
use std::process::Stdio;

use common::controlled::Controlled;
use common::{assert_same, require_kvm, run_native, run_sandboxed, stdout};

fn pipes() -> std::path::PathBuf {
    test_apps::path("pipes")
}

/// Every semantic check, native vs sandboxed.
#[test]
fn pipe_semantics_match_linux() {
    if !require_kvm() {
        return;
    }
    let native = run_native(&pipes(), &[], &[]);
    let text = stdout(&native);
    assert!(
        !text.contains("FAIL") && native.status == 0 && text.lines().count() > 100,
        "the native run already fails: {native:?}"
    );
    let sandboxed = run_sandboxed(&pipes(), &[], &[]);
    assert_same("pipes", &native, &sandboxed);
}

/// A process alone: EOF with no writer; with itself as the writer a read
/// and an endless poll block until a signal (EINTR), as on Linux.
#[test]
fn a_process_alone_on_its_own_pipe() {
    if !require_kvm() {
        return;
    }
    let native = run_native(&pipes(), &["alone"], &[]);
    assert!(
        !stdout(&native).contains("FAIL") && native.status == 0,
        "the native run already fails: {native:?}"
    );
    let sandboxed = run_sandboxed(&pipes(), &["alone"], &[]);
    assert_same("pipes alone", &native, &sandboxed);
}

/// A sandbox under control running `pipes MODE`, which prints "ready".
fn start(mode: &str) -> Controlled {
    let (c, line) = Controlled::start(&format!("pipes-{mode}"), &pipes(), &[mode], Stdio::piped());
    assert_eq!(line, "ready\n");
    c
}

fn hibernate_and_wake(c: &Controlled) {
    c.hibernate();
    c.ctl("wake");
}

/// Two processes: the parent parked reading an empty pipe, the child
/// blocked on stdin with 40000 bytes buffered in another pipe. Two
/// hibernate/wake cycles, then a line on stdin: 4 MiB flow through the
/// first pipe and the buffered bytes come out intact (checksums).
#[test]
fn hibernate_with_a_reader_parked_on_a_pipe() {
    if !require_kvm() {
        return;
    }
    let mut c = start("hib");
    hibernate_and_wake(&c);
    hibernate_and_wake(&c);
    let mut stdin = c.child.stdin.take().expect("stdin");
    stdin.write_all(b"go\n").expect("write");
    drop(stdin);
    let (rest, code) = c.finish();
    assert_eq!(
        rest,
        "parent: big ok (4194304 bytes)\nparent: buffered ok (40000 bytes)\nparent: child status 0\n"
    );
    assert_eq!(code, 0);
}

/// A process alone, blocked reading a pipe whose only writer is itself:
/// the sandbox still hibernates and wakes, and a signal ends the read.
#[test]
fn a_lone_task_blocked_on_its_pipe_hibernates_and_takes_signals() {
    if !require_kvm() {
        return;
    }
    let c = start("selfblock");
    hibernate_and_wake(&c);
    c.ctl("signal 10");
    let (rest, code) = c.finish();
    assert_eq!(rest, "selfblock: read -1 EINTR, signals 1\n");
    assert_eq!(code, 0);
}
