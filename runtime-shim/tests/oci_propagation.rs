//! Mount propagation of a bind-mounted volume as runc gives it (issue 17,
//! critest's mount propagation specs): the host shares the volume
//! (`mount --make-rshared`), the container gets it `rslave` or
//! `rprivate`, the host mounts something under it once the container
//! runs, and a privileged container bind-mounts its `/etc` under it.
//! With `rslave` and `rshared` the host's mount reaches the container,
//! with `rprivate` it does not; the container's mount reaches the host
//! only with `rshared`. The same bundles run under `runc run` and `qrun
//! run`.
//!
//! Needs /dev/kvm: without it a test says SKIPPED loudly, and fails under
//! `CI=true`.

#![forbid(unsafe_code)]

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::bundle::{bundle, busybox_bundle, run_both};
use common::tmp::TempDir;
use common::{Outcome, assert_same, qrun, require_kvm, shell_status};
use serde_json::json;

/// The container's script: says it runs, waits for the host's go, then
/// reports whether the host's mount shows and bind-mounts /etc.
const SCRIPT: &str = "touch /vol/started; \
    while [ ! -e /vol/go ]; do sleep 0.05; done; \
    ls -A /vol/mnt; mkdir -p /vol/cmnt; mount --bind /etc /vol/cmnt; echo mount $?";

fn mount(args: &[&str]) {
    let st = Command::new("mount").args(args).status().expect("mount");
    assert!(st.success(), "mount {args:?}: {st}");
}

fn umount(path: &Path) {
    let _ = Command::new("umount")
        .arg("-l")
        .arg(path)
        .stderr(Stdio::null())
        .status();
}

/// Runs the bundle under `runtime` (`runc` or qrun) with the host's side
/// of the exchange; returns the outcome and what the host sees in the
/// container's mount point.
fn exchange(runtime: &Path, b: &TempDir, vol: &Path, id: &str) -> (Outcome, usize) {
    for f in ["started", "go"] {
        let _ = std::fs::remove_file(vol.join(f));
    }
    let root = TempDir::new("propagation-root");
    let child = Command::new(runtime)
        .arg("--root")
        .arg(&root.0)
        .args(["run", "--bundle", b.str(), id])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning the runtime");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !vol.join("started").exists() {
        assert!(Instant::now() < deadline, "the container did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let (src, mnt) = (vol.join("src"), vol.join("mnt"));
    mount(&["--bind", &src.to_string_lossy(), &mnt.to_string_lossy()]);
    std::fs::write(vol.join("go"), b"").expect("go");
    let out = child.wait_with_output().expect("waiting for the runtime");
    umount(&mnt);
    let seen = std::fs::read_dir(vol.join("cmnt")).map_or(0, |d| d.count());
    umount(&vol.join("cmnt"));
    let _ = Command::new(runtime)
        .arg("--root")
        .arg(&root.0)
        .args(["delete", "--force", id])
        .output();
    let o = Outcome {
        stdout: out.stdout,
        stderr: out.stderr,
        status: shell_status(out.status),
    };
    (o, seen)
}

fn check(option: &str, host_mount_shows: bool, shares_back: bool) {
    let host = TempDir::new("propagation-host");
    let vol = host.join("vol");
    std::fs::create_dir_all(vol.join("mnt")).expect("mkdir");
    std::fs::create_dir_all(vol.join("src")).expect("mkdir");
    std::fs::write(vol.join("src/flagFile"), b"").expect("flag");
    let v = vol.to_string_lossy().into_owned();
    mount(&["--bind", &v, &v]);
    mount(&["--make-rshared", &v]);
    let b = TempDir::new("propagation");
    let busybox = Path::new("/bin/busybox");
    assert!(busybox.is_file(), "/bin/busybox: scripts/deps.sh");
    let mut files = vec![("/bin/busybox", busybox)];
    let etc_file = host.join("hosts");
    std::fs::write(&etc_file, b"127.0.0.1 localhost\n").expect("etc");
    files.push(("/etc/hosts", &etc_file));
    bundle(&b.0, &files, &["busybox", "sh", "-c", SCRIPT], |c| {
        c["process"]["env"] = json!(["PATH=/bin"]);
        for set in ["bounding", "effective", "permitted"] {
            c["process"]["capabilities"][set]
                .as_array_mut()
                .expect("a capability set")
                .push("CAP_SYS_ADMIN".into());
        }
        if shares_back {
            // As containerd sets it for a bidirectional volume.
            c["linux"]["rootfsPropagation"] = json!("rshared");
        }
        c["mounts"].as_array_mut().expect("mounts").push(json!({
            "destination": "/vol", "type": "bind", "source": v,
            "options": ["rbind", option],
        }));
    });
    let link = b.join("rootfs/bin");
    for applet in ["sh", "ls", "mkdir", "mount", "touch", "sleep"] {
        let _ = std::os::unix::fs::symlink("busybox", link.join(applet));
    }
    let id = format!("propagation-{option}-{}", std::process::id());
    let (r, r_seen) = exchange(Path::new("runc"), &b, &vol, &id);
    let (q, q_seen) = exchange(&qrun(), &b, &vol, &id);
    umount(&vol);
    assert_same(&format!("{option} volume"), &r, &q);
    let want = if host_mount_shows { "flagFile\n" } else { "" };
    assert_eq!(
        String::from_utf8_lossy(&q.stdout),
        format!("{want}mount 0\n"),
        "{q:?}"
    );
    if shares_back {
        assert!(
            r_seen > 0,
            "runc: the container's mount did not reach the host"
        );
        assert_eq!(r_seen, q_seen, "the container's /etc as the host sees it");
    } else {
        assert_eq!(
            (r_seen, q_seen),
            (0, 0),
            "the container's mount reached the host"
        );
    }
}

#[test]
fn an_rslave_volume_receives_the_hosts_mounts() {
    if !require_kvm() {
        return;
    }
    check("rslave", true, false);
}

#[test]
fn an_rprivate_volume_does_not() {
    if !require_kvm() {
        return;
    }
    check("rprivate", false, false);
}

#[test]
fn an_rshared_volume_shares_both_ways() {
    if !require_kvm() {
        return;
    }
    check("rshared", true, true);
}

/// Without CAP_SYS_ADMIN a bind mount is refused (EPERM; a missing
/// target is ENOENT first), as under runc.
#[test]
fn a_bind_mount_needs_cap_sys_admin() {
    if !require_kvm() {
        return;
    }
    let b = TempDir::new("propagation-nocap");
    busybox_bundle(
        &b.0,
        &[
            "busybox",
            "sh",
            "-c",
            "busybox mount --bind /bin /nothing 2>&1; echo $?; \
             busybox mkdir -p /x; busybox mount --bind /bin /x 2>&1; echo $?",
        ],
        |c| c["root"]["readonly"] = json!(false),
    );
    let id = format!("propagation-nocap-{}", std::process::id());
    let (r, q) = run_both(&b.0, &id);
    let outs = [r, q];
    assert_same("mount without CAP_SYS_ADMIN", &outs[0], &outs[1]);
    assert!(
        String::from_utf8_lossy(&outs[1].stdout).ends_with("(are you root?)\n1\n"),
        "{:?}",
        outs[1]
    );
}

/// A privileged container binds its root under itself and unmounts it
/// again (runtime-tools' `runtimetest` does, then removes the mount
/// point: without `umount2` that removed the whole rootfs), with the
/// root's propagation from `linux.rootfsPropagation`.
#[test]
fn a_bind_of_the_root_is_unmounted() {
    if !require_kvm() {
        return;
    }
    let b = TempDir::new("propagation-umount");
    let busybox = Path::new("/bin/busybox");
    assert!(busybox.is_file(), "/bin/busybox: scripts/deps.sh");
    let script = "busybox mkdir -p /t /s; busybox touch /s/f; \
                  busybox mount --rbind / /t; echo $?; busybox ls /t/s; \
                  busybox umount -l /t; echo $?; busybox ls -A /t | busybox wc -l; \
                  busybox rmdir /t; busybox ls /s";
    bundle(
        &b.0,
        &[("/bin/busybox", busybox)],
        &["busybox", "sh", "-c", script],
        |c| {
            c["root"]["readonly"] = json!(false);
            c["linux"]["rootfsPropagation"] = json!("private");
            for set in ["bounding", "effective", "permitted"] {
                c["process"]["capabilities"][set]
                    .as_array_mut()
                    .expect("a capability set")
                    .push("CAP_SYS_ADMIN".into());
            }
        },
    );
    let id = format!("propagation-umount-{}", std::process::id());
    let (r, q) = run_both(&b.0, &id);
    let outs = [r, q];
    assert_same("bind of / and umount", &outs[0], &outs[1]);
    assert_eq!(String::from_utf8_lossy(&outs[1].stdout), "0\nf\n0\n0\nf\n");
}
