//! `linux.seccomp` applies to the container's program (issue 12: it used
//! to be ignored). The same bundle, with the same profile, runs under runc
//! (the reference: the host kernel applies the filter) and under qrun (the
//! guest kernel applies it); output and exit status must match: errno
//! results (with and without `errnoRet`, with an argument condition), a
//! TRAP (SIGSYS, 159) and a KILL_PROCESS (159).
//!
//! Every test needs /dev/kvm: without it a test says SKIPPED loudly, and
//! fails under `CI=true`.

#![forbid(unsafe_code)]

mod common;

use common::bundle::{bundle, qrun_at};
use common::runc::runc;
use common::tmp::TempDir;
use common::{Outcome, assert_same, require_kvm};
use serde_json::{Value, json};

fn profile() -> Value {
    json!({
        "defaultAction": "SCMP_ACT_ALLOW",
        "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
        "syscalls": [
            {"names": ["getppid"], "action": "SCMP_ACT_ERRNO", "errnoRet": 13},
            {"names": ["getpriority", "no_such_syscall"], "action": "SCMP_ACT_ERRNO"},
            {"names": ["socket"], "action": "SCMP_ACT_ERRNO", "errnoRet": 97,
             "args": [{"index": 0, "value": 40, "op": "SCMP_CMP_EQ"}]},
            {"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_TRAP"},
            {"names": ["sync"], "action": "SCMP_ACT_KILL_PROCESS"},
        ]
    })
}

fn probe_bundle(dir: &TempDir, last: &str) {
    let probe = test_apps::path("seccomp_probe");
    bundle(&dir.0, &[("/probe", &probe)], &["/probe", last], |c| {
        c["linux"]["seccomp"] = profile();
    });
}

fn under_runc(b: &TempDir, id: &str) -> Outcome {
    let root = TempDir::new("seccomp-runc-root");
    runc(&root.0, &["run", "--bundle", &b.0.to_string_lossy(), id])
}

fn compare(last: &str) -> Outcome {
    let b = TempDir::new("seccomp-bundle");
    probe_bundle(&b, last);
    let id = format!("seccomp-{last}-{}", std::process::id());
    let runc = under_runc(&b, &id);
    let root = TempDir::new("seccomp-root");
    let qrun = qrun_at(&root.0, &["run", "--bundle", &b.0.to_string_lossy(), &id]);
    assert_same(&format!("seccomp_probe {last}"), &runc, &qrun);
    qrun
}

#[test]
fn errno_rules_apply_as_under_runc() {
    if !require_kvm() {
        return;
    }
    let out = compare("none");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("getppid: errno 13"), "{text}");
    assert!(text.contains("getpriority: errno 1 "), "{text}");
    assert!(text.contains("socket(AF_INET): ok"), "{text}");
    assert!(text.contains("socket(AF_VSOCK): errno 97"), "{text}");
    assert_eq!(out.status, 0);
}

#[test]
fn trap_raises_sigsys_as_under_runc() {
    if !require_kvm() {
        return;
    }
    let out = compare("mkdir");
    assert_eq!(out.status, 159, "{out:?}");
}

#[test]
fn kill_process_ends_the_program_as_under_runc() {
    if !require_kvm() {
        return;
    }
    let out = compare("sync");
    assert_eq!(out.status, 159, "{out:?}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("sync: returned"));
}

#[test]
fn a_seccomp_agent_is_refused_with_one_line() {
    if !require_kvm() {
        return;
    }
    let b = TempDir::new("seccomp-agent");
    let probe = test_apps::path("seccomp_probe");
    bundle(&b.0, &[("/probe", &probe)], &["/probe"], |c| {
        c["linux"]["seccomp"] =
            json!({"defaultAction": "SCMP_ACT_ALLOW", "listenerPath": "/run/agent.sock"});
    });
    let root = TempDir::new("seccomp-agent-root");
    let out = qrun_at(
        &root.0,
        &["run", "--bundle", &b.0.to_string_lossy(), "agent"],
    );
    assert_ne!(out.status, 0, "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("listenerPath"), "{err}");
}

/// `/proc/self/status` says a filter is on (mode 2, one filter) as under
/// runc, and off without a profile: critest checks `Seccomp:` for the
/// CRI's RuntimeDefault profile (qrun's guest always said 0).
#[test]
fn proc_status_shows_the_filter_as_under_runc() {
    if !require_kvm() {
        return;
    }
    let busybox = std::path::Path::new("/bin/busybox");
    for with in [true, false] {
        let b = TempDir::new("seccomp-status");
        let args = ["/bin/busybox", "grep", "^Seccomp", "/proc/self/status"];
        bundle(&b.0, &[("/bin/busybox", busybox)], &args, |c| {
            if with {
                c["linux"]["seccomp"] = profile();
            }
        });
        let id = format!("seccomp-status-{with}-{}", std::process::id());
        let runc = under_runc(&b, &id);
        let root = TempDir::new("seccomp-root");
        let qrun = qrun_at(&root.0, &["run", "--bundle", &b.0.to_string_lossy(), &id]);
        assert_same("grep ^Seccomp /proc/self/status", &runc, &qrun);
        let want = if with {
            "Seccomp:\t2\nSeccomp_filters:\t1\n"
        } else {
            "Seccomp:\t0\nSeccomp_filters:\t0\n"
        };
        assert_eq!(String::from_utf8_lossy(&qrun.stdout), want);
    }
}

/// Hostile or broken profiles (issue 17's bad input) are refused by
/// `create` with one line naming the problem, and leave no container:
/// an errno out of range, an argument index past 5, an action or
/// operator that does not exist, a filter for other architectures only.
#[test]
fn hostile_profiles_are_refused_with_one_line() {
    if !require_kvm() {
        return;
    }
    let cases = [
        (
            json!({"defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 70000}),
            "out of range",
        ),
        (
            json!({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["read"],
                "action": "SCMP_ACT_ERRNO", "args": [{"index": 9, "value": 1, "op": "SCMP_CMP_EQ"}]}]}),
            "argument index",
        ),
        (json!({"defaultAction": "SCMP_ACT_EVIL"}), "SCMP_ACT_EVIL"),
        (
            json!({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["read"],
                "action": "SCMP_ACT_ERRNO", "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_SOMETIMES"}]}]}),
            "SCMP_CMP_SOMETIMES",
        ),
        (
            json!({"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_AARCH64"]}),
            "architectures",
        ),
    ];
    for (n, (profile, needle)) in cases.into_iter().enumerate() {
        let b = TempDir::new("seccomp-hostile");
        let probe = test_apps::path("seccomp_probe");
        bundle(&b.0, &[("/probe", &probe)], &["/probe"], |c| {
            c["linux"]["seccomp"] = profile.clone();
        });
        let root = TempDir::new("seccomp-hostile-root");
        let id = format!("hostile-{n}");
        let out = qrun_at(&root.0, &["run", "--bundle", &b.0.to_string_lossy(), &id]);
        assert_ne!(out.status, 0, "{profile}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{profile}: {err}");
        assert!(err.contains(needle), "{profile}: {err}");
        assert!(
            !root.0.join(&id).exists(),
            "{profile}: a container was left"
        );
    }
}
