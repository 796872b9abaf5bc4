//! Results of a FunctionBench run and their three forms: a table on the
//! terminal, JSON and a markdown report; the targets of issue 19 as
//! ratios within the run; and the small parsers the run needs (HTTP
//! answers, `/proc` files, error lines). Pure functions only.

use std::fmt::Write as _;

use serde_json::{Map, Value as Json, json};

use crate::stats::Summary;

/// Metric names, their units and what they are.
pub const METRICS: &[(&str, &str, &str)] = &[
    ("cold_ms", "ms", "create+start to the first response"),
    (
        "warm_ms",
        "ms",
        "median request latency on a running instance",
    ),
    ("hibernate_ms", "ms", "`qrun kill ID SIGSTOP`, wall time"),
    (
        "pf_first_ms",
        "ms",
        "first request after hibernation, page-fault wake",
    ),
    (
        "reap_first_ms",
        "ms",
        "first request after the second hibernation, REAP wake",
    ),
    (
        "pss_warm_mib",
        "MiB",
        "PSS of the container's processes, warm",
    ),
    (
        "pss_hibernated_mib",
        "MiB",
        "PSS while hibernated (all instances at once)",
    ),
    (
        "woken_warm_ms",
        "ms",
        "median request latency once woken (qrun: after the REAP wake; gVisor: after the restore)",
    ),
    (
        "pss_woken_mib",
        "MiB",
        "PSS after the REAP wake (gVisor: after the restore)",
    ),
    (
        "cpu_hibernated_ms_per_s",
        "ms",
        "CPU time used over 1 s while hibernated",
    ),
    ("pf_swap_faults", "", "swap faults of the page-fault wake"),
    (
        "pf_read_mib",
        "MiB",
        "bytes read back by the page-fault wake",
    ),
    ("reap_swap_faults", "", "swap faults of the REAP wake"),
    ("reap_read_mib", "MiB", "bytes read back by the REAP wake"),
    (
        "ckpt_ms",
        "ms",
        "gVisor: `runsc checkpoint --image-path`, wall time",
    ),
    ("ckpt_image_mib", "MiB", "gVisor: checkpoint image on disk"),
    (
        "restore_first_ms",
        "ms",
        "gVisor: `runsc restore` to the first response",
    ),
];

/// How one workload fared under one runtime.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// All measurements taken.
    Ok,
    /// Stopped at an error (its first line); samples before it are kept.
    Failed(String),
    /// The runtime is not installed.
    Missing(String),
    /// The workload's image part is not built yet.
    NotBuilt(String),
}

impl Outcome {
    fn label(&self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Failed(_) => "FAILED",
            Self::Missing(_) => "missing",
            Self::NotBuilt(_) => "not built yet",
        }
    }

    fn reason(&self) -> &str {
        match self {
            Self::Ok => "",
            Self::Failed(r) | Self::Missing(r) | Self::NotBuilt(r) => r,
        }
    }
}

/// One workload under one runtime: samples by metric (one per instance).
#[derive(Debug, Clone)]
pub struct RuntimeResult {
    pub runtime: String,
    pub outcome: Outcome,
    pub samples: Vec<(String, Vec<f64>)>,
}

impl RuntimeResult {
    pub fn new(runtime: &str) -> Self {
        Self {
            runtime: runtime.to_owned(),
            outcome: Outcome::Ok,
            samples: Vec::new(),
        }
    }

    pub fn add(&mut self, metric: &str, x: f64) {
        match self.samples.iter_mut().find(|(n, _)| n == metric) {
            Some((_, v)) => v.push(x),
            None => self.samples.push((metric.to_owned(), vec![x])),
        }
    }

    pub fn summary(&self, metric: &str) -> Option<Summary> {
        let (_, v) = self.samples.iter().find(|(n, _)| n == metric)?;
        Summary::of(v)
    }

    pub fn median(&self, metric: &str) -> Option<f64> {
        self.summary(metric).map(|s| s.median)
    }
}

#[derive(Clone)]
pub struct WorkloadResult {
    pub name: String,
    pub runtimes: Vec<RuntimeResult>,
}

impl WorkloadResult {
    fn runtime(&self, name: &str) -> Option<&RuntimeResult> {
        self.runtimes.iter().find(|r| r.runtime == name)
    }
}

/// A target of issue 19 for one workload: `value <= limit`, or why it does
/// not apply or could not be computed.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub name: &'static str,
    pub value: Option<f64>,
    pub limit: f64,
    /// Why there is no verdict (not applicable or not measured).
    pub note: Option<String>,
}

impl Target {
    pub fn verdict(&self) -> &'static str {
        match (self.value, &self.note) {
            (_, Some(_)) | (None, _) => "n/a",
            (Some(v), None) if v <= self.limit => "PASS",
            _ => "MISS",
        }
    }
}

/// Cold starts above this (ms) must be beaten 5x by a REAP wake.
pub const REAP_COLD_THRESHOLD_MS: f64 = 300.0;

/// The four targets for a workload, each a ratio (or a value) in this run;
/// none for a workload nothing was measured for.
pub fn targets(w: &WorkloadResult) -> Vec<Target> {
    if w.runtimes.iter().all(|r| r.samples.is_empty()) {
        return Vec::new();
    }
    let q = w.runtime("qrun");
    let runc = w.runtime("runc");
    let m = |r: Option<&RuntimeResult>, k: &str| r.and_then(|r| r.median(k));
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    let failed = |r: Option<&RuntimeResult>| {
        r.filter(|r| matches!(r.outcome, Outcome::Failed(_)))
            .map(|r| format!("{} failed", r.runtime))
    };
    let why_none = failed(q)
        .or_else(|| failed(runc))
        .unwrap_or_else(|| "not measured".to_owned());
    let missing = |v: Option<f64>| v.is_none().then(|| why_none.clone());
    let cold = m(q, "cold_ms");
    let reap = ratio(m(q, "reap_first_ms"), cold);
    let reap_note = match cold {
        Some(c) if c <= REAP_COLD_THRESHOLD_MS => Some(format!(
            "cold start {c:.0} ms <= {REAP_COLD_THRESHOLD_MS:.0} ms"
        )),
        _ => missing(reap),
    };
    let pss = ratio(m(q, "pss_hibernated_mib"), m(runc, "pss_warm_mib"));
    let warm = ratio(m(q, "warm_ms"), m(runc, "warm_ms"));
    let cpu = m(q, "cpu_hibernated_ms_per_s");
    vec![
        Target {
            name: "reap first / qrun cold",
            value: reap,
            limit: 0.2,
            note: reap_note,
        },
        Target {
            name: "qrun hibernated PSS / runc warm PSS",
            value: pss,
            limit: 0.1,
            note: missing(pss),
        },
        Target {
            name: "qrun warm / runc warm latency",
            value: warm,
            limit: 1.2,
            note: missing(warm),
        },
        Target {
            name: "CPU while hibernated (ms/s)",
            value: cpu,
            limit: 0.0,
            note: missing(cpu),
        },
    ]
}

fn cell(r: &RuntimeResult, metric: &str) -> String {
    match r.median(metric) {
        Some(x) if x >= 100.0 => format!("{x:.0}"),
        Some(x) if x >= 10.0 => format!("{x:.1}"),
        Some(x) => format!("{x:.2}"),
        None => "-".to_owned(),
    }
}

/// Columns of the table: metric and header.
const COLUMNS: &[(&str, &str)] = &[
    ("cold_ms", "cold ms"),
    ("warm_ms", "warm ms"),
    ("hibernate_ms", "hib ms"),
    ("pf_first_ms", "pf 1st ms"),
    ("reap_first_ms", "REAP 1st ms"),
    ("woken_warm_ms", "woken ms"),
    ("pss_warm_mib", "PSS warm"),
    ("pss_hibernated_mib", "PSS hib"),
    ("pss_woken_mib", "PSS woken"),
    ("cpu_hibernated_ms_per_s", "CPU hib"),
    ("ckpt_ms", "ckpt ms"),
    ("ckpt_image_mib", "ckpt MiB"),
    ("restore_first_ms", "restore 1st ms"),
];

/// The terminal table: one row per workload and runtime, medians, then
/// the targets and the failures with their first error line.
pub fn table(results: &[WorkloadResult]) -> String {
    let mut s = String::new();
    let _ = write!(s, "{:<18} {:<7} {:<13}", "workload", "runtime", "status");
    for (_, h) in COLUMNS {
        let _ = write!(s, " {h:>11}");
    }
    s.push('\n');
    for w in results {
        for r in &w.runtimes {
            let _ = write!(
                s,
                "{:<18} {:<7} {:<13}",
                w.name,
                r.runtime,
                r.outcome.label()
            );
            for (k, _) in COLUMNS {
                let _ = write!(s, " {:>11}", cell(r, k));
            }
            s.push('\n');
        }
    }
    s.push_str("\ntargets (issue 19)\n");
    for w in results {
        for t in targets(w) {
            let v = t.value.map_or("-".to_owned(), |v| format!("{v:.3}"));
            let note = t
                .note
                .as_deref()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default();
            let _ = writeln!(
                s,
                "{:<18} {:<38} {:>9} <= {:<4} {}{note}",
                w.name,
                t.name,
                v,
                t.limit,
                t.verdict()
            );
        }
    }
    let problems: Vec<_> = results
        .iter()
        .flat_map(|w| w.runtimes.iter().map(move |r| (w, r)))
        .filter(|(_, r)| r.outcome != Outcome::Ok)
        .collect();
    if !problems.is_empty() {
        s.push_str("\nnot measured\n");
        for (w, r) in problems {
            let _ = writeln!(
                s,
                "{:<18} {:<7} {}: {}",
                w.name,
                r.runtime,
                r.outcome.label(),
                r.outcome.reason()
            );
        }
    }
    s
}

/// The JSON document: settings, then per workload and runtime the outcome
/// and a summary (n, median, min, p90, max) per metric, then the targets.
pub fn to_json(results: &[WorkloadResult], settings: Json) -> Json {
    let mut workloads = Map::new();
    for w in results {
        let mut rts = Map::new();
        for r in &w.runtimes {
            let mut metrics = Map::new();
            for (k, unit, _) in METRICS {
                if let Some(s) = r.summary(k) {
                    metrics.insert((*k).to_owned(), json!({ "unit": unit, "summary": s }));
                }
            }
            rts.insert(
                r.runtime.clone(),
                json!({
                    "status": r.outcome.label(),
                    "reason": r.outcome.reason(),
                    "metrics": metrics,
                }),
            );
        }
        let targets: Vec<Json> = targets(w)
            .iter()
            .map(|t| {
                json!({ "name": t.name, "value": t.value, "limit": t.limit,
                             "verdict": t.verdict(), "note": t.note })
            })
            .collect();
        workloads.insert(
            w.name.clone(),
            json!({ "runtimes": rts, "targets": targets }),
        );
    }
    // The workloads' run order (the map's keys come out sorted).
    let order: Vec<&str> = results.iter().map(|w| w.name.as_str()).collect();
    json!({ "settings": settings, "order": order, "workloads": workloads })
}

/// The markdown report: how it was run, the table of medians, the
/// targets, and what did not run with its reason.
pub fn markdown(
    results: &[WorkloadResult],
    title: &str,
    preamble: &str,
    charts: &[String],
) -> String {
    let mut s = format!("# {title}\n\n{preamble}\n\n");
    s.push_str("## Summary\n\n");
    s.push_str(&summary_table(results));
    s.push_str(
        "\nMedians; `fail`: the runtime failed the workload (below, its first error line).\n\n",
    );
    s.push_str("## Status per runtime\n\n");
    s.push_str(&status_table(results));
    s.push('\n');
    s.push_str(&target_summary(results));
    s.push_str("\n## Medians\n\n");
    s.push_str("| workload | runtime | status |");
    for (_, h) in COLUMNS {
        let _ = write!(s, " {h} |");
    }
    s.push_str("\n|---|---|---|");
    s.push_str(&"---:|".repeat(COLUMNS.len()));
    s.push('\n');
    for w in results {
        for r in &w.runtimes {
            let _ = write!(s, "| {} | {} | {} |", w.name, r.runtime, r.outcome.label());
            for (k, _) in COLUMNS {
                let _ = write!(s, " {} |", cell(r, k));
            }
            s.push('\n');
        }
    }
    s.push_str("\nPSS in MiB; `CPU hib` is ms of CPU per second while hibernated. ");
    s.push_str("`-`: not measured (runc has no hibernation, qrun and runc no checkpoint; a failed run stops at its error).\n");
    s.push_str("\n## Targets (issue 19)\n\n| workload | target | value | limit | verdict |\n|---|---|---:|---:|---|\n");
    for w in results {
        for t in targets(w) {
            let v = t.value.map_or("-".to_owned(), |v| format!("{v:.3}"));
            let verdict = match &t.note {
                Some(n) => format!("n/a ({n})"),
                None => t.verdict().to_owned(),
            };
            let _ = writeln!(
                s,
                "| {} | {} | {v} | {} | {verdict} |",
                w.name, t.name, t.limit
            );
        }
    }
    if !charts.is_empty() {
        s.push_str("\n## Charts\n\n");
        for c in charts {
            let _ = writeln!(s, "![{c}]({c})\n");
        }
    }
    let problems: Vec<_> = results
        .iter()
        .flat_map(|w| w.runtimes.iter().map(move |r| (w, r)))
        .filter(|(_, r)| r.outcome != Outcome::Ok)
        .collect();
    if !problems.is_empty() {
        s.push_str("\n## Not measured\n\n| workload | runtime | status | first error line / reason |\n|---|---|---|---|\n");
        for (w, r) in problems {
            let reason = code(r.outcome.reason());
            let _ = writeln!(
                s,
                "| {} | {} | {} | {reason} |",
                w.name,
                r.runtime,
                r.outcome.label()
            );
        }
    }
    s
}

/// `text` as a markdown code span inside a table cell: pipes escaped, and
/// fenced with two backticks when it holds one (Node's assertion messages).
fn code(text: &str) -> String {
    let t = text.replace('|', "\\|");
    if t.contains('`') {
        format!("`` {t} ``")
    } else {
        format!("`{t}`")
    }
}

/// The runtimes in the order they were run.
fn runtime_names(results: &[WorkloadResult]) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::new();
    for r in results.iter().flat_map(|w| &w.runtimes) {
        if !names.contains(&r.runtime.as_str()) {
            names.push(&r.runtime);
        }
    }
    names
}

/// Every workload's status under every runtime, with the reason of each
/// one that did not pass.
pub fn status_table(results: &[WorkloadResult]) -> String {
    let names = runtime_names(results);
    let mut s = String::from("| workload |");
    for n in &names {
        let _ = write!(s, " {n} |");
    }
    s.push_str("\n|---|");
    s.push_str(&"---|".repeat(names.len()));
    s.push('\n');
    for w in results {
        let _ = write!(s, "| {} |", w.name);
        for n in &names {
            let cell = match w.runtime(n).map(|r| &r.outcome) {
                None => "-".to_owned(),
                Some(Outcome::Ok) => "pass".to_owned(),
                Some(o) => format!("{}: {}", o.label(), code(o.reason())),
            };
            let _ = write!(s, " {cell} |");
        }
        s.push('\n');
    }
    s
}

/// The short table (for the README): per workload, the medians that
/// compare the runtimes, `-` where a runtime did not measure it.
pub fn summary_table(results: &[WorkloadResult]) -> String {
    let cols: &[(&str, &str, &str)] = &[
        ("cold ms qrun", "qrun", "cold_ms"),
        ("runc", "runc", "cold_ms"),
        ("gVisor", "runsc", "cold_ms"),
        ("warm ms qrun", "qrun", "warm_ms"),
        ("runc", "runc", "warm_ms"),
        ("gVisor", "runsc", "warm_ms"),
        ("1st after hib. (REAP) qrun", "qrun", "reap_first_ms"),
        ("restore+1st gVisor", "runsc", "restore_first_ms"),
        ("PSS MiB warm qrun", "qrun", "pss_warm_mib"),
        ("runc", "runc", "pss_warm_mib"),
        ("gVisor", "runsc", "pss_warm_mib"),
        ("hibernated qrun", "qrun", "pss_hibernated_mib"),
    ];
    let mut s = String::from("| workload |");
    for (h, _, _) in cols {
        let _ = write!(s, " {h} |");
    }
    s.push_str("\n|---|");
    s.push_str(&"---:|".repeat(cols.len()));
    s.push('\n');
    for w in results {
        let _ = write!(s, "| {} |", w.name);
        for (_, rt, k) in cols {
            let c = match w.runtime(rt) {
                Some(r) if r.outcome == Outcome::Ok => cell(r, k),
                Some(r) if matches!(r.outcome, Outcome::Failed(_)) => "fail".to_owned(),
                _ => "-".to_owned(),
            };
            let _ = write!(s, " {c} |");
        }
        s.push('\n');
    }
    s
}

/// Per target: how many workloads pass, miss, or have no verdict.
pub fn target_summary(results: &[WorkloadResult]) -> String {
    let all: Vec<Target> = results.iter().flat_map(targets).collect();
    let mut names: Vec<&str> = Vec::new();
    for t in &all {
        if !names.contains(&t.name) {
            names.push(t.name);
        }
    }
    let mut s = String::from(
        "## Targets met\n\n| target | limit | PASS | MISS | n/a |\n|---|---:|---:|---:|---:|\n",
    );
    for n in names {
        let of = |v: &str| {
            all.iter()
                .filter(|t| t.name == n && t.verdict() == v)
                .count()
        };
        let limit = all.iter().find(|t| t.name == n).map_or(0.0, |t| t.limit);
        let _ = writeln!(
            s,
            "| {n} | {limit} | {} | {} | {} |",
            of("PASS"),
            of("MISS"),
            of("n/a")
        );
    }
    s
}

/// The line of a failed program's output that says why: the exception line
/// of a Python traceback (its last `Name: message` line), else the first
/// line saying something failed (Go's runtime, Node's assertions, the JVM's
/// `fatal error: X failed`), else the first line naming an error, else the
/// last non-empty line. Leading `#` (the JVM's crash banner) is dropped and
/// headings (lines ending in `:`) are skipped.
pub fn first_error_line(text: &str) -> Option<String> {
    let lines: Vec<&str> = text
        .lines()
        .map(|l| l.trim().trim_start_matches('#').trim())
        .filter(|l| !l.is_empty())
        .collect();
    if let Some(pos) = lines
        .iter()
        .position(|l| l.starts_with("Traceback (most recent call last)"))
        && let Some(l) = lines[pos..].iter().find(|l| is_exception_line(l))
    {
        return Some((*l).to_owned());
    }
    let with = |word: &str| {
        lines
            .iter()
            .find(|l| !l.ends_with(':') && l.to_ascii_lowercase().contains(word))
    };
    with("failed")
        .or_else(|| with("error"))
        .or(lines.last())
        .map(|l| (*l).to_owned())
}

/// `ModuleNotFoundError: No module named 'x'`, `OSError: [Errno 38] ...`.
fn is_exception_line(l: &str) -> bool {
    let Some((name, _)) = l.split_once(':') else {
        return false;
    };
    !name.is_empty()
        && !name.contains(' ')
        && (name.ends_with("Error") || name.ends_with("Exception") || name.ends_with("Interrupt"))
}

/// Status code and body of an HTTP/1.x response.
pub fn parse_response(resp: &str) -> Option<(u16, String)> {
    let (head, body) = resp.split_once("\r\n\r\n")?;
    let status = head.lines().next()?;
    let mut words = status.split_whitespace();
    if !words.next()?.starts_with("HTTP/1.") {
        return None;
    }
    let code = words.next()?.parse().ok()?;
    Some((code, body.to_owned()))
}

/// `Pss:` of `/proc/PID/smaps_rollup`, in kB.
pub fn pss_kb(smaps_rollup: &str) -> Option<f64> {
    smaps_rollup
        .lines()
        .find_map(|l| l.strip_prefix("Pss:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Fields after the command name (which may hold spaces and parentheses).
fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    Some(stat.rsplit_once(')')?.1.split_whitespace().collect())
}

/// utime + stime (clock ticks) of `/proc/PID/stat`.
pub fn cpu_ticks(stat: &str) -> Option<f64> {
    let f = stat_fields(stat)?;
    let ut: f64 = f.get(11)?.parse().ok()?;
    let st: f64 = f.get(12)?.parse().ok()?;
    Some(ut + st)
}

/// The parent pid of `/proc/PID/stat`.
pub fn parent_pid(stat: &str) -> Option<i32> {
    stat_fields(stat)?.get(1)?.parse().ok()
}

/// `YYYY-MM-DD` (UTC) of a Unix time.
pub fn date(unix_secs: u64) -> String {
    // Days to a civil date (proleptic Gregorian), by 400-year eras.
    let z = (unix_secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(rt: &str, samples: &[(&str, &[f64])]) -> RuntimeResult {
        let mut r = RuntimeResult::new(rt);
        for (k, xs) in samples {
            for x in *xs {
                r.add(k, *x);
            }
        }
        r
    }

    #[test]
    fn targets_are_ratios_within_the_run() {
        let w = WorkloadResult {
            name: "matmul".into(),
            runtimes: vec![
                result(
                    "qrun",
                    &[
                        ("cold_ms", &[900.0, 1000.0, 1100.0]),
                        ("reap_first_ms", &[150.0, 250.0, 200.0]),
                        ("warm_ms", &[13.0]),
                        ("pss_hibernated_mib", &[4.0]),
                        ("cpu_hibernated_ms_per_s", &[0.0, 10.0, 0.0]),
                    ],
                ),
                result("runc", &[("warm_ms", &[10.0]), ("pss_warm_mib", &[50.0])]),
            ],
        };
        let t = targets(&w);
        assert_eq!(t[0].value, Some(0.2));
        assert_eq!(t[0].verdict(), "PASS");
        assert_eq!(t[1].value, Some(0.08));
        assert_eq!(t[1].verdict(), "PASS");
        assert_eq!(t[2].value, Some(1.3));
        assert_eq!(t[2].verdict(), "MISS");
        assert_eq!(t[3].value, Some(0.0));
        assert_eq!(t[3].verdict(), "PASS");
    }

    #[test]
    fn reap_target_needs_a_slow_cold_start_and_missing_values_are_na() {
        let w = WorkloadResult {
            name: "hello".into(),
            runtimes: vec![result(
                "qrun",
                &[("cold_ms", &[200.0]), ("reap_first_ms", &[100.0])],
            )],
        };
        let t = targets(&w);
        assert_eq!(t[0].verdict(), "n/a");
        assert!(t[0].note.as_deref().is_some_and(|n| n.contains("300")));
        // No runc: the ratios against it are not zero but n/a.
        assert_eq!((t[1].value, t[1].verdict()), (None, "n/a"));
        assert_eq!((t[2].value, t[2].verdict()), (None, "n/a"));
    }

    #[test]
    fn report_lists_failures_with_their_reason() {
        let mut q = result("qrun", &[("cold_ms", &[500.0])]);
        q.outcome = Outcome::Failed("OSError: [Errno 38] Function not implemented".into());
        let mut g = RuntimeResult::new("runsc");
        g.outcome = Outcome::Missing("runsc is not on PATH".into());
        let w = [WorkloadResult {
            name: "numpy|x".into(),
            runtimes: vec![q, g],
        }];
        let md = markdown(&w, "t", "p", &[]);
        assert!(md.contains("| numpy|x | qrun | FAILED | 500 |"), "{md}");
        assert!(
            md.contains("`OSError: [Errno 38] Function not implemented`"),
            "{md}"
        );
        assert!(md.contains("| runsc | missing |"), "{md}");
        // The status table: one row per workload, a reason per runtime.
        assert!(
            md.contains("| numpy|x | FAILED: `OSError: [Errno 38] Function not implemented` | missing: `runsc is not on PATH` |"),
            "{md}"
        );
        // The summary marks the failure, not a number from a partial run.
        assert!(md.contains("| numpy|x | fail |"), "{md}");
        let table = table(&w);
        assert!(table.contains("runsc is not on PATH"), "{table}");
        let j = to_json(&w, json!({}));
        assert_eq!(
            j["workloads"]["numpy|x"]["runtimes"]["qrun"]["status"],
            "FAILED"
        );
        assert_eq!(
            j["workloads"]["numpy|x"]["runtimes"]["qrun"]["metrics"]["cold_ms"]["summary"]["median"],
            500.0
        );
        assert!(j["workloads"]["numpy|x"]["runtimes"]["runsc"]["metrics"]["cold_ms"].is_null());
        assert_eq!(j["order"], json!(["numpy|x"]));
        // A failure whose line holds a backtick stays one code span.
        let mut q = RuntimeResult::new("qrun");
        q.outcome = Outcome::Failed("Assertion `(0) == (x)' failed.".into());
        let node = [WorkloadResult {
            name: "hello_nodejs".into(),
            runtimes: vec![q],
        }];
        let md2 = markdown(&node, "t", "p", &[]);
        assert!(
            md2.contains("| hello_nodejs | FAILED: `` Assertion `(0) == (x)' failed. `` |"),
            "{md2}"
        );
        // With runc measured, its targets say qrun failed, not that
        // nothing was measured.
        let mut q = RuntimeResult::new("qrun");
        q.outcome = Outcome::Failed("x".into());
        let w = WorkloadResult {
            name: "hello_go".into(),
            runtimes: vec![q, result("runc", &[("warm_ms", &[1.0])])],
        };
        let t = targets(&w);
        assert_eq!(t[2].note.as_deref(), Some("qrun failed"));
        assert_eq!(t[2].verdict(), "n/a");
        // The qrun-only workload: PSS and latency against runc are n/a.
        assert!(
            md.contains("| qrun warm / runc warm latency | 1.2 | 0 | 0 | 1 |"),
            "{md}"
        );
        // A workload nothing ran for has no targets, only its reason.
        let mut nb = RuntimeResult::new("qrun");
        nb.outcome = Outcome::NotBuilt("no JRE".into());
        let w = WorkloadResult {
            name: "hello_java".into(),
            runtimes: vec![nb],
        };
        assert!(targets(&w).is_empty());
    }

    #[test]
    fn error_lines() {
        let tb = "listening\nTraceback (most recent call last):\n  File \"/f.py\", line 3, in <module>\n    import numpy\nModuleNotFoundError: No module named 'numpy'\n";
        assert_eq!(
            first_error_line(tb).as_deref(),
            Some("ModuleNotFoundError: No module named 'numpy'")
        );
        assert_eq!(
            first_error_line("qrun: boot\nqrun: error: mmap failed\nlater error\n").as_deref(),
            Some("qrun: error: mmap failed")
        );
        assert_eq!(first_error_line("a\nb\n").as_deref(), Some("b"));
        // Go's runtime without threads: the line with the errno, not the
        // `fatal error:` that follows it.
        assert_eq!(
            first_error_line("runtime: failed to create new OS thread (have 2 already; errno=38)\nfatal error: newosproc\n").as_deref(),
            Some("runtime: failed to create new OS thread (have 2 already; errno=38)")
        );
        // The JVM's crash banner: past its heading, to the failing call.
        let jvm = "#\n# A fatal error has been detected by the Java Runtime Environment:\n#\n#  Internal Error (os_linux.cpp:5440), pid=1, tid=1\n#  fatal error: pthread_getattr_np failed with error = 2\n";
        assert_eq!(
            first_error_line(jvm).as_deref(),
            Some("fatal error: pthread_getattr_np failed with error = 2")
        );
        assert_eq!(first_error_line("\n \n"), None);
    }

    #[test]
    fn parsers() {
        assert_eq!(
            parse_response("HTTP/1.0 200 OK\r\nServer: x\r\n\r\nhello in 1 ms\n"),
            Some((200, "hello in 1 ms\n".into()))
        );
        assert_eq!(
            parse_response("HTTP/1.0 500 Internal\r\n\r\n"),
            Some((500, String::new()))
        );
        assert_eq!(parse_response("garbage"), None);
        assert_eq!(
            pss_kb("Rss: 10 kB\nPss:               12345 kB\n"),
            Some(12345.0)
        );
        assert_eq!(pss_kb("Rss: 10 kB\n"), None);
        let stat = "42 (a (b) c) S 7 42 42 0 -1 4194560 100 0 0 0 25 5 0 0 20 0 1 0";
        assert_eq!(parent_pid(stat), Some(7));
        assert_eq!(cpu_ticks(stat), Some(30.0));
        assert_eq!(cpu_ticks("1 (x) S"), None);
    }

    #[test]
    fn dates() {
        assert_eq!(date(0), "1970-01-01");
        assert_eq!(date(951_782_400), "2000-02-29");
        assert_eq!(date(1_795_392_000), "2026-11-23");
        assert_eq!(date(1_795_391_999), "2026-11-22");
    }
}
