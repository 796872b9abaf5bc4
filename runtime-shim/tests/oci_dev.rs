//! A container's /dev as runc makes it (issue 17): the devices' numbers,
//! the /dev/fd, /dev/stdin, /dev/stdout and /dev/stderr symlinks, and a
//! /dev/shm (the config's tmpfs, made in the sandbox's view) where
//! `shm_open` and `sem_open` work between a parent and its child. The
//! same bundle runs `test-apps/c/devshm.c` under `runc run` and `qrun
//! run`; output and status must agree.
//!
//! Needs /dev/kvm: without it the test says SKIPPED loudly, and fails
//! under `CI=true`.

#![forbid(unsafe_code)]

mod common;

use common::bundle::{bundle, qrun_at};
use common::runc::runc;
use common::tmp::TempDir;
use common::{assert_same, require_kvm};

#[test]
fn dev_and_dev_shm_as_under_runc() {
    if !require_kvm() {
        return;
    }
    let b = TempDir::new("devshm");
    let prog = test_apps::path("devshm");
    bundle(&b.0, &[("/devshm", &prog)], &["/devshm"], |_| {});
    let id = format!("devshm-{}", std::process::id());
    let bs = b.str();
    let rroot = TempDir::new("devshm-runc-root");
    let runc_out = runc(&rroot.0, &["run", "--bundle", bs, &id]);
    let _ = runc(&rroot.0, &["delete", "--force", &id]);
    let root = TempDir::new("devshm-root");
    let qrun = qrun_at(&root.0, &["run", "--bundle", bs, &id]);
    let _ = qrun_at(&root.0, &["delete", "--force", &id]);
    assert_same("devshm", &runc_out, &qrun);
    let out = String::from_utf8_lossy(&qrun.stdout);
    assert!(out.contains("parent reads: written by the child"), "{out}");
    assert!(out.contains("/dev/stdin -> /proc/self/fd/0"), "{out}");
}

/// The config's `linux.devices` (a char, a block device and a fifo,
/// one at a nested path) with their numbers, permissions and owners,
/// `/dev/ptmx` as a symlink to `pts/ptmx`, and the config's tmpfs and
/// bind mounts in `/proc/self/mountinfo`: `test-apps/c/ocidevs.c` under
/// `runc run` and `qrun run` on the same bundle (runtime-tools'
/// `linux_devices`, `mounts` and the default symlinks).
#[test]
fn config_devices_and_mounts_as_under_runc() {
    if !require_kvm() {
        return;
    }
    let b = TempDir::new("ocidevs");
    let prog = test_apps::path("ocidevs");
    let shared = b.0.join("shared-src");
    std::fs::create_dir_all(&shared).expect("mkdir");
    let devices = [
        "/dev/test1",
        "/dev/test2",
        "/dev/test3",
        "/dev/net/tun",
        "/dev/tty",
    ];
    let mut args = vec!["/ocidevs"];
    args.extend(devices);
    bundle(&b.0, &[("/ocidevs", &prog)], &args, |c| {
        c["linux"]["devices"] = serde_json::json!([
            {"path": "/dev/test1", "type": "c", "major": 10, "minor": 666,
             "fileMode": 0o660, "uid": 0, "gid": 0},
            {"path": "/dev/test2", "type": "b", "major": 8, "minor": 666,
             "fileMode": 0o640, "uid": 1, "gid": 2},
            {"path": "/dev/test3", "type": "p", "major": 8, "minor": 666, "fileMode": 0o600},
            {"path": "/dev/net/tun", "type": "c", "major": 10, "minor": 200},
            {"path": "/dev/tty", "type": "c", "major": 5, "minor": 0, "fileMode": 0o666},
        ]);
        let mounts = c["mounts"].as_array_mut().expect("mounts");
        mounts.push(serde_json::json!({
            "destination": "/tmp/t1", "type": "tmpfs", "source": "tmpfs",
            "options": ["nosuid", "size=64k", "mode=755"]}));
        mounts.push(serde_json::json!({
            "destination": "/mnt/b1", "type": "bind", "source": shared,
            "options": ["rbind", "ro"]}));
    });
    let id = format!("ocidevs-{}", std::process::id());
    let bs = b.str();
    let rroot = TempDir::new("ocidevs-runc-root");
    let runc_out = runc(&rroot.0, &["run", "--bundle", bs, &id]);
    let _ = runc(&rroot.0, &["delete", "--force", &id]);
    let root = TempDir::new("ocidevs-root");
    let qrun = qrun_at(&root.0, &["run", "--bundle", bs, &id]);
    let _ = qrun_at(&root.0, &["delete", "--force", &id]);
    assert_same("ocidevs", &runc_out, &qrun);
    let out = String::from_utf8_lossy(&qrun.stdout);
    for want in [
        "/dev/ptmx -> pts/ptmx",
        "/dev/test2: blk 8:666 mode 640 uid 1 gid 2",
        "/dev/test3: fifo 0:0 mode 600",
        "/dev/net/tun: chr 10:200 mode 666",
        "mount /tmp/t1: tmpfs from tmpfs, rw",
        "mount /mnt/b1: bind of .../shared-src, ro",
    ] {
        assert!(out.contains(want), "missing {want:?}:\n{out}");
    }
}
