//! OCI hooks (runtime-spec `config.md`, "POSIX-platform Hooks"): programs
//! the config names, run at points of the lifecycle with the container's
//! state JSON on their stdin. Where each kind runs, as runc does it:
//!
//! ```text
//! prestart, createRuntime   create, in the runtime's namespaces, while the
//!                           sandbox process waits before pivot_root (its
//!                           namespaces, mounts and cgroups exist)   "creating"
//! createContainer           create, in the sandbox process's namespaces,
//!                           right after, still before pivot_root; cwd is
//!                           its view of the rootfs (config mounts made) "creating"
//! poststart                 start, once the program was let go       "running"
//! poststop                  delete, once the container is gone       "stopped"
//! ```
//! A failing prestart, createRuntime or createContainer hook fails
//! `create` (the later hooks do not run); a failing poststart or poststop
//! hook is a warning and the rest go on. `startContainer` is refused when
//! the config is read (see [`from_spec`]).
//!
//! A hook gets exactly its `args` (argv[0] included; its path when
//! empty) and, when `env` is given, exactly that environment (without it,
//! the runtime's, as runc's `exec.Cmd` with a nil `Env`). Its stdout and
//! stderr are kept, and the start of them goes into the error. `timeout`
//! (seconds, > 0) kills the hook's process group when it is exceeded.

use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::memfd::{MFdFlags, memfd_create};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use oci_spec::runtime::Spec;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use thiserror::Error;

use crate::bundle::BundleError;

/// Most of a hook's output kept for its error message.
const MAX_OUTPUT: u64 = 4096;
/// Most characters of that output in the (one-line) message.
const MAX_SHOWN: usize = 200;

/// One hook, checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hook {
    pub path: PathBuf,
    /// argv, argv[0] included (never empty: the path when the config has
    /// none).
    pub args: Vec<String>,
    /// The whole environment; `None` inherits the runtime's.
    pub env: Option<Vec<String>>,
    /// Seconds.
    pub timeout: Option<u64>,
}

/// The hooks of a config, by kind (`startContainer` is refused).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hooks {
    pub prestart: Vec<Hook>,
    pub create_runtime: Vec<Hook>,
    pub create_container: Vec<Hook>,
    pub poststart: Vec<Hook>,
    pub poststop: Vec<Hook>,
}

impl Hooks {
    /// Whether `create` runs hooks in the runtime's namespaces (and so
    /// the sandbox process waits for it before pivot_root).
    pub fn runtime_create(&self) -> bool {
        !self.prestart.is_empty() || !self.create_runtime.is_empty()
    }
}

/// The kinds of hook, named as in config.json.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Prestart,
    CreateRuntime,
    CreateContainer,
    Poststart,
    Poststop,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Self::Prestart => "prestart",
            Self::CreateRuntime => "createRuntime",
            Self::CreateContainer => "createContainer",
            Self::Poststart => "poststart",
            Self::Poststop => "poststop",
        }
    }
}

#[derive(Debug, Error)]
#[error("hook {kind}[{index}] {path}: {what}", kind = .kind.name(), path = .path.display())]
pub struct HookError {
    pub kind: Kind,
    pub index: usize,
    pub path: PathBuf,
    pub what: String,
}

/// The hooks of `spec`, checked: absolute paths, argv and `NAME=VALUE`
/// environment entries without NUL bytes, timeouts above zero.
#[allow(deprecated, reason = "prestart is deprecated but Docker 20.10 uses it")]
pub fn from_spec(spec: &Spec) -> Result<Hooks, BundleError> {
    let Some(h) = spec.hooks() else {
        return Ok(Hooks::default());
    };
    if h.start_container().as_ref().is_some_and(|v| !v.is_empty()) {
        return Err(BundleError::Invalid(
            "hooks.startContainer is not supported by qrun: it runs a program of the \
             container's rootfs before the container's program, and qrun runs the \
             container's code only inside its VM"
                .into(),
        ));
    }
    let list = |kind: &str, hooks: &Option<Vec<oci_spec::runtime::Hook>>| {
        hooks
            .iter()
            .flatten()
            .enumerate()
            .map(|(i, h)| check(&format!("hooks.{kind}[{i}]"), h))
            .collect::<Result<Vec<_>, _>>()
    };
    Ok(Hooks {
        prestart: list("prestart", h.prestart())?,
        create_runtime: list("createRuntime", h.create_runtime())?,
        create_container: list("createContainer", h.create_container())?,
        poststart: list("poststart", h.poststart())?,
        poststop: list("poststop", h.poststop())?,
    })
}

fn check(what: &str, h: &oci_spec::runtime::Hook) -> Result<Hook, BundleError> {
    let bad = |why: String| Err(BundleError::Invalid(format!("{what}: {why}")));
    let path = h.path();
    let text = path.to_string_lossy();
    if !path.is_absolute() {
        return bad(format!("path {text:?} is not absolute"));
    }
    if text.contains('\0') {
        return bad(format!("path {text:?} contains a NUL byte"));
    }
    let args = h.args().clone().unwrap_or_default();
    if let Some(i) = args.iter().position(|a| a.contains('\0')) {
        return bad(format!("args[{i}] {:?} contains a NUL byte", args[i]));
    }
    let args = if args.is_empty() {
        vec![text.into_owned()]
    } else {
        args
    };
    if let Some(env) = h.env()
        && let Some((i, why)) = crate::bundle::bad_env_entry(env)
    {
        return bad(format!("env[{i}] {:?} {why}", env[i]));
    }
    let timeout = match h.timeout() {
        None => None,
        Some(t) if t > 0 => u64::try_from(t).ok(),
        Some(t) => return bad(format!("timeout {t} must be greater than zero")),
    };
    Ok(Hook {
        path: path.clone(),
        args,
        env: h.env().clone(),
        timeout,
    })
}

/// Runs `hooks` of `kind` in order with `state` on their stdin (and `cwd`
/// as their working directory when given); stops at the first failure.
pub fn run_all(
    kind: Kind,
    hooks: &[Hook],
    state: &Value,
    cwd: Option<&Path>,
) -> Result<(), HookError> {
    for (index, hook) in hooks.iter().enumerate() {
        run_one(hook, state, cwd).map_err(|what| HookError {
            kind,
            index,
            path: hook.path.clone(),
            what,
        })?;
    }
    Ok(())
}

/// Runs every hook of `kind`; a failure is a warning line on stderr
/// (poststart, poststop: the lifecycle goes on).
pub fn run_warn(kind: Kind, hooks: &[Hook], state: &Value) {
    for (index, hook) in hooks.iter().enumerate() {
        if let Err(what) = run_one(hook, state, None) {
            let e = HookError {
                kind,
                index,
                path: hook.path.clone(),
                what,
            };
            eprintln!("qrun: warning: {e}");
        }
    }
}

/// An anonymous file (the hook's stdin, stdout or stderr).
fn scratch(name: &str) -> Result<std::fs::File, String> {
    memfd_create(name, MFdFlags::MFD_CLOEXEC)
        .map(std::fs::File::from)
        .map_err(|e| format!("memfd_create: {e}"))
}

fn run_one(hook: &Hook, state: &Value, cwd: Option<&Path>) -> Result<(), String> {
    let mut stdin = scratch("qrun-hook-state")?;
    let text = serde_json::to_vec(state).map_err(|e| format!("encoding the state: {e}"))?;
    stdin
        .write_all(&text)
        .and_then(|()| stdin.seek(SeekFrom::Start(0)).map(drop))
        .map_err(|e| format!("writing the state: {e}"))?;
    let out = scratch("qrun-hook-stdout")?;
    let err = scratch("qrun-hook-stderr")?;
    let dup = |f: &std::fs::File| f.try_clone().map_err(|e| format!("dup: {e}"));
    let mut cmd = Command::new(&hook.path);
    // args is never empty (see `check`).
    if let Some((first, rest)) = hook.args.split_first() {
        cmd.arg0(first).args(rest);
    }
    if let Some(env) = &hook.env {
        cmd.env_clear()
            .envs(env.iter().filter_map(|e| e.split_once('=')));
    }
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    cmd.stdin(Stdio::from(stdin))
        .stdout(Stdio::from(dup(&out)?))
        .stderr(Stdio::from(dup(&err)?))
        // Its own group, so that a timeout kills what it started too.
        .process_group(0);
    let mut child = cmd.spawn().map_err(|e| e.to_string())?;
    let status = match hook.timeout {
        None => child.wait().map_err(|e| format!("waiting: {e}"))?,
        Some(secs) => {
            let deadline = Instant::now() + Duration::from_secs(secs);
            let mut nap = Duration::from_micros(200);
            loop {
                if let Some(s) = child.try_wait().map_err(|e| format!("waiting: {e}"))? {
                    break s;
                }
                if Instant::now() >= deadline {
                    let pid = i32::try_from(child.id()).unwrap_or(0);
                    if pid > 0 {
                        let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
                    }
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!("killed after its timeout of {secs} s"));
                }
                std::thread::sleep(nap);
                nap = (nap * 2).min(Duration::from_millis(10));
            }
        }
    };
    if status.success() {
        return Ok(());
    }
    let shown = match (output(err), output(out)) {
        (e, _) if !e.is_empty() => format!(" (stderr: {e})"),
        (_, o) if !o.is_empty() => format!(" (stdout: {o})"),
        _ => String::new(),
    };
    Err(format!("{}{shown}", describe(status)))
}

fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => status.to_string(),
    }
}

/// The start of an output file, on one line.
fn output(mut f: std::fs::File) -> String {
    let mut bytes = Vec::new();
    if f.seek(SeekFrom::Start(0)).is_err()
        || (&mut f).take(MAX_OUTPUT).read_to_end(&mut bytes).is_err()
    {
        return String::new();
    }
    one_line(&String::from_utf8_lossy(&bytes))
}

/// `text` with its lines joined by " / ", at most [`MAX_SHOWN`] characters.
fn one_line(text: &str) -> String {
    let joined = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" / ");
    let mut out: String = joined.chars().take(MAX_SHOWN).collect();
    if joined.chars().count() > MAX_SHOWN {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(hooks: Value) -> Spec {
        serde_json::from_value(serde_json::json!({"ociVersion": "1.0.2", "hooks": hooks}))
            .expect("a spec")
    }

    fn sh(script: &str) -> Hook {
        Hook {
            path: "/bin/sh".into(),
            args: vec!["sh".into(), "-c".into(), script.into()],
            env: Some(vec!["A=b".into()]),
            timeout: None,
        }
    }

    #[test]
    fn configs_are_checked() {
        let h = from_spec(&spec(serde_json::json!({
            "prestart": [{"path": "/bin/true"}],
            "poststop": [{"path": "/bin/sh", "args": ["sh", "-c", "x"], "timeout": 3}],
        })))
        .expect("valid");
        assert_eq!(h.prestart[0].args, vec!["/bin/true".to_string()]);
        assert_eq!(h.poststop[0].timeout, Some(3));
        assert!(h.runtime_create());
        for (bad, says) in [
            (
                serde_json::json!({"poststart": [{"path": "rel"}]}),
                "not absolute",
            ),
            (
                serde_json::json!({"createRuntime": [{"path": "/bin/true", "timeout": 0}]}),
                "hooks.createRuntime[0]: timeout 0 must be greater than zero",
            ),
            (
                serde_json::json!({"poststop": [{"path": "/x", "env": ["NOEQ"]}]}),
                "has no '='",
            ),
            (
                serde_json::json!({"startContainer": [{"path": "/bin/true"}]}),
                "hooks.startContainer is not supported",
            ),
        ] {
            let e = from_spec(&spec(bad)).expect_err("refused").to_string();
            assert!(e.contains(says), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn state_args_and_env_reach_the_hook() {
        let dir = std::env::temp_dir().join(format!("qrun-hook-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let file = dir.join("out");
        // `sh -c SCRIPT one`: "one" is $0.
        let script = format!("cat > {0}; echo \"$0 $A\" >> {0}", file.display());
        let mut hook = sh(&script);
        hook.args.push("one".into());
        let state = serde_json::json!({"id": "c"});
        run_all(Kind::Poststart, &[hook], &state, None).expect("runs");
        let got = std::fs::read_to_string(&file).expect("written");
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(got, "{\"id\":\"c\"}one b\n");
    }

    #[test]
    fn failures_say_why_on_one_line() {
        let state = serde_json::json!({});
        let e = run_all(
            Kind::CreateRuntime,
            &[sh("echo bad >&2; echo more >&2; exit 3")],
            &state,
            None,
        )
        .expect_err("fails")
        .to_string();
        assert_eq!(
            e,
            "hook createRuntime[0] /bin/sh: exit status 3 (stderr: bad / more)"
        );
        let mut slow = sh("sleep 5");
        slow.timeout = Some(1);
        let t = Instant::now();
        let e = run_all(Kind::Prestart, &[slow], &state, None)
            .expect_err("times out")
            .to_string();
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
        assert!(e.ends_with("killed after its timeout of 1 s"), "{e}");
        let missing = Hook {
            path: "/nonexistent/hook".into(),
            args: vec!["x".into()],
            env: None,
            timeout: None,
        };
        let e = run_all(Kind::Poststop, &[missing], &state, None).expect_err("no file");
        assert!(e.to_string().contains("No such file"), "{e}");
    }
}
