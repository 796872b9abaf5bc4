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

#[test]
fn capget_as_under_runc() {
    if !require_kvm() {
        return;
    }
    let defaults = json!([
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
    ]);
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
