//! `linux.devices`: nodes the guest kernel serves under its own `/dev`
//! with the config's type, numbers, permissions and owner (runc makes
//! them with `mknod` in the container's /dev). No host device is behind
//! them: the sandbox reaches none, and opening one in the guest fails
//! with `ENXIO`.

use oci_spec::runtime::{LinuxDeviceType, Spec};

use super::BundleError;

/// Permission bits of a device the config gives none (runc's default).
const DEFAULT_MODE: u32 = 0o666;

/// The config's devices as `qlib::abi::BootInfo::devices` records
/// (`path type major minor mode uid gid`).
pub fn plan(spec: &Spec) -> Result<Vec<String>, BundleError> {
    let devices = spec
        .linux()
        .as_ref()
        .and_then(|l| l.devices().as_ref())
        .map_or(&[][..], |d| d.as_slice());
    let bad = |what: String| Err(BundleError::Invalid(what));
    let mut out = Vec::new();
    for d in devices {
        let path = d.path().to_string_lossy();
        let clean = path.starts_with("/dev/")
            && !path.ends_with('/')
            && path[1..]
                .split('/')
                .all(|c| !c.is_empty() && c != "." && c != "..")
            && !path.contains([' ', '\0', '\n']);
        if !clean {
            return Err(BundleError::Unsupported(format!(
                "linux.devices path {path:?} (the guest serves devices only at clean paths under /dev)"
            )));
        }
        let kind = match d.typ() {
            LinuxDeviceType::C | LinuxDeviceType::U => 'c',
            LinuxDeviceType::B => 'b',
            LinuxDeviceType::P => 'p',
            LinuxDeviceType::A => {
                return bad(format!("linux.devices {path}: type \"a\" is not a device"));
            }
        };
        let num = |n: i64| u32::try_from(n).ok().filter(|n| *n <= 0xfff_ffff);
        let (Some(major), Some(minor)) = (num(d.major()), num(d.minor())) else {
            return bad(format!("linux.devices {path}: bad major or minor number"));
        };
        let mode = d.file_mode().map_or(DEFAULT_MODE, |m| m & 0o7777);
        out.push(format!(
            "{path} {kind} {major} {minor} {mode:o} {} {}",
            d.uid().unwrap_or(0),
            d.gid().unwrap_or(0)
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(devices: &str) -> Spec {
        let text = format!(
            r#"{{"ociVersion":"1.0.2","root":{{"path":"rootfs"}},"linux":{{"devices":{devices}}}}}"#
        );
        serde_json::from_str(&text).expect("a valid spec")
    }

    #[test]
    fn records_carry_the_configs_attributes() {
        let s = spec(
            r#"[{"path":"/dev/test1","type":"c","major":10,"minor":666,"fileMode":432,"uid":0,"gid":0},
                {"path":"/dev/net/tun","type":"c","major":10,"minor":200},
                {"path":"/dev/test2","type":"b","major":8,"minor":666,"fileMode":8624,"uid":5,"gid":6},
                {"path":"/dev/test3","type":"p","major":0,"minor":0}]"#,
        );
        assert_eq!(
            plan(&s).expect("accepted"),
            [
                "/dev/test1 c 10 666 660 0 0",
                "/dev/net/tun c 10 200 666 0 0",
                "/dev/test2 b 8 666 660 5 6",
                "/dev/test3 p 0 0 666 0 0",
            ]
        );
    }

    #[test]
    fn paths_outside_dev_and_bad_numbers_are_refused() {
        for d in [
            r#"[{"path":"/etc/x","type":"c","major":1,"minor":1}]"#,
            r#"[{"path":"/dev/../etc/x","type":"c","major":1,"minor":1}]"#,
            r#"[{"path":"/dev/a b","type":"c","major":1,"minor":1}]"#,
            r#"[{"path":"/dev/x","type":"c","major":-1,"minor":1}]"#,
            r#"[{"path":"/dev/x","type":"a","major":1,"minor":1}]"#,
        ] {
            assert!(plan(&spec(d)).is_err(), "{d} was accepted");
        }
    }
}
