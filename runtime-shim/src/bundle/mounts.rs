//! The config's `mounts`: which ones qrun makes, which ones the guest
//! kernel already provides, and which ones it refuses.
//!
//! What a normal container's config holds (runc's and `qrun spec`'s
//! default, Docker, containerd, podman, Kubernetes):
//! ```text
//! /proc           proc      } the guest kernel's own file systems: the
//! /dev            tmpfs     } program sees the guest's /proc, /sys and
//! /dev/pts        devpts    } /dev, never the host's, so these mounts
//! /dev/mqueue     mqueue    } describe what the guest provides already
//! /sys            sysfs     } and are accepted without anything to do
//! /sys/fs/cgroup  cgroup(2) }
//! /dev/shm        tmpfs     made: a tmpfs in the sandbox's view, which the
//! /dev/shm        bind      made: guest reaches as a rootfs directory
//!                                 (POSIX shm and semaphores; a bind of a
//!                                 fresh shm tmpfs under Docker and podman)
//! anything else   bind      made: a bind mount in the sandbox's view
//! anything else   tmpfs     made: a tmpfs in the sandbox's view
//! ```
//! Everything else is refused with one line naming the mount: another
//! file system type (runc would mount it; qrun cannot, the guest sees only
//! the rootfs view), one of the kernel file systems above at another
//! place, and any other mount under /proc or /sys, or under /dev over a
//! name the guest kernel serves itself ([`GUEST_DEV_NAMES`]). A bind under
//! /dev at any other name is made (the guest looks up names it does not
//! serve in the rootfs): Kubernetes' `/dev/termination-log`.

use std::path::{Component, Path};

use oci_spec::runtime::Spec;

use super::BundleError;
use crate::plan::{MountKind, MountPlan};

/// Kernel file systems the guest provides, by type, at the places a
/// container config puts them.
const GUEST_OWNED: &[(&str, &str)] = &[
    ("proc", "/proc"),
    ("tmpfs", "/dev"),
    ("devpts", "/dev/pts"),
    ("mqueue", "/dev/mqueue"),
    ("sysfs", "/sys"),
    ("cgroup", "/sys/fs/cgroup"),
    ("cgroup2", "/sys/fs/cgroup"),
];

/// The POSIX shared-memory directory: a real tmpfs (or bind) in the
/// sandbox's view, as under runc.
pub const SHM: &str = "/dev/shm";

/// Where the guest kernel's own file systems are.
const GUEST_TREES: &[&str] = &["/proc", "/sys"];

/// Names under /dev the guest kernel serves itself (`qkernel::fs::special`).
const GUEST_DEV_NAMES: &[&str] = &[
    "null", "zero", "full", "random", "urandom", "stdin", "stdout", "stderr", "fd",
];

/// Whether `destination` (clean, absolute) is a bind under /dev that the
/// guest reaches: a direct child of /dev that the kernel does not serve.
fn dev_bind_reachable(destination: &str) -> bool {
    destination
        .strip_prefix("/dev/")
        .is_some_and(|name| !name.contains('/') && !GUEST_DEV_NAMES.contains(&name))
}

/// The propagation options of a mount (runc's `mountPropagationMapping`).
pub const PROPAGATION: &[&str] = &[
    "private",
    "rprivate",
    "slave",
    "rslave",
    "shared",
    "rshared",
    "unbindable",
    "runbindable",
];

/// The mounts qrun makes, in config order.
pub fn plan(spec: &Spec, bundle: &Path) -> Result<Vec<MountPlan>, BundleError> {
    let mut out = Vec::new();
    for m in spec.mounts().as_deref().unwrap_or_default() {
        let raw = m.destination().to_string_lossy();
        let destination = clean(&raw)?;
        let options = m.options().as_deref().unwrap_or_default();
        let has = |o: &str| options.iter().any(|x| x == o);
        let typ = m.typ().as_deref().unwrap_or_default();
        let is_bind = typ == "bind" || has("bind") || has("rbind");
        let kind_name = if is_bind { "bind" } else { typ };
        let refuse = |why: &str| {
            BundleError::Unsupported(format!(
                "mount {destination:?} (type {:?}): {why}",
                if typ.is_empty() { kind_name } else { typ }
            ))
        };
        if destination == "/" {
            return Err(refuse("a mount over the root is not supported"));
        }
        if GUEST_OWNED.contains(&(kind_name, destination.as_str())) {
            continue;
        }
        let dev = destination == "/dev" || destination.starts_with("/dev/");
        let shm = destination == SHM && (is_bind || typ == "tmpfs");
        if GUEST_TREES
            .iter()
            .any(|t| destination == *t || destination.starts_with(&format!("{t}/")))
            || (dev && !shm && !(is_bind && dev_bind_reachable(&destination)))
        {
            return Err(refuse(
                "the guest kernel provides /proc, /sys and /dev itself",
            ));
        }
        let kind = if is_bind {
            let source = bundle.join(m.source().clone().unwrap_or_default());
            std::fs::metadata(&source)
                .map_err(|e| BundleError::MountSource(destination.clone(), source.clone(), e))?;
            MountKind::Bind {
                source,
                recursive: has("rbind"),
            }
        } else if typ == "tmpfs" {
            MountKind::Tmpfs
        } else if GUEST_OWNED.iter().any(|(t, _)| *t == typ) {
            return Err(refuse("only supported at its usual place"));
        } else {
            return Err(refuse("this file system type"));
        };
        let data: Vec<&str> = options
            .iter()
            .map(String::as_str)
            .filter(|o| {
                o.starts_with("size=") || o.starts_with("mode=") || o.starts_with("nr_inodes=")
            })
            .collect();
        out.push(MountPlan {
            destination,
            kind,
            readonly: has("ro"),
            nosuid: has("nosuid"),
            nodev: has("nodev"),
            noexec: has("noexec"),
            data: data.join(","),
            propagation: options
                .iter()
                .rev()
                .find(|o| PROPAGATION.contains(&o.as_str()))
                .cloned(),
        });
    }
    Ok(out)
}

/// An absolute destination, lexically cleaned (`//`, `.`, `..` and a
/// trailing `/` gone, as runc's `filepath.Clean`).
fn clean(dest: &str) -> Result<String, BundleError> {
    if !dest.starts_with('/') {
        return Err(BundleError::Invalid(format!(
            "mount destination {dest:?} is not absolute"
        )));
    }
    if dest.contains('\0') {
        return Err(BundleError::Invalid(format!(
            "mount destination {dest:?} contains a NUL byte"
        )));
    }
    let mut parts: Vec<&str> = Vec::new();
    for c in Path::new(dest).components() {
        match c {
            Component::Normal(s) => parts.push(s.to_str().unwrap_or_default()),
            Component::ParentDir => {
                parts.pop();
            }
            _ => {}
        }
    }
    Ok(format!("/{}", parts.join("/")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec_with(mounts: serde_json::Value) -> Spec {
        let mut v = serde_json::to_value(Spec::default()).expect("spec JSON");
        v["mounts"] = mounts;
        serde_json::from_value(v).expect("a spec")
    }

    fn plan_of(mounts: serde_json::Value) -> Result<Vec<MountPlan>, BundleError> {
        plan(&spec_with(mounts), Path::new("/"))
    }

    #[test]
    fn the_default_mounts_are_the_guests() {
        let planned = plan(&Spec::default(), Path::new("/")).expect("default mounts");
        let dests: Vec<&str> = planned.iter().map(|m| m.destination.as_str()).collect();
        assert_eq!(dests, [SHM], "{planned:?}");
    }

    #[test]
    fn docker_style_mounts() {
        let planned = plan_of(serde_json::json!([
            {"destination": "/dev/shm", "type": "bind", "source": "/tmp", "options": ["rbind"]},
            {"destination": "/sys/fs/cgroup", "type": "cgroup2", "source": "cgroup"},
            {"destination": "/etc/hostname", "type": "bind", "source": "/etc/hostname",
             "options": ["rbind", "rprivate"]},
            {"destination": "/tmp/", "type": "tmpfs", "source": "tmpfs", "options": ["size=1m"]},
        ]))
        .expect("accepted");
        let dests: Vec<&str> = planned.iter().map(|m| m.destination.as_str()).collect();
        assert_eq!(dests, ["/dev/shm", "/etc/hostname", "/tmp"]);
    }

    #[test]
    fn kubernetes_termination_log_bind_is_made() {
        let planned = plan_of(serde_json::json!([
            {"destination": "/dev/termination-log", "type": "bind",
             "source": "/etc/hostname", "options": ["rbind", "rprivate", "rw"]},
        ]))
        .expect("accepted");
        assert_eq!(planned[0].destination, "/dev/termination-log");
    }

    #[test]
    fn unsupported_mounts_are_refused() {
        for (m, want) in [
            (
                serde_json::json!({"destination": "/data", "type": "nfs", "source": "srv:/x"}),
                "mount \"/data\" (type \"nfs\")",
            ),
            (
                serde_json::json!({"destination": "/mnt/proc", "type": "proc", "source": "proc"}),
                "only supported at its usual place",
            ),
            (
                serde_json::json!({"destination": "/dev/null", "type": "bind",
                                   "source": "/etc/hostname", "options": ["rbind"]}),
                "provides /proc, /sys and /dev itself",
            ),
            (
                serde_json::json!({"destination": "/dev/sub/x", "type": "bind",
                                   "source": "/etc/hostname", "options": ["rbind"]}),
                "provides /proc, /sys and /dev itself",
            ),
            (
                serde_json::json!({"destination": "/dev/x", "type": "tmpfs", "source": "tmpfs"}),
                "provides /proc, /sys and /dev itself",
            ),
            (
                serde_json::json!({"destination": "/x", "source": "y"}),
                "mount \"/x\"",
            ),
            (
                serde_json::json!({"destination": "/x/../proc/sys", "type": "tmpfs"}),
                "mount \"/proc/sys\"",
            ),
        ] {
            let e = plan_of(serde_json::json!([m])).expect_err("refused");
            assert!(e.to_string().contains(want), "{e}");
        }
    }

    #[test]
    fn destinations_are_cleaned() {
        assert_eq!(clean("//a/./b/../c/").ok().as_deref(), Some("/a/c"));
        assert_eq!(clean("/..").ok().as_deref(), Some("/"));
        assert!(clean("rel").is_err());
    }
}
