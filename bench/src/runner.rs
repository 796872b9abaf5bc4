//! Running programs natively and under `qrun do`, and reading what they
//! print.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime};

/// Where `qrun` is, and how to run a program with or without it.
pub struct Runner {
    qrun: PathBuf,
}

/// The workspace root: this crate's parent directory.
pub fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the bench crate lives inside the workspace")
}

impl Runner {
    /// Uses `qrun` if given, else `target/release/qrun` in the workspace.
    pub fn new(qrun: Option<PathBuf>) -> Result<Self, String> {
        let qrun = qrun.unwrap_or_else(|| workspace_root().join("target/release/qrun"));
        if !qrun.is_file() {
            return Err(format!(
                "{} not found: run `cargo build --release` first",
                qrun.display()
            ));
        }
        Ok(Self { qrun })
    }

    pub fn qrun(&self) -> &Path {
        &self.qrun
    }

    /// A warning if a source file of the runtime is newer than `qrun`: the
    /// numbers would then describe an older build.
    pub fn staleness_warning(&self) -> Option<String> {
        let built = std::fs::metadata(&self.qrun)
            .and_then(|m| m.modified())
            .ok()?;
        let root = workspace_root();
        let newest = ["qkernel/src", "qvisor/src", "qlib/src", "runtime-shim/src"]
            .iter()
            .filter_map(|d| newest_mtime(&root.join(d)))
            .max()?;
        (newest > built).then(|| {
            format!(
                "warning: {} is older than the runtime's sources; \
                 run `cargo build --release` to measure the current code",
                self.qrun.display()
            )
        })
    }

    /// `PROGRAM ARGS` run directly on the host.
    pub fn native(&self, program: &str, args: &[&str]) -> Command {
        let mut cmd = Command::new(test_apps::path(program));
        cmd.args(args).env_clear().stdin(Stdio::null());
        cmd
    }

    /// `qrun do OPTS -- PROGRAM ARGS`.
    pub fn sandboxed(&self, opts: &[&str], program: &str, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.qrun);
        cmd.arg("do")
            .args(opts)
            .arg("--")
            .arg(test_apps::path(program))
            .args(args)
            .stdin(Stdio::null());
        cmd
    }
}

fn newest_mtime(dir: &Path) -> Option<SystemTime> {
    let mut newest = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        let t = if path.is_dir() {
            newest_mtime(&path)
        } else {
            entry.metadata().and_then(|m| m.modified()).ok()
        };
        newest = newest.max(t);
    }
    newest
}

/// What `cmd` looks like in an error message.
pub fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Runs `cmd` to completion with stdout and stderr captured; an error
/// unless it exits with status 0.
pub fn output(cmd: &mut Command) -> Result<Output, String> {
    let out = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("{}: {e}", describe(cmd)))?;
    if !out.status.success() {
        return Err(format!(
            "{}: {}; stderr: {}",
            describe(cmd),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(out)
}

/// Wall time of `cmd` from spawn to exit, output discarded; an error
/// unless it exits with status 0.
pub fn time_run(cmd: &mut Command) -> Result<Duration, String> {
    cmd.stdout(Stdio::null()).stderr(Stdio::null());
    let start = Instant::now();
    let status = cmd
        .status()
        .map_err(|e| format!("{}: {e}", describe(cmd)))?;
    let elapsed = start.elapsed();
    if !status.success() {
        return Err(format!("{}: {status}", describe(cmd)));
    }
    Ok(elapsed)
}

/// The number after `key` on a line `key VALUE` of `text`.
pub fn field(text: &str, key: &str) -> Result<f64, String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix(key)?.strip_prefix(' '))
        .find_map(|v| v.trim().parse().ok())
        .ok_or_else(|| format!("no '{key} <number>' line in output {text:?}"))
}

/// The host-call count from `qrun do --stats`' last line,
/// `qrun: status 0 in 4.089 ms, 3 host calls`, and the time it reports.
pub fn stats_line(stderr: &str) -> Option<(f64, u64)> {
    let line = stderr
        .lines()
        .rev()
        .find(|l| l.starts_with("qrun: status "))?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let ms = words.iter().position(|w| *w == "ms,")?;
    let calls = words.iter().position(|w| *w == "host")?;
    Some((
        words.get(ms.checked_sub(1)?)?.parse().ok()?,
        words.get(calls.checked_sub(1)?)?.parse().ok()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_fields() {
        let text = "poll_ns 29059.3\nsyscall_ns 1593.2\nhostcall_ns 27466.1\n";
        assert_eq!(field(text, "syscall_ns"), Ok(1593.2));
        assert_eq!(field(text, "hostcall_ns"), Ok(27466.1));
        assert!(field(text, "poll").is_err());
        assert!(field("syscall_ns oops\n", "syscall_ns").is_err());
    }

    #[test]
    fn parses_stats_line() {
        let err = "hello\nqrun: status 0 in 4.089 ms, 3 host calls\n";
        assert_eq!(stats_line(err), Some((4.089, 3)));
        assert_eq!(stats_line("qrun: status 0\n"), None);
        assert_eq!(stats_line(""), None);
    }
}
