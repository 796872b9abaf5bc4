//! `capget` in the guest answers as Linux does under runc for a container
//! with runc's default capability set (Docker's and the CRI's): the
//! version probe, the sets with v3 and v1, ESRCH for another pid. It was
//! ENOSYS, and Go's gocapability (runtime-tools' runtimetest) and libcap
//! give up on that.
//!
//! Needs /dev/kvm: without it the test says SKIPPED loudly, and fails
//! under `CI=true`.

#![forbid(unsafe_code)]

mod common;

use common::bundle::{bundle, qrun_at};
use common::runc::runc;
use common::tmp::TempDir;
use common::{assert_same, require_kvm};
use serde_json::json;

/// runc's default capability set (Docker's and the CRI's).
fn defaults() -> serde_json::Value {
    json!([
        "CAP_CHOWN",
        "CAP_DAC_OVERRIDE",
        "CAP_FSETID",
        "CAP_FOWNER",
        "CAP_MKNOD",
        "CAP_NET_RAW",
        "CAP_SETGID",
        "CAP_SETUID",
        "CAP_SETFCAP",
        "CAP_SETPCAP",
        "CAP_NET_BIND_SERVICE",
        "CAP_SYS_CHROOT",
        "CAP_KILL",
        "CAP_AUDIT_WRITE"
    ])
}

#[test]
fn capget_as_under_runc() {
    if !require_kvm() {
        return;
    }
    let defaults = defaults();
    let b = TempDir::new("caps");
    let prog = test_apps::path("caps");
    bundle(&b.0, &[("/caps", &prog)], &["/caps"], |c| {
        c["process"]["capabilities"] = json!({
            "bounding": defaults, "effective": defaults, "permitted": defaults,
            "inheritable": [], "ambient": [],
        });
    });
    let id = format!("caps-{}", std::process::id());
    let bs = b.str();
    let runc = runc(&TempDir::new("caps-root").0, &["run", "--bundle", bs, &id]);
    let qrun = qrun_at(&TempDir::new("caps-root").0, &["run", "--bundle", bs, &id]);
    assert_same("caps", &runc, &qrun);
    let out = String::from_utf8_lossy(&qrun.stdout);
    assert!(
        out.contains("v3: 0 eff 0xa80425fb 0 prm 0xa80425fb 0"),
        "{out}"
    );
}

/// `sethostname` and `setdomainname` change the container's own UTS names
/// (uname, /proc/sys/kernel/hostname) when the config grants
/// CAP_SYS_ADMIN, with Linux's EINVAL and EFAULT, and are EPERM once it
/// is dropped; the same under runc and qrun (the guest refused them
/// whatever the sets said, and critest's seccomp specs that call
/// `sethostname` failed on that).
#[test]
fn sethostname_with_cap_sys_admin_as_under_runc() {
    if !require_kvm() {
        return;
    }
    let mut caps = defaults();
    caps.as_array_mut()
        .expect("a list")
        .push(json!("CAP_SYS_ADMIN"));
    let prog = test_apps::path("uts");
    for args in [&["/uts"][..], &["/uts", "drop"]] {
        let b = TempDir::new("caps-uts");
        bundle(&b.0, &[("/uts", &prog)], args, |c| {
            c["hostname"] = json!("uts-start");
            c["process"]["capabilities"] = json!({
                "bounding": caps, "effective": caps, "permitted": caps,
                "inheritable": [], "ambient": [],
            });
        });
        let id = format!("caps-uts-{}", std::process::id());
        let bs = b.str();
        let runc = runc(&TempDir::new("caps-root").0, &["run", "--bundle", bs, &id]);
        let qrun = qrun_at(&TempDir::new("caps-root").0, &["run", "--bundle", bs, &id]);
        assert_same(&format!("uts {args:?}"), &runc, &qrun);
        let out = String::from_utf8_lossy(&qrun.stdout);
        let want = if args.len() == 1 {
            "nodename qrun-uts-test, domainname example.test, /proc hostname qrun-uts-test"
        } else {
            "sethostname: Operation not permitted"
        };
        assert!(out.contains(want), "{args:?}: {out}");
    }
}
