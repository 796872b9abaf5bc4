//! Benchmark harness: `cargo run --release -p bench [-- --quick] [--out
//! PATH] [--qrun PATH]`. Needs `target/release/qrun` (`cargo build
//! --release`) and `/dev/kvm`. `--only-alloc` runs just the allocator
//! micro-benchmark ([`alloc_bench`]), which needs neither, and prints its
//! table without writing JSON.
//!
//! Not a test: it prints a table of medians (with min, p90, max and the run
//! count), each against its target with PASS or MISS, then ratios, and
//! writes the same as JSON to `target/bench/bench.json` (see
//! [`metric::json`] for the layout). Native and sandboxed runs are
//! interleaved in one invocation so that both see the same machine state.
//! Benchmarks never fail the process for missing a target; the exit status
//! is 1 only when a required measurement could not be taken.
//!
//! | metric | what | target |
//! |---|---|---|
//! | `hello_qrun_ms` | wall time of `qrun do -- hello`, spawn to exit, 30 runs | <= 10 ms |
//! | `hello_native_ms` | the same binary run natively | |
//! | `oci_run_qrun_ms` | `qrun run` of a hello bundle (the OCI path: namespaces, cgroups, pivot_root, seccomp), [`oci`] | <= 20 ms |
//! | `oci_run_runc_ms`, `oci_run_crun_ms` | `runc run` / `crun run` of the same bundle (crun: n/a on hybrid cgroup hosts) | |
//! | `hello_host_calls` | count from `qrun do --stats` | <= 10 |
//! | `hello_qrun_self_ms` | the time `qrun --stats` reports for itself | |
//! | `null_syscall_us` | raw `getppid` in the guest, `bench_syscall` | <= 3 µs |
//! | `page_fault_us` | one touch per 64 KiB of fresh anonymous memory (one fault-around fault each), `bench_fault` | <= 10 µs |
//! | `page_fault_warm_us` | the same on guest frames freed by the first pass: the guest's fault path without the host populating guest RAM | |
//! | `page_touch_us` | touching every 4 KiB page of fresh memory, per page | |
//! | `thread_create_join_us`, `futex_pingpong_us`, `mutex_contended_us` | `bench_threads 1000`: pthread_create + join of an empty thread; a round trip between two threads over one futex word (FUTEX_WAIT/WAKE); per lock+unlock with 4 threads contending for one mutex | ratios to native: create+join <= 10x, futex ping-pong <= 10x |
//! | `host_call_us` | `poll(fd 1, timeout 0)` (one host call) minus a null syscall, `bench_hostcall` | <= 35 µs |
//! | `alloc.*` | qlib's bitmap page allocator, direct (`bitmap`) and through a per-CPU `PageCache` as the kernel uses it (`bitmap_cached`), against `buddy_system_allocator` plain and locked ([`alloc_bench`]) | ratio `alloc pair bitmap_cached/buddy_locked` <= 0.5 |
//! | `http_rps`, `http_p50_us`, `http_p99_us` | keep-alive `GET /` to `http_server` in `qrun do`, `wrk -t1 -c1 --latency`, 3 x 5 s ([`http`]); optional until the guest has sockets | p50 <= 150 µs |
//! | `http_native_*` | the same server run natively, rounds interleaved | |
//! | `http_host_calls_per_req` | (host calls of a loaded sandbox - those of one serving only `/quit`) / requests, from `qrun do --stats` | <= 4 |
//! | `hib.<workload>.*` | hibernation with 10 sandboxes per workload ([`hibernate`]): first-request latency cold, warm, after a page-fault wake, a REAP wake and an explicit wake; PSS warm, hibernated, woken; swap faults and bytes read per wake; CPU while hibernated | hibernated PSS <= 5% of warm (64 MiB) / <= 2 MiB (hello); REAP/page-fault <= 0.2; REAP/cold <= 0.2; 0 CPU |
//! | `reclaim_ms`, `reclaim_calls_per_mib`, `churn_calls_per_mib` | the guest unmaps 1 GiB until qrun's RSS falls, with no reclaim asked for; hand-back host calls per MiB freed, there and in an alloc/free loop ([`reclaim`]) | <= 150 ms; <= 0.5 |
//!
//! Each guest metric has a `*_native_us` twin from the same program run
//! directly on the host. The guest programs time themselves with
//! `CLOCK_MONOTONIC`; each is run 10 times per side (3 with `--quick`).
//! `--quick` also cuts `hello` to 10 runs, reclaim to one, http to one
//! 2 s round per side and the hibernation sandboxes to 3 per workload.
//! `--only-hibernate` runs just the hibernation part, `--only-reclaim`
//! just the reclaim part, `--only-guest` just the programs timed inside
//! the guest ([`guest`]: syscalls, faults, host calls, processes,
//! threads).
//!
//! `bench functionbench [--quick]` runs the FunctionBench suite instead
//! (real Python functions as OCI containers under qrun and runc, with
//! hibernation; [`functionbench`]). `bench density [-n N]` runs N Python
//! hello functions under qrun and N under runc side by side and reports
//! PSS per instance warm and hibernated ([`density`]).

#![deny(unsafe_code)]

#[allow(
    unsafe_code,
    reason = "alloc_bench reserves its chunk pool with std::alloc; its unsafe blocks carry SAFETY comments"
)]
mod alloc_bench;
mod density;
mod functionbench;
mod guest;
mod hibernate;
mod http;
mod metric;
mod oci;
mod reclaim;
mod runner;
mod startup;
mod stats;

use std::path::PathBuf;
use std::process::ExitCode;

use metric::{Metric, Ratio, Value};
use runner::Runner;

const USAGE: &str = "usage: bench [--quick] [--only-hibernate] [--only-reclaim] [--only-guest] [--out PATH] [--qrun PATH] | bench --only-alloc | bench functionbench [--quick] | bench density [-n N]";

struct Options {
    quick: bool,
    only_hibernate: bool,
    only_reclaim: bool,
    only_alloc: bool,
    only_guest: bool,
    out: PathBuf,
    qrun: Option<PathBuf>,
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        quick: false,
        only_hibernate: false,
        only_reclaim: false,
        only_alloc: false,
        only_guest: false,
        out: runner::workspace_root().join("target/bench/bench.json"),
        qrun: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => o.quick = true,
            "--only-hibernate" => o.only_hibernate = true,
            "--only-alloc" => o.only_alloc = true,
            "--only-reclaim" => o.only_reclaim = true,
            "--only-guest" => o.only_guest = true,
            "--out" => o.out = args.next().ok_or("--out needs a path")?.into(),
            "--qrun" => o.qrun = Some(args.next().ok_or("--qrun needs a path")?.into()),
            // `cargo bench` style invocations pass --bench; ignore it.
            "--bench" => {}
            "-h" | "--help" => return Err(String::new()),
            _ => return Err(format!("unknown argument '{a}'")),
        }
    }
    Ok(o)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "functionbench") {
        return functionbench::main(&args[1..]);
    }
    if args.first().is_some_and(|a| a == "density") {
        return density::main(&args[1..]);
    }
    let opts = match parse_args() {
        Ok(o) => o,
        Err(msg) => {
            if !msg.is_empty() {
                eprintln!("bench: {msg}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    if opts.only_alloc {
        let metrics = alloc_metrics();
        print!("{}", metric::table(&metrics, &alloc_ratios(&metrics)));
        println!();
        return ExitCode::SUCCESS;
    }
    let runner = match Runner::new(opts.qrun.clone()) {
        Ok(r) => r,
        Err(msg) => {
            eprintln!("bench: {msg}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(w) = runner.staleness_warning() {
        eprintln!("bench: {w}");
    }
    let (hello_runs, guest_runs, reclaim_runs, sandboxes) = if opts.quick {
        (10, 3, 1, 3)
    } else {
        (30, 10, 3, 10)
    };

    let mut metrics = Vec::new();
    if opts.only_guest {
        metrics.extend(guest::run(&runner, guest_runs));
    } else if opts.only_reclaim {
        metrics.extend(reclaim::run(&runner, reclaim_runs));
    } else if !opts.only_hibernate {
        eprintln!("bench: hello x{hello_runs}");
        metrics.extend(startup::run(&runner, hello_runs));
        metrics.extend(guest::run(&runner, guest_runs));
        eprintln!("bench: OCI run (qrun, runc, crun) x{hello_runs}");
        metrics.extend(oci::run(&runner, hello_runs));
        metrics.extend(alloc_metrics());
        metrics.extend(reclaim::run(&runner, reclaim_runs));
        metrics.extend(http::run(&runner, opts.quick));
    }
    if !opts.only_reclaim && !opts.only_guest {
        metrics.extend(hibernate::run(&runner, sandboxes));
    }
    let ratios = ratios(&metrics);

    print!("{}", metric::table(&metrics, &ratios));
    let json = metric::json(
        &metrics,
        &ratios,
        opts.quick,
        &runner.qrun().display().to_string(),
    );
    if let Err(e) = write_json(&opts.out, &json) {
        eprintln!("bench: writing {}: {e}", opts.out.display());
        return ExitCode::FAILURE;
    }
    println!("\nwrote {}", opts.out.display());
    if metrics.iter().any(|m| matches!(m.value, Value::Failed(_))) {
        eprintln!("bench: some measurements failed (ERROR above)");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

fn alloc_metrics() -> Vec<Metric> {
    eprintln!("bench: allocators");
    alloc_bench::run_alloc_bench()
        .into_iter()
        .map(|(name, v)| Metric::new(&name, alloc_unit(&name), Value::Scalar(v), None))
        .collect()
}

fn alloc_unit(name: &str) -> &'static str {
    if name.ends_with("ns_per_op") {
        "ns"
    } else if name.ends_with("ops_per_s") {
        "op/s"
    } else {
        ""
    }
}

/// Sandboxed against native, and the bitmap allocator against the buddy
/// allocator (below 1 means the bitmap allocator is faster).
fn ratios(m: &[Metric]) -> Vec<Ratio> {
    let mut r = vec![
        // Issue 15's targets: 2 CPU-bound threads on 2 vCPUs take at most
        // 0.6x their time on 1 vCPU and 1.15x native; a futex wake across
        // vCPUs at most 20x native.
        Ratio::of(
            m,
            "2 CPU-bound threads, 2 vCPUs / 1 vCPU",
            "burn_2threads_2vcpus_us",
            "burn_2threads_1vcpu_us",
        )
        .at_most(0.6),
        Ratio::of(
            m,
            "2 CPU-bound threads, 2 vCPUs / native",
            "burn_2threads_2vcpus_us",
            "burn_2threads_native_us",
        )
        .at_most(1.15),
        Ratio::of(
            m,
            "futex ping-pong, 2 vCPUs / native",
            "futex_pingpong_2vcpus_us",
            "futex_pingpong_native_us",
        )
        .at_most(20.0),
        // Syscall-heavy tasks stay on vCPU 0 (docs/smp.md): no slower on
        // 2 vCPUs than on 1 (the bound leaves room for a loaded machine).
        Ratio::of(
            m,
            "null syscall, 2 vCPUs / 1 vCPU",
            "null_syscall_2vcpus_us",
            "null_syscall_us",
        )
        .at_most(1.2),
        Ratio::of(
            m,
            "pipe ping-pong, 2 vCPUs / 1 vCPU",
            "pipe_pingpong_2vcpus_us",
            "pipe_pingpong_us",
        )
        .at_most(1.2),
        Ratio::of(m, "hello qrun/native", "hello_qrun_ms", "hello_native_ms"),
        Ratio::of(
            m,
            "fork+exit+wait qrun/native",
            "fork_exit_wait_us",
            "fork_exit_wait_native_us",
        ),
        Ratio::of(
            m,
            "fork+exec+wait qrun/native",
            "fork_exec_wait_us",
            "fork_exec_wait_native_us",
        ),
        Ratio::of(
            m,
            "pipe ping-pong qrun/native",
            "pipe_pingpong_us",
            "pipe_pingpong_native_us",
        ),
        Ratio::of(
            m,
            "socket ping-pong (armed waits) qrun/native",
            "socket_pingpong_us",
            "socket_pingpong_native_us",
        ),
        // Issue 14's targets: thread create+join and a futex ping-pong
        // at most 10x native.
        Ratio::of(
            m,
            "thread create+join sandbox/native",
            "thread_create_join_us",
            "thread_create_join_native_us",
        )
        .at_most(10.0),
        Ratio::of(
            m,
            "futex ping-pong sandbox/native",
            "futex_pingpong_us",
            "futex_pingpong_native_us",
        )
        .at_most(10.0),
        Ratio::of(
            m,
            "mutex 4-thread contention sandbox/native",
            "mutex_contended_us",
            "mutex_contended_native_us",
        ),
        Ratio::of(m, "oci run qrun/runc", "oci_run_qrun_ms", "oci_run_runc_ms"),
        Ratio::of(m, "oci run runc/qrun", "oci_run_runc_ms", "oci_run_qrun_ms"),
        Ratio::of(m, "oci run qrun/crun", "oci_run_qrun_ms", "oci_run_crun_ms"),
        Ratio::of(
            m,
            "null syscall sandbox/native",
            "null_syscall_us",
            "null_syscall_native_us",
        ),
        Ratio::of(
            m,
            "page fault sandbox/native",
            "page_fault_us",
            "page_fault_native_us",
        ),
        Ratio::of(
            m,
            "page fault (warm) sandbox/native",
            "page_fault_warm_us",
            "page_fault_warm_native_us",
        ),
        Ratio::of(
            m,
            "page touch sandbox/native",
            "page_touch_us",
            "page_touch_native_us",
        ),
        Ratio::of(
            m,
            "host call sandbox/native",
            "host_call_us",
            "host_call_native_us",
        ),
        Ratio::of(
            m,
            "host call / null syscall",
            "host_call_us",
            "null_syscall_us",
        ),
    ];
    r.push(Ratio::of(
        m,
        "http req/s sandbox/native",
        "http_rps",
        "http_native_rps",
    ));
    r.push(Ratio::of(
        m,
        "http p50 sandbox/native",
        "http_p50_us",
        "http_native_p50_us",
    ));
    r.extend(alloc_ratios(m));
    r
}

/// The bitmap allocator (shared entry points, and through a per-CPU page
/// cache as the kernel uses it) against the buddy allocator, plain and
/// locked. Below 1 means ours is faster.
fn alloc_ratios(m: &[Metric]) -> Vec<Ratio> {
    let mut r = Vec::new();
    for workload in ["pair", "batch"] {
        for ours in ["bitmap", "bitmap_cached"] {
            for other in ["buddy", "buddy_locked"] {
                let ratio = Ratio::of(
                    m,
                    &format!("alloc {workload} {ours}/{other}"),
                    &format!("alloc.{workload}.{ours}.ns_per_op"),
                    &format!("alloc.{workload}.{other}.ns_per_op"),
                );
                // Issue 3's target: single-page alloc + free at least 2x
                // faster than the buddy crate, on the kernel's path (the
                // page cache) against the buddy allocator as a kernel
                // shares it between CPUs (behind its lock).
                r.push(
                    if (workload, ours, other) == ("pair", "bitmap_cached", "buddy_locked") {
                        ratio.at_most(0.5)
                    } else {
                        ratio
                    },
                );
            }
        }
    }
    r
}

fn write_json(path: &std::path::Path, json: &serde_json::Value) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut text = serde_json::to_string_pretty(json).map_err(std::io::Error::other)?;
    text.push('\n');
    std::fs::write(path, text)
}
