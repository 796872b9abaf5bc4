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
    let err = seq_written_in_order();
    let faults = not_present_faults(&err);
    // The program's start takes some faults of its own (~10 for this
    // static binary); the 8 MiB about 10 more.
    assert!(
        faults <= 48,
        "{faults} faults for 8 MiB written in order: {err}"
    );
}

/// The heap shrunk and grown again (`heapslack`: regrown pages, a fork
/// sharing them, a mapping placed over them, malloc's 6 MiB trim and
/// regrow 200 times): the same as natively, although the sandbox keeps
/// the pages above the break mapped (`AddrSpace::set_brk`).
#[test]
fn heap_shrunk_and_regrown_reads_as_linux_gives_it() {
    if !require_kvm() {
        return;
    }
    let prog = test_apps::path("heapslack");
    let native = run_native(&prog, &[], &[]);
    let text = stdout(&native);
    assert!(
        native.status == 0
            && text.ends_with("done\n")
            && !text.contains(": no,")
            && text.contains("child keeps its heap: yes"),
        "the native run already fails: {native:?}"
    );
    let sandboxed = run_sandboxed(&prog, &[], &[]);
    assert_same("heapslack", &native, &sandboxed);
}

/// The heap regrown over its slack takes no faults: 200 rounds of 6 MiB
/// took ~1,400 (a fault-ahead run each) before the slack, ~30 now (the
/// program's start and its other checks).
#[test]
fn heap_regrown_over_its_slack_takes_few_faults() {
    if !require_kvm() {
        return;
    }
    let prog = test_apps::path("heapslack");
    let out = run_sandboxed_with(&["--stats"], &prog, &[], &[]);
    assert_eq!(out.status, 0, "{out:?}");
    let err = common::stderr(&out);
    let faults = not_present_faults(&err);
    assert!(faults <= 150, "{faults} faults: {err}");
}

/// Slack pages written out by a hibernation (or dropped while the
/// program waited) read zero once the heap grows over them again.
#[test]
fn heap_slack_across_a_hibernation_reads_zero() {
    if !require_kvm() {
        return;
    }
    let (mut c, first) = common::controlled::Controlled::start(
        "heapslack",
        &test_apps::path("heapslack"),
        &["wait"],
        std::process::Stdio::piped(),
    );
    assert!(first.starts_with("regrown reads zero: yes"), "{first}");
    loop {
        let line = c.read_line();
        assert!(
            !line.is_empty(),
            "the program ended before it shrank its heap"
        );
        assert!(!line.contains("zero: no"), "{line}");
        if line == "shrunk\n" {
            break;
        }
    }
    for _ in 0..2 {
        c.hibernate();
        c.ctl("wake");
    }
    let mut stdin = c.child.stdin.take().expect("stdin");
    std::io::Write::write_all(&mut stdin, b"go\n").expect("write");
    drop(stdin);
    let (rest, _) = c.finish();
    assert_eq!(rest, "regrown after the wait reads zero: yes\ndone\n");
}

/// Fresh guest RAM is backed by the host a 256 KiB block at a time before
/// the program touches it (`Call::Populate`, docs/coldstart.md): the 8 MiB
/// written in order take about one call per block. A VMM that refused the
/// call would leave one (the guest stops asking after an error); a guest
/// that never asked, none.
#[test]
fn fresh_memory_is_backed_ahead_a_block_at_a_time() {
    if !require_kvm() {
        return;
    }
    let err = seq_written_in_order();
    let calls = common::host_call_count(&err, "Populate");
    // 32 blocks for the 8 MiB, a few for the program's start; each block
    // once.
    assert!(
        (30..=64).contains(&calls),
        "{calls} Populate calls for 8 MiB of fresh memory: {err}"
    );
}

/// `seqfault seq` (8 MiB written in order) under `qrun do --stats`: its
/// stderr, the guest's counters in it.
fn seq_written_in_order() -> String {
    let prog = test_apps::path("seqfault");
    let out = run_sandboxed_with(&["--stats"], &prog, &["seq"], &[]);
    assert_eq!(out.status, 0, "{out:?}");
    assert_eq!(stdout(&out), "in order: yes\n", "{out:?}");
    common::stderr(&out)
}

/// The guest's not-present fault count from `qrun do --stats`' stderr.
fn not_present_faults(err: &str) -> u64 {
    err.lines()
        .find_map(|l| l.split("faults: not present ").nth(1))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no fault count in the stats: {err}"))
}
