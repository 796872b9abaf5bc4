//! Memory going back to the host.
//!
//! While the program runs: `free_probe hold` touches 64 MiB and frees it
//! (munmap, `MADV_DONTNEED`, brk shrink) and stays alive; with no reclaim
//! asked for, the VMM process's RSS must drop by most of it, and what is
//! mapped afterwards reads as zeros. `free_probe churn` allocates and frees
//! in a loop with live buffers checked byte by byte; its output must match
//! the native run's, and the hand-back must be batched (host calls well
//! under one per MiB freed).
//!
//! On request: SIGUSR1 to the sandbox process makes the guest hand all its
//! free pages back (`qrun: reclaimed` with `--stats`).
#![forbid(unsafe_code)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `Rss` of a process from `/proc/<pid>/smaps_rollup`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).expect("smaps_rollup");
    text.lines()
        .find_map(|l| l.strip_prefix("Rss:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("an Rss line")
}

/// Polls the RSS of `pid` until it is at most `want` KiB or 5 s passed;
/// returns the last reading.
fn rss_falls_to(pid: u32, want: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut now = rss_kib(pid);
    while now > want && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        now = rss_kib(pid);
    }
    now
}

/// Test app `app` with `args` under `qrun do --stats --memory MEMORY`, its
/// stdio piped.
fn spawn_probe(memory: &str, app: &str, args: &[&str]) -> std::process::Child {
    Command::new(common::qrun())
        .args(["do", "--stats", "--memory", memory, "--"])
        .arg(test_apps::path(app))
        .args(args)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn qrun")
}

/// `free_probe hold 64 HOW` in a sandbox: the RSS must fall by >= 56 MiB
/// after the free while the program waits, with no signal sent.
fn freed_memory_leaves_while_running(how: &str) {
    if !common::require_kvm() {
        return;
    }
    let mut child = spawn_probe("256M", "free_probe", &["hold", "64", how]);
    let pid = child.id();
    let mut stdin = child.stdin.take().expect("stdin");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("read");
    assert_eq!(
        line, "touched\n",
        "the probe should have touched its memory"
    );
    let touched = rss_kib(pid);
    assert!(
        touched >= 64 * 1024,
        "64 MiB touched should be resident, RSS is {touched} KiB"
    );

    stdin.write_all(b"\n").expect("write");
    line.clear();
    out.read_line(&mut line).expect("read");
    assert_eq!(line, "freed\n", "the probe should have freed its memory");
    let after = rss_falls_to(pid, touched - 56 * 1024);
    assert!(
        touched - after.min(touched) >= 56 * 1024,
        "{how}: RSS should drop by >= 56 MiB while the program runs: {touched} KiB -> {after} KiB"
    );
    assert!(
        child.try_wait().expect("try_wait").is_none(),
        "the program is still running"
    );

    stdin.write_all(b"\n").expect("write");
    drop(stdin);
    line.clear();
    out.read_line(&mut line).expect("read");
    assert_eq!(
        line, "zero ok\n",
        "memory mapped after the free reads as zeros"
    );
    let output = child.wait_with_output().expect("wait");
    assert!(output.status.success(), "status {:?}", output.status);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let (bytes, calls) = returned(&stderr).expect("a 'qrun: returned' line");
    assert!(bytes >= 56 << 20, "{how}: {stderr}");
    // One batch returns the 64 MiB (plus what boot and exit freed).
    assert!((1..=8).contains(&calls), "{how}: {stderr}");
}

/// `(bytes, host calls)` from `qrun: returned B bytes while running in K
/// host calls`.
fn returned(stderr: &str) -> Option<(u64, u64)> {
    let line = stderr
        .lines()
        .find_map(|l| l.strip_prefix("qrun: returned "))?;
    let (bytes, rest) = line.split_once(" bytes while running in ")?;
    let calls = rest.strip_suffix(" host calls")?;
    Some((bytes.parse().ok()?, calls.parse().ok()?))
}

#[test]
fn munmapped_memory_leaves_the_host_process_while_running() {
    freed_memory_leaves_while_running("munmap");
}

#[test]
fn dontneed_memory_leaves_the_host_process_while_running() {
    freed_memory_leaves_while_running("dontneed");
}

#[test]
fn brk_shrink_leaves_the_host_process_while_running() {
    freed_memory_leaves_while_running("brk");
}

/// `free_probe ahead 64`: 64 MiB mapped with `MAP_POPULATE`, every second
/// page written. The sandbox backs fresh guest memory ahead of its first
/// use (docs/coldstart.md), so all 64 MiB are resident at first; while the
/// program waits the untouched half goes back (RSS falls by >= 24 MiB),
/// and afterwards the written pages still hold their bytes and the others
/// read as zero.
#[test]
fn memory_backed_ahead_and_never_written_leaves_while_waiting() {
    if !common::require_kvm() {
        return;
    }
    let mut child = spawn_probe("256M", "free_probe", &["ahead", "64"]);
    let pid = child.id();
    let mut stdin = child.stdin.take().expect("stdin");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("read");
    assert_eq!(line, "mapped\n", "the probe should have mapped its memory");
    let mapped = rss_kib(pid);
    assert!(
        mapped >= 60 * 1024,
        "64 MiB mapped with MAP_POPULATE should be backed ahead, RSS is {mapped} KiB"
    );
    let after = rss_falls_to(pid, mapped - 24 * 1024);
    assert!(
        mapped - after.min(mapped) >= 24 * 1024,
        "the 32 MiB never written should leave while the program waits: {mapped} KiB -> {after} KiB"
    );
    stdin.write_all(b"\n").expect("write");
    drop(stdin);
    line.clear();
    out.read_line(&mut line).expect("read");
    assert_eq!(line, "kept ok\n", "every page reads as the program left it");
    let output = child.wait_with_output().expect("wait");
    assert!(output.status.success(), "status {:?}", output.status);
}

#[test]
fn allocate_free_churn_stays_correct_and_batched() {
    if !common::require_kvm() {
        return;
    }
    let prog = test_apps::path("free_probe");
    let args = ["churn", "120"];
    let native = common::run_native(&prog, &args, &[]);
    let sandboxed = common::run_sandboxed_with(&["--stats", "--memory", "256M"], &prog, &args, &[]);
    assert_eq!(native.status, 0, "{native:?}");
    let out = common::stdout(&native);
    assert!(out.starts_with("churn ok "), "{native:?}");
    assert_eq!(common::stdout(&sandboxed), out, "{sandboxed:?}");
    assert_eq!(sandboxed.status, 0, "{sandboxed:?}");
    let freed_mib: u64 = out
        .lines()
        .find_map(|l| l.strip_prefix("freed "))
        .and_then(|l| l.strip_suffix(" MiB"))
        .and_then(|n| n.parse().ok())
        .expect("a 'freed N MiB' line");
    let (_, calls) = returned(&common::stderr(&sandboxed)).expect("a 'qrun: returned' line");
    // Some hand-back happened, and never one host call per page (256 per
    // MiB): at most one per 2 MiB the program freed.
    assert!(
        calls >= 1 && calls <= freed_mib / 2,
        "{calls} hand-back host calls for {freed_mib} MiB freed"
    );
}

#[test]
fn sigusr1_reclaims_on_request() {
    if !common::require_kvm() {
        return;
    }
    let mut child = spawn_probe("512M", "reclaim_probe", &["128"]);
    let pid = child.id();
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("read");
    assert_eq!(
        line, "unmapped\n",
        "the probe should have touched and unmapped its memory"
    );
    let kill = Command::new("kill")
        .args(["-USR1", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(kill.success());
    // The 128 MiB went back when they were unmapped, or now.
    let after = rss_falls_to(pid, 40 * 1024);
    assert!(after <= 40 * 1024, "RSS after the reclaim: {after} KiB");

    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"go\n")
        .expect("write");
    let mut rest = String::new();
    out.read_line(&mut rest).expect("read");
    assert_eq!(
        rest, "zero ok\n",
        "memory mapped after reclaim must be zero-filled"
    );
    let output = child.wait_with_output().expect("wait");
    assert!(output.status.success(), "status {:?}", output.status);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("qrun: reclaimed "),
        "the VMM reports what it reclaimed: {stderr}"
    );
}
