//! Preemption by time slices (docs/threads.md, "Preemption"): threads and
//! processes that spin in user mode without a syscall share the vCPU. The
//! `timeslice` program checks that the spins overlap in time and that a
//! sleeping thread wakes while they spin (without preemption the first
//! spinner keeps the vCPU until its time is up); native and sandboxed runs
//! must print the same. A sandbox with one task must not be preempted.
//!
//! Every test needs /dev/kvm: without it a test says SKIPPED loudly, and
//! fails under `CI=true`.

#![forbid(unsafe_code)]

mod common;

use std::time::{Duration, Instant};

use common::{assert_same, require_kvm, run_native, run_qrun, stderr, stdout};

/// `timeslice ARGS` natively and sandboxed (`--stats`): the same output;
/// returns the sandbox's preemption count.
fn same(args: &[&str]) -> u64 {
    // One spinning sandbox at a time: the test harness runs this file's
    // tests in parallel, and three sandboxes of spinners on a 2-core
    // machine starve each other's sleepers (seen: "main woke after spinner
    // 0 ended" under load).
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let prog = test_apps::path("timeslice");
    let native = run_native(&prog, args, &[]);
    assert!(
        stdout(&native).contains(" ok") && native.status == 0,
        "the native run already fails: {native:?}"
    );
    let t = Instant::now();
    let mut qargs = vec!["do".to_string(), "--stats".into(), "--".into()];
    qargs.push(prog.display().to_string());
    qargs.extend(args.iter().map(|a| a.to_string()));
    let mut sandboxed = run_qrun(&qargs);
    let took = t.elapsed();
    let preemptions = preemptions(&stderr(&sandboxed));
    eprintln!("timeslice {args:?}: {took:?}, {preemptions} preemptions");
    // The stats lines are the sandbox's own.
    sandboxed.stderr = stderr(&sandboxed)
        .lines()
        .filter(|l| {
            !l.starts_with("qrun: status")
                && !l.starts_with("qrun: returned")
                && !l.starts_with("qrun: guest:")
        })
        .map(|l| format!("{l}\n"))
        .collect::<String>()
        .into_bytes();
    assert_same(&format!("timeslice {args:?}"), &native, &sandboxed);
    assert!(took < Duration::from_secs(10), "took {took:?}");
    preemptions
}

/// The preemption count of `qrun do --stats`' last line.
fn preemptions(err: &str) -> u64 {
    let line = err
        .lines()
        .rev()
        .find(|l| l.starts_with("qrun: status"))
        .unwrap_or_else(|| panic!("no stats line in {err:?}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words
        .iter()
        .position(|w| *w == "preemptions")
        .unwrap_or_else(|| panic!("no preemption count in {line:?}"));
    words[at - 1].parse().expect("a number")
}

#[test]
fn spinning_threads_share_the_vcpu() {
    if !require_kvm() {
        return;
    }
    assert!(same(&["threads", "2"]) > 0);
    assert!(same(&["threads", "3"]) > 0);
}

#[test]
fn spinning_processes_share_the_vcpu() {
    if !require_kvm() {
        return;
    }
    assert!(same(&["procs", "2"]) > 0);
}

/// One task alone spinning: nobody to switch to, no slice ends.
#[test]
fn a_lone_task_is_never_preempted() {
    if !require_kvm() {
        return;
    }
    let out = run_qrun(&[
        "do".to_string(),
        "--stats".into(),
        "--".into(),
        test_apps::path("spin").display().to_string(),
        "checksum".into(),
        "300".into(),
    ]);
    assert_eq!(out.status, 0, "{out:?}");
    assert_eq!(preemptions(&stderr(&out)), 0, "{out:?}");
}

/// Threads preempted thousands of times (half-millisecond slices through
/// `QVISOR_SLICE_US`) keep their user state: XMM registers, FS base and
/// the red zone below RSP across syscalls (`preempt_state`), as natively.
/// Written while looking for the JVM's preemption crash (docs/threads.md,
/// "Java"): these are not it, and must stay so.
#[test]
fn preempted_threads_keep_their_registers() {
    if !require_kvm() {
        return;
    }
    same_under_short_slices("preempt_state", &[]);
}

/// `prog ARGS` natively and in `qrun do` with half-millisecond slices
/// (`QVISOR_SLICE_US=500`): the same output and status 0, and (unless it
/// says "no avx": nothing to check) at least 100 preemptions.
fn same_under_short_slices(name: &str, args: &[&str]) {
    let prog = test_apps::path(name);
    let native = run_native(&prog, args, &[]);
    assert_eq!(native.status, 0, "the native run already fails: {native:?}");
    let out = std::process::Command::new(common::qrun())
        .args(["do", "--stats", "--"])
        .arg(&prog)
        .args(args)
        .env("QVISOR_SLICE_US", "500")
        .output()
        .expect("running qrun");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        stdout(&native),
        "{err}"
    );
    assert_eq!(out.status.code(), Some(0), "{err}");
    if !stdout(&native).contains("no avx") {
        let n = preemptions(&err);
        assert!(n >= 100, "only {n} preemptions: the test did not test");
    }
}

/// Threads preempted hundreds of times (half-millisecond slices) keep
/// the whole of their AVX registers (`avx_state switch`: YMM0-15, and
/// with AVX-512 ZMM0-31 and k1-k7), as natively. The hypervisor runs user
/// mode with the host's XCR0, so programs use them (glibc, the JVM's
/// JIT); with only FXSAVE at a switch a thread got another one's upper
/// halves, and the JVM crashed at start (docs/threads.md, "Java"): this
/// failed then (every run, checked). Without AVX both runs print "no avx".
#[test]
fn preempted_threads_keep_their_avx_registers() {
    if !require_kvm() {
        return;
    }
    same_under_short_slices("avx_state", &["switch"]);
}
