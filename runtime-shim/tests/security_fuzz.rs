//! The guest kernel under random system calls: the `sysfuzz` test program
//! (test-apps/c/sysfuzz.c) makes 20,000 random syscalls per seed with
//! hostile arguments (wild and kernel-half pointers, pointers running into
//! a guard page, huge lengths, random fds, valid small buffers), skipping
//! only calls that would end or block it or reach outside it, and prints
//! one summary line.
//!
//! Sandboxed, in a scratch rootfs, the sandbox must end in time with the
//! program's own exit 0 and its summary; the guest kernel must not panic
//! (`qrun: guest kernel panic: ...`, from `qkernel::klog::report_panic`)
//! and the VMM must not fail or panic. Any signal death counts as a
//! failure: the program catches every signal but SIGKILL and SIGSTOP,
//! which it never sends, so a death means the kernel killed it (a bad
//! signal frame, a fault it caused). `faults 0`: no fault hit the
//! program outside a fuzzed call (the kernel wrote into its memory).
//!
//! The same seeds run natively first, as a check that the program itself
//! is sound: it ends with 0 and 0 faults on Linux.

#![forbid(unsafe_code)]

mod common;

use std::time::{Duration, Instant};

use common::tmp::TempDir;
use common::{Outcome, require_kvm, run_native_in, run_sandboxed_in, stderr, stdout};

/// Calls per seed.
const CALLS: &str = "20000";
/// How long one sandboxed run may take (about 1 s on an idle host).
const DEADLINE: Duration = Duration::from_secs(30);

fn check(what: &str, seed: u64, out: &Outcome, took: Duration) {
    let text = stdout(out);
    let err = stderr(out);
    assert!(
        took < DEADLINE,
        "{what} seed {seed}: took {took:?} (deadline {DEADLINE:?}): {out:?}"
    );
    for bad in ["panic", "vCPU failed", "guest kernel"] {
        assert!(
            !err.contains(bad),
            "{what} seed {seed}: stderr says {bad:?} (reproduce: sysfuzz {seed} {CALLS} trace): {out:?}"
        );
    }
    assert_eq!(
        out.status, 0,
        "{what} seed {seed}: status (reproduce: sysfuzz {seed} {CALLS} trace): {out:?}"
    );
    let want = format!("sysfuzz seed {seed}: {CALLS} calls, ");
    assert!(
        text.starts_with(&want) && text.trim_end().ends_with(", 0 faults"),
        "{what} seed {seed}: summary: {out:?}"
    );
}

fn fuzz(seed: u64) {
    let prog = test_apps::path("sysfuzz");
    let arg = seed.to_string();

    let native_dir = TempDir::new("sysfuzz-native");
    let t0 = Instant::now();
    let native = run_native_in(native_dir.path(), None, &prog, &[&arg, CALLS], &[]);
    check("native", seed, &native, t0.elapsed());

    // A scratch rootfs holding only the program: every path the fuzzer
    // makes up lands in /work inside it.
    let root = TempDir::new("sysfuzz-root");
    std::fs::copy(&prog, root.join("sysfuzz")).expect("copying sysfuzz into the rootfs");
    std::fs::create_dir(root.join("work")).expect("mkdir work");
    let t0 = Instant::now();
    let sandboxed = run_sandboxed_in(root.path(), "/work", None, "/sysfuzz", &[&arg, CALLS], &[]);
    check("sandboxed", seed, &sandboxed, t0.elapsed());
}

/// Seed 1 found a guest-kernel panic: `getsockopt` with `*optlen == 0`
/// read the first byte of an empty buffer (a dangling pointer) after the
/// host call (fixed in qkernel/src/fs/host.rs).
#[test]
fn random_syscalls_seed_1() {
    if require_kvm() {
        fuzz(1);
    }
}

#[test]
fn random_syscalls_seed_2() {
    if require_kvm() {
        fuzz(2);
    }
}

#[test]
fn random_syscalls_seed_3() {
    if require_kvm() {
        fuzz(3);
    }
}

/// Seed 183 found a guest-kernel hang: `futex(FUTEX_WAIT)` with a
/// negative `tv_sec` slept for centuries instead of failing with EINVAL
/// (fixed in qkernel/src/syscalls/sys_proc.rs).
#[test]
fn random_syscalls_seed_183() {
    if require_kvm() {
        fuzz(183);
    }
}
