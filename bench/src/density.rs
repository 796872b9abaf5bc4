//! Memory density (issue 16): `bench density [-n N] [--out PATH] [--qrun
//! PATH]`. N (default 5) Python hello functions (`functionbench/hello.py`
//! on the FunctionBench Debian rootfs, built once and cached by
//! `scripts/functionbench-image.sh`) run as OCI containers under qrun and
//! N under runc, all 2N side by side, started alternately. After one
//! request each (the readiness `GET /`) and three more, the PSS of every
//! instance is read (the sum of `smaps_rollup` Pss over the container's
//! process and its descendants): `warm`. Then every qrun instance is
//! hibernated (`qrun kill ID SIGSTOP`) and, 200 ms later, read again:
//! `hibernated`. runc has no hibernation. Every qrun container has its own
//! state directory (`<root>/<id>/sandbox`).
//!
//! Printed as a table and written as JSON (default
//! `target/bench/density.json`): per runtime and state the min, median,
//! p90 and max PSS per instance in MiB, and the ratios qrun/runc warm,
//! hibernated/warm (qrun) and qrun hibernated / runc warm.

use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::{Value as Json, json};

use crate::functionbench::container::{Instance, Runtime};
use crate::runner::workspace_root;
use crate::stats::Summary;

const USAGE: &str = "usage: bench density [-n N] [--out PATH] [--qrun PATH]";
/// The function: the FunctionBench Python hello server.
const ARGS: &[&str] = &["/usr/bin/python3", "/functionbench/hello.py", "{port}"];
const EXTRA_REQUESTS: usize = 3;

struct Options {
    n: usize,
    out: PathBuf,
    qrun: PathBuf,
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        n: 5,
        out: workspace_root().join("target/bench/density.json"),
        qrun: workspace_root().join("target/release/qrun"),
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-n" => {
                let v = it.next().ok_or("-n needs a number")?;
                o.n = v
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or(format!("-n {v}: not a positive number"))?;
            }
            "--out" => o.out = it.next().ok_or("--out needs a path")?.into(),
            "--qrun" => o.qrun = it.next().ok_or("--qrun needs a path")?.into(),
            "-h" | "--help" => return Err(String::new()),
            _ => return Err(format!("unknown argument '{a}'")),
        }
    }
    Ok(o)
}

/// PSS per instance (MiB) of each runtime and state.
struct Results {
    qrun_warm: Vec<f64>,
    qrun_hibernated: Vec<f64>,
    runc_warm: Vec<f64>,
}

pub fn main(args: &[String]) -> ExitCode {
    let opts = match parse_args(args) {
        Ok(o) => o,
        Err(msg) => {
            if !msg.is_empty() {
                eprintln!("density: {msg}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    if !opts.qrun.is_file() {
        eprintln!(
            "density: {} not found: run `cargo build --release` first",
            opts.qrun.display()
        );
        return ExitCode::FAILURE;
    }
    let Some(runc) = which("runc") else {
        eprintln!("density: runc is not on PATH");
        return ExitCode::FAILURE;
    };
    eprintln!("density: image (built once, then cached)");
    let (rootfs, stamp) = match crate::functionbench::image() {
        Ok(x) => x,
        Err(e) => {
            eprintln!("density: {e}");
            return ExitCode::FAILURE;
        }
    };
    let work = std::env::temp_dir().join(format!("qrun-density-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    if let Err(e) = std::fs::create_dir_all(&work) {
        eprintln!("density: {}: {e}", work.display());
        return ExitCode::FAILURE;
    }
    let qrun = Runtime {
        name: "qrun",
        bin: opts.qrun.clone(),
        root: work.join("root-qrun"),
        flags: Vec::new(),
    };
    let runc = Runtime {
        name: "runc",
        bin: runc,
        root: work.join("root-runc"),
        flags: Vec::new(),
    };
    let scripts = workspace_root().join("functionbench");
    let ctx = Ctx {
        qrun: &qrun,
        runc: &runc,
        work: &work,
        rootfs: &rootfs,
        scripts: &scripts,
    };
    let res = measure(&ctx, opts.n);
    let _ = std::fs::remove_dir_all(&work);
    let res = match res {
        Ok(r) => r,
        Err(e) => {
            eprintln!("density: {e}");
            return ExitCode::FAILURE;
        }
    };
    let j = to_json(&res, opts.n, &stamp);
    print!("{}", table(&j));
    let text = serde_json::to_string_pretty(&j).unwrap_or_default() + "\n";
    if let Some(dir) = opts.out.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if let Err(e) = std::fs::write(&opts.out, text) {
        eprintln!("density: {}: {e}", opts.out.display());
        return ExitCode::FAILURE;
    }
    println!("wrote {}", opts.out.display());
    ExitCode::SUCCESS
}

struct Ctx<'a> {
    qrun: &'a Runtime,
    runc: &'a Runtime,
    work: &'a std::path::Path,
    rootfs: &'a std::path::Path,
    scripts: &'a std::path::Path,
}

/// Starts the 2N instances, measures, and deletes them (their drop guards)
/// whatever happened.
fn measure(ctx: &Ctx, n: usize) -> Result<Results, String> {
    let mut q = Vec::new();
    let mut c = Vec::new();
    let pid = std::process::id();
    for i in 0..n {
        eprintln!("density: starting pair {}/{n}", i + 1);
        for (rt, out) in [(ctx.qrun, &mut q), (ctx.runc, &mut c)] {
            let id = format!("density-{pid}-{}-{i}", rt.name);
            let (inst, _) = Instance::start(rt, ctx.work, ctx.rootfs, ctx.scripts, ARGS, id)?;
            out.push(inst);
        }
    }
    for inst in q.iter().chain(&c) {
        for _ in 0..EXTRA_REQUESTS {
            inst.request()?;
        }
    }
    let pss =
        |v: &[Instance]| -> Result<Vec<f64>, String> { v.iter().map(Instance::pss_mib).collect() };
    let qrun_warm = pss(&q)?;
    let runc_warm = pss(&c)?;
    eprintln!("density: hibernating the qrun instances");
    for inst in &q {
        ctx.qrun.kill(&inst.id, "SIGSTOP")?;
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    let qrun_hibernated = pss(&q)?;
    // Each still answers after its wake.
    for inst in &q {
        inst.request()?;
    }
    Ok(Results {
        qrun_warm,
        qrun_hibernated,
        runc_warm,
    })
}

fn summary(xs: &[f64]) -> Json {
    match Summary::of(xs) {
        Some(s) => json!({"n": s.n, "min": s.min, "median": s.median, "p90": s.p90, "max": s.max}),
        None => Json::Null,
    }
}

fn median(xs: &[f64]) -> f64 {
    Summary::of(xs).map_or(f64::NAN, |s| s.median)
}

fn to_json(r: &Results, n: usize, stamp: &str) -> Json {
    let (qw, qh, cw) = (
        median(&r.qrun_warm),
        median(&r.qrun_hibernated),
        median(&r.runc_warm),
    );
    json!({
        "workload": "python3 functionbench/hello.py (http.server), OCI bundles on the FunctionBench rootfs",
        "instances_per_runtime": n,
        "image": stamp.lines().collect::<Vec<_>>(),
        "pss_mib_per_instance": {
            "qrun_warm": summary(&r.qrun_warm),
            "qrun_hibernated": summary(&r.qrun_hibernated),
            "runc_warm": summary(&r.runc_warm),
        },
        "ratios": {
            "qrun_warm/runc_warm": qw / cw,
            "qrun_hibernated/qrun_warm": qh / qw,
            "qrun_hibernated/runc_warm": qh / cw,
        },
    })
}

fn table(j: &Json) -> String {
    let mut out = format!(
        "density: {} instances per runtime, PSS per instance (MiB)\n{:<18} {:>8} {:>8} {:>8} {:>8}\n",
        j["instances_per_runtime"], "", "min", "median", "p90", "max"
    );
    for k in ["qrun_warm", "qrun_hibernated", "runc_warm"] {
        let s = &j["pss_mib_per_instance"][k];
        let f = |f: &str| s[f].as_f64().unwrap_or(f64::NAN);
        out += &format!(
            "{k:<18} {:>8.2} {:>8.2} {:>8.2} {:>8.2}\n",
            f("min"),
            f("median"),
            f("p90"),
            f("max")
        );
    }
    if let Some(ratios) = j["ratios"].as_object() {
        for (k, v) in ratios {
            out += &format!("{k:<28} {:>8.3}\n", v.as_f64().unwrap_or(f64::NAN));
        }
    }
    out
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}
