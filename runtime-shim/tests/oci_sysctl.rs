//! `linux.sysctl` as runc takes it (issue 17): the namespaced ones (IPC,
//! network, `kernel.domainname`) read as set in the container's
//! `/proc/sys`, and one of no namespace the container has is refused
//! before anything runs; a container that joins another's IPC and
//! network namespaces sees the sysctls set there (a Kubernetes pod's
//! sysctls are set on its pause container). The same bundles run under
//! `runc` and `qrun`.
//!
//! Needs /dev/kvm: without it a test says SKIPPED loudly, and fails under
//! `CI=true`.

#![forbid(unsafe_code)]

mod common;

use std::path::Path;

use common::bundle::{bundle, busybox_bundle, qrun_at, qrun_detached, run_both, state};
use common::runc::{runc, runc_ok, runc_state};
use common::tmp::TempDir;
use common::{Outcome, assert_same, require_kvm};
use serde_json::{Value, json};

fn both(name: &str, args: &[&str], edit: impl Fn(&mut Value)) -> (Outcome, Outcome) {
    let b = TempDir::new(name);
    busybox_bundle(&b.0, args, edit);
    run_both(&b.0, &format!("{name}-{}", std::process::id()))
}

#[test]
fn namespaced_sysctls_read_as_set() {
    if !require_kvm() {
        return;
    }
    let (r, q) = both(
        "sysctl-ok",
        &[
            "busybox",
            "cat",
            "/proc/sys/kernel/shm_rmid_forced",
            "/proc/sys/kernel/shmmax",
            "/proc/sys/net/ipv4/ip_local_port_range",
            "/proc/sys/kernel/domainname",
        ],
        |c| {
            c["linux"]["sysctl"] = json!({
                "kernel.shm_rmid_forced": "1",
                "kernel.shmmax": "4096",
                "net.ipv4.ip_local_port_range": "20000\t30000",
                "kernel.domainname": "qrun.example",
            });
        },
    );
    assert_same("sysctl", &r, &q);
    assert_eq!(
        String::from_utf8_lossy(&q.stdout),
        "1\n4096\n20000\t30000\nqrun.example\n"
    );
}

#[test]
fn sysctls_outside_the_containers_namespaces_are_refused() {
    if !require_kvm() {
        return;
    }
    for (key, needle) in [
        ("vm.swappiness", "is not in a separate kernel namespace"),
        ("kernel.hostname", "conflicts with the OCI"),
    ] {
        let (r, q) = both("sysctl-bad", &["busybox", "true"], |c| {
            c["linux"]["sysctl"] = json!({ key: "1" });
        });
        assert_ne!(r.status, 0, "runc refuses {key}: {r:?}");
        assert_ne!(q.status, 0, "qrun refuses {key}: {q:?}");
        assert!(
            String::from_utf8_lossy(&r.stderr).contains(needle),
            "runc: {r:?}"
        );
        assert!(
            String::from_utf8_lossy(&q.stderr).contains(needle),
            "qrun: {q:?}"
        );
    }
    // Without its own IPC namespace an IPC sysctl is the host's: refused.
    let (r, q) = both("sysctl-ipc", &["busybox", "true"], |c| {
        c["linux"]["sysctl"] = json!({"kernel.shmmax": "4096"});
        let ns = c["linux"]["namespaces"].as_array_mut().expect("namespaces");
        ns.retain(|n| n["type"] != "ipc");
    });
    let needle = "is not allowed in the hosts ipc namespace";
    assert!(
        String::from_utf8_lossy(&r.stderr).contains(needle),
        "runc: {r:?}"
    );
    assert!(
        String::from_utf8_lossy(&q.stderr).contains(needle),
        "qrun: {q:?}"
    );
}

/// A "pod" container (created, not started) with pod sysctls in its own
/// IPC and network namespaces, and a container that joins both and reads
/// them, under each runtime.
#[test]
fn a_joined_namespace_shows_its_sysctls() {
    if !require_kvm() {
        return;
    }
    let busybox = Path::new("/bin/busybox");
    assert!(busybox.is_file(), "/bin/busybox: scripts/deps.sh");
    let pod = TempDir::new("sysctl-pod");
    bundle(
        &pod.0,
        &[("/bin/busybox", busybox)],
        &["busybox", "sleep", "30"],
        |c| {
            c["linux"]["sysctl"] = json!({
                "kernel.shm_rmid_forced": "1",
                "fs.mqueue.msg_max": "100",
                "net.ipv4.ip_local_port_range": "21000\t31000",
            });
        },
    );
    let files = [
        "/proc/sys/kernel/shm_rmid_forced",
        "/proc/sys/fs/mqueue/msg_max",
        "/proc/sys/net/ipv4/ip_local_port_range",
    ];
    let app = |pid: u64| {
        let b = TempDir::new("sysctl-app");
        let mut args = vec!["busybox", "cat"];
        args.extend(files);
        bundle(&b.0, &[("/bin/busybox", busybox)], &args, |c| {
            let ns = c["linux"]["namespaces"].as_array_mut().expect("namespaces");
            ns.retain(|n| n["type"] != "ipc" && n["type"] != "network");
            ns.push(json!({"type": "ipc", "path": format!("/proc/{pid}/ns/ipc")}));
            ns.push(json!({"type": "network", "path": format!("/proc/{pid}/ns/net")}));
        });
        b
    };
    let id = format!("sysctl-pod-{}", std::process::id());
    let app_id = format!("sysctl-app-{}", std::process::id());

    let rroot = TempDir::new("sysctl-runc-root");
    runc_ok(&rroot.0, &["create", "--bundle", pod.str(), &id]);
    let pid = runc_state(&rroot.0, &id)["pid"].as_u64().expect("runc pid");
    let b = app(pid);
    let r = runc(&rroot.0, &["run", "--bundle", b.str(), &app_id]);
    let _ = runc(&rroot.0, &["delete", "--force", &app_id]);
    let _ = runc(&rroot.0, &["delete", "--force", &id]);

    let root = TempDir::new("sysctl-root");
    let out = qrun_detached(
        &root.0,
        &["create", "--bundle", pod.str(), &id],
        &pod.0.join("create.log"),
    );
    assert_eq!(out.status, 0, "qrun create: {out:?}");
    let pid = state(&root.0, &id).expect("state")["pid"]
        .as_u64()
        .expect("qrun pid");
    let b = app(pid);
    let q = qrun_at(&root.0, &["run", "--bundle", b.str(), &app_id]);
    let _ = qrun_at(&root.0, &["delete", "--force", &app_id]);
    let _ = qrun_at(&root.0, &["delete", "--force", &id]);

    assert_same("joined sysctls", &r, &q);
    assert_eq!(String::from_utf8_lossy(&q.stdout), "1\n100\n21000\t31000\n");
}
