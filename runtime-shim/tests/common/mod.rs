//! Helpers for the integration tests: run a program natively or in a
//! `qrun do` sandbox with the same arguments and environment, with a
//! timeout, and compare the outcomes.
//!
//! Both sides run with a cleared environment (plus exactly the variables a
//! test passes), stdin from /dev/null and their own process group, so a
//! hung sandbox is killed along with anything it spawned.

#![allow(dead_code, reason = "each test binary uses a different subset")]

pub mod bundle;
pub mod controlled;
pub mod cri;
pub mod http;
pub mod ready;
pub mod runc;
pub mod server;
pub mod tmp;

use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// How long one child may run; `QRUN_TEST_TIMEOUT_SECS` overrides it.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// What a program did: its output and its status as a shell reports it
/// (the exit code, or 128 + N when killed by signal N).
#[derive(Clone, PartialEq, Eq)]
pub struct Outcome {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub status: i32,
}

impl std::fmt::Debug for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outcome")
            .field("status", &self.status)
            .field("stdout", &String::from_utf8_lossy(&self.stdout))
            .field("stderr", &String::from_utf8_lossy(&self.stderr))
            .finish()
    }
}

/// The `qrun` binary under test.
pub fn qrun() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_qrun"))
}

/// Whether /dev/kvm can be opened read-write. When it cannot, this panics
/// under `CI=true` (the test fails) and otherwise says so loudly on stderr
/// and returns false, so the caller returns early.
pub fn require_kvm() -> bool {
    let err = match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
    {
        Ok(_) => return true,
        Err(e) => e,
    };
    let ci = std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1");
    if ci {
        panic!("/dev/kvm is not available ({err}) and CI=true: sandbox tests cannot run here");
    }
    eprintln!();
    eprintln!("************************************************************");
    eprintln!("SKIPPED: /dev/kvm not available ({err})");
    eprintln!("          this sandbox test did NOT run; under CI=true it fails");
    eprintln!("************************************************************");
    false
}

/// Runs `prog args` natively with exactly the environment `env`.
pub fn run_native(prog: &Path, args: &[&str], env: &[(&str, &str)]) -> Outcome {
    let mut cmd = Command::new(prog);
    cmd.args(args).env_clear().envs(env.iter().copied());
    run(cmd)
}

/// The arguments of `qrun do OPTS [--env K=V]... -- prog args`.
fn do_args(
    opts: Vec<OsString>,
    env: &[(&str, &str)],
    prog: &OsStr,
    args: &[&str],
) -> Vec<OsString> {
    let mut out: Vec<OsString> = vec!["do".into()];
    out.extend(opts);
    for (k, v) in env {
        out.push("--env".into());
        out.push(format!("{k}={v}").into());
    }
    out.push("--".into());
    out.push(prog.into());
    out.extend(args.iter().map(OsString::from));
    out
}

/// Runs `qrun do [--env K=V]... -- prog args`: the same program, arguments
/// and environment as [`run_native`], in a fresh sandbox.
pub fn run_sandboxed(prog: &Path, args: &[&str], env: &[(&str, &str)]) -> Outcome {
    run_sandboxed_with(&[], prog, args, env)
}

/// Like [`run_sandboxed`], with extra `qrun do` options (e.g. `--memory`).
pub fn run_sandboxed_with(
    qrun_opts: &[&str],
    prog: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> Outcome {
    let opts: Vec<OsString> = qrun_opts.iter().map(OsString::from).collect();
    run_qrun(&do_args(opts, env, prog.as_os_str(), args))
}

/// Runs `qrun` with exactly `args`, in a cleared environment plus `PATH`.
pub fn run_qrun<S: AsRef<OsStr>>(args: &[S]) -> Outcome {
    run_qrun_stdin(args, None)
}

/// Like [`run_qrun`], with stdin read from the host file `stdin` (else
/// /dev/null).
pub fn run_qrun_stdin<S: AsRef<OsStr>>(args: &[S], stdin: Option<&Path>) -> Outcome {
    let mut cmd = Command::new(qrun());
    cmd.args(args).env_clear();
    if let Some(path) = std::env::var_os("PATH") {
        cmd.env("PATH", path);
    }
    run_with_stdin(cmd, stdin)
}

/// Runs `prog args` natively in the directory `cwd`, with exactly the
/// environment `env` and stdin from `stdin` (else /dev/null).
pub fn run_native_in(
    cwd: &Path,
    stdin: Option<&Path>,
    prog: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> Outcome {
    let mut cmd = Command::new(prog);
    cmd.args(args)
        .env_clear()
        .envs(env.iter().copied())
        .current_dir(cwd);
    run_with_stdin(cmd, stdin)
}

/// `qrun do --rootfs ROOTFS --cwd CWD [--env K=V]... -- prog args`: `prog`
/// and `cwd` are paths inside `rootfs`; stdin from the host file `stdin`
/// (else /dev/null).
pub fn run_sandboxed_in(
    rootfs: &Path,
    cwd: &str,
    stdin: Option<&Path>,
    prog: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Outcome {
    let opts = vec!["--rootfs".into(), rootfs.into(), "--cwd".into(), cwd.into()];
    run_qrun_stdin(&do_args(opts, env, OsStr::new(prog), args), stdin)
}

/// Asserts that the sandbox did exactly what the native run did, showing a
/// line diff of whatever differs.
#[track_caller]
/// How many host calls of `kind` (`Populate`, `CopyPages` …) the guest
/// made, from `qrun do --stats`' stderr ("host calls N in T us: KindxN=…",
/// the 8 costliest kinds); 0 when the kind is not listed.
pub fn host_call_count(stderr: &str, kind: &str) -> u64 {
    let key = format!(" {kind}x");
    stderr
        .lines()
        .find_map(|l| l.split(key.as_str()).nth(1))
        .and_then(|r| r.split('=').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

pub fn assert_same(what: &str, native: &Outcome, sandboxed: &Outcome) {
    if let Some(msg) = differences(what, native, sandboxed) {
        panic!("{msg}");
    }
}

/// What differs between a native and a sandboxed run, as a report with a
/// line diff; `None` when they are the same.
pub fn differences(what: &str, native: &Outcome, sandboxed: &Outcome) -> Option<String> {
    if native == sandboxed {
        return None;
    }
    let mut msg = format!("{what}: sandboxed run differs from native run\n");
    if native.status != sandboxed.status {
        let _ = writeln!(
            msg,
            "status: native {}, sandboxed {}",
            native.status, sandboxed.status
        );
    }
    for (name, n, s) in [
        ("stdout", &native.stdout, &sandboxed.stdout),
        ("stderr", &native.stderr, &sandboxed.stderr),
    ] {
        if n != s {
            let _ = writeln!(msg, "{name} (- native, + sandboxed):");
            let (n, s) = (String::from_utf8_lossy(n), String::from_utf8_lossy(s));
            if n.lines().eq(s.lines()) {
                // What a line diff cannot show: line endings, a final newline.
                let _ = writeln!(msg, "- {n:?}\n+ {s:?}");
            } else {
                msg.push_str(&line_diff(&n, &s));
            }
        }
    }
    Some(msg)
}

/// Runs `cmd` with stdin from /dev/null and captured output, killing its
/// whole process group if it outlives the timeout.
fn run(cmd: Command) -> Outcome {
    run_with_stdin(cmd, None)
}

/// [`run`] with stdin from the file `stdin` when given.
fn run_with_stdin(mut cmd: Command, stdin: Option<&Path>) -> Outcome {
    let shown = format!("{cmd:?}");
    let input = match stdin {
        Some(p) => Stdio::from(
            std::fs::File::open(p).unwrap_or_else(|e| panic!("stdin {}: {e}", p.display())),
        ),
        None => Stdio::null(),
    };
    cmd.stdin(input)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // A program the test just wrote may still be open for writing in a
    // child another test thread is forking (ETXTBSY until that child
    // execs): try again briefly.
    let mut tries = 0;
    let mut child = loop {
        match cmd.spawn() {
            Ok(c) => break c,
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && tries < 100 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("spawning {shown}: {e}"),
        }
    };
    let deadline = Instant::now() + timeout();
    let stdout = drain(child.stdout.take().expect("stdout is piped"));
    let stderr = drain(child.stderr.take().expect("stderr is piped"));
    let status = wait_until(&mut child, deadline, &shown);
    // Something the child left behind may still hold the pipes open.
    while !(stdout.is_finished() && stderr.is_finished()) {
        if Instant::now() >= deadline {
            kill_group(&mut child);
            panic!("{shown} exited but left a process holding its stdout/stderr; killed its group");
        }
        thread::sleep(Duration::from_millis(5));
    }
    Outcome {
        stdout: stdout.join().expect("stdout reader panicked"),
        stderr: stderr.join().expect("stderr reader panicked"),
        status: shell_status(status),
    }
}

fn drain(mut pipe: impl Read + Send + 'static) -> JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut buf = Vec::new();
        // A read error just ends the capture; the comparison shows the rest.
        let _ = pipe.read_to_end(&mut buf);
        buf
    })
}

fn timeout() -> Duration {
    std::env::var("QRUN_TEST_TIMEOUT_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(DEFAULT_TIMEOUT, Duration::from_secs)
}

fn wait_until(child: &mut Child, deadline: Instant, shown: &str) -> ExitStatus {
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return status,
            Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(5)),
            Ok(None) => {
                kill_group(child);
                panic!("{shown} did not finish within {:?}; killed it", timeout());
            }
            Err(e) => panic!("waiting for {shown}: {e}"),
        }
    }
}

/// Kills the child's process group. The child leads its own group
/// (`process_group(0)`), so this also reaches anything it spawned, e.g. a
/// VMM process, which would otherwise keep our pipes open.
fn kill_group(child: &mut Child) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", child.id())])
        .stderr(Stdio::null())
        .status();
    let _ = child.kill();
    let _ = child.wait();
}

/// The status as a shell reports it: the exit code, or 128 + signal.
pub fn shell_status(status: ExitStatus) -> i32 {
    match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(signal)) => 128 + signal,
        (None, None) => panic!("{status:?} has neither an exit code nor a signal"),
    }
}

/// A line diff (longest common subsequence) of two short texts.
pub fn line_diff(a: &str, b: &str) -> String {
    const MAX_LINES: usize = 2000;
    let a: Vec<&str> = a.lines().collect();
    let b: Vec<&str> = b.lines().collect();
    if a.len() > MAX_LINES || b.len() > MAX_LINES {
        return format!("- {a:?}\n+ {b:?}\n");
    }
    // lcs[i][j] = LCS length of a[i..] and b[j..].
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            let _ = writeln!(out, "  {}", a[i]);
            (i, j) = (i + 1, j + 1);
        } else if j == b.len() || (i < a.len() && lcs[i + 1][j] >= lcs[i][j + 1]) {
            let _ = writeln!(out, "- {}", a[i]);
            i += 1;
        } else {
            let _ = writeln!(out, "+ {}", b[j]);
            j += 1;
        }
    }
    out
}

/// `qrun ctl SOCKET REQ...`: the status JSON, or the error message.
pub fn ctl(socket: &Path, req: &str) -> Result<serde_json::Value, String> {
    let out = Command::new(qrun())
        .arg("ctl")
        .arg(socket)
        .args(req.split(' '))
        .output()
        .map_err(|e| format!("running qrun ctl: {e}"))?;
    if out.status.success() {
        serde_json::from_slice(&out.stdout).map_err(|e| format!("status JSON: {e}"))
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// The names in `dir` (none when it does not exist).
pub fn dir_names(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Runs `prog args` natively and sandboxed with `env`, asserts they agree
/// and returns the native outcome.
pub fn compare_programs(prog: &Path, args: &[&str], env: &[(&str, &str)]) -> Outcome {
    let what = format!("{} {args:?} env {env:?}", prog.display());
    let native = run_native(prog, args, env);
    let sandboxed = run_sandboxed(prog, args, env);
    assert_same(&what, &native, &sandboxed);
    native
}

/// An outcome's stdout as text.
pub fn stdout(outcome: &Outcome) -> String {
    String::from_utf8_lossy(&outcome.stdout).into_owned()
}

/// An outcome's stderr as text.
pub fn stderr(outcome: &Outcome) -> String {
    String::from_utf8_lossy(&outcome.stderr).into_owned()
}

/// Waits (up to 10 s) for a sandbox's control socket to appear.
pub fn wait_for_socket(socket: &Path) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !socket.exists() {
        assert!(
            Instant::now() < deadline,
            "no control socket {}",
            socket.display()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `qrun do --memory 256M --control-socket SOCKET --state-dir STATE --`,
/// ready for the program and its arguments.
pub fn qrun_do_controlled(socket: &Path, state_dir: &Path) -> Command {
    qrun_do_controlled_with(socket, state_dir, &[])
}

/// Like [`qrun_do_controlled`], with extra `qrun do` options (e.g.
/// `--cpus 2`).
pub fn qrun_do_controlled_with(socket: &Path, state_dir: &Path, opts: &[&str]) -> Command {
    let mut cmd = Command::new(qrun());
    cmd.args(["do", "--memory", "256M", "--control-socket"])
        .arg(socket)
        .arg("--state-dir")
        .arg(state_dir)
        .args(opts)
        .arg("--");
    cmd
}
