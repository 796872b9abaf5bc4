//! `qrun run` against `runc run` (and `crun run` where it runs) of the
//! same hello bundle, wall time from spawn to exit, runs interleaved so
//! all see the same machine state. Each runtime gets its own `--root`.
//!
//! The bundle is made here: a rootfs holding the static `hello` as
//! `/hello` and a config from `qrun spec` (the runc-style default:
//! pid, ipc, uts, mount and network namespaces, read-only root).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::metric::{Metric, Value};
use crate::runner::{self, Runner};
use crate::startup::summary_metric;

/// A runtime, its binary and its samples (or why there are none).
type Side = (&'static str, PathBuf, Result<Vec<f64>, String>);

/// `qrun run` of hello: the goal is several times faster than runc.
const QRUN_RUN_TARGET_MS: f64 = 20.0;

pub fn run(r: &Runner, runs: usize) -> Vec<Metric> {
    let dir = std::env::temp_dir().join(format!("qrun-bench-oci-{}", std::process::id()));
    let result = bundle(r, &dir);
    let mut out = Vec::new();
    match result {
        Err(e) => {
            for name in ["oci_run_qrun_ms", "oci_run_runc_ms", "oci_run_crun_ms"] {
                out.push(Metric::new(name, "ms", Value::Failed(e.clone()), None));
            }
        }
        Ok(bundle) => {
            let mut sides: Vec<Side> = Vec::new();
            sides.push(("qrun", r.qrun().to_owned(), Ok(Vec::new())));
            for rt in ["runc", "crun"] {
                match which(rt) {
                    Some(p) => sides.push((rt, p, Ok(Vec::new()))),
                    None => sides.push((rt, PathBuf::new(), Err(format!("{rt} is not installed")))),
                }
            }
            // Run 0 warms caches and is not recorded.
            for i in 0..=runs {
                for (name, bin, samples) in sides.iter_mut() {
                    let Ok(v) = samples else { continue };
                    let root = dir.join(format!("root-{name}"));
                    let id = format!("bench-{i}");
                    let mut cmd = Command::new(&*bin);
                    cmd.arg("--root").arg(&root).args(["run", "--bundle"]);
                    cmd.arg(&bundle).arg(&id).stdin(Stdio::null());
                    match runner::time_run(&mut cmd) {
                        Ok(t) if i > 0 => v.push(t.as_secs_f64() * 1e3),
                        Ok(_) => {}
                        Err(e) => *samples = Err(e),
                    }
                }
            }
            for (name, _, samples) in sides {
                let target = (name == "qrun").then_some(QRUN_RUN_TARGET_MS);
                let metric = summary_metric(&format!("oci_run_{name}_ms"), "ms", samples, target);
                // crun refuses hybrid cgroup hosts: optional, not an error.
                let metric = match (name, metric.value) {
                    ("crun", Value::Failed(e)) => {
                        Metric::new("oci_run_crun_ms", "ms", Value::NotAvailable(e), None)
                    }
                    (_, value) => Metric { value, ..metric },
                };
                out.push(metric);
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    out
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// Makes the hello bundle in `dir`; returns its path.
fn bundle(r: &Runner, dir: &Path) -> Result<PathBuf, String> {
    let _ = std::fs::remove_dir_all(dir);
    let b = dir.join("bundle");
    let rootfs = b.join("rootfs");
    std::fs::create_dir_all(&rootfs).map_err(|e| format!("mkdir {}: {e}", rootfs.display()))?;
    std::fs::copy(test_apps::path("hello"), rootfs.join("hello"))
        .map_err(|e| format!("copying hello: {e}"))?;
    runner::output(Command::new(r.qrun()).args(["spec", "--bundle"]).arg(&b))?;
    let path = b.join("config.json");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("reading config.json: {e}"))?;
    let mut config: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("config.json: {e}"))?;
    config["process"]["args"] = serde_json::json!(["/hello"]);
    config["process"]["terminal"] = serde_json::Value::Bool(false);
    std::fs::write(&path, config.to_string()).map_err(|e| format!("writing config.json: {e}"))?;
    Ok(b)
}
