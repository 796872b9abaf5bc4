//! Micro-benchmarks that time themselves inside the guest (and natively,
//! for comparison): `bench_syscall`, `bench_fault`, `bench_hostcall`,
//! `bench_procs`, `bench_threads`, `smp burn` from `test-apps`. Each prints `key value`
//! lines in nanoseconds; the harness runs each program `runs` times on each side, interleaved, after one
//! unrecorded warm-up run, and reports medians in microseconds.

use crate::metric::Metric;
use crate::runner::{self, Runner};
use crate::startup::summary_metric;

/// One figure a program prints, and the metrics it becomes.
struct Field {
    key: &'static str,
    sandboxed: &'static str,
    native: &'static str,
    /// Target for the sandboxed median, in µs.
    target_us: Option<f64>,
}

struct Program {
    name: &'static str,
    args: &'static [&'static str],
    qrun_opts: &'static [&'static str],
    fields: &'static [Field],
}

const PROGRAMS: &[Program] = &[
    // On 1 vCPU, whatever the default (the host's CPUs): the "2 vCPUs / 1
    // vCPU" ratios divide by these rows, and their history is on 1.
    Program {
        name: "bench_syscall",
        args: &["200000"],
        qrun_opts: &["--cpus", "1"],
        fields: &[
            Field {
                key: "syscall_ns",
                sandboxed: "null_syscall_us",
                native: "null_syscall_native_us",
                target_us: Some(3.0),
            },
            // Issue 14: the vDSO (docs/vdso.md) against the system call.
            Field {
                key: "clock_gettime_ns",
                sandboxed: "clock_gettime_vdso_us",
                native: "clock_gettime_vdso_native_us",
                target_us: None,
            },
            Field {
                key: "clock_gettime_syscall_ns",
                sandboxed: "clock_gettime_syscall_us",
                native: "clock_gettime_syscall_native_us",
                target_us: None,
            },
        ],
    },
    Program {
        name: "bench_fault",
        // 256 MiB of touches needs more than the default 256 MiB guest.
        args: &["256"],
        qrun_opts: &["--memory", "1G"],
        fields: &[
            Field {
                key: "fault_ns_per_touch",
                sandboxed: "page_fault_us",
                native: "page_fault_native_us",
                target_us: Some(10.0),
            },
            Field {
                key: "fault_warm_ns_per_touch",
                sandboxed: "page_fault_warm_us",
                native: "page_fault_warm_native_us",
                target_us: None,
            },
            Field {
                key: "page_ns_per_page",
                sandboxed: "page_touch_us",
                native: "page_touch_native_us",
                target_us: None,
            },
        ],
    },
    Program {
        name: "bench_hostcall",
        args: &["2000"],
        qrun_opts: &[],
        fields: &[Field {
            key: "hostcall_ns",
            sandboxed: "host_call_us",
            native: "host_call_native_us",
            target_us: Some(35.0),
        }],
    },
    Program {
        name: "bench_procs",
        args: &["200", HELLO],
        qrun_opts: &["--cpus", "1"],
        fields: &[
            Field {
                key: "fork_exit_wait_ns",
                sandboxed: "fork_exit_wait_us",
                native: "fork_exit_wait_native_us",
                target_us: None,
            },
            Field {
                key: "fork_exec_wait_ns",
                sandboxed: "fork_exec_wait_us",
                native: "fork_exec_wait_native_us",
                target_us: None,
            },
            Field {
                key: "pingpong_ns",
                sandboxed: "pipe_pingpong_us",
                native: "pipe_pingpong_native_us",
                target_us: None,
            },
            // Issue 13: what armed waits cost a blocking read (host
            // sockets: tried, parked, woken by the idle poll).
            Field {
                key: "sockpong_ns",
                sandboxed: "socket_pingpong_us",
                native: "socket_pingpong_native_us",
                target_us: None,
            },
        ],
    },
    Program {
        name: "bench_threads",
        args: &["1000"],
        qrun_opts: &[],
        fields: &[
            Field {
                key: "thread_create_join_ns",
                sandboxed: "thread_create_join_us",
                native: "thread_create_join_native_us",
                target_us: None,
            },
            Field {
                key: "futex_pingpong_ns",
                sandboxed: "futex_pingpong_us",
                native: "futex_pingpong_native_us",
                target_us: None,
            },
            Field {
                key: "mutex_contended_ns",
                sandboxed: "mutex_contended_us",
                native: "mutex_contended_native_us",
                target_us: None,
            },
        ],
    },
    // SMP (issue 15): two CPU-bound threads at once, on 1 and on 2 vCPUs
    // (the ratio rows compare them), and the futex ping-pong with 2 vCPUs
    // (a wake across vCPUs once tasks run on both).
    Program {
        name: "smp",
        args: &["burn", "50000000"],
        qrun_opts: &["--cpus", "1"],
        fields: &[Field {
            key: "burn_parallel_ns",
            sandboxed: "burn_2threads_1vcpu_us",
            native: "burn_2threads_native_us",
            target_us: None,
        }],
    },
    Program {
        name: "smp",
        args: &["burn", "50000000"],
        qrun_opts: &["--cpus", "2"],
        fields: &[Field {
            key: "burn_parallel_ns",
            sandboxed: "burn_2threads_2vcpus_us",
            native: "burn_2threads_native_again_us",
            target_us: None,
        }],
    },
    // Syscall-heavy tasks on 2 vCPUs stay on vCPU 0 (docs/smp.md, "Who
    // goes to a secondary"): these should match their 1-vCPU rows.
    Program {
        name: "bench_syscall",
        args: &["200000"],
        qrun_opts: &["--cpus", "2"],
        fields: &[Field {
            key: "syscall_ns",
            sandboxed: "null_syscall_2vcpus_us",
            native: "null_syscall_native_again_us",
            target_us: None,
        }],
    },
    Program {
        name: "bench_procs",
        args: &["200", HELLO],
        qrun_opts: &["--cpus", "2"],
        fields: &[Field {
            key: "pingpong_ns",
            sandboxed: "pipe_pingpong_2vcpus_us",
            native: "pipe_pingpong_native_again_us",
            target_us: None,
        }],
    },
    Program {
        name: "bench_threads",
        args: &["1000"],
        qrun_opts: &["--cpus", "2"],
        fields: &[Field {
            key: "futex_pingpong_ns",
            sandboxed: "futex_pingpong_2vcpus_us",
            native: "futex_pingpong_native_again_us",
            target_us: None,
        }],
    },
];

/// Stands for the static hello's absolute path in a program's arguments.
const HELLO: &str = "@hello";

pub fn run(r: &Runner, runs: usize) -> Vec<Metric> {
    let mut out = Vec::new();
    for p in PROGRAMS {
        eprintln!("bench: {} x{runs}", p.name);
        let mut native = Ok(vec![Vec::new(); p.fields.len()]);
        let mut sandboxed = Ok(vec![Vec::new(); p.fields.len()]);
        let hello = test_apps::path("hello").display().to_string();
        let args: Vec<&str> = p
            .args
            .iter()
            .map(|&a| if a == HELLO { hello.as_str() } else { a })
            .collect();
        for i in 0..=runs {
            for (samples, mut cmd) in [
                (&mut native, r.native(p.name, &args)),
                (&mut sandboxed, r.sandboxed(p.qrun_opts, p.name, &args)),
            ] {
                let Ok(per_field) = samples else { continue };
                match one_run(&mut cmd, p.fields) {
                    Ok(values) if i > 0 => {
                        for (v, x) in per_field.iter_mut().zip(values) {
                            v.push(x / 1e3);
                        }
                    }
                    Ok(_) => {}
                    Err(e) => *samples = Err(e),
                }
            }
        }
        for (i, f) in p.fields.iter().enumerate() {
            let pick = |s: &Result<Vec<Vec<f64>>, String>| match s {
                Ok(v) => Ok(v[i].clone()),
                Err(e) => Err(e.clone()),
            };
            out.push(summary_metric(
                f.sandboxed,
                "us",
                pick(&sandboxed),
                f.target_us,
            ));
            out.push(summary_metric(f.native, "us", pick(&native), None));
        }
    }
    out
}

/// The value of each field, in the program's nanoseconds.
fn one_run(cmd: &mut std::process::Command, fields: &[Field]) -> Result<Vec<f64>, String> {
    let o = runner::output(cmd)?;
    let text = String::from_utf8_lossy(&o.stdout);
    fields
        .iter()
        .map(|f| runner::field(&text, f.key))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: {e}", runner::describe(cmd)))
}
