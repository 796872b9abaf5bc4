//! FunctionBench (issue 19): real serverless functions as OCI containers
//! under qrun, runc and gVisor's `runsc`, side by side. `bench
//! functionbench [--quick] [--instances N] [--out-dir DIR] [--qrun PATH]
//! [--runsc PATH] [--only W1,W2] [--tag NAME]`; `make functionbench` /
//! `make functionbench-quick`.
//!
//! The image is built once by `scripts/functionbench-image.sh` (a Debian
//! bookworm rootfs with python3 and the workloads' libraries, Node.js, a
//! JRE and the Go and Java hello servers, cached), `runsc` once by
//! `scripts/runsc.sh` (from its Go module, CGO_ENABLED=0, cached); each
//! workload is an HTTP function from `functionbench/` (the image read-only
//! as `root.path`, the scripts bound at `/functionbench`). Per workload and
//! runtime, N instances (10; 3 with `--quick`) run side by side, measured
//! as in [`crate::hibernate`] but through the OCI commands: cold start,
//! warm latency, and for qrun two hibernations with `qrun kill ID SIGSTOP`
//! (the first woken page by page, the second by REAP), hibernate time, PSS
//! warm / hibernated / woken, CPU while hibernated, swap faults and bytes
//! read per wake; for gVisor `runsc checkpoint` and `runsc restore` with
//! its first request instead ([`container`], [`report`]).
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

const USAGE: &str = "usage: bench functionbench [--quick] [--instances N] [--out-dir DIR] [--qrun PATH] \
     [--runsc PATH] [--only W1,W2,...] [--tag NAME]";

/// What a workload needs from the image beyond Python: a line of the
/// image's stamp says whether it was built (`scripts/functionbench-image.sh`).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Needs {
    Python,
    OpenCv,
    Node,
    Java,
    Go,
}

/// A workload: its name in the report, its command (`{port}` is replaced
/// by its port), and what it needs.
struct Workload {
    name: &'static str,
    args: &'static [&'static str],
    needs: Needs,
}

const fn py(name: &'static str, args: &'static [&'static str]) -> Workload {
    Workload {
        name,
        args,
        needs: Needs::Python,
    }
}

const WORKLOADS: &[Workload] = &[
    py(
        "hello",
        &["/usr/bin/python3", "/functionbench/hello.py", "{port}"],
    ),
    py(
        "float_operation",
        &[
            "/usr/bin/python3",
            "/functionbench/float_operation.py",
            "{port}",
        ],
    ),
    py(
        "image_processing",
        &[
            "/usr/bin/python3",
            "/functionbench/image_processing.py",
            "{port}",
        ],
    ),
    py(
        "json_dumps_loads",
        &[
            "/usr/bin/python3",
            "/functionbench/json_dumps_loads.py",
            "{port}",
        ],
    ),
    py(
        "pyaes",
        &["/usr/bin/python3", "/functionbench/aes.py", "{port}"],
    ),
    py(
        "matmul",
        &["/usr/bin/python3", "/functionbench/matmul.py", "{port}"],
    ),
    py(
        "linpack",
        &["/usr/bin/python3", "/functionbench/linpack.py", "{port}"],
    ),
    py(
        "chameleon",
        &[
            "/usr/bin/python3",
            "/functionbench/chameleon_table.py",
            "{port}",
        ],
    ),
    py(
        "gzip_compression",
        &[
            "/usr/bin/python3",
            "/functionbench/gzip_compression.py",
            "{port}",
        ],
    ),
    Workload {
        name: "video_processing",
        args: &[
            "/usr/bin/python3",
            "/functionbench/video_processing.py",
            "{port}",
        ],
        needs: Needs::OpenCv,
    },
    Workload {
        name: "hello_nodejs",
        args: &["/usr/bin/node", "/functionbench/hello.js", "{port}"],
        needs: Needs::Node,
    },
    Workload {
        name: "hello_go",
        args: &["/opt/functionbench/hello_go", "{port}"],
        needs: Needs::Go,
    },
    // The serial collector and a bounded heap: fewer GC threads, and a
    // heap that fits the 512 MiB every runtime gives an instance.
    Workload {
        name: "hello_java",
        args: &[
            "/usr/bin/java",
            "-XX:+UseSerialGC",
            "-Xmx128m",
            "-cp",
            "/opt/functionbench/java",
            "Hello",
            "{port}",
        ],
        needs: Needs::Java,
    },
];

/// Why the image lacks what `needs` asks for (from its stamp), if it does.
fn not_built(stamp: &str, needs: Needs) -> Option<String> {
    let line = |key: &str| {
        stamp
            .lines()
            .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(' ')))
            .map(str::to_owned)
    };
    let check = |key: &str, what: &str| match line(key) {
        None => Some(format!(
            "{what} is not in the image (rebuild it: scripts/functionbench-image.sh)"
        )),
        Some(v) if v.starts_with("not ") => Some(format!("{key} {v}")),
        Some(_) => None,
    };
    match needs {
        Needs::Python => None,
        Needs::OpenCv => match line("opencv") {
            Some(v) if v == "installed" => None,
            Some(v) => Some(format!("opencv {v}")),
            None => Some("opencv is not in the image".to_owned()),
        },
        Needs::Node => check("node", "Node.js"),
        Needs::Go => check("go", "the Go hello binary"),
        Needs::Java => check("java", "a JRE").or_else(|| check("javaclass", "Hello.class")),
    }
}

struct Options {
    quick: bool,
    instances: Option<usize>,
    out_dir: PathBuf,
    qrun: Option<PathBuf>,
    runsc: Option<PathBuf>,
    only: Option<Vec<String>>,
    /// Appended to the output files' names (`functionbench-DATE-TAG.*`),
    /// so a second run on a day keeps the first one's report.
    tag: Option<String>,
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        quick: false,
        instances: None,
        out_dir: workspace_root().join("docs/bench"),
        qrun: None,
        runsc: None,
        only: None,
        tag: None,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" => o.quick = true,
            "--out-dir" => o.out_dir = it.next().ok_or("--out-dir needs a path")?.into(),
            "--qrun" => o.qrun = Some(it.next().ok_or("--qrun needs a path")?.into()),
            "--runsc" => o.runsc = Some(it.next().ok_or("--runsc needs a path")?.into()),
            "--instances" => {
                let n = it.next().ok_or("--instances needs a number")?;
                match n.parse::<usize>() {
                    Ok(n) if n > 0 => o.instances = Some(n),
                    _ => return Err(format!("--instances: '{n}' is not a positive number")),
                }
            }
            "--only" => {
                let list = it.next().ok_or("--only needs workload names")?;
                o.only = Some(list.split(',').map(str::to_owned).collect());
            }
            "--tag" => {
                let t = it.next().ok_or("--tag needs a name")?;
                if t.is_empty()
                    || !t
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                {
                    return Err(format!("--tag: '{t}' must be letters, digits, '-' or '_'"));
                }
                o.tag = Some(t.clone());
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

/// gVisor's `runsc`: `--runsc PATH`, else built (once, cached) by
/// `scripts/runsc.sh`, else on PATH; or why there is none.
fn runsc(opt: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(p) = opt {
        return if p.is_file() {
            Ok(p.to_owned())
        } else {
            Err(format!("{} does not exist", p.display()))
        };
    }
    let script = workspace_root().join("scripts/runsc.sh");
    let built = Command::new(&script)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    match built {
        Ok(o) if o.status.success() => {
            let out = String::from_utf8_lossy(&o.stdout);
            Ok(PathBuf::from(out.lines().last().unwrap_or("").trim()))
        }
        other => {
            let why = match other {
                Ok(o) => {
                    let err = String::from_utf8_lossy(&o.stderr);
                    eprint!("{err}");
                    report::first_error_line(&err).unwrap_or_else(|| o.status.to_string())
                }
                Err(e) => format!("{}: {e}", script.display()),
            };
            which("runsc").ok_or(format!(
                "runsc could not be built ({why}) and is not on PATH"
            ))
        }
    }
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
    let started = std::time::Instant::now();
    let load_before = loadavg();
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
    let work = std::env::temp_dir().join(format!("qrun-fb-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    if let Err(e) = std::fs::create_dir_all(&work) {
        eprintln!("functionbench: {}: {e}", work.display());
        return ExitCode::FAILURE;
    }
    let runtimes = vec![
        Ok(Runtime {
            name: "qrun",
            bin: qrun,
            root: work.join("root-qrun"),
            flags: Vec::new(),
        }),
        match which("runc") {
            Some(bin) => Ok(Runtime {
                name: "runc",
                bin,
                root: work.join("root-runc"),
                flags: Vec::new(),
            }),
            None => Err(("runc", "runc is not on PATH".to_owned())),
        },
        {
            eprintln!("functionbench: runsc (built once, then cached)");
            match runsc(opts.runsc.as_deref()) {
                // The host's network: the function's loopback port is the
                // bench's, as under runc and qrun.
                Ok(bin) => Ok(Runtime {
                    name: "runsc",
                    bin,
                    root: work.join("root-runsc"),
                    flags: vec!["--network=host".to_owned()],
                }),
                Err(why) => Err(("runsc", why)),
            }
        },
    ];
    let n = opts.instances.unwrap_or(if opts.quick { 3 } else { 10 });
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
                Ok(rt) if not_built(&stamp, w.needs).is_some() => {
                    let mut r = RuntimeResult::new(rt.name);
                    r.outcome = Outcome::NotBuilt(not_built(&stamp, w.needs).unwrap_or_default());
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
    for rt in runtimes.iter().flatten() {
        leftovers(rt);
    }
    let _ = std::fs::remove_dir_all(&work);
    if interrupt::interrupted() {
        eprintln!("functionbench: interrupted; containers deleted, nothing written");
        return ExitCode::from(130);
    }
    print!("{}", report::table(&results));
    let runsc_version = runtimes
        .iter()
        .flatten()
        .find(|r| r.name == "runsc")
        .map(|r| version(&r.bin));
    let info = RunInfo {
        n,
        requests,
        runsc_version,
        load_before,
        load_after: loadavg(),
        wall_s: started.elapsed().as_secs(),
    };
    match write_outputs(&opts, &results, &stamp, &info) {
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
/// a step failed between create and the instance's drop guard), and
/// unmounts what runsc leaves mounted there (its `null-netns`).
fn leftovers(rt: &Runtime) {
    if rt.name == "qrun" {
        if let Ok(dir) = std::fs::read_dir(&rt.root) {
            for e in dir.flatten() {
                if let Some(id) = e.file_name().to_str()
                    && e.path().is_dir()
                {
                    rt.remove(id);
                }
            }
        }
    } else {
        for id in rt.list() {
            rt.remove(&id);
        }
    }
    let netns = rt.root.join("null-netns");
    if netns.exists() {
        let _ = Command::new("umount")
            .arg(&netns)
            .stderr(Stdio::null())
            .status();
    }
}

/// What runsc this is: the module version `scripts/runsc.sh` stamped
/// beside it (a build from the module proxy reports no version of its
/// own), else the first line of `BIN --version`.
fn version(bin: &Path) -> String {
    if let Ok(v) = std::fs::read_to_string(bin.with_file_name("runsc.stamp")) {
        return format!("gvisor.dev/gvisor {}", v.trim());
    }
    Command::new(bin)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(str::to_owned)
        })
        .unwrap_or_default()
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
        let (b, cold) = Instance::start(ctx.rt, ctx.work, ctx.rootfs, ctx.scripts, w.args, id)?;
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
    if ctx.rt.name == "runsc" {
        return checkpoint_restore(ctx, &mut boxes, r);
    }
    if ctx.rt.name != "qrun" {
        return Ok(());
    }
    // Two hibernations: the first woken page by page (no working set yet),
    // the second by REAP prefetch of the pages the first wake used.
    for round in 0..2 {
        for b in &boxes {
            let t = ctx.rt.kill(&b.id, "SIGSTOP").map_err(|e| b.explain(e))?;
            if round == 0 {
                r.add("hibernate_ms", t);
                let st = ctx.rt.ctl_status(&b.id).map_err(|e| b.explain(e))?;
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
            let st = ctx.rt.ctl_status(&b.id).map_err(|e| b.explain(e))?;
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
    woken_warm(ctx, &boxes, r)?;
    for b in &boxes {
        r.add("pss_woken_mib", b.pss_mib()?);
    }
    Ok(())
}

/// Request latency once woken (qrun) or restored (gVisor): the median of a
/// few requests per instance after its first.
fn woken_warm(ctx: &Ctx, boxes: &[Instance], r: &mut RuntimeResult) -> Result<(), String> {
    for b in boxes {
        let warm: Vec<f64> = (0..ctx.requests.min(5))
            .map(|_| b.request())
            .collect::<Result<_, _>>()?;
        r.add(
            "woken_warm_ms",
            Summary::of(&warm).map_or(f64::NAN, |s| s.median),
        );
    }
    Ok(())
}

/// gVisor's nearest equivalent of hibernation: `runsc checkpoint` of every
/// instance (the sandbox saves its memory to an image on disk and exits),
/// then per instance `runsc restore` and its first request; PSS once all
/// are restored. The images are deleted as soon as they are restored.
fn checkpoint_restore(
    ctx: &Ctx,
    boxes: &mut [Instance],
    r: &mut RuntimeResult,
) -> Result<(), String> {
    let dirs: Vec<PathBuf> = boxes
        .iter()
        .map(|b| ctx.work.join(format!("ckpt-{}", b.id)))
        .collect();
    for (b, d) in boxes.iter().zip(&dirs) {
        r.add("ckpt_ms", b.checkpoint(d)?);
        r.add("ckpt_image_mib", dir_mib(d));
    }
    for (b, d) in boxes.iter_mut().zip(&dirs) {
        let t = b.restore(d);
        let _ = std::fs::remove_dir_all(d);
        r.add("restore_first_ms", t?);
    }
    woken_warm(ctx, boxes, r)?;
    for b in boxes.iter() {
        r.add("pss_woken_mib", b.pss_mib()?);
    }
    Ok(())
}

/// Size of the files in a directory, MiB.
fn dir_mib(dir: &Path) -> f64 {
    std::fs::read_dir(dir).map_or(0.0, |d| {
        d.flatten()
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len() as f64)
            .sum::<f64>()
            / 1_048_576.0
    })
}

/// What the figures mean, and what they do not say.
const CAVEATS: &str = "How to read it: qrun's PSS is that of its sandbox process (the VMM with the \
guest's RAM, kernel and page cache in it); runc's is that of the container's processes (the Python \
process: its shared libraries and page cache are the host's, shared with the other instances and \
divided among them by PSS); gVisor's is that of its sandbox (the Sentry with the application's memory) \
and its gofer. Cold start includes the first request's work. runc has no hibernation: its hibernation \
columns are `-`. gVisor's nearest equivalent is `runsc checkpoint --image-path` (the sandbox saves its \
memory to disk and exits: `ckpt ms`, image size `ckpt MiB`) and `runsc restore` (`restore 1st ms`: the \
restore command to the first response); its `PSS woken` and `woken ms` are after the restore. \
`woken ms` is the median of 5 requests after the first once woken (qrun: after the REAP wake). \
CPU while hibernated is \
read from /proc in 10 ms ticks over one second.";

/// How the run went, for the report.
struct RunInfo {
    n: usize,
    requests: usize,
    runsc_version: Option<String>,
    load_before: String,
    load_after: String,
    wall_s: u64,
}

/// The first three fields of /proc/loadavg.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// PNG charts by `scripts/functionbench-charts.py` (needs matplotlib on
/// the host): their file names, and a note when none were made.
fn charts(json: &Path, dir: &Path, prefix: &str) -> (Vec<String>, String) {
    let script = workspace_root().join("scripts/functionbench-charts.py");
    // Debian's python3, which has the python3-matplotlib that
    // scripts/deps.sh installs (a `python3` earlier on the PATH, e.g.
    // pyenv's, may not have it).
    let python = ["/usr/bin/python3"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap_or("python3");
    let out = Command::new(python)
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
    info: &RunInfo,
) -> Result<Vec<PathBuf>, String> {
    let RunInfo { n, requests, .. } = *info;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let date = report::date(now);
    let kind = if opts.quick {
        "functionbench-quick"
    } else {
        "functionbench"
    };
    let name = match &opts.tag {
        Some(t) => format!("{kind}-{date}-{t}"),
        None => format!("{kind}-{date}"),
    };
    std::fs::create_dir_all(&opts.out_dir)
        .map_err(|e| format!("{}: {e}", opts.out_dir.display()))?;
    let json_path = opts.out_dir.join(format!("{name}.json"));
    let md_path = opts.out_dir.join(format!("{name}.md"));
    let image: Vec<&str> = stamp.lines().collect();
    let settings = json!({
        "date": date,
        "quick": opts.quick,
        "instances": n,
        "warm_requests": requests,
        "image": image,
        "cpus": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "runsc": info.runsc_version,
        "loadavg_before": info.load_before,
        "loadavg_after": info.load_after,
        "wall_s": info.wall_s,
    });
    let j = report::to_json(results, settings);
    let text = serde_json::to_string_pretty(&j).map_err(|e| e.to_string())? + "\n";
    std::fs::write(&json_path, text).map_err(|e| format!("{}: {e}", json_path.display()))?;
    let command = if opts.instances.is_some() {
        format!("`bench functionbench --instances {n}`")
    } else {
        format!("`make {kind}`")
    };
    let runsc = info.runsc_version.as_deref().map_or(String::new(), |v| {
        format!(
            " gVisor: `runsc` ({v}), built by `scripts/runsc.sh` from its Go module with \
             CGO_ENABLED=0, default platform (systrap), `--network=host` (the loopback port is the \
             host's, as for runc and qrun)."
        )
    });
    let preamble = format!(
        "{command} on {date}: {n} instances per workload and runtime, side by side; warm latency is the \
         median of {requests} requests per instance, each figure below the median over the instances. \
         Every request is a `GET /` on a new loopback connection to an HTTP function (`functionbench/`: \
         Python `http.server`, and hello servers in Node.js, Go and Java); the image is a Debian bookworm \
         rootfs shared read-only by all bundles (`scripts/functionbench-image.sh`).{runsc}\n\n\
         The machine: {} CPUs, shared with other work during the run (load average {} before, {} after; \
         the run took {} s), so absolute times are those of a loaded machine; the runtimes ran one after \
         the other per workload, under the same load.\n\nImage:\n\n```\n{}\n```\n\nThe JSON with min, \
         p90 and max of every figure: `{}`.",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        info.load_before,
        info.load_after,
        info.wall_s,
        stamp.trim(),
        json_path
            .file_name()
            .map_or(String::new(), |f| f.to_string_lossy().into_owned()),
    );
    let (charts, charts_note) = charts(&json_path, &opts.out_dir, &name);
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

#[cfg(test)]
mod tests {
    use super::*;

    const STAMP: &str = "version 1\npython 3.11.2\nopencv installed\nnode v18.20.4\n\
        java openjdk version \"17.0.19\"\ngo not built: no go on the host\n\
        javaclass not built: no javac on the host\nextras 1\n";

    #[test]
    fn image_parts_come_from_the_stamp() {
        assert_eq!(not_built(STAMP, Needs::Python), None);
        assert_eq!(not_built(STAMP, Needs::OpenCv), None);
        assert_eq!(not_built(STAMP, Needs::Node), None);
        assert_eq!(
            not_built(STAMP, Needs::Go).as_deref(),
            Some("go not built: no go on the host")
        );
        // A JRE without the compiled class is not enough.
        assert_eq!(
            not_built(STAMP, Needs::Java).as_deref(),
            Some("javaclass not built: no javac on the host")
        );
        // An image from before the second layer: said so, not left out.
        let old = "version 1\nopencv not installed: pip failed\n";
        assert!(not_built(old, Needs::Node).is_some_and(|w| w.contains("not in the image")));
        assert_eq!(
            not_built(old, Needs::OpenCv).as_deref(),
            Some("opencv not installed: pip failed")
        );
    }

    #[test]
    fn every_workload_has_a_port_and_a_unique_name() {
        for (i, w) in WORKLOADS.iter().enumerate() {
            assert!(w.args.contains(&"{port}"), "{}", w.name);
            assert!(
                WORKLOADS[..i].iter().all(|o| o.name != w.name),
                "{}",
                w.name
            );
        }
    }

    #[test]
    fn instances_option() {
        let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let o = parse_args(&args(&["--instances", "4", "--quick"])).unwrap();
        assert_eq!(o.instances, Some(4));
        assert!(parse_args(&args(&["--instances", "0"])).is_err());
        assert!(parse_args(&args(&["--instances"])).is_err());
    }

    #[test]
    fn tag_option() {
        let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let o = parse_args(&args(&["--tag", "threads"])).unwrap();
        assert_eq!(o.tag.as_deref(), Some("threads"));
        assert!(parse_args(&args(&["--tag"])).is_err());
        assert!(parse_args(&args(&["--tag", "../x"])).is_err());
        assert!(parse_args(&args(&["--tag", ""])).is_err());
        assert_eq!(parse_args(&args(&[])).unwrap().tag, None);
    }
}
