//! Secondary vCPUs (docs/smp.md): `qrun do --cpus N` boots N vCPUs, the
//! secondaries come up in native mode (one guest log line each), the
//! program's exit status comes back whatever N, bad counts are refused,
//! and an idle sandbox with 4 vCPUs uses no CPU (the secondaries wait in
//! the host, not in a loop). Tasks still run on vCPU 0 only.

#![forbid(unsafe_code)]

mod common;

use std::process::Command;
use std::time::Duration;

use common::server::{Server, group_cpu_ticks, ticks_per_sec};

fn online_lines(stderr: &str) -> Vec<usize> {
    let mut v: Vec<usize> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("[qkernel INFO] vCPU "))
        .filter_map(|l| l.strip_suffix(" online (native mode)"))
        .filter_map(|n| n.parse().ok())
        .collect();
    v.sort_unstable();
    v
}

#[test]
fn secondaries_come_up_and_the_status_comes_back() {
    if !common::require_kvm() {
        return;
    }
    let prog = test_apps::path("exit_code");
    for n in [1usize, 2, 4] {
        let out = common::run_qrun(&[
            "--debug".into(),
            "do".into(),
            "--cpus".into(),
            n.to_string(),
            "--".into(),
            prog.display().to_string(),
            "7".into(),
        ]);
        let stderr = common::stderr(&out);
        assert_eq!(out.status, 7, "--cpus {n}: {stderr}");
        assert_eq!(
            online_lines(&stderr),
            (1..n).collect::<Vec<_>>(),
            "--cpus {n}: every secondary (and only they) came online:\n{stderr}"
        );
    }
}

#[test]
fn bad_cpu_counts_are_refused() {
    let prog = test_apps::path("hello");
    for bad in ["0", "9", "x", "-1"] {
        let out = common::run_qrun(&[
            "do".into(),
            "--cpus".into(),
            bad.to_string(),
            "--".into(),
            prog.display().to_string(),
        ]);
        let stderr = common::stderr(&out);
        assert_eq!(out.status, 2, "--cpus {bad}: {stderr}");
        assert!(stderr.contains("--cpus"), "--cpus {bad}: {stderr}");
    }
}

/// The kernel runs with GS base = its per-CPU state and gives the
/// program its own back on every way out: the program's GS base (read
/// through %gs) survives syscalls, faults, a signal handler, fork and
/// thread switches, as natively, on 1 and 2 vCPUs.
#[test]
fn the_programs_gs_base_survives_the_kernel() {
    let prog = test_apps::path("gsbase");
    let native = common::run_native(&prog, &[], &[]);
    assert_eq!(common::stdout(&native), "gs ok\n", "{native:?}");
    if !common::require_kvm() {
        return;
    }
    for n in ["1", "2"] {
        let out = common::run_qrun(&[
            "do".into(),
            "--cpus".into(),
            n.to_string(),
            "--".into(),
            prog.display().to_string(),
        ]);
        common::assert_same(&format!("gsbase, --cpus {n}"), &native, &out);
    }
}

const IDLE: Duration = Duration::from_secs(4);
const MAX_IDLE_CPU: f64 = 0.02;

#[test]
fn an_idle_sandbox_with_4_vcpus_uses_no_cpu() {
    if !common::require_kvm() {
        return;
    }
    let mut cmd = Command::new(common::qrun());
    cmd.args(["do", "--cpus", "4", "--"])
        .arg(test_apps::path("sig_graceful"))
        .arg("pause");
    let mut server = Server::spawn(cmd);
    server.wait_line("ready", Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(500));
    let before = group_cpu_ticks(server.pid());
    std::thread::sleep(IDLE);
    let used = group_cpu_ticks(server.pid()) - before;
    let share = used as f64 / ticks_per_sec() as f64 / IDLE.as_secs_f64();
    assert!(
        share < MAX_IDLE_CPU,
        "the idle 4-vCPU sandbox used {:.1}% of a CPU over {IDLE:?} ({used} ticks)",
        share * 100.0
    );
    // Still alive and responsive: SIGTERM reaches the program.
    let status = Command::new("kill")
        .args(["-TERM", &server.pid().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let (code, stderr) = server.wait_exit(Duration::from_secs(20));
    assert_eq!(code, 0, "exit after SIGTERM; stderr: {stderr}");
}
