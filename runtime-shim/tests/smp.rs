//! Secondary vCPUs (docs/smp.md): `qrun do --cpus N` boots N vCPUs, the
//! secondaries come up in native mode (one guest log line each), the
//! program's exit status comes back whatever N, bad counts are refused,
//! and an idle sandbox with 4 vCPUs uses no CPU (the secondaries wait in
//! the host, not in a loop). Tasks still run on vCPU 0 only; the thread,
//! munmap/mprotect race, affinity and hibernation cases below already run
//! with 2 and 4 vCPUs so that step 3 (tasks on every vCPU) is held to them.

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

/// `qrun do --cpus N -- prog args` against the native run: same stdout,
/// stderr and status, and no `WRONG` in the native output.
fn same_on(cpus: usize, prog: &str, args: &[&str]) -> String {
    let path = test_apps::path(prog);
    let native = common::run_native(&path, args, &[]);
    let text = common::stdout(&native);
    assert!(
        !text.contains("WRONG"),
        "the native run already fails: {native:?}"
    );
    let n = cpus.to_string();
    let sandboxed = common::run_sandboxed_with(&["--cpus", &n], &path, args, &[]);
    common::assert_same(
        &format!("{prog} {args:?}, --cpus {cpus}"),
        &native,
        &sandboxed,
    );
    text
}

/// The threads.rs cases with several vCPUs: pthread checksum (in pid 1
/// and in a forked child), mutex/condvar ping-pong, the raw futex
/// operations and timeouts, a process signal taken by a worker, tgkill,
/// exit_group and execve from a thread; then fork from 4 threads at once.
fn threads_cases_on(cpus: usize) {
    let out = same_on(cpus, "threads", &["checksum", "16"]);
    assert!(out.contains("16 threads") && out.contains(" ok"), "{out}");
    let out = same_on(cpus, "threads", &["child", "checksum", "8"]);
    assert!(out.contains("child exited 0"), "{out}");
    let out = same_on(cpus, "threads", &["pingpong"]);
    assert_eq!(out, "pingpong: 2000 rounds\n");
    let out = same_on(cpus, "threads", &["futex"]);
    assert!(out.contains("wake_op: 2, word now 1"), "{out}");
    let out = same_on(cpus, "threads", &["sigproc"]);
    assert_eq!(out, "handled by the worker: yes\npending in main: no\n");
    let out = same_on(cpus, "threads", &["tgkill"]);
    assert!(out.contains("tgkill handled by the target: yes"), "{out}");
    let out = same_on(cpus, "threads", &["child", "exitgroup"]);
    assert_eq!(out, "child exited 7\n");
    let out = same_on(cpus, "threads", &["exec"]);
    assert_eq!(out, "exec'd: pid kept yes, tid = pid yes\n");
    let out = same_on(cpus, "smp", &["forkthreads"]);
    assert_eq!(out.matches(", 0 wrong statuses").count(), 4, "{out}");
}

#[test]
fn threads_cases_on_2_vcpus() {
    if !common::require_kvm() {
        return;
    }
    threads_cases_on(2);
}

#[test]
fn threads_cases_on_4_vcpus() {
    if !common::require_kvm() {
        return;
    }
    threads_cases_on(4);
}

/// One thread unmaps (and remaps with a new pattern) and mprotects a
/// region while three read it: after munmap returns no reader sees the
/// old pattern, and no read succeeds while PROT_NONE is in force (the
/// readers take SIGSEGV), on 1, 2 and 4 vCPUs as natively.
#[test]
fn munmap_and_mprotect_race_with_readers() {
    if !common::require_kvm() {
        return;
    }
    for cpus in [1, 2, 4] {
        let out = same_on(cpus, "smp", &["mmrace", "1000"]);
        assert_eq!(
            out,
            "mmrace: readers ran: yes\nmmrace: rounds done: yes\n\
             mmrace: old pattern read after munmap: 0\nmmrace: reads while PROT_NONE: 0\n"
        );
    }
}

/// `sched_setaffinity` to a CPU the sandbox does not have is EINVAL (as
/// natively for a CPU the machine does not have); to CPU 0 it works and
/// `getcpu` then says 0; `nproc` (the online count) agrees with the
/// affinity mask.
#[test]
fn affinity_to_an_absent_cpu_is_einval() {
    if !common::require_kvm() {
        return;
    }
    for cpus in [1, 2] {
        let out = same_on(cpus, "smp", &["affinity"]);
        assert!(out.contains(": Invalid argument\n"), "{out}");
        assert!(
            out.contains("getcpu after pinning: cpu 0 node 0\n"),
            "{out}"
        );
    }
}

/// `getcpu` (the syscall and glibc/musl's `sched_getcpu`, through the
/// vDSO) names a CPU below the online count, natively and on 1 and 2
/// vCPUs; with 2 vCPUs a computing thread, which runs on the secondary,
/// sees vCPU 1 (the vCPU its user mode last ran on: `task::stints`).
#[test]
fn getcpu_names_the_vcpu_a_thread_ran_on() {
    if !common::require_kvm() {
        return;
    }
    for cpus in [1, 2] {
        let out = same_on(cpus, "smp", &["getcpu"]);
        assert_eq!(out, "getcpu: every answer below the online CPU count\n");
    }
    let path = test_apps::path("smp");
    let one = common::run_sandboxed_with(&["--cpus", "1"], &path, &["getcpu", "1"], &[]);
    let err = String::from_utf8_lossy(&one.stderr).into_owned();
    assert!(err.contains("getcpu seen: 0\n"), "{err}");
    // A busy host may starve the secondary's thread for a while: up to
    // three runs to see it.
    let mut seen = String::new();
    for _ in 0..3 {
        let two = common::run_sandboxed_with(&["--cpus", "2"], &path, &["getcpu", "1"], &[]);
        seen = String::from_utf8_lossy(&two.stderr).into_owned();
        if seen.contains("getcpu seen: 0 1\n") || seen.contains("getcpu seen: 1\n") {
            return;
        }
    }
    panic!("no thread saw vCPU 1 in three runs: {seen}");
}

/// Four threads compute over their own buffers (rewrite, verify, again)
/// while the 2-vCPU sandbox is hibernated and woken 100 times: every word
/// is intact, every thread went on computing, and every hibernation held
/// until its wake (a preemption posted during the deflate used to wake
/// the sandbox by itself: `mm::swap::park`).
#[test]
fn hibernate_4_computing_threads_on_2_vcpus() {
    use std::io::Write;
    use std::process::Stdio;

    if !common::require_kvm() {
        return;
    }
    let (mut c, line) = common::controlled::Controlled::start_with(
        "smphib",
        &["--cpus", "2"],
        &test_apps::path("smp"),
        &["hib", "4"],
        Stdio::piped(),
    );
    assert_eq!(line, "ready\n");
    // The SMP issue's "every checksum over 100 cycles".
    for _ in 0..100 {
        std::thread::sleep(Duration::from_millis(50));
        c.hibernate();
        c.ctl("wake");
    }
    let mut stdin = c.child.stdin.take().expect("stdin");
    stdin.write_all(b"go\n").expect("write");
    drop(stdin);
    let (rest, code) = c.finish();
    let want: String = (0..4)
        .map(|i| format!("thread {i}: 0 bad words, computed: yes\n"))
        .collect();
    assert_eq!(rest, want);
    assert_eq!(code, 0);
}

/// Copy-on-write faults taken on the secondary while the 2-vCPU sandbox
/// is hibernated and woken 100 times (`cowhib`: children that compute
/// about a millisecond between writes to pages they share with pid 1):
/// every child finds its pattern, pid 1 its own, the sandbox survives.
/// A fault whose page a hibernation swapped out before vCPU 0 served it
/// used to be served as a protection fault on the swap entry, which
/// mapped guest kernel memory into the child (docs/smp.md, "The 2-vCPU
/// hibernation failure"): without the fix (`mm::fault::as_now`) this
/// test failed in 3 of 9 runs (a child's pattern gone, or the sandbox
/// dead at a `ctl`). A rarer failure remained (about 1 run in 10-40: the
/// sandbox dead at a `ctl`, guest kernel panics; in this branch's base
/// loop a triple fault of vCPU 1): a secondary that left `VcpuIdle` late
/// ran on the memory a hibernation had dropped (docs/smp.md, "The
/// secondary that ran on dropped memory"); the test below forces that
/// race. 0 failures in 130 runs since (the test's cycles from a shell
/// driver).
#[test]
fn hibernations_between_a_secondarys_fault_and_its_service() {
    if !common::require_kvm() {
        return;
    }
    cowhib_cycles("cowhib", &[], 100);
}

/// A secondary vCPU that leaves `VcpuIdle` late (the VMM's test hook
/// `QVISOR_IDLE_DELAY_MS`: every wake of a secondary lingers 30 ms in its
/// wait, still counted idle, as a host thread the host does not schedule
/// at once) never enters the guest while a hibernation holds it. vCPU 0
/// pokes a secondary's wake at every recall, so such a late wake came
/// after the commit at most hibernations, and the secondary ran on the
/// kernel pages the VMM had dropped: without the fix (`smp::Smp::idle`)
/// this test failed in 8 of 8 runs, each within its first 7 cycles (a
/// triple fault of vCPU 1; with 100 cycles also the kernel page file's
/// checksum wrong at the wake).
#[test]
fn a_late_secondary_stays_out_of_a_hibernated_guest() {
    if !common::require_kvm() {
        return;
    }
    cowhib_cycles("cowhib_late", &[("QVISOR_IDLE_DELAY_MS", "30")], 40);
}

/// `cowhib` on 2 vCPUs (VMM environment `vmm_env`), hibernated and woken
/// `cycles` times 20 ms apart; then every child and pid 1 must find their
/// patterns.
fn cowhib_cycles(tag: &str, vmm_env: &[(&str, &str)], cycles: usize) {
    use std::io::Write;
    use std::process::Stdio;

    let (mut c, line) = common::controlled::Controlled::start_with_vmm_env(
        tag,
        &["--cpus", "2"],
        vmm_env,
        &test_apps::path("cowhib"),
        &[],
        Stdio::piped(),
    );
    assert_eq!(line, "ready\n");
    for i in 0..cycles {
        std::thread::sleep(Duration::from_millis(20));
        let r = c.try_ctl("hibernate").and_then(|st| {
            assert_eq!(st["state"], "hibernated", "cycle {i}: {st}");
            c.try_ctl("wake")
        });
        if let Err(e) = r {
            // The sandbox may be gone: its status and stderr say why.
            drop(c.child.stdin.take());
            c.finish_with_stderr();
            panic!("cycle {i}: {e}");
        }
    }
    let mut stdin = c.child.stdin.take().expect("stdin");
    stdin.write_all(b"stop\n").expect("write");
    drop(stdin);
    let (rest, err, code) = c.finish_with_stderr();
    assert_eq!(rest, "children: all ok\nparent: 0 bad words\n", "{err}");
    assert_eq!(code, 0);
    eprintln!("{}", err.trim());
}

/// `smp burn N`'s ratio of parallel to serial wall time in `out`.
fn burn_ratio(out: &common::Outcome) -> f64 {
    common::stdout(out)
        .lines()
        .find_map(|l| l.strip_prefix("burn_ratio "))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no burn_ratio: {out:?}"))
}

/// Two CPU-bound threads on 2 vCPUs overlap in time: running them at once
/// takes clearly less wall time than one after the other (under 0.75x),
/// when the machine has two free CPUs, which the same program run
/// natively in turn with the sandbox shows (best of 3 to 6 each). On a machine
/// too loaded for that (native ratio over 0.6: the machine is shared),
/// the sandbox must still come within 0.3 of the native ratio (its vCPU
/// threads and round trips to vCPU 0 compete for the same busy CPUs).
#[test]
fn two_cpu_bound_threads_overlap_on_2_vcpus() {
    if !common::require_kvm() {
        return;
    }
    let prog = test_apps::path("smp");
    let args = ["burn", "100000000"];
    let (mut native, mut sandboxed) = (f64::MAX, f64::MAX);
    // Best of 3, and up to 6 while the sandbox's best is not good enough
    // for the native one yet: on a shared machine one side's best can come
    // from a quiet moment the other side never had (2 of 6 runs failed so
    // at a load of 5 with best of 3; a sandbox without parallelism stays
    // near 1.0 however often it runs).
    let good = |native: f64, sandboxed: f64| {
        if native <= 0.6 {
            sandboxed < 0.75
        } else {
            sandboxed <= native + 0.3
        }
    };
    for round in 0..6 {
        if round >= 3 && good(native, sandboxed) {
            break;
        }
        native = native.min(burn_ratio(&common::run_native(&prog, &args, &[])));
        let out = common::run_sandboxed_with(&["--cpus", "2"], &prog, &args, &[]);
        sandboxed = sandboxed.min(burn_ratio(&out));
    }
    eprintln!("burn ratio (parallel / serial), best: native {native:.2}, 2 vCPUs {sandboxed:.2}");
    if native <= 0.6 {
        assert!(
            sandboxed < 0.75,
            "parallel / serial wall time {sandboxed:.2} on 2 vCPUs (native {native:.2})"
        );
    } else {
        eprintln!(
            "NOTE: the machine has no two free CPUs now (native ratio {native:.2}): checked against native only"
        );
        assert!(
            sandboxed <= native + 0.3,
            "parallel / serial wall time {sandboxed:.2} on 2 vCPUs, native {native:.2}"
        );
    }
}
