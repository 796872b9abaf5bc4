//! Threads in one sandbox (docs/threads.md): pthread create/join, mutexes
//! and condition variables, raw futex operations and their timeouts,
//! exit_group from a non-leader thread, signals to a process and to one
//! thread, execve from a thread, hibernation of a two-thread process.
//! Each case runs natively and in `qrun do`; stdout, stderr and exit
//! status must match.
//!
//! Every test needs /dev/kvm: without it a test says SKIPPED loudly, and
//! fails under `CI=true`.

#![forbid(unsafe_code)]

mod common;

use common::{assert_same, require_kvm, run_native, run_sandboxed, stdout};

/// Runs `threads ARGS` natively and sandboxed; they must agree, the
/// native output must not contain WRONG. Returns the native stdout.
fn same(args: &[&str]) -> String {
    let prog = test_apps::path("threads");
    let native = run_native(&prog, args, &[]);
    let text = stdout(&native);
    assert!(
        !text.contains("WRONG"),
        "the native run already fails: {native:?}"
    );
    let sandboxed = run_sandboxed(&prog, args, &[]);
    assert_same(&format!("threads {args:?}"), &native, &sandboxed);
    text
}

#[test]
fn pthread_checksum() {
    if !require_kvm() {
        return;
    }
    let out = same(&["checksum", "16"]);
    assert!(out.contains("16 threads") && out.contains(" ok"), "{out}");
    // In a forked child: threads of a group that is not pid 1's.
    let out = same(&["child", "checksum", "8"]);
    assert!(out.contains("child exited 0"), "{out}");
}

#[test]
fn mutex_condvar_pingpong() {
    if !require_kvm() {
        return;
    }
    let out = same(&["pingpong"]);
    assert_eq!(out, "pingpong: 2000 rounds\n");
}

#[test]
fn futex_operations_and_timeouts() {
    if !require_kvm() {
        return;
    }
    let out = same(&["futex"]);
    assert!(
        out.contains("relative timeout: Connection timed out, in time")
            || out.contains("relative timeout: Operation timed out, in time"),
        "{out}"
    );
    assert!(out.contains("wake_op: 2, word now 1"), "{out}");
}

#[test]
fn exit_group_from_a_thread() {
    if !require_kvm() {
        return;
    }
    let prog = test_apps::path("threads");
    let native = run_native(&prog, &["exitgroup"], &[]);
    assert_eq!(native.status, 7, "{native:?}");
    let sandboxed = run_sandboxed(&prog, &["exitgroup"], &[]);
    assert_same("threads exitgroup", &native, &sandboxed);
    let out = same(&["child", "exitgroup"]);
    assert_eq!(out, "child exited 7\n");
}

#[test]
fn process_signal_handled_by_a_thread_that_does_not_block_it() {
    if !require_kvm() {
        return;
    }
    let out = same(&["sigproc"]);
    assert_eq!(out, "handled by the worker: yes\npending in main: no\n");
    let out = same(&["child", "sigproc"]);
    assert!(out.ends_with("child exited 0\n"), "{out}");
}

#[test]
fn tgkill_to_a_thread() {
    if !require_kvm() {
        return;
    }
    let out = same(&["tgkill"]);
    assert!(out.contains("tgkill handled by the target: yes"), "{out}");
    assert!(out.contains("tkill handled by the target: yes"), "{out}");
    let out = same(&["child", "tgkill"]);
    assert!(out.ends_with("child killed by signal 15\n"), "{out}");
}

#[test]
fn execve_from_a_thread() {
    if !require_kvm() {
        return;
    }
    let out = same(&["exec"]);
    assert_eq!(out, "exec'd: pid kept yes, tid = pid yes\n");
    let out = same(&["child", "exec"]);
    assert_eq!(out, "exec'd: pid kept yes, tid = pid yes\nchild exited 0\n");
}

#[test]
fn thread_ids_affinity_names() {
    if !require_kvm() {
        return;
    }
    let out = same(&["misc"]);
    assert!(out.contains("thread name: worker"), "{out}");
    // In a forked child (pid not 1): set_tid_address returns its tid.
    let out = same(&["child", "misc"]);
    assert!(
        out.contains("set_tid_address returns the tid: yes"),
        "{out}"
    );
}

/// A two-thread process hibernated three times while one thread blocks on
/// stdin and the other in pthread_join: the shared address space is
/// walked once and both threads find their bytes intact.
#[test]
fn hibernate_two_threads() {
    use std::io::Write;
    use std::process::Stdio;

    if !require_kvm() {
        return;
    }
    let (mut c, line) = common::controlled::Controlled::start(
        "threadhib",
        &test_apps::path("threads"),
        &["hib", "12"],
        Stdio::piped(),
    );
    assert_eq!(line, "ready\n");
    for i in 0..3 {
        let st = c.hibernate();
        assert!(
            i > 0 || st["swapped_out_bytes"].as_u64().expect("bytes") >= 20 << 20,
            "cycle {i}: both threads' pages should leave: {st}"
        );
        c.ctl("wake");
    }
    let mut stdin = c.child.stdin.take().expect("stdin");
    stdin.write_all(b"go\n").expect("write");
    drop(stdin);
    let (rest, code) = c.finish();
    assert_eq!(
        rest,
        "worker: 0 bad bytes, main's: 0 bad bytes\nmain: 0 bad bytes\n"
    );
    assert_eq!(code, 0);
}

/// A thread bomb stops at the sandbox's task limit with EAGAIN (Linux
/// goes on to the 300 asked: the native run is not compared), every
/// thread can be joined, and a new thread works again.
#[test]
fn thread_bomb_stops_at_the_limit() {
    if !require_kvm() {
        return;
    }
    let out = run_sandboxed(&test_apps::path("threadbomb"), &["bomb"], &[]);
    assert_eq!(
        stdout(&out),
        "created 127 threads, then EAGAIN\njoined 127\na thread afterwards: works\n",
        "{out:?}"
    );
    assert_eq!(out.status, 0, "{out:?}");
}

/// A raw `clone(CLONE_THREAD)` with an unmapped or kernel-half stack, or
/// an unmapped TLS, kills only that program (SIGSEGV, the whole thread
/// group); a non-canonical TLS is refused with EPERM (it made the guest
/// kernel fault loading the FS base); the parent goes on. As on Linux.
#[test]
fn wild_clone_stack_and_tls_kill_only_the_program() {
    if !require_kvm() {
        return;
    }
    let prog = test_apps::path("threadbomb");
    let native = run_native(&prog, &["wild"], &[]);
    assert!(
        stdout(&native).contains("parent: alive") && native.status == 0,
        "the native run already fails: {native:?}"
    );
    let sandboxed = run_sandboxed(&prog, &["wild"], &[]);
    assert_same("threadbomb wild", &native, &sandboxed);
}
