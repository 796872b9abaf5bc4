//! `linux.uidMappings` and `linux.gidMappings` of a user namespace the
//! config makes, checked as the kernel checks a `uid_map` (each range
//! within 32 bits, no two container ranges overlapping, at most 340
//! lines) and as runc does (mappings need a new user namespace, and a
//! new user namespace needs both).

use oci_spec::runtime::{LinuxIdMapping, Spec};

use super::BundleError;
use crate::plan::{Namespace, NsKind};

/// Most lines a `uid_map` takes.
const MAX_LINES: usize = 340;

/// (uid mappings, gid mappings) as (container id, host id, size).
pub type IdMaps = (Vec<[u32; 3]>, Vec<[u32; 3]>);

pub fn plan(spec: &Spec, namespaces: &[Namespace]) -> Result<IdMaps, BundleError> {
    let linux = spec.linux().as_ref();
    let get = |m: Option<&Vec<LinuxIdMapping>>| -> Vec<[u32; 3]> {
        m.map(|v| {
            v.iter()
                .map(|m| [m.container_id(), m.host_id(), m.size()])
                .collect()
        })
        .unwrap_or_default()
    };
    let uids = get(linux.and_then(|l| l.uid_mappings().as_ref()));
    let gids = get(linux.and_then(|l| l.gid_mappings().as_ref()));
    let user = namespaces.iter().find(|n| n.kind == NsKind::User);
    let bad = |m: &str| Err(BundleError::Invalid(m.into()));
    match user {
        None if !uids.is_empty() || !gids.is_empty() => {
            return bad("uid or gid mappings are given but the config makes no user namespace");
        }
        None => return Ok((uids, gids)),
        Some(ns) if ns.path.is_some() => {
            return Err(BundleError::Unsupported(
                "joining a user namespace by path".into(),
            ));
        }
        Some(_) if uids.is_empty() || gids.is_empty() => {
            return bad("a new user namespace needs both uid and gid mappings");
        }
        Some(_) => {}
    }
    for (what, maps) in [("uid", &uids), ("gid", &gids)] {
        if !valid(maps) {
            return Err(BundleError::Invalid(format!(
                "linux.{what}Mappings: empty, overflowing or overlapping ranges, or more than {MAX_LINES}"
            )));
        }
    }
    Ok((uids, gids))
}

/// Whether `maps` is a map the kernel takes.
fn valid(maps: &[[u32; 3]]) -> bool {
    let fits = |start: u32, size: u32| u64::from(start) + u64::from(size) <= 1 << 32;
    let ok = maps
        .iter()
        .all(|&[c, h, s]| s > 0 && fits(c, s) && fits(h, s));
    let disjoint = maps.iter().enumerate().all(|(i, a)| {
        maps[i + 1..].iter().all(|b| {
            u64::from(a[0]) + u64::from(a[2]) <= u64::from(b[0])
                || u64::from(b[0]) + u64::from(b[2]) <= u64::from(a[0])
        })
    });
    ok && disjoint && maps.len() <= MAX_LINES
}

/// The host id container id `id` maps to in `maps` (`None` when unmapped).
pub fn host_id(maps: &[[u32; 3]], id: u32) -> Option<u32> {
    maps.iter()
        .find(|m| id >= m[0] && u64::from(id) < u64::from(m[0]) + u64::from(m[2]))
        .map(|m| m[1] + (id - m[0]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(linux: &str) -> Spec {
        let text =
            format!(r#"{{"ociVersion":"1.0.2","root":{{"path":"rootfs"}},"linux":{linux}}}"#);
        serde_json::from_str(&text).expect("a valid spec")
    }

    fn user() -> Vec<Namespace> {
        vec![Namespace {
            kind: NsKind::User,
            path: None,
        }]
    }

    #[test]
    fn mappings_of_a_new_user_namespace() {
        let s = spec(
            r#"{"uidMappings":[{"containerID":0,"hostID":1000,"size":2000}],
                "gidMappings":[{"containerID":0,"hostID":1000,"size":3000}]}"#,
        );
        let (u, g) = plan(&s, &user()).expect("accepted");
        assert_eq!(u, [[0, 1000, 2000]]);
        assert_eq!(g, [[0, 1000, 3000]]);
        assert_eq!(host_id(&u, 0), Some(1000));
        assert_eq!(host_id(&u, 1999), Some(2999));
        assert_eq!(host_id(&u, 2000), None);
    }

    #[test]
    fn bad_mappings_are_refused() {
        let both = |u: &str, g: &str| spec(&format!(r#"{{"uidMappings":{u},"gidMappings":{g}}}"#));
        let one = r#"[{"containerID":0,"hostID":1000,"size":10}]"#;
        for (s, ns) in [
            // Mappings without a user namespace, and the reverse.
            (both(one, one), Vec::new()),
            (spec(r#"{"uidMappings":[]}"#), user()),
            (both(one, "[]"), user()),
            // Empty, overflowing, overlapping ranges.
            (
                both(r#"[{"containerID":0,"hostID":1,"size":0}]"#, one),
                user(),
            ),
            (
                both(r#"[{"containerID":4294967295,"hostID":1,"size":2}]"#, one),
                user(),
            ),
            (
                both(
                    r#"[{"containerID":0,"hostID":1000,"size":10},{"containerID":5,"hostID":5000,"size":10}]"#,
                    one,
                ),
                user(),
            ),
        ] {
            assert!(plan(&s, &ns).is_err(), "{s:?} was accepted");
        }
        let joined = vec![Namespace {
            kind: NsKind::User,
            path: Some("/proc/1/ns/user".into()),
        }];
        assert!(plan(&both(one, one), &joined).is_err());
    }
}
