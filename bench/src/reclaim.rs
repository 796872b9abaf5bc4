//! Memory going back to the host while the program runs: `qrun do
//! --stats --memory 1536M -- free_probe hold 1024 munmap` maps and touches
//! 1 GiB in the guest and prints `touched`; the harness reads qrun's RSS,
//! tells the probe to unmap it (a line on stdin), and polls the RSS until
//! it has fallen by at least half the probe size and then stopped falling;
//! nothing asks for a reclaim: the guest hands the freed pages back on its
//! own. Then the probe checks that remapped memory reads as zero.
//!
//! `reclaim_ms` runs from the line sent to the last RSS reading that was
//! lower than the one before (the munmap, the hand-back, up to one polling
//! interval of 0.5 ms); `reclaim_rss_after_mib` is that lowest reading.
//! `reclaim_host_calls` is the `Reclaim` host calls the hand-back took over
//! the whole run (`qrun: returned ... in K host calls`), and
//! `reclaim_calls_per_mib` that per MiB the probe freed. `churn_*` runs
//! `free_probe churn 200` (mmap/munmap, malloc/free, `MADV_DONTNEED`, brk
//! in a loop): hand-back host calls per MiB the program freed, and its
//! wall time against the same run natively.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use crate::metric::{Metric, Value};
use crate::runner::{self, Runner};
use crate::stats::Summary;

const PROBE_MIB: u64 = 1024;
const TARGET_MS: f64 = 150.0;
/// Mapping and touching 1 GiB in the guest; generous for a slow machine.
const UNMAPPED_TIMEOUT: Duration = Duration::from_secs(120);
const RECLAIM_TIMEOUT: Duration = Duration::from_secs(10);
const POLL_INTERVAL: Duration = Duration::from_micros(500);
/// The RSS has settled once it has not fallen for this long.
const SETTLE: Duration = Duration::from_millis(100);
/// Remapping and checking 1 GiB after the reclaim.
const EXIT_TIMEOUT: Duration = Duration::from_secs(120);

/// Name, unit and target of each metric, in the order `run` returns them.
const METRICS: [(&str, &str, Option<f64>); 5] = [
    ("reclaim_ms", "ms", Some(TARGET_MS)),
    ("reclaim_host_calls", "", None),
    ("reclaim_calls_per_mib", "", Some(0.5)),
    ("reclaim_rss_before_mib", "MiB", None),
    ("reclaim_rss_after_mib", "MiB", None),
];
const CHURN_ROUNDS: &str = "200";

/// One reclaim, as measured.
struct Sample {
    rss_before: u64,
    rss_after: u64,
    observed_ms: f64,
    /// `(bytes, host calls)` from the VMM's `--stats` line, if it printed
    /// one.
    vmm: Option<(u64, u64)>,
}

pub fn run(r: &Runner, runs: usize) -> Vec<Metric> {
    eprintln!("bench: free_probe hold {PROBE_MIB} x{runs}");
    let samples: Result<Vec<Sample>, String> = (0..runs).map(|_| once(r)).collect();
    let samples = match samples {
        Ok(s) => s,
        Err(why) => {
            return METRICS
                .iter()
                .map(|&(name, unit, target)| {
                    Metric::new(name, unit, Value::NotAvailable(why.clone()), target)
                })
                .collect();
        }
    };
    let metric = |i: usize, f: &dyn Fn(&Sample) -> Option<f64>| {
        let (name, unit, target) = METRICS[i];
        let xs: Option<Vec<f64>> = samples.iter().map(f).collect();
        let value = match xs.as_deref().and_then(Summary::of) {
            Some(s) => Value::Summary(s),
            None => Value::NotAvailable("qrun printed no 'qrun: returned' line".to_owned()),
        };
        Metric::new(name, unit, value, target)
    };
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    let mut out = vec![
        metric(0, &|s| Some(s.observed_ms)),
        metric(1, &|s| s.vmm.map(|v| v.1 as f64)),
        metric(2, &|s| s.vmm.map(|v| v.1 as f64 / PROBE_MIB as f64)),
        metric(3, &|s| Some(mib(s.rss_before))),
        metric(4, &|s| Some(mib(s.rss_after))),
    ];
    out.extend(churn(r, runs));
    out
}

/// `free_probe churn`: hand-back host calls per MiB freed, and wall time
/// sandboxed and native.
fn churn(r: &Runner, runs: usize) -> Vec<Metric> {
    eprintln!("bench: free_probe churn {CHURN_ROUNDS} x{runs}");
    let once = || -> Result<(f64, f64, f64), String> {
        let args = ["churn", CHURN_ROUNDS];
        let mut native = r.native("free_probe", &args);
        let native_ms = runner::time_run(&mut native)?.as_secs_f64() * 1e3;
        let mut cmd = r.sandboxed(&["--stats", "--memory", "512M"], "free_probe", &args);
        let start = Instant::now();
        let out = runner::output(&mut cmd)?;
        let ms = start.elapsed().as_secs_f64() * 1e3;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let freed: f64 = stdout
            .lines()
            .find_map(|l| l.strip_prefix("freed ")?.strip_suffix(" MiB")?.parse().ok())
            .ok_or_else(|| format!("free_probe churn: {stdout}"))?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        let (_, calls) = stderr
            .lines()
            .find_map(parse_returned)
            .ok_or_else(|| format!("no 'qrun: returned' line: {stderr}"))?;
        Ok((calls as f64 / freed, ms, native_ms))
    };
    let samples: Result<Vec<_>, String> = (0..runs).map(|_| once()).collect();
    let names = [
        ("churn_calls_per_mib", "", Some(0.5)),
        ("churn_qrun_ms", "ms", None),
        ("churn_native_ms", "ms", None),
    ];
    names
        .iter()
        .enumerate()
        .map(|(i, &(name, unit, target))| {
            let value = match &samples {
                Ok(s) => {
                    let xs: Vec<f64> = s.iter().map(|t| [t.0, t.1, t.2][i]).collect();
                    Summary::of(&xs).map_or(Value::NotAvailable("no runs".into()), Value::Summary)
                }
                Err(why) => Value::Failed(why.clone()),
            };
            Metric::new(name, unit, value, target)
        })
        .collect()
}

/// Kills and reaps the child if a measurement bails out early.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn once(r: &Runner) -> Result<Sample, String> {
    let args = ["hold", &PROBE_MIB.to_string()[..], "munmap"];
    let mut cmd = r.sandboxed(&["--stats", "--memory", "1536M"], "free_probe", &args);
    let what = runner::describe(&cmd);
    let mut child = Guard(
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{what}: {e}"))?,
    );
    let pid = child.0.id();
    let stdout = lines(child.0.stdout.take().expect("stdout is piped"));
    let mut stdin = child.0.stdin.take().expect("stdin is piped");
    let mut stderr = child.0.stderr.take().expect("stderr is piped");
    let stderr = thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let gone = |child: &mut Guard, stderr: thread::JoinHandle<String>| {
        let status = child.0.wait().map_or("?".to_owned(), |s| s.to_string());
        let err = stderr.join().unwrap_or_default();
        format!("qrun exited early ({status}); stderr: {}", err.trim())
    };

    if !wait_for_line(&stdout, "touched", UNMAPPED_TIMEOUT) {
        return Err(gone(&mut child, stderr));
    }
    let rss_before = rss(pid).ok_or_else(|| "cannot read qrun's VmRSS".to_owned())?;
    let threshold = rss_before.saturating_sub(PROBE_MIB << 19);

    let start = Instant::now();
    stdin
        .write_all(b"\n")
        .map_err(|e| format!("writing to free_probe: {e}"))?;
    // Wait for the RSS to fall below the threshold, then until it has not
    // fallen for SETTLE; the hand-back ended at the last fall.
    let mut last = (rss_before, Duration::ZERO);
    loop {
        let Some(now) = rss(pid) else {
            return Err(gone(&mut child, stderr));
        };
        let t = start.elapsed();
        if now < last.0 {
            last = (now, t);
        }
        if last.0 <= threshold && t - last.1 >= SETTLE {
            break;
        }
        if last.0 > threshold && t > RECLAIM_TIMEOUT {
            return Err(format!(
                "RSS did not fall within {RECLAIM_TIMEOUT:?} of the unmap ({} -> {} MiB)",
                rss_before >> 20,
                now >> 20
            ));
        }
        thread::sleep(POLL_INTERVAL);
    }
    let (rss_after, observed) = last;

    stdin
        .write_all(b"\n")
        .map_err(|e| format!("writing to free_probe: {e}"))?;
    drop(stdin);
    let status = wait_timeout(&mut child.0, EXIT_TIMEOUT)?;
    let err = stderr.join().unwrap_or_default();
    let rest: Vec<String> = stdout.try_iter().collect();
    if !status.success() || !rest.iter().any(|l| l == "zero ok") {
        return Err(format!(
            "free_probe failed after the hand-back ({status}): {rest:?}; stderr: {}",
            err.trim()
        ));
    }
    Ok(Sample {
        rss_before,
        rss_after,
        observed_ms: observed.as_secs_f64() * 1e3,
        vmm: err.lines().find_map(parse_returned),
    })
}

/// A channel of `r`'s lines, fed by a thread until EOF.
fn lines(r: impl Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(r).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Whether `want` arrives as a whole line before EOF and the timeout.
fn wait_for_line(rx: &Receiver<String>, want: &str, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line == want => return true,
            Ok(_) => {}
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return false,
        }
    }
}

fn wait_timeout(child: &mut Child, timeout: Duration) -> Result<std::process::ExitStatus, String> {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status),
            Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(5)),
            Ok(None) => return Err(format!("qrun still running {timeout:?} after the reclaim")),
            Err(e) => return Err(format!("waiting for qrun: {e}")),
        }
    }
}

/// Resident set of `pid` in bytes; `None` once it has exited (a zombie
/// has no `VmRSS` line).
fn rss(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_vmrss(&status)
}

fn parse_vmrss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib << 10)
}

/// `(bytes, host calls)` from `qrun: returned <bytes> bytes while running
/// in <calls> host calls`.
fn parse_returned(line: &str) -> Option<(u64, u64)> {
    let rest = line.strip_prefix("qrun: returned ")?;
    let (bytes, rest) = rest.split_once(" bytes while running in ")?;
    let calls = rest.strip_suffix(" host calls")?;
    Some((bytes.trim().parse().ok()?, calls.trim().parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_vmrss() {
        let s = "Name:\tqrun\nVmPeak:\t  9 kB\nVmRSS:\t 1052672 kB\nThreads:\t2\n";
        assert_eq!(parse_vmrss(s), Some(1052672 << 10));
        assert_eq!(parse_vmrss("Name:\tqrun\nState:\tZ (zombie)\n"), None);
    }

    #[test]
    fn parses_returned_line() {
        let l = "qrun: returned 1073741824 bytes while running in 3 host calls";
        assert_eq!(parse_returned(l), Some((1 << 30, 3)));
        assert_eq!(
            parse_returned("qrun: status 0 in 4.089 ms, 3 host calls"),
            None
        );
    }
}
