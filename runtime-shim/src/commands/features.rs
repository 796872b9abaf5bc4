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
        // startContainer is refused (it would run the image's code on
        // the host kernel): see `crate::hooks`.
        "hooks": ["prestart", "createRuntime", "createContainer", "poststart", "poststop"],
        "mountOptions": ["bind", "rbind", "ro", "rw", "nosuid", "suid", "nodev", "dev",
                          "noexec", "exec", "size", "mode"],
        "linux": {
            "namespaces": ["mount", "pid", "network", "ipc", "uts", "cgroup"],
            "capabilities": [],
            "cgroup": {"v1": true, "v2": true, "systemd": false, "systemdUser": false},
            // Applied by the guest kernel to the program's syscalls.
            "seccomp": {
                "enabled": true,
                "actions": ["SCMP_ACT_ALLOW", "SCMP_ACT_ERRNO", "SCMP_ACT_KILL",
                            "SCMP_ACT_KILL_PROCESS", "SCMP_ACT_KILL_THREAD", "SCMP_ACT_LOG",
                            "SCMP_ACT_TRACE", "SCMP_ACT_TRAP"],
                "operators": ["SCMP_CMP_EQ", "SCMP_CMP_GE", "SCMP_CMP_GT", "SCMP_CMP_LE",
                              "SCMP_CMP_LT", "SCMP_CMP_MASKED_EQ", "SCMP_CMP_NE"],
                "archs": ["SCMP_ARCH_X86_64"],
            },
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
