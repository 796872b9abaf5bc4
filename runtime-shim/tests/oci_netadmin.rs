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

use common::bundle::{busybox_bundle, run_both};
use common::tmp::TempDir;
use common::{Outcome, assert_same, require_kvm};
use serde_json::Value;

fn both(name: &str, script: &str, edit: impl Fn(&mut Value)) -> (Outcome, Outcome) {
    let b = TempDir::new(name);
    busybox_bundle(&b.0, &["busybox", "sh", "-c", script], edit);
    run_both(&b.0, &format!("{name}-{}", std::process::id()))
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
