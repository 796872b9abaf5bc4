//! A container in a user namespace of its own (`linux.uidMappings`,
//! `gidMappings`; runtime-tools' `linux_uid_mappings` and
//! `linux_ns_nopath`): the same bundle under `runc run` and `qrun run`
//! runs `test-apps/c/userns.c`, which prints its ids and
//! `/proc/self/uid_map` and `gid_map`, sees a host root's file as the
//! overflow id, creates a file in a bind-mounted directory and chowns it
//! (to a mapped id, then an unmapped one). Output and status must agree,
//! and on the host the file must belong to the mapped ids (container 5 is
//! host 100005): the VMM itself runs in the namespace, as runc's process
//! does. The sandbox process's user namespace is not the host's.
//!
//! Needs /dev/kvm: without it the test says SKIPPED loudly, and fails
//! under `CI=true`.

#![forbid(unsafe_code)]

mod common;

use std::os::unix::fs::MetadataExt;

use common::bundle::{bundle, qrun_at, state};
use common::runc::runc;
use common::tmp::TempDir;
use common::{assert_same, require_kvm};

const HOST_BASE: u32 = 100_000;

/// A new user namespace mapping ids 0..65536 to `HOST_BASE`.. in config `c`.
fn new_user_namespace(c: &mut serde_json::Value) {
    c["linux"]["namespaces"]
        .as_array_mut()
        .expect("namespaces")
        .push(serde_json::json!({"type": "user"}));
    let map = serde_json::json!([{"containerID": 0, "hostID": HOST_BASE, "size": 65536}]);
    c["linux"]["uidMappings"] = map.clone();
    c["linux"]["gidMappings"] = map;
}

/// A change to a bundle's config.
type Edit<'a> = Box<dyn Fn(&mut serde_json::Value) + 'a>;

#[test]
fn user_namespace_mappings_as_under_runc() {
    if !require_kvm() {
        return;
    }
    let b = TempDir::new("userns");
    let prog = test_apps::path("userns");
    let w = b.0.join("w");
    std::fs::create_dir_all(&w).expect("mkdir");
    // runc, in the namespace, cannot make mount points in a root-owned
    // rootfs: they are there, as in an image.
    for d in ["proc", "dev", "sys", "w"] {
        std::fs::create_dir_all(b.0.join("rootfs").join(d)).expect("mkdir");
    }
    std::os::unix::fs::chown(&w, Some(HOST_BASE), Some(HOST_BASE)).expect("chown w");
    bundle(
        &b.0,
        &[("/userns", &prog)],
        &["/userns", "/w/new", "/userns"],
        |c| {
            new_user_namespace(c);
            for set in ["bounding", "effective", "permitted"] {
                c["process"]["capabilities"][set]
                    .as_array_mut()
                    .expect("capability set")
                    .push("CAP_CHOWN".into());
            }
            c["mounts"]
                .as_array_mut()
                .expect("mounts")
                .push(serde_json::json!({
                    "destination": "/w", "type": "bind", "source": w,
                    "options": ["rbind", "rw"]}));
        },
    );
    let id = format!("userns-{}", std::process::id());
    let bs = b.str();
    let owner = || {
        let m = std::fs::metadata(w.join("new")).expect("the container made /w/new");
        (m.uid(), m.gid())
    };
    let rroot = TempDir::new("userns-runc-root");
    let runc_out = runc(&rroot.0, &["run", "--bundle", bs, &id]);
    let _ = runc(&rroot.0, &["delete", "--force", &id]);
    let runc_owner = owner();
    std::fs::remove_file(w.join("new")).expect("rm");
    let root = TempDir::new("userns-root");
    let qrun = qrun_at(&root.0, &["run", "--bundle", bs, &id]);
    let _ = qrun_at(&root.0, &["delete", "--force", &id]);
    assert_same("userns", &runc_out, &qrun);
    assert_eq!(qrun.status, 0, "{qrun:?}");
    let out = String::from_utf8_lossy(&qrun.stdout);
    for want in [
        "uid 0 euid 0 gid 0 egid 0",
        "         0     100000      65536",
        "/userns: owner 65534:65534",
        "/w/new: owner 0:0",
        "chown to 5: 0",
        "chown to the unmapped 70000: -1",
        "/w/new: owner 5:5",
    ] {
        assert!(out.contains(want), "missing {want:?}:\n{out}");
    }
    assert_eq!(runc_owner, (HOST_BASE + 5, HOST_BASE + 5));
    assert_eq!(owner(), (HOST_BASE + 5, HOST_BASE + 5));
}

/// The sandbox process is in a user namespace of its own while the
/// container runs, and the guest's program sees the mappings.
#[test]
fn the_sandbox_process_is_in_the_new_user_namespace() {
    if !require_kvm() {
        return;
    }
    let b = TempDir::new("userns-sleep");
    common::bundle::sleep_bundle_with(&b.0, "30", |c| {
        new_user_namespace(c);
    });
    let id = format!("userns-sleep-{}", std::process::id());
    let root = TempDir::new("userns-sleep-root");
    let log = b.0.join("create.log");
    let created =
        common::bundle::qrun_detached(&root.0, &["create", "--bundle", b.str(), &id], &log);
    assert_eq!(created.status, 0, "{created:?}");
    let pid = state(&root.0, &id).expect("state")["pid"]
        .as_i64()
        .expect("a pid");
    let ns = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/user")).expect("ns link");
    let theirs = ns(&pid.to_string());
    let map = std::fs::read_to_string(format!("/proc/{pid}/uid_map")).expect("uid_map");
    let _ = qrun_at(&root.0, &["delete", "--force", &id]);
    assert_ne!(theirs, ns("self"));
    assert_eq!(map, "         0     100000      65536\n");
}

/// Mappings without a user namespace, a user namespace without them, and
/// a `process.user` the mappings leave out are refused, as runc refuses
/// them.
#[test]
fn bad_mappings_are_refused() {
    if !require_kvm() {
        return;
    }
    let map = serde_json::json!([{"containerID": 0, "hostID": HOST_BASE, "size": 10}]);
    let cases: [(&str, Edit); 3] = [
        (
            "mappings without a user namespace",
            Box::new(|c| {
                c["linux"]["uidMappings"] = map.clone();
                c["linux"]["gidMappings"] = map.clone();
            }),
        ),
        (
            "a user namespace without mappings",
            Box::new(|c| {
                c["linux"]["namespaces"]
                    .as_array_mut()
                    .expect("namespaces")
                    .push(serde_json::json!({"type": "user"}));
            }),
        ),
        (
            "an unmapped process.user",
            Box::new(|c| {
                c["linux"]["namespaces"]
                    .as_array_mut()
                    .expect("namespaces")
                    .push(serde_json::json!({"type": "user"}));
                c["linux"]["uidMappings"] = map.clone();
                c["linux"]["gidMappings"] = map.clone();
                c["process"]["user"]["uid"] = 20.into();
            }),
        ),
    ];
    for (what, edit) in cases {
        let b = TempDir::new("userns-bad");
        common::bundle::hello_bundle(&b.0);
        let path = b.0.join("config.json");
        let mut c: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("JSON");
        edit(&mut c);
        std::fs::write(&path, serde_json::to_vec(&c).expect("JSON")).expect("write");
        let root = TempDir::new("userns-bad-root");
        let out = qrun_at(&root.0, &["run", "--bundle", b.str(), "bad"]);
        assert_eq!(out.status, 1, "{what}: {out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("config.json"),
            "{what}: {out:?}"
        );
    }
}
