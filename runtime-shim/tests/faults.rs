//! Demand paging of anonymous memory: a fault maps a window of pages, and
//! where a program touches memory in order the window doubles up to 2 MiB
//! (`qkernel/src/mm/fault.rs`, `anon_window`). What the program sees must
//! be what Linux gives it (`seqfault`, natively and sandboxed, compared);
//! the fault count is the point (~75 µs a fault on this hypervisor).
//!
//! Needs /dev/kvm: without it a test says SKIPPED loudly, and fails under
//! `CI=true`.

#![forbid(unsafe_code)]

mod common;

use common::{assert_same, require_kvm, run_native, run_sandboxed, run_sandboxed_with, stdout};

/// In order, backwards, at random, before a guard page, on a heap grown,
/// shrunk and grown again, and across a fork: the same as natively.
#[test]
fn memory_mapped_ahead_reads_as_linux_gives_it() {
    if !require_kvm() {
        return;
    }
    let prog = test_apps::path("seqfault");
    let native = run_native(&prog, &[], &[]);
    let text = stdout(&native);
    assert!(
        native.status == 0 && text.ends_with("done\n") && !text.contains(": no"),
        "the native run already fails: {native:?}"
    );
    let sandboxed = run_sandboxed(&prog, &[], &[]);
    assert_same("seqfault", &native, &sandboxed);
}

/// 8 MiB (2,048 pages) written in order take a handful of faults, not
/// one per 16-page window (128).
#[test]
fn memory_written_in_order_takes_few_faults() {
    if !require_kvm() {
        return;
    }
    let prog = test_apps::path("seqfault");
    let out = run_sandboxed_with(&["--stats"], &prog, &["seq"], &[]);
    assert_eq!(out.status, 0, "{out:?}");
    assert_eq!(stdout(&out), "in order: yes\n", "{out:?}");
    let err = common::stderr(&out);
    let faults: u64 = err
        .lines()
        .find_map(|l| l.split("faults: not present ").nth(1))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no fault count in the stats: {err}"));
    // The program's start takes some faults of its own (~10 for this
    // static binary); the 8 MiB about 10 more.
    assert!(
        faults <= 48,
        "{faults} faults for 8 MiB written in order: {err}"
    );
}
