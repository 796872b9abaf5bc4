//! Memory reclaim through the real path: a program touches 128 MiB and
//! unmaps it; SIGUSR1 to the sandbox process makes the guest hand its free
//! pages back; the process's RSS must drop by at least 120 MiB, and memory
//! mapped afterwards must read as zeros.
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

#[test]
fn freed_memory_leaves_the_host_process() {
    if !common::require_kvm() {
        return;
    }
    let prog = test_apps::path("reclaim_probe");
    let mut child = Command::new(common::qrun())
        .args(["do", "--stats", "--memory", "512M", "--"])
        .arg(&prog)
        .arg("128")
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn qrun");
    let pid = child.id();
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("read");
    assert_eq!(
        line, "unmapped\n",
        "the probe should have touched and unmapped its memory"
    );

    let before = rss_kib(pid);
    assert!(
        before >= 128 * 1024,
        "128 MiB touched should be resident, RSS is {before} KiB"
    );
    let kill = Command::new("kill")
        .args(["-USR1", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(kill.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut after = rss_kib(pid);
    while before - after.min(before) < 120 * 1024 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        after = rss_kib(pid);
    }
    assert!(
        before - after.min(before) >= 120 * 1024,
        "RSS should drop by >= 120 MiB after reclaim: {before} KiB -> {after} KiB"
    );

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
