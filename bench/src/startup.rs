//! Startup: the static `hello` natively and under `qrun do`, wall time
//! from spawn to exit as the harness sees it, runs interleaved; then a few
//! `qrun do --stats` runs for the host-call count and qrun's own timing.

use crate::metric::{Metric, Value};
use crate::runner::{self, Runner};
use crate::stats::Summary;

const HELLO_TARGET_MS: f64 = 10.0;
const HOST_CALLS_TARGET: f64 = 10.0;
/// `--stats` runs: the count is deterministic, a few runs show that.
const STATS_RUNS: usize = 5;

pub fn run(r: &Runner, runs: usize) -> Vec<Metric> {
    let mut native = Ok(Vec::new());
    let mut sandboxed = Ok(Vec::new());
    // Run 0 warms the page cache and is not recorded.
    for i in 0..=runs {
        for (samples, mut cmd) in [
            (&mut native, r.native("hello", &[])),
            (&mut sandboxed, r.sandboxed(&[], "hello", &[])),
        ] {
            if let Ok(v) = samples {
                match runner::time_run(&mut cmd) {
                    Ok(t) if i > 0 => v.push(t.as_secs_f64() * 1e3),
                    Ok(_) => {}
                    Err(e) => *samples = Err(e),
                }
            }
        }
    }
    let mut out = vec![
        summary_metric("hello_qrun_ms", "ms", sandboxed, Some(HELLO_TARGET_MS)),
        summary_metric("hello_native_ms", "ms", native, None),
    ];

    let stats: Result<Vec<(f64, u64)>, String> = (0..STATS_RUNS)
        .map(|_| {
            let o = runner::output(&mut r.sandboxed(&["--stats"], "hello", &[]))?;
            let err = String::from_utf8_lossy(&o.stderr);
            runner::stats_line(&err)
                .ok_or_else(|| format!("no 'qrun: status ... host calls' line in {err:?}"))
        })
        .collect();
    let (ms, calls) = match stats {
        Ok(v) => {
            let (ms, calls): (Vec<f64>, Vec<f64>) =
                v.into_iter().map(|(ms, n)| (ms, n as f64)).unzip();
            (Ok(ms), Ok(calls))
        }
        Err(e) => (Err(e.clone()), Err(e)),
    };
    out.push(summary_metric(
        "hello_host_calls",
        "calls",
        calls,
        Some(HOST_CALLS_TARGET),
    ));
    // qrun's own figure: from its `main` to the guest's exit, so the
    // difference to hello_qrun_ms is exec, dynamic loading and teardown.
    out.push(summary_metric("hello_qrun_self_ms", "ms", ms, None));
    out
}

/// A metric from samples, or the error that stopped their collection.
pub fn summary_metric(
    name: &str,
    unit: &'static str,
    samples: Result<Vec<f64>, String>,
    target: Option<f64>,
) -> Metric {
    let value = match samples {
        Ok(v) => match Summary::of(&v) {
            Some(s) => Value::Summary(s),
            None => Value::Failed("no samples".to_owned()),
        },
        Err(e) => Value::Failed(e),
    };
    Metric::new(name, unit, value, target)
}
