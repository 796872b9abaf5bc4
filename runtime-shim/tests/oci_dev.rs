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
