//! Differential I/O tests: the file, pipe, polling and socket programs of
//! test-apps (`fileops`, `fileops_special`, `ioops`, `netops`) run natively
//! and in a `qrun do` sandbox (default rootfs `/`, so the same absolute
//! paths work on both sides); stdout, stderr and exit status must match
//! byte for byte. Each program prints one line per check, so the diff
//! names the checks that differ.
//!
//! Each run gets its own fresh scratch directory holding `data.txt` and
//! the symlink `link -> data.txt` (the programs print only paths relative
//! to it). The native run is checked first, with or without /dev/kvm: it
//! must exit 0 with no `FAIL` line, or the program itself is wrong.

#![forbid(unsafe_code)]

mod common;

use common::tmp::TempDir;
use common::{Outcome, assert_same, require_kvm, run_native, run_sandboxed};

/// What `fileops` expects in `data.txt` (its DATA).
const DATA: &str = "line one\nline two\nline three\n";

fn scratch_dir(tag: &str) -> TempDir {
    let dir = TempDir::new(tag);
    std::fs::write(dir.join("data.txt"), DATA).expect("writing data.txt");
    std::os::unix::fs::symlink("data.txt", dir.join("link")).expect("creating the symlink");
    dir
}

/// Runs `name DIR` natively and asserts it is sane.
fn native(name: &str, dir: Option<&TempDir>) -> Outcome {
    let args: Vec<&str> = dir.iter().map(|d| d.str()).collect();
    let out = run_native(&test_apps::path(name), &args, &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status == 0 && !text.contains("FAIL") && text.ends_with("done\n"),
        "{name}: the native run already fails, fix the test program: {out:?}"
    );
    out
}

/// The differential test of one program; `with_dir` gives it a fresh
/// scratch directory on each side.
fn compare(name: &str, with_dir: bool) {
    let native_dir = with_dir.then(|| scratch_dir(name));
    let native = native(name, native_dir.as_ref());
    if !require_kvm() {
        return;
    }
    let sandbox_dir = with_dir.then(|| scratch_dir(name));
    let args: Vec<&str> = sandbox_dir.iter().map(|d| d.str()).collect();
    let sandboxed = run_sandboxed(&test_apps::path(name), &args, &[]);
    assert_same(name, &native, &sandboxed);
}

#[test]
fn fileops() {
    compare("fileops", true);
}

#[test]
fn fileops_special_files_and_bad_input() {
    compare("fileops_special", true);
}

#[test]
fn ioops_pipes_poll_epoll_eventfd_timerfd() {
    compare("ioops", false);
}

#[test]
fn netops_sockets() {
    compare("netops", true);
}

/// Two native runs print the same bytes: the comparison above is fair.
#[test]
fn programs_are_deterministic_natively() {
    for (name, with_dir) in [
        ("fileops", true),
        ("fileops_special", true),
        ("ioops", false),
        ("netops", true),
    ] {
        let (d1, d2) = (
            with_dir.then(|| scratch_dir(name)),
            with_dir.then(|| scratch_dir(name)),
        );
        let first = native(name, d1.as_ref());
        let second = native(name, d2.as_ref());
        assert_same(&format!("{name}, two native runs"), &first, &second);
        assert!(first.stderr.is_empty(), "{name}: stderr {first:?}");
    }
}
