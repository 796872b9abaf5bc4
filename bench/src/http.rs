//! The HTTP function server (`test-apps/c/http_server.c`) under load from
//! `wrk -t1 -c1 -dNs --latency` (Debian's `wrk`), natively and in `qrun
//! do`, rounds interleaved: requests/s and p50/p99 latency of keep-alive
//! `GET /` on one connection.
//!
//! Host calls per request: each sandboxed round runs `qrun do --stats`,
//! ends the server with `GET /quit` and reads the host-call count qrun
//! prints at exit; a baseline sandbox that serves only `/quit` gives the
//! fixed cost (boot, listen, one connection, exit), so per request =
//! (calls of the round - baseline) / wrk's request count. (`--debug` is
//! not used: forwarding the guest log would add host calls.)
//!
//! The sandboxed figures are optional until the guest kernel has sockets:
//! `n/a` with the reason. A failing native run or a missing `wrk` is an
//! error.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use crate::metric::{Metric, Value};
use crate::runner::{self, Runner};
use crate::startup::summary_metric;

const P50_TARGET_US: f64 = 150.0;
const CALLS_TARGET: f64 = 4.0;
const START_TIMEOUT: Duration = Duration::from_secs(30);
const EXIT_TIMEOUT: Duration = Duration::from_secs(20);

/// What one wrk run reports.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Load {
    rps: f64,
    p50_us: f64,
    p99_us: f64,
    requests: u64,
}

pub fn run(r: &Runner, quick: bool) -> Vec<Metric> {
    let (rounds, secs) = if quick { (1, 2) } else { (3, 5) };
    eprintln!("bench: http, wrk {secs} s x{rounds} per side");
    let mut native: Result<Vec<Load>, String> = Ok(Vec::new());
    let mut sandboxed: Result<Vec<(Load, u64)>, String> = Ok(Vec::new());
    for _ in 0..rounds {
        if let Ok(v) = &mut native {
            match native_round(r, secs) {
                Ok(l) => v.push(l),
                Err(e) => native = Err(e),
            }
        }
        if let Ok(v) = &mut sandboxed {
            match sandboxed_round(r, secs) {
                Ok(x) => v.push(x),
                Err(e) => sandboxed = Err(e),
            }
        }
    }
    let baseline = sandboxed
        .as_ref()
        .map_err(Clone::clone)
        .and_then(|_| baseline_calls(r));

    let pick = |v: &Result<Vec<Load>, String>, f: fn(&Load) -> f64| {
        v.as_ref()
            .map(|v| v.iter().map(f).collect::<Vec<f64>>())
            .map_err(Clone::clone)
    };
    let loads = sandboxed
        .as_ref()
        .map(|v| v.iter().map(|x| x.0).collect())
        .map_err(Clone::clone);
    let per_request = match (&sandboxed, &baseline) {
        (Ok(v), Ok(b)) => Ok(v
            .iter()
            .map(|(l, calls)| calls.saturating_sub(*b) as f64 / l.requests.max(1) as f64)
            .collect()),
        (Err(e), _) | (_, Err(e)) => Err(e.clone()),
    };
    let optional = |m: Metric| match m.value {
        Value::Failed(why) => Metric::new(&m.name, m.unit, Value::NotAvailable(why), m.target),
        _ => m,
    };
    vec![
        optional(summary_metric(
            "http_rps",
            "req/s",
            pick(&loads, |l| l.rps),
            None,
        )),
        summary_metric("http_native_rps", "req/s", pick(&native, |l| l.rps), None),
        optional(summary_metric(
            "http_p50_us",
            "µs",
            pick(&loads, |l| l.p50_us),
            Some(P50_TARGET_US),
        )),
        summary_metric(
            "http_native_p50_us",
            "µs",
            pick(&native, |l| l.p50_us),
            None,
        ),
        optional(summary_metric(
            "http_p99_us",
            "µs",
            pick(&loads, |l| l.p99_us),
            None,
        )),
        summary_metric(
            "http_native_p99_us",
            "µs",
            pick(&native, |l| l.p99_us),
            None,
        ),
        optional(summary_metric(
            "http_host_calls_per_req",
            "calls",
            per_request,
            Some(CALLS_TARGET),
        )),
    ]
}

fn native_round(r: &Runner, secs: u32) -> Result<Load, String> {
    let mut server = Server::start(
        "native http_server",
        r.native("http_server", &["--port", "0"]),
    )?;
    let load = wrk(server.port, secs)?;
    server.quit()?;
    Ok(load)
}

/// One sandboxed wrk run and the host calls of the whole sandbox.
fn sandboxed_round(r: &Runner, secs: u32) -> Result<(Load, u64), String> {
    let mut server = Server::start("sandboxed http_server", sandboxed_cmd(r))?;
    let load = wrk(server.port, secs)?;
    let calls = server.quit()?;
    Ok((
        load,
        calls.ok_or("qrun --stats printed no host-call count")?,
    ))
}

/// Host calls of a sandbox that starts, serves `/quit` and exits.
fn baseline_calls(r: &Runner) -> Result<u64, String> {
    let mut server = Server::start("baseline sandboxed http_server", sandboxed_cmd(r))?;
    server
        .quit()?
        .ok_or_else(|| "qrun --stats printed no host-call count".to_owned())
}

fn sandboxed_cmd(r: &Runner) -> Command {
    r.sandboxed(&["--stats"], "http_server", &["--port", "0"])
}

fn wrk(port: u16, secs: u32) -> Result<Load, String> {
    let url = format!("http://127.0.0.1:{port}/");
    let mut cmd = Command::new("wrk");
    cmd.args(["-t1", "-c1", &format!("-d{secs}s"), "--latency", &url]);
    let out = runner::output(&mut cmd)
        .map_err(|e| format!("{e} (is Debian's wrk installed? scripts/deps.sh)"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    parse_wrk(&text).ok_or_else(|| format!("cannot read wrk's report:\n{text}"))
}

/// Requests/s, the 50% and 99% latencies and the request count from a
/// `wrk --latency` report; `None` if it shows errors or non-2xx answers.
fn parse_wrk(text: &str) -> Option<Load> {
    if text.contains("Socket errors") || text.contains("Non-2xx") {
        return None;
    }
    let after = |key: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(key))
            .map(str::trim)
    };
    let rps = after("Requests/sec:")?.parse().ok()?;
    let requests = text
        .lines()
        .find(|l| l.contains(" requests in "))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(Load {
        rps,
        p50_us: duration_us(after("50%")?)?,
        p99_us: duration_us(after("99%")?)?,
        requests,
    })
}

/// wrk's `15.00us`, `3.18ms`, `1.02s` in µs.
fn duration_us(s: &str) -> Option<f64> {
    let (num, scale) = if let Some(n) = s.strip_suffix("us") {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix("ms") {
        (n, 1e3)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60e6)
    } else {
        (s.strip_suffix('s')?, 1e6)
    };
    Some(num.parse::<f64>().ok()? * scale)
}

/// Several lines of stderr as one line of a table.
fn one_line(s: &str) -> String {
    s.trim().lines().collect::<Vec<_>>().join(" | ")
}

/// A running http_server (native or sandboxed); killed with its process
/// group if dropped before it exits.
struct Server {
    child: Child,
    port: u16,
    stderr: Option<thread::JoinHandle<String>>,
}

impl Server {
    /// Starts `cmd` and reads its port; `what` names it in errors.
    fn start(what: &str, mut cmd: Command) -> Result<Self, String> {
        cmd.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = cmd.spawn().map_err(|e| format!("{what}: {e}"))?;
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut err = child.stderr.take().expect("stderr is piped");
        let stderr = Some(thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        }));
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let mut server = Self {
            child,
            port: 0,
            stderr,
        };
        let line = rx.recv_timeout(START_TIMEOUT).unwrap_or_default();
        match line
            .strip_prefix("listening on ")
            .and_then(|p| p.trim().parse().ok())
        {
            Some(port) => server.port = port,
            None => {
                server.kill();
                let err = server.stderr.take().map(|h| h.join().unwrap_or_default());
                return Err(format!(
                    "{what}: no 'listening on PORT' line (got {line:?}); stderr: {}",
                    one_line(&err.unwrap_or_default())
                ));
            }
        }
        Ok(server)
    }

    /// `GET /quit`, then waits for the exit; the host-call count if qrun
    /// printed one.
    fn quit(&mut self) -> Result<Option<u64>, String> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port))
            .map_err(|e| format!("connecting for /quit: {e}"))?;
        s.set_read_timeout(Some(EXIT_TIMEOUT))
            .map_err(|e| e.to_string())?;
        s.write_all(b"GET /quit HTTP/1.1\r\nHost: bench\r\n\r\n")
            .map_err(|e| format!("sending /quit: {e}"))?;
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        let deadline = Instant::now() + EXIT_TIMEOUT;
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(5)),
                _ => {
                    self.kill();
                    return Err(format!(
                        "http_server did not exit after /quit (answer {answer:?})"
                    ));
                }
            }
        };
        let err = self
            .stderr
            .take()
            .map(|h| h.join().unwrap_or_default())
            .unwrap_or_default();
        if !status.success() || !answer.ends_with("bye\n") {
            return Err(format!(
                "/quit answered {answer:?}, exit {status}; stderr: {}",
                one_line(&err)
            ));
        }
        Ok(runner::stats_line(&err).map(|(_, calls)| calls))
    }

    fn kill(&mut self) {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.kill();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPORT: &str = "Running 2s test @ http://127.0.0.1:38113/
  1 threads and 1 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   126.10us  541.94us   7.72ms   95.57%
    Req/Sec    45.06k    19.98k   62.33k    70.00%
  Latency Distribution
     50%   15.00us
     75%   18.00us
     90%   58.00us
     99%    3.18ms
  89521 requests in 2.00s, 5.98MB read
Requests/sec:  44709.06
Transfer/sec:      2.98MB
";

    #[test]
    fn parses_a_wrk_report() {
        let l = parse_wrk(REPORT).expect("a report");
        assert_eq!(l.rps, 44709.06);
        assert_eq!(l.p50_us, 15.0);
        assert!((l.p99_us - 3180.0).abs() < 1e-6);
        assert_eq!(l.requests, 89521);
    }

    #[test]
    fn rejects_reports_with_errors() {
        let bad = REPORT.replace(
            "Requests/sec",
            "  Socket errors: connect 0, read 1, write 0, timeout 0\nRequests/sec",
        );
        assert_eq!(parse_wrk(&bad), None);
        assert_eq!(parse_wrk("garbage"), None);
    }

    #[test]
    fn durations() {
        assert_eq!(duration_us("15.00us"), Some(15.0));
        assert_eq!(duration_us("2.50ms"), Some(2500.0));
        assert_eq!(duration_us("1.00s"), Some(1e6));
        assert_eq!(duration_us("1.00m"), Some(60e6));
        assert_eq!(duration_us("fast"), None);
    }
}
