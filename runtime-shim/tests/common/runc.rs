//! runc, the reference the OCI tests compare qrun with: `runc --root ROOT
//! ARGS` with stdin from /dev/null (runc is installed by scripts/deps.sh).

use std::path::Path;
use std::process::{Command, Stdio};

use super::{Outcome, shell_status};

/// `runc --root ROOT ARGS`, its output captured.
pub fn runc(root: &Path, args: &[&str]) -> Outcome {
    let out = Command::new("runc")
        .arg("--root")
        .arg(root)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("runc is installed (scripts/deps.sh)");
    Outcome {
        stdout: out.stdout,
        stderr: out.stderr,
        status: shell_status(out.status),
    }
}

/// `runc --root ROOT ARGS`, which must succeed; its output is not kept
/// (`runc create` leaves `runc init` holding its stdout, so waiting for
/// the output to end would wait for the container).
pub fn runc_ok(root: &Path, args: &[&str]) {
    let st = Command::new("runc")
        .arg("--root")
        .arg(root)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("runc is installed (scripts/deps.sh)");
    assert!(st.success(), "runc {args:?}: {st}");
}

/// `runc state ID` as JSON (`Null` when runc knows no such container).
pub fn runc_state(root: &Path, id: &str) -> serde_json::Value {
    serde_json::from_slice(&runc(root, &["state", id]).stdout).unwrap_or_default()
}
