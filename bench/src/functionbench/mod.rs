//! FunctionBench (issue 19): real serverless functions as OCI containers
//! under qrun and runc (and gVisor's `runsc` when it is on PATH), side by
//! side. `bench functionbench [--quick] [--out-dir DIR] [--qrun PATH]
//! [--only W1,W2]`; `make functionbench` / `make functionbench-quick`.
//!
//! The image is built once by `scripts/functionbench-image.sh` (a Debian
//! bookworm rootfs with python3 and the workloads' libraries, cached); each
//! workload is a Python HTTP function from `functionbench/` (the image
//! read-only as `root.path`, the scripts bound at `/functionbench`). Per
//! workload and runtime, N instances (10; 3 with `--quick`) run side by
//! side, measured as in [`crate::hibernate`] but through the OCI commands:
//! cold start, warm latency, and for qrun two hibernations with `qrun kill
//! ID SIGSTOP` (the first woken page by page, the second by REAP), hibernate
//! time, PSS warm / hibernated / woken, CPU while hibernated, swap faults
//! and bytes read per wake ([`container`], [`report`]).
//!
//! A workload that fails under a runtime is reported with its first error
//! line and the run goes on; a runtime or image part that is missing is
//! reported as such; Ctrl-C deletes the containers before exiting.

pub mod container;
#[allow(
    unsafe_code,
    reason = "installs a signal handler that sets an atomic flag; its unsafe block carries a SAFETY comment"
)]
mod interrupt;
pub mod report;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use serde_json::json;

use crate::runner::workspace_root;
use crate::stats::Summary;
use container::{Instance, Runtime};
use report::{Outcome, RuntimeResult, WorkloadResult};

const USAGE: &str =
    "usage: bench functionbench [--quick] [--out-dir DIR] [--qrun PATH] [--only W1,W2,...]";

/// A workload: its name in the report, its script, and what it needs.
struct Workload {
    name: &'static str,
    script: &'static str,
    needs_opencv: bool,
}

const WORKLOADS: &[Workload] = &[
    Workload {
        name: "hello",
        script: "hello.py",
        needs_opencv: false,
    },
    Workload {
        name: "float_operation",
        script: "float_operation.py",
        needs_opencv: false,
    },
    Workload {
        name: "image_processing",
        script: "image_processing.py",
        needs_opencv: false,
    },
    Workload {
        name: "json_dumps_loads",
        script: "json_dumps_loads.py",
        needs_opencv: false,
    },
    Workload {
        name: "pyaes",
        script: "aes.py",
        needs_opencv: false,
    },
    Workload {
        name: "matmul",
        script: "matmul.py",
        needs_opencv: false,
    },
    Workload {
        name: "linpack",
        script: "linpack.py",
        needs_opencv: false,
    },
    Workload {
        name: "chameleon",
        script: "chameleon_table.py",
        needs_opencv: false,
    },
    Workload {
        name: "gzip_compression",
        script: "gzip_compression.py",
        needs_opencv: false,
    },
    Workload {
        name: "video_processing",
        script: "video_processing.py",
        needs_opencv: true,
    },
];

/// The paper's hello servers in other languages: not in the image yet.
const NOT_BUILT: &[(&str, &str)] = &[
    ("hello_nodejs", "Node.js is not in the image yet"),
    (
        "hello_java",
        "a JRE (openjdk-17-jre-headless) is not in the image yet",
    ),
    ("hello_go", "Go binaries are not in the image yet"),
];

struct Options {
    quick: bool,
    out_dir: PathBuf,
    qrun: Option<PathBuf>,
    only: Option<Vec<String>>,
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        quick: false,
        out_dir: workspace_root().join("docs/bench"),
        qrun: None,
        only: None,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" => o.quick = true,
            "--out-dir" => o.out_dir = it.next().ok_or("--out-dir needs a path")?.into(),
            "--qrun" => o.qrun = Some(it.next().ok_or("--qrun needs a path")?.into()),
            "--only" => {
                let list = it.next().ok_or("--only needs workload names")?;
                o.only = Some(list.split(',').map(str::to_owned).collect());
            }
            "-h" | "--help" => return Err(String::new()),
            _ => return Err(format!("unknown argument '{a}'")),
        }
    }
    Ok(o)
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// Builds (or finds) the image; its rootfs and stamp text.
pub(crate) fn image() -> Result<(PathBuf, String), String> {
    let script = workspace_root().join("scripts/functionbench-image.sh");
    let out = Command::new(&script)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("{}: {e}", script.display()))?;
    if !out.status.success() {
        return Err(format!("{} failed ({})", script.display(), out.status));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let rootfs = PathBuf::from(stdout.lines().last().unwrap_or("").trim());
    let stamp = rootfs.with_file_name("rootfs.stamp");
    let stamp = std::fs::read_to_string(&stamp).map_err(|e| format!("{}: {e}", stamp.display()))?;
    Ok((rootfs, stamp))
}

pub fn main(args: &[String]) -> ExitCode {
    let opts = match parse_args(args) {
        Ok(o) => o,
        Err(msg) => {
            if !msg.is_empty() {
                eprintln!("functionbench: {msg}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    interrupt::install();
    let qrun = opts
        .qrun
        .clone()
        .unwrap_or_else(|| workspace_root().join("target/release/qrun"));
    if !qrun.is_file() {
        eprintln!(
            "functionbench: {} not found: run `cargo build --release` first",
            qrun.display()
        );
        return ExitCode::FAILURE;
    }
    eprintln!("functionbench: image (built once, then cached)");
    let (rootfs, stamp) = match image() {
        Ok(x) => x,
        Err(e) => {
            eprintln!("functionbench: {e}");
            return ExitCode::FAILURE;
        }
    };
    let opencv = stamp
        .lines()
        .find_map(|l| l.strip_prefix("opencv "))
        .unwrap_or("not installed")
        .to_owned();
    let work = std::env::temp_dir().join(format!("qrun-fb-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    if let Err(e) = std::fs::create_dir_all(&work) {
        eprintln!("functionbench: {}: {e}", work.display());
        return ExitCode::FAILURE;
    }
    let mut runtimes = vec![Ok(Runtime {
        name: "qrun",
        bin: qrun,
        root: work.join("root-qrun"),
    })];
    for name in ["runc", "runsc"] {
        runtimes.push(match which(name) {
            Some(bin) => Ok(Runtime {
                name,
                bin,
                root: work.join(format!("root-{name}")),
            }),
            None => Err((name, format!("{name} is not on PATH"))),
        });
    }
    let n = if opts.quick { 3 } else { 10 };
    let requests = if opts.quick { 5 } else { 10 };
    let selected: Vec<&Workload> = WORKLOADS
        .iter()
        .filter(|w| {
            opts.only
                .as_ref()
                .is_none_or(|o| o.iter().any(|x| x == w.name))
        })
        .collect();
    let scripts = workspace_root().join("functionbench");
    let mut results = Vec::new();
    for (i, w) in selected.iter().enumerate() {
        let mut wr = WorkloadResult {
            name: w.name.to_owned(),
            runtimes: Vec::new(),
        };
        for rt in &runtimes {
            let r = match rt {
                Err((name, why)) => {
                    let mut r = RuntimeResult::new(name);
                    r.outcome = Outcome::Missing(why.clone());
                    r
                }
                Ok(_) if w.needs_opencv && opencv != "installed" => {
                    let mut r = RuntimeResult::new(rt.as_ref().map_or("", |r| r.name));
                    r.outcome = Outcome::NotBuilt(format!("opencv {opencv}"));
                    r
                }
                Ok(rt) => {
                    eprintln!(
                        "functionbench: [{}/{}] {} under {} x{n}",
                        i + 1,
                        selected.len(),
                        w.name,
                        rt.name
                    );
                    let ctx = Ctx {
                        rt,
                        work: &work,
                        rootfs: &rootfs,
                        scripts: &scripts,
                        n,
                        requests,
                    };
                    run_one(&ctx, w)
                }
            };
            if let Outcome::Failed(e) = &r.outcome {
                eprintln!(
                    "functionbench:   {} under {} FAILED: {e}",
                    w.name, r.runtime
                );
            }
            wr.runtimes.push(r);
            if interrupt::interrupted() {
                break;
            }
        }
        results.push(wr);
        if interrupt::interrupted() {
            break;
        }
    }
    if opts.only.is_none() {
        for (name, why) in NOT_BUILT {
            let runtimes = ["qrun", "runc", "runsc"]
                .iter()
                .map(|rt| {
                    let mut r = RuntimeResult::new(rt);
                    r.outcome = Outcome::NotBuilt((*why).to_owned());
                    r
                })
                .collect();
            results.push(WorkloadResult {
                name: (*name).to_owned(),
                runtimes,
            });
        }
    }
    for rt in runtimes.iter().flatten() {
        leftovers(rt);
    }
    let _ = std::fs::remove_dir_all(&work);
    if interrupt::interrupted() {
        eprintln!("functionbench: interrupted; containers deleted, nothing written");
        return ExitCode::from(130);
    }
    print!("{}", report::table(&results));
    match write_outputs(&opts, &results, &stamp, n, requests) {
        Ok(paths) => {
            for p in paths {
                println!("wrote {}", p.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("functionbench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Deletes any container still listed under a runtime's root (none unless
/// a step failed between create and the instance's drop guard).
fn leftovers(rt: &Runtime) {
    if let Ok(dir) = std::fs::read_dir(&rt.root) {
        for e in dir.flatten() {
            if let Some(id) = e.file_name().to_str()
                && e.path().is_dir()
            {
                rt.remove(id);
            }
        }
    }
}

struct Ctx<'a> {
    rt: &'a Runtime,
    work: &'a Path,
    rootfs: &'a Path,
    scripts: &'a Path,
    n: usize,
    requests: usize,
}

fn run_one(ctx: &Ctx, w: &Workload) -> RuntimeResult {
    let mut r = RuntimeResult::new(ctx.rt.name);
    if let Err(e) = measure(ctx, w, &mut r) {
        r.outcome = Outcome::Failed(e);
    }
    r
}

/// All measurements of one workload under one runtime, into `r`; the
/// instances are deleted when this returns, whatever happened.
fn measure(ctx: &Ctx, w: &Workload, r: &mut RuntimeResult) -> Result<(), String> {
    let mut boxes = Vec::new();
    for i in 0..ctx.n {
        let id = format!("fb-{}-{}-{i}", std::process::id(), w.name);
        let (b, cold) = Instance::start(ctx.rt, ctx.work, ctx.rootfs, ctx.scripts, w.script, id)?;
        r.add("cold_ms", cold);
        boxes.push(b);
    }
    for b in &boxes {
        let warm: Vec<f64> = (0..ctx.requests)
            .map(|_| b.request())
            .collect::<Result<_, _>>()?;
        r.add("warm_ms", Summary::of(&warm).map_or(f64::NAN, |s| s.median));
    }
    for b in &boxes {
        r.add("pss_warm_mib", b.pss_mib()?);
    }
    if ctx.rt.name != "qrun" {
        return Ok(());
    }
    // Two hibernations: the first woken page by page (no working set yet),
    // the second by REAP prefetch of the pages the first wake used.
    for round in 0..2 {
        for b in &boxes {
            let t = ctx.rt.kill(&b.id, "SIGSTOP")?;
            if round == 0 {
                r.add("hibernate_ms", t);
                let st = ctx.rt.ctl_status(&b.id)?;
                r.add(
                    "hibernate_vmm_ms",
                    st["hibernate_us"].as_u64().unwrap_or(0) as f64 / 1e3,
                );
            }
        }
        if round == 0 {
            std::thread::sleep(Duration::from_millis(200));
            let cpu0: Vec<f64> = boxes
                .iter()
                .map(Instance::cpu_ms)
                .collect::<Result<_, _>>()?;
            for b in &boxes {
                r.add("pss_hibernated_mib", b.pss_mib()?);
            }
            std::thread::sleep(Duration::from_secs(1));
            for (b, c0) in boxes.iter().zip(cpu0) {
                r.add("cpu_hibernated_ms_per_s", b.cpu_ms()? - c0);
            }
        }
        for b in &boxes {
            let t = b.request()?;
            let st = ctx.rt.ctl_status(&b.id)?;
            let faults = st["swap_faults"].as_u64().unwrap_or(0) as f64;
            let read = st["read_back_bytes"].as_u64().unwrap_or(0) as f64 / 1_048_576.0;
            let (k, f, rb) = if round == 0 {
                ("pf_first_ms", "pf_swap_faults", "pf_read_mib")
            } else {
                ("reap_first_ms", "reap_swap_faults", "reap_read_mib")
            };
            r.add(k, t);
            r.add(f, faults);
            r.add(rb, read);
        }
    }
    for b in &boxes {
        r.add("pss_woken_mib", b.pss_mib()?);
    }
    Ok(())
}

/// What the figures mean, and what they do not say.
const CAVEATS: &str = "How to read it: qrun's PSS is that of its sandbox process (the VMM with the \
guest's RAM, kernel and page cache in it); runc's is that of the container's processes (the Python \
process: its shared libraries and page cache are the host's, shared with the other instances and \
divided among them by PSS). Cold start includes the first request's work. runc has no hibernation: its \
hibernation columns are `-`. CPU while hibernated is read from /proc in 10 ms ticks over one second.";

/// PNG charts by `scripts/functionbench-charts.py` (needs matplotlib on
/// the host): their file names, and a note when none were made.
fn charts(json: &Path, dir: &Path, prefix: &str) -> (Vec<String>, String) {
    let script = workspace_root().join("scripts/functionbench-charts.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(json)
        .arg(dir)
        .arg(prefix)
        .stdin(Stdio::null())
        .output();
    match out {
        Ok(o) if o.status.success() => {
            let names = String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(str::to_owned)
                .filter(|l| !l.is_empty())
                .collect();
            (names, String::new())
        }
        Ok(o) => {
            let why = String::from_utf8_lossy(&o.stderr);
            let why = why.lines().last().unwrap_or("failed").to_owned();
            eprintln!("functionbench: no charts: {why}");
            (Vec::new(), format!("\n\nNo charts: {why}."))
        }
        Err(e) => (Vec::new(), format!("\n\nNo charts: python3: {e}.")),
    }
}

fn write_outputs(
    opts: &Options,
    results: &[WorkloadResult],
    stamp: &str,
    n: usize,
    requests: usize,
) -> Result<Vec<PathBuf>, String> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let date = report::date(now);
    let kind = if opts.quick {
        "functionbench-quick"
    } else {
        "functionbench"
    };
    std::fs::create_dir_all(&opts.out_dir)
        .map_err(|e| format!("{}: {e}", opts.out_dir.display()))?;
    let json_path = opts.out_dir.join(format!("{kind}-{date}.json"));
    let md_path = opts.out_dir.join(format!("{kind}-{date}.md"));
    let image: Vec<&str> = stamp.lines().collect();
    let settings = json!({
        "date": date,
        "quick": opts.quick,
        "instances": n,
        "warm_requests": requests,
        "image": image,
        "cpus": std::thread::available_parallelism().map_or(0, |n| n.get()),
    });
    let j = report::to_json(results, settings);
    let text = serde_json::to_string_pretty(&j).map_err(|e| e.to_string())? + "\n";
    std::fs::write(&json_path, text).map_err(|e| format!("{}: {e}", json_path.display()))?;
    let preamble = format!(
        "`make {kind}` on {date}: {n} instances per workload and runtime, side by side; warm latency is the \
         median of {requests} requests per instance, each figure below the median over the instances. \
         Every request is a `GET /` on a new loopback connection to a Python `http.server` function \
         (`functionbench/`); the image is a Debian bookworm rootfs shared read-only by all bundles \
         (`scripts/functionbench-image.sh`).\n\nImage:\n\n```\n{}\n```\n\nThe JSON with min, p90 and max of \
         every figure: `{}`.",
        stamp.trim(),
        json_path
            .file_name()
            .map_or(String::new(), |f| f.to_string_lossy().into_owned()),
    );
    let (charts, charts_note) = charts(&json_path, &opts.out_dir, &format!("{kind}-{date}"));
    let preamble = format!("{preamble}\n\n{CAVEATS}{charts_note}");
    let md = report::markdown(
        results,
        &format!("FunctionBench, {date}"),
        &preamble,
        &charts,
    );
    std::fs::write(&md_path, md).map_err(|e| format!("{}: {e}", md_path.display()))?;
    let mut out = vec![json_path, md_path];
    out.extend(charts.iter().map(|c| opts.out_dir.join(c)));
    Ok(out)
}
