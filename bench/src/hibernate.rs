//! Hibernation (DESIGN.md "Measuring what matters"): N sandboxes of each
//! workload run side by side (10; 3 with `--quick`), each driven through
//! its control socket (`qrun ctl`) and its request channel.
//!
//! Workloads, each a [`Workload`]:
//! - `fn64`: `hib_pattern 64`, a function with a 64 MiB heap; its request
//!   (`verify`) reads all of it.
//! - `hello`: `hib_pattern 1` answering `ping`: a small server.
//! - `http64`: the HTTP function server (`http_server`) after `/fill?mb=64`;
//!   its request is `GET /verify` (re-reads the 64 MiB) on a new connection,
//!   which is also what wakes it.
//! - `httphello`: the same server answering `GET /` (a small server).
//! - `pyhello`: the host's `/usr/bin/python3` running a standard-library
//!   `http.server` answering `GET /` ([`PY_HELLO`], FunctionBench's hello
//!   in one line; `n/a` without python3): a function with shared libraries
//!   and an interpreter, which the C servers do not have.
//!
//! Per sandbox: `cold` (spawn to first response), `warm` (a request on a
//! running sandbox), then three hibernations: the first is woken by a
//! request (page-fault swap-in: no working set recorded yet, `pf`), the
//! second likewise (REAP prefetch, `reap`), the third by `qrun ctl wake`
//! and then a request (`woken`, and `wake_ms` for the wake alone). PSS from
//! `/proc/<pid>/smaps_rollup` warm, hibernated (all N hibernated at once)
//! and woken; CPU time (utime + stime) used over one second while
//! hibernated; swap faults and bytes read back per wake from the status.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value as Json;

use crate::metric::{Metric, Value};
use crate::runner::Runner;
use crate::stats::Summary;

/// How a workload's sandbox is driven.
#[derive(Clone, Copy)]
enum Driver {
    /// `hib_pattern MIB`: a command line on stdin, an answer line on stdout.
    Pattern { mib: u64, request: &'static str },
    /// `http_server`: `setup` once (a GET, or none), then `GET request`,
    /// each on a new loopback connection.
    Http {
        setup: Option<&'static str>,
        request: &'static str,
    },
    /// [`PY_HELLO`] under `/usr/bin/python3`: `GET /` as for `Http`.
    PyHttp,
}

/// The host's Python interpreter.
const PYTHON: &str = "/usr/bin/python3";

/// A Python hello function (as `functionbench/hello.py` with `fbserve.py`):
/// prints `listening on PORT`, answers `GET /` with `hello`, and exits
/// after `GET /quit`. `handle_request` blocks without a timeout, as
/// FunctionBench's server does, so a hibernated sandbox stays asleep.
const PY_HELLO: &str = "\
import http.server
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    def do_GET(self):
        body = b'bye' if self.path == '/quit' else b'hello'
        self.send_response(200)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        if self.path == '/quit':
            self.server.quit = True
    def log_message(self, *args):
        pass
s = http.server.HTTPServer(('127.0.0.1', 0), H)
s.quit = False
print('listening on', s.server_address[1], flush=True)
while not s.quit:
    s.handle_request()
";

/// A workload: what to run and what a request is.
struct Workload {
    name: &'static str,
    driver: Driver,
    /// Expected answer prefix (an answer line, or a response body).
    answer: &'static str,
    /// Hibernated PSS target: percent of warm, or MiB.
    pss_pct_target: Option<f64>,
    pss_mib_target: Option<f64>,
}

fn workloads() -> [Workload; 5] {
    [
        Workload {
            name: "fn64",
            driver: Driver::Pattern {
                mib: 64,
                request: "verify",
            },
            answer: "ok",
            pss_pct_target: Some(5.0),
            pss_mib_target: None,
        },
        Workload {
            name: "hello",
            driver: Driver::Pattern {
                mib: 1,
                request: "ping",
            },
            answer: "pong",
            pss_pct_target: None,
            pss_mib_target: Some(2.0),
        },
        Workload {
            name: "http64",
            driver: Driver::Http {
                setup: Some("/fill?mb=64"),
                request: "/verify",
            },
            answer: "ok ",
            pss_pct_target: Some(5.0),
            pss_mib_target: None,
        },
        Workload {
            name: "httphello",
            driver: Driver::Http {
                setup: None,
                request: "/",
            },
            answer: "hello",
            pss_pct_target: None,
            pss_mib_target: Some(2.0),
        },
        Workload {
            name: "pyhello",
            driver: Driver::PyHttp,
            answer: "hello",
            pss_pct_target: None,
            // Issue 16: <= 1 MiB hibernated for the Python hello.
            pss_mib_target: Some(1.0),
        },
    ]
}

/// The sandbox's request channel.
enum Channel {
    Stdio {
        stdin: ChildStdin,
        stdout: BufReader<ChildStdout>,
    },
    Http {
        port: u16,
        /// The server's stdout (its port line was read), kept open so a
        /// later line never meets a closed pipe.
        _stdout: BufReader<ChildStdout>,
    },
}

struct Sandbox {
    child: Child,
    channel: Channel,
    socket: PathBuf,
    dir: PathBuf,
}

impl Sandbox {
    fn start(r: &Runner, w: &Workload, i: usize) -> Result<(Self, f64), String> {
        let dir = std::env::temp_dir().join(format!(
            "qrun-bench-hib-{}-{}-{i}",
            std::process::id(),
            w.name
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let socket = dir.join("ctl.sock");
        let opts = [
            "--memory".to_owned(),
            "256M".to_owned(),
            "--control-socket".to_owned(),
            socket.display().to_string(),
            "--state-dir".to_owned(),
            dir.join("state").display().to_string(),
        ];
        let opts: Vec<&str> = opts.iter().map(String::as_str).collect();
        let t0 = Instant::now();
        let mut cmd = match w.driver {
            Driver::Pattern { mib, .. } => r.sandboxed(&opts, "hib_pattern", &[&mib.to_string()]),
            Driver::Http { .. } => r.sandboxed(&opts, "http_server", &["--port", "0"]),
            Driver::PyHttp => {
                let mut c = Command::new(r.qrun());
                c.arg("do")
                    .args(&opts)
                    .args(["--", PYTHON, "-c", PY_HELLO])
                    .stdin(Stdio::null());
                c
            }
        };
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("spawning qrun: {e}"))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let mut stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        let first = line(&mut stdout)?;
        let channel = match w.driver {
            Driver::Pattern { .. } if first.starts_with("ready") => {
                Channel::Stdio { stdin, stdout }
            }
            Driver::Http { .. } | Driver::PyHttp => {
                let port = first
                    .strip_prefix("listening on ")
                    .and_then(|p| p.trim().parse().ok())
                    .ok_or_else(|| format!("http_server: {first:?}"))?;
                drop(stdin);
                Channel::Http {
                    port,
                    _stdout: stdout,
                }
            }
            Driver::Pattern { .. } => return Err(format!("hib_pattern: {first:?}")),
        };
        let mut s = Self {
            child,
            channel,
            socket,
            dir,
        };
        if let (Driver::Http { setup: Some(p), .. }, Channel::Http { port, .. }) =
            (w.driver, &s.channel)
        {
            http_get(*port, p)?;
        }
        s.request(w)?;
        Ok((s, ms(t0)))
    }

    /// One request; returns its latency in ms.
    fn request(&mut self, w: &Workload) -> Result<f64, String> {
        let t0 = Instant::now();
        let answer = match (&mut self.channel, w.driver) {
            (Channel::Stdio { stdin, stdout }, Driver::Pattern { request, .. }) => {
                writeln!(stdin, "{request}")
                    .and_then(|()| stdin.flush())
                    .map_err(|e| format!("writing: {e}"))?;
                line(stdout)?
            }
            (Channel::Http { port, .. }, Driver::Http { request, .. }) => http_get(*port, request)?,
            (Channel::Http { port, .. }, Driver::PyHttp) => http_get(*port, "/")?,
            _ => return Err("workload and channel disagree".into()),
        };
        if !answer.starts_with(w.answer) {
            return Err(format!("answer {answer:?} from {}", w.name));
        }
        Ok(ms(t0))
    }

    fn ctl(&self, r: &Runner, req: &str) -> Result<(Json, f64), String> {
        let t0 = Instant::now();
        let out = Command::new(r.qrun())
            .arg("ctl")
            .arg(&self.socket)
            .arg(req)
            .output()
            .map_err(|e| format!("qrun ctl: {e}"))?;
        let t = ms(t0);
        if !out.status.success() {
            return Err(format!(
                "qrun ctl {req}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let v = serde_json::from_slice(&out.stdout).map_err(|e| format!("status JSON: {e}"))?;
        Ok((v, t))
    }

    fn pss_mib(&self) -> Result<f64, String> {
        let pid = self.child.id();
        let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
            .map_err(|e| format!("smaps_rollup: {e}"))?;
        text.lines()
            .find_map(|l| l.strip_prefix("Pss:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map(|kb| kb / 1024.0)
            .ok_or_else(|| "no Pss line".to_owned())
    }

    /// utime + stime of the sandbox process, in ms.
    fn cpu_ms(&self) -> Result<f64, String> {
        let pid = self.child.id();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map_err(|e| format!("stat: {e}"))?;
        let rest = stat.rsplit_once(')').ok_or("bad stat")?.1;
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks: f64 = f
            .get(11..13)
            .ok_or("short stat")?
            .iter()
            .map(|x| x.parse::<f64>().unwrap_or(0.0))
            .sum();
        Ok(ticks * 10.0)
    }

    fn finish(mut self) {
        match &mut self.channel {
            Channel::Stdio { stdin, .. } => {
                let _ = writeln!(stdin, "quit");
            }
            Channel::Http { port, .. } => {
                let _ = http_get(*port, "/quit");
            }
        }
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn line(r: &mut BufReader<ChildStdout>) -> Result<String, String> {
    let mut l = String::new();
    r.read_line(&mut l).map_err(|e| format!("reading: {e}"))?;
    Ok(l.trim().to_owned())
}

/// `GET path` on a new loopback connection (`Connection: close`): the body
/// of a 200 response.
fn http_get(port: u16, path: &str) -> Result<String, String> {
    match crate::functionbench::container::http_get(port, path, Duration::from_secs(60)) {
        Ok((200, body)) => Ok(body),
        Ok((code, _)) => Err(format!("GET {path}: HTTP {code}")),
        Err(e) => Err(format!("GET {path}: {e}")),
    }
}

fn ms(t0: Instant) -> f64 {
    t0.elapsed().as_secs_f64() * 1e3
}

fn u(v: &Json, k: &str) -> f64 {
    v[k].as_u64().unwrap_or(0) as f64
}

/// Samples of one workload, one per sandbox, by metric name.
#[derive(Default)]
struct Samples(Vec<(&'static str, Vec<f64>)>);

impl Samples {
    fn add(&mut self, name: &'static str, x: f64) {
        match self.0.iter_mut().find(|(n, _)| *n == name) {
            Some((_, v)) => v.push(x),
            None => self.0.push((name, vec![x])),
        }
    }
}

/// Name suffix, unit, and whether a target applies (filled per workload).
const METRICS: &[(&str, &str)] = &[
    ("cold_ms", "ms"),
    ("warm_ms", "ms"),
    ("pf_first_ms", "ms"),
    ("reap_first_ms", "ms"),
    ("woken_first_ms", "ms"),
    ("wake_ms", "ms"),
    ("hibernate_ms", "ms"),
    ("pss_warm_mib", "MiB"),
    ("pss_hibernated_mib", "MiB"),
    ("pss_woken_mib", "MiB"),
    ("pss_hibernated_pct", "%"),
    ("pf_swap_faults", ""),
    ("pf_read_mib", "MiB"),
    ("reap_swap_faults", ""),
    ("reap_read_mib", "MiB"),
    ("reap_vs_pf", "x"),
    ("reap_vs_cold", "x"),
    ("cpu_hibernated_ms_per_s", "ms"),
];

fn run_workload(r: &Runner, w: &Workload, n: usize) -> Result<Samples, String> {
    let mut s = Samples::default();
    let mut boxes = Vec::new();
    for i in 0..n {
        let (b, cold) = Sandbox::start(r, w, i)?;
        s.add("cold_ms", cold);
        boxes.push(b);
    }
    for b in boxes.iter_mut() {
        let warm: Vec<f64> = (0..5).map(|_| b.request(w)).collect::<Result<_, _>>()?;
        s.add("warm_ms", Summary::of(&warm).map_or(0.0, |x| x.median));
    }
    let warm_pss: Vec<f64> = boxes
        .iter()
        .map(Sandbox::pss_mib)
        .collect::<Result<_, _>>()?;
    // Three rounds: page-fault wake, REAP wake, explicit wake.
    for round in 0..3 {
        for b in &boxes {
            let (st, _) = b.ctl(r, "hibernate")?;
            if round == 0 {
                s.add("hibernate_ms", u(&st, "hibernate_us") / 1e3);
            }
        }
        if round == 0 {
            std::thread::sleep(Duration::from_millis(200));
            let cpu0: Vec<f64> = boxes
                .iter()
                .map(Sandbox::cpu_ms)
                .collect::<Result<_, _>>()?;
            for (b, warm) in boxes.iter().zip(&warm_pss) {
                let p = b.pss_mib()?;
                s.add("pss_hibernated_mib", p);
                s.add("pss_hibernated_pct", 100.0 * p / warm);
                s.add("pss_warm_mib", *warm);
            }
            std::thread::sleep(Duration::from_secs(1));
            for (b, c0) in boxes.iter().zip(cpu0) {
                s.add("cpu_hibernated_ms_per_s", b.cpu_ms()? - c0);
            }
        }
        for b in boxes.iter_mut() {
            let t = match round {
                0 | 1 => b.request(w)?,
                _ => {
                    let (_, wake) = b.ctl(r, "wake")?;
                    s.add("wake_ms", wake);
                    b.request(w)?
                }
            };
            let (st, _) = b.ctl(r, "status")?;
            match round {
                0 => {
                    s.add("pf_first_ms", t);
                    s.add("pf_swap_faults", u(&st, "swap_faults"));
                    s.add("pf_read_mib", u(&st, "read_back_bytes") / 1048576.0);
                }
                1 => {
                    s.add("reap_first_ms", t);
                    s.add("reap_swap_faults", u(&st, "swap_faults"));
                    s.add("reap_read_mib", u(&st, "read_back_bytes") / 1048576.0);
                }
                _ => s.add("woken_first_ms", t),
            }
        }
    }
    for b in &boxes {
        s.add("pss_woken_mib", b.pss_mib()?);
    }
    for b in boxes {
        b.finish();
    }
    let median = |name| {
        s.0.iter()
            .find(|(n, _)| *n == name)
            .and_then(|(_, v)| Summary::of(v))
            .map_or(f64::NAN, |x| x.median)
    };
    let (pf, reap, cold) = (
        median("pf_first_ms"),
        median("reap_first_ms"),
        median("cold_ms"),
    );
    s.add("reap_vs_pf", reap / pf);
    s.add("reap_vs_cold", reap / cold);
    Ok(s)
}

fn target(w: &Workload, suffix: &str) -> Option<f64> {
    match suffix {
        "pss_hibernated_pct" => w.pss_pct_target,
        "pss_hibernated_mib" => w.pss_mib_target,
        // REAP wake >= 5x faster than a page-fault wake, < 20% of cold.
        "reap_vs_pf" if w.name.ends_with("64") => Some(0.2),
        "reap_vs_cold" if w.name.ends_with("64") => Some(0.2),
        "cpu_hibernated_ms_per_s" => Some(0.0),
        _ => None,
    }
}

pub fn run(r: &Runner, sandboxes: usize) -> Vec<Metric> {
    let mut out = Vec::new();
    for w in workloads() {
        eprintln!("bench: hibernation {} x{sandboxes}", w.name);
        let result =
            if matches!(w.driver, Driver::PyHttp) && !std::path::Path::new(PYTHON).is_file() {
                Err(Value::NotAvailable(format!("{PYTHON} not found")))
            } else {
                run_workload(r, &w, sandboxes).map_err(Value::Failed)
            };
        for &(suffix, unit) in METRICS {
            let name = format!("hib.{}.{suffix}", w.name);
            let value = match &result {
                Ok(s) => {
                    s.0.iter()
                        .find(|(n, _)| *n == suffix)
                        .and_then(|(_, v)| Summary::of(v))
                        .map_or(Value::NotAvailable("not measured".into()), Value::Summary)
                }
                Err(Value::Failed(e)) => Value::Failed(e.clone()),
                Err(Value::NotAvailable(e)) => Value::NotAvailable(e.clone()),
                Err(_) => Value::NotAvailable(String::new()),
            };
            out.push(Metric::new(&name, unit, value, target(&w, suffix)));
        }
    }
    out
}
