//! The guest's cache of frozen rootfs metadata (docs/coldstart.md): the
//! `metacache` test program stats, opens, reads, seeks, creates, renames,
//! chmods, truncates and unlinks files, and re-stats them, on an image
//! directory `/img`, a writable bind mount `/w` (also reached as
//! `/img/tow`, a symlink from the image into the mount) and a read-only
//! bind mount `/r`, in the same OCI
//! bundle under runc (the reference) and qrun; the output and exit status
//! must match. With `root.readonly` the image's lookups are frozen and
//! cached by the guest; a file the host creates in `/w` while the program
//! runs must be seen. Without it nothing is cached, and a file the host
//! creates in the rootfs itself must be seen.
//!
//! Needs /dev/kvm: without it the test says SKIPPED loudly, and fails
//! under `CI=true`.

#![forbid(unsafe_code)]

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::bundle::{bundle, qrun_at};
use common::runc::runc;
use common::tmp::TempDir;
use common::{Outcome, assert_same, require_kvm};
use serde_json::json;

/// The bundle: `/metacache MODE`, the image directory, `/w` bound from
/// `w` (a host directory) and `/r` bound read-only from `r`.
fn make_bundle(b: &Path, w: &Path, r: &Path, readonly: bool) {
    let prog = test_apps::path("metacache");
    let mode = if readonly { "ro" } else { "rw" };
    bundle(b, &[("/metacache", &prog)], &["/metacache", mode], |c| {
        c["root"]["readonly"] = readonly.into();
        let mounts = c["mounts"].as_array_mut().expect("mounts");
        mounts.push(json!({
            "destination": "/w",
            "type": "bind",
            "source": w.to_string_lossy(),
            "options": ["rbind", "rw"],
        }));
        mounts.push(json!({
            "destination": "/r",
            "type": "bind",
            "source": r.to_string_lossy(),
            "options": ["rbind", "ro"],
        }));
    });
    let img = b.join("rootfs/img");
    std::fs::create_dir_all(img.join("sub")).expect("mkdir img/sub");
    std::fs::create_dir_all(b.join("rootfs/w")).expect("mkdir w");
    std::fs::create_dir_all(b.join("rootfs/r")).expect("mkdir r");
    std::fs::write(r.join("f"), "read-only bind\n").expect("write r/f");
    std::fs::write(img.join("data.txt"), "0123456789abcdefghij\n").expect("write data.txt");
    std::os::unix::fs::symlink("../w", img.join("tow")).expect("symlink tow");
}

/// Runs `run` while a thread plays the host side: once `dir/ready`
/// appears, it creates `dir/hostfile`; then both are removed.
fn with_host_side(dir: &Path, run: impl FnOnce() -> Outcome) -> Outcome {
    let (ready, hostfile) = (dir.join("ready"), dir.join("hostfile"));
    let host = {
        let (ready, hostfile) = (ready.clone(), hostfile.clone());
        std::thread::spawn(move || {
            let start = Instant::now();
            while !ready.exists() && start.elapsed() < Duration::from_secs(60) {
                std::thread::sleep(Duration::from_millis(2));
            }
            std::fs::write(&hostfile, "from the host\n").expect("writing hostfile");
        })
    };
    let out = run();
    host.join().expect("host side thread");
    let _ = std::fs::remove_file(&hostfile);
    let _ = std::fs::remove_file(&ready);
    out
}

fn compare(readonly: bool) {
    if !require_kvm() {
        return;
    }
    let tag = if readonly {
        "metacache-ro"
    } else {
        "metacache-rw"
    };
    let b = TempDir::new(tag);
    let w = TempDir::new(&format!("{tag}-w"));
    let r = TempDir::new(&format!("{tag}-r"));
    make_bundle(&b.0, &w.0, &r.0, readonly);
    let host_dir: PathBuf = if readonly {
        w.0.clone()
    } else {
        b.join("rootfs/img")
    };
    let id = format!("{tag}-{}", std::process::id());
    let bs = b.str();
    let reference = with_host_side(&host_dir, || {
        runc(
            &TempDir::new(&format!("{tag}-runc")).0,
            &["run", "--bundle", bs, &id],
        )
    });
    let text = String::from_utf8_lossy(&reference.stdout);
    assert!(
        reference.status == 0 && !text.contains("FAIL") && text.ends_with("done\n"),
        "metacache under runc already fails, fix the test program: {reference:?}"
    );
    let sandboxed = with_host_side(&host_dir, || {
        qrun_at(
            &TempDir::new(&format!("{tag}-qrun")).0,
            &["run", "--bundle", bs, &id],
        )
    });
    assert_same(tag, &reference, &sandboxed);
}

#[test]
fn readonly_root_caches_and_stays_right() {
    compare(true);
}

#[test]
fn writable_root_sees_host_changes() {
    compare(false);
}
