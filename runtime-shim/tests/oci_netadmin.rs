//! A container's view of its network as under runc (issue 17, critest's
//! HostNetwork, Privileged and adding-a-capability specs): in the host's
//! network namespace `netstat -ln` lists the host's listening ports, in a
//! namespace of its own it does not; `/sys/class/net` lists the
//! interfaces; `brctl addbr` fails with EPERM without CAP_NET_ADMIN and
//! makes the bridge with it. The same bundles run under `runc run` and
//! `qrun run`.
//!
//! Needs /dev/kvm: without it a test says SKIPPED loudly, and fails under
//! `CI=true`.

#![forbid(unsafe_code)]

mod common;

use std::path::Path;

use common::bundle::{bundle, qrun_at};
use common::runc::runc;
use common::tmp::TempDir;
use common::{Outcome, assert_same, require_kvm};
use serde_json::Value;

fn both(name: &str, script: &str, edit: impl Fn(&mut Value)) -> (Outcome, Outcome) {
    let b = TempDir::new(name);
    let busybox = Path::new("/bin/busybox");
    assert!(busybox.is_file(), "/bin/busybox: scripts/deps.sh");
    bundle(
        &b.0,
        &[("/bin/busybox", busybox)],
        &["busybox", "sh", "-c", script],
        edit,
    );
    let id = format!("{name}-{}", std::process::id());
    let rroot = TempDir::new("netadmin-runc-root");
    let r = runc(&rroot.0, &["run", "--bundle", b.str(), &id]);
    let _ = runc(&rroot.0, &["delete", "--force", &id]);
    let root = TempDir::new("netadmin-root");
    let q = qrun_at(&root.0, &["run", "--bundle", b.str(), &id]);
    let _ = qrun_at(&root.0, &["delete", "--force", &id]);
    (r, q)
}

fn without_netns(c: &mut Value) {
    c["linux"]["namespaces"]
        .as_array_mut()
        .expect("namespaces")
        .retain(|n| n["type"] != "network");
}

fn with_net_admin(c: &mut Value) {
    let caps = c["process"]["capabilities"]
        .as_object_mut()
        .expect("capabilities");
    for set in ["bounding", "effective", "permitted"] {
        caps[set]
            .as_array_mut()
            .expect("a capability set")
            .push("CAP_NET_ADMIN".into());
    }
}

#[test]
fn the_host_network_lists_the_hosts_listening_ports() {
    if !require_kvm() {
        return;
    }
    let l = std::net::TcpListener::bind("[::]:0").expect("listening");
    let port = l.local_addr().expect("address").port();
    let script = format!("busybox netstat -ltn | busybox grep -c ':{port} '");
    let (r, q) = both("netadmin-hostnet", &script, without_netns);
    assert_same("host network", &r, &q);
    assert_eq!(String::from_utf8_lossy(&q.stdout), "1\n", "{q:?}");
    // A network namespace of its own does not show the host's port.
    let (r, q) = both("netadmin-ownnet", &script, |_| {});
    assert_same("own network", &r, &q);
    assert_eq!(String::from_utf8_lossy(&q.stdout), "0\n", "{q:?}");
}

#[test]
fn brctl_addbr_needs_cap_net_admin() {
    if !require_kvm() {
        return;
    }
    let script = "ls /sys/class/net; busybox brctl addbr qrunbr0 2>&1; echo $?";
    let (r, q) = both("netadmin-nocap", script, |_| {});
    assert_same("brctl without CAP_NET_ADMIN", &r, &q);
    assert_eq!(
        String::from_utf8_lossy(&q.stdout),
        "lo\nbrctl: bridge qrunbr0: Operation not permitted\n1\n"
    );
    let script = "busybox brctl addbr qrunbr0; echo $?; ls /sys/class/net; \
                  busybox brctl delbr qrunbr0; echo $?; ls /sys/class/net";
    let (r, q) = both("netadmin-cap", script, with_net_admin);
    assert_same("brctl with CAP_NET_ADMIN", &r, &q);
    assert_eq!(
        String::from_utf8_lossy(&q.stdout),
        "0\nlo\nqrunbr0\n0\nlo\n"
    );
}
