//! The container's cgroups against runc's: the sandbox process is in
//! every cgroup hierarchy mounted on the host (every v1 controller,
//! named hierarchies such as `name=systemd`, and v2), at `cgroupsPath`
//! as runc places it (absolute: from each hierarchy's root; relative:
//! under the caller's cgroup), with `cpu.cpus`/`cpu.mems` applied, and
//! every directory goes at delete. The same config runs under runc and
//! `/proc/PID/cgroup` of both must agree.
//!
//! Needs /dev/kvm (qrun's side): without it a test says SKIPPED loudly,
//! and fails under `CI=true`.

#![forbid(unsafe_code)]

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::bundle::{qrun_at, qrun_detached, sleep_bundle_with, state};
use common::require_kvm;
use common::runc::{runc, runc_ok, runc_state};
use common::tmp::TempDir;
use serde_json::json;

/// Mount points of every cgroup hierarchy on this host.
fn hierarchy_mounts() -> Vec<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    info.lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let fstype = right.split(' ').next()?;
            (fstype == "cgroup" || fstype == "cgroup2")
                .then(|| PathBuf::from(left.split(' ').nth(4).unwrap_or_default()))
        })
        .collect()
}

/// `/proc/PID/cgroup`, sorted, with the last component `name` replaced
/// by `NAME`.
fn cgroup_lines(pid: i64, name: &str) -> Vec<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).expect("cgroup");
    let suffix = format!("/{name}");
    let mut lines: Vec<String> = text
        .lines()
        .map(|l| match l.strip_suffix(&suffix) {
            Some(head) => format!("{head}/NAME"),
            None => l.to_owned(),
        })
        .collect();
    lines.sort();
    lines
}

fn runc_pid(root: &Path, id: &str) -> i64 {
    runc_state(root, id)["pid"]
        .as_i64()
        .expect("runc state has a pid")
}

/// Deletes both containers and removes what is left of the cgroup
/// directories (runc leaves the parents it made), also when a test fails.
struct Cleanup {
    root: PathBuf,
    rroot: PathBuf,
    ids: [String; 2],
    prefix: String,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = common::bundle::qrun_at(&self.root, &["delete", "--force", &self.ids[0]]);
        let _ = runc(&self.rroot, &["delete", "--force", &self.ids[1]]);
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let mut bases = vec![String::new()];
        bases.extend(
            own.lines()
                .filter_map(|l| l.splitn(3, ':').nth(2))
                .map(str::to_owned),
        );
        for m in hierarchy_mounts() {
            for base in &bases {
                let top = m.join(base.trim_start_matches('/')).join(&self.prefix);
                for id in &self.ids {
                    let _ = std::fs::remove_dir(top.join(id));
                }
                let _ = std::fs::remove_dir(&top);
            }
        }
    }
}

fn gone(dir: &Path) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while dir.exists() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// Creates `id` under qrun and `id-runc` under runc with `cgroupsPath`
/// `prefix/NAME` (NAME the id), compares where each landed, checks qrun's
/// directories, then deletes both and checks qrun's went.
fn compare(prefix: &str, id: &str) {
    let b = TempDir::new("cg-bundle");
    let root = TempDir::new("cg-root");
    let rroot = TempDir::new("cg-runc-root");
    let rid = format!("{id}-runc");
    let _cleanup = Cleanup {
        root: root.0.clone(),
        rroot: rroot.0.clone(),
        ids: [id.to_owned(), rid.clone()],
        prefix: prefix.trim_start_matches('/').to_owned(),
    };
    let make = |name: &str| {
        let path = format!("{prefix}/{name}");
        let _ = std::fs::remove_file(b.join("config.json"));
        sleep_bundle_with(&b.0, "60", |c| {
            c["linux"]["cgroupsPath"] = json!(path);
            c["linux"]["resources"] = json!({"cpu": {"cpus": "0", "mems": "0"}});
        });
    };
    make(id);
    let log = root.join("create.log");
    let out = qrun_detached(&root.0, &["create", "--bundle", b.str(), id], &log);
    assert_eq!(out.status, 0, "qrun create: {out:?}");
    let pid = state(&root.0, id).expect("state")["pid"]
        .as_i64()
        .expect("pid");
    let qrun_lines = cgroup_lines(pid, id);
    make(&rid);
    runc_ok(&rroot.0, &["create", "--bundle", b.str(), &rid]);
    let runc_lines = cgroup_lines(runc_pid(&rroot.0, &rid), &rid);
    runc_ok(&rroot.0, &["delete", "--force", &rid]);

    // Each hierarchy's directory for the sandbox, from its cgroup line.
    let mut dirs = Vec::new();
    for line in &qrun_lines {
        let rel = line.splitn(3, ':').nth(2).expect("a path");
        assert!(
            rel.ends_with(&format!("{}/NAME", prefix.trim_start_matches('/'))),
            "{line}"
        );
        dirs.push(format!("{}{id}", rel.trim_end_matches("NAME")));
    }
    let mounts = hierarchy_mounts();
    let mut found = 0;
    for m in &mounts {
        let hits: Vec<PathBuf> = dirs
            .iter()
            .map(|d| m.join(d.trim_start_matches('/')))
            .filter(|d| d.is_dir())
            .collect();
        let Some(dir) = hits.first() else {
            continue;
        };
        found += 1;
        let procs = std::fs::read_to_string(dir.join("cgroup.procs")).expect("cgroup.procs");
        assert!(
            procs.lines().any(|l| l.trim() == pid.to_string()),
            "{}: {procs}",
            dir.display()
        );
        if dir.join("cpuset.cpus").exists() && !dir.join("cgroup.controllers").exists() {
            let cpus = std::fs::read_to_string(dir.join("cpuset.cpus")).expect("cpus");
            assert_eq!(cpus.trim(), "0", "{}", dir.display());
        }
    }
    assert_eq!(found, mounts.len(), "in every hierarchy: {qrun_lines:?}");
    assert_eq!(qrun_lines, runc_lines, "qrun's cgroups vs runc's");

    let d = qrun_at(&root.0, &["delete", "--force", id]);
    assert_eq!(d.status, 0, "{d:?}");
    for m in &mounts {
        for dir in &dirs {
            let dir = m.join(dir.trim_start_matches('/'));
            assert!(gone(&dir), "{} left after delete", dir.display());
        }
    }
}

/// An absolute `cgroupsPath` is from each hierarchy's root: the memory
/// cgroup used to land under this process's own memory cgroup, and
/// cpuacct, cpuset, blkio, devices and name=systemd were not joined.
#[test]
fn absolute_cgroups_path_is_joined_in_every_hierarchy_as_runc() {
    if !require_kvm() {
        return;
    }
    let prefix = format!("/qrun-test-{}", std::process::id());
    compare(&prefix, "cg-abs");
}

/// A relative `cgroupsPath` is under the caller's own cgroup in each
/// hierarchy (this test's, which runc and qrun share).
#[test]
fn relative_cgroups_path_is_under_our_own_cgroup_as_runc() {
    if !require_kvm() {
        return;
    }
    let prefix = format!("qrun-rel-{}", std::process::id());
    compare(&prefix, "cg-rel");
}
