//! `qrun features`: what this runtime implements, as the OCI features
//! JSON (runtime-spec `features.md`).

use serde_json::json;

use super::CliError;

pub fn run(args: &[String]) -> Result<i32, CliError> {
    if !args.is_empty() {
        return Err(CliError::Usage("features takes no arguments".into()));
    }
    let features = json!({
        "ociVersionMin": "1.0.0",
        "ociVersionMax": crate::container::OCI_VERSION,
        "hooks": [],
        "mountOptions": ["bind", "rbind", "ro", "rw", "nosuid", "suid", "nodev", "dev",
                          "noexec", "exec", "size", "mode"],
        "linux": {
            "namespaces": ["mount", "pid", "network", "ipc", "uts", "cgroup"],
            "capabilities": [],
            "cgroup": {"v1": true, "v2": true, "systemd": false, "systemdUser": false},
            "seccomp": {"enabled": false},
            "apparmor": {"enabled": false},
            "selinux": {"enabled": false},
        },
        "annotations": {
            "io.github.qrun.sandbox": "qvisor (KVM virtual machine per container)",
            "io.github.qrun.hibernation": "kill SIGSTOP hibernates, SIGCONT wakes",
            "io.github.qrun.version": env!("CARGO_PKG_VERSION"),
        },
    });
    println!("{features:#}");
    Ok(0)
}
