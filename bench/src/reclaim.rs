//! Memory reclaim, optional until the runtime supports it: `qrun do
//! --stats --memory 1536M -- reclaim_probe 1024` maps, touches and unmaps
//! 1 GiB in the guest and prints `unmapped`; the harness reads qrun's RSS,
//! sends it SIGUSR1 (which asks the VMM to reclaim free guest memory),
//! polls the RSS until it has fallen by at least half the probe size and
//! then stopped falling, then lets the probe finish (it checks that
//! remapped memory reads as zero).
//!
//! `reclaim_ms` runs from just before the `kill` command is spawned to the
//! last RSS reading that was lower than the one before, so it includes
//! signal delivery and up to one polling interval (0.5 ms);
//! `reclaim_rss_after_mib` is that lowest reading. `reclaim_vmm_ms` is the
//! VMM's own figure from its `qrun: reclaimed <bytes> bytes in <ms> ms`
//! line.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
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
    ("reclaim_vmm_ms", "ms", Some(TARGET_MS)),
    ("reclaim_vmm_mib", "MiB", None),
    ("reclaim_rss_before_mib", "MiB", None),
    ("reclaim_rss_after_mib", "MiB", None),
];

/// One reclaim, as measured.
struct Sample {
    rss_before: u64,
    rss_after: u64,
    observed_ms: f64,
    /// `(bytes, ms)` from the VMM's `--stats` line, if it printed one.
    vmm: Option<(u64, f64)>,
}

pub fn run(r: &Runner, runs: usize) -> Vec<Metric> {
    eprintln!("bench: reclaim_probe {PROBE_MIB} x{runs}");
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
            None => Value::NotAvailable("qrun printed no 'qrun: reclaimed' line".to_owned()),
        };
        Metric::new(name, unit, value, target)
    };
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    vec![
        metric(0, &|s| Some(s.observed_ms)),
        metric(1, &|s| s.vmm.map(|v| v.1)),
        metric(2, &|s| s.vmm.map(|v| mib(v.0))),
        metric(3, &|s| Some(mib(s.rss_before))),
        metric(4, &|s| Some(mib(s.rss_after))),
    ]
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
    let args = [&PROBE_MIB.to_string()[..]];
    let mut cmd = r.sandboxed(&["--stats", "--memory", "1536M"], "reclaim_probe", &args);
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

    if !wait_for_line(&stdout, "unmapped", UNMAPPED_TIMEOUT) {
        return Err(gone(&mut child, stderr));
    }
    let rss_before = rss(pid).ok_or_else(|| "cannot read qrun's VmRSS".to_owned())?;
    let threshold = rss_before.saturating_sub(PROBE_MIB << 19);

    let start = Instant::now();
    let kill = Command::new("kill")
        .args(["-USR1", &pid.to_string()])
        .status()
        .map_err(|e| format!("kill -USR1 {pid}: {e}"))?;
    if !kill.success() {
        return Err(format!("kill -USR1 {pid}: {kill}"));
    }
    // Wait for the RSS to fall below the threshold, then until it has not
    // fallen for SETTLE; the reclaim ended at the last fall.
    let mut last = (rss_before, Duration::ZERO);
    loop {
        let Some(now) = rss(pid) else {
            // No VmRSS: qrun has exited, most likely killed by SIGUSR1.
            return Err(format!("after SIGUSR1: {}", gone(&mut child, stderr)));
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
                "RSS did not fall within {RECLAIM_TIMEOUT:?} of SIGUSR1 ({} -> {} MiB)",
                rss_before >> 20,
                now >> 20
            ));
        }
        thread::sleep(POLL_INTERVAL);
    }
    let (rss_after, observed) = last;

    let mut stdin = child.0.stdin.take().expect("stdin is piped");
    stdin
        .write_all(b"\n")
        .map_err(|e| format!("writing to reclaim_probe: {e}"))?;
    drop(stdin);
    let status = wait_timeout(&mut child.0, EXIT_TIMEOUT)?;
    let err = stderr.join().unwrap_or_default();
    let rest: Vec<String> = stdout.try_iter().collect();
    if !status.success() || !rest.iter().any(|l| l == "zero ok") {
        return Err(format!(
            "reclaim_probe failed after the reclaim ({status}): {rest:?}; stderr: {}",
            err.trim()
        ));
    }
    Ok(Sample {
        rss_before,
        rss_after,
        observed_ms: observed.as_secs_f64() * 1e3,
        vmm: err.lines().find_map(parse_reclaimed),
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

/// `(bytes, ms)` from `qrun: reclaimed <bytes> bytes in <ms> ms`.
fn parse_reclaimed(line: &str) -> Option<(u64, f64)> {
    let rest = line.strip_prefix("qrun: reclaimed ")?;
    let (bytes, rest) = rest.split_once(" bytes in ")?;
    let ms = rest.strip_suffix(" ms")?;
    Some((bytes.trim().parse().ok()?, ms.trim().parse().ok()?))
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
    fn parses_reclaimed_line() {
        let l = "qrun: reclaimed 1073741824 bytes in 91.250 ms";
        assert_eq!(parse_reclaimed(l), Some((1 << 30, 91.25)));
        assert_eq!(
            parse_reclaimed("qrun: status 0 in 4.089 ms, 3 host calls"),
            None
        );
    }
}
