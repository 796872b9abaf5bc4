//! `linux.maskedPaths` and `linux.readonlyPaths` (the CRI sets them for
//! every container; critest checks both): the same bundle under runc (the
//! reference) and qrun must print the same. A masked file reads empty, a
//! masked directory lists empty and refuses writes, a read-only directory
//! refuses writes ("Read-only file system"), and a missing path is skipped.
//! (qrun ignored both lists.)
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

const SCRIPT: &str = "cat /secret.txt; echo cat=$?; ls /secretdir; \
     touch /secretdir/x 2>&1; touch /ro/x 2>&1; echo ro=$?; \
     touch /rw/x; echo rw=$?; cat /ro/kept";

#[test]
fn masked_and_readonly_paths_as_under_runc() {
    if !require_kvm() {
        return;
    }
    let b = TempDir::new("masked");
    let busybox = std::path::Path::new("/bin/busybox");
    bundle(
        &b.0,
        &[("/bin/busybox", busybox)],
        &["/bin/busybox", "sh", "-c", SCRIPT],
        |c| {
            c["linux"]["maskedPaths"] = json!(["/secret.txt", "/secretdir", "/no/such"]);
            c["linux"]["readonlyPaths"] = json!(["/ro", "/missing"]);
            c["root"]["readonly"] = false.into();
        },
    );
    let rootfs = b.join("rootfs");
    for d in ["secretdir", "ro", "rw"] {
        std::fs::create_dir_all(rootfs.join(d)).expect("mkdir");
    }
    std::fs::write(rootfs.join("secret.txt"), "top secret\n").expect("write");
    std::fs::write(rootfs.join("secretdir/inside"), "hidden\n").expect("write");
    std::fs::write(rootfs.join("ro/kept"), "still readable\n").expect("write");
    let id = format!("masked-{}", std::process::id());
    let bs = b.str();
    let runc = runc(
        &TempDir::new("masked-root").0,
        &["run", "--bundle", bs, &id],
    );
    std::fs::remove_file(rootfs.join("rw/x")).expect("runc touched rw/x");
    let qrun = qrun_at(
        &TempDir::new("masked-root").0,
        &["run", "--bundle", bs, &id],
    );
    assert_same("masked and read-only paths", &runc, &qrun);
    let out = String::from_utf8_lossy(&qrun.stdout);
    assert!(
        !out.contains("top secret") && !out.contains("inside"),
        "{out}"
    );
    assert!(
        out.contains("touch: /ro/x: Read-only file system\nro=1"),
        "{out}"
    );
    assert!(
        out.contains("rw=0") && out.contains("still readable"),
        "{out}"
    );
    assert!(!rootfs.join("ro/x").exists());
}
