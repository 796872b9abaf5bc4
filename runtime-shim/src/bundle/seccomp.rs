//! `linux.seccomp` of config.json compiled for the guest kernel, which
//! applies it to the program's system calls (`qlib::seccomp`): the
//! program's syscalls are served by the guest kernel, not the host's, so
//! that is where the filter belongs. (The sandbox process itself runs under
//! qrun's own, stricter host filter, `isolation::seccomp`.)
//!
//! As runc with libseccomp: syscall names that x86-64 does not have are
//! skipped, `errnoRet` defaults to EPERM, `SCMP_ACT_KILL` kills the thread
//! (here: the program). What cannot be honoured is refused with one line:
//! a seccomp agent (`listenerPath`, `SCMP_ACT_NOTIFY`) and filters for
//! architectures without x86-64.

use oci_spec::runtime::{Arch, LinuxSeccomp, LinuxSeccompAction, LinuxSeccompOperator};
use qlib::seccomp::{self, ArgCmp, Op, Rule};

use super::BundleError;

const EPERM: u32 = 1;

fn unsupported(what: &str) -> BundleError {
    BundleError::Unsupported(format!("linux.seccomp: {what}"))
}

fn action(a: LinuxSeccompAction, errno: Option<u32>) -> Result<u32, BundleError> {
    Ok(match a {
        LinuxSeccompAction::ScmpActKill | LinuxSeccompAction::ScmpActKillThread => {
            seccomp::KILL_THREAD
        }
        LinuxSeccompAction::ScmpActKillProcess => seccomp::KILL_PROCESS,
        LinuxSeccompAction::ScmpActTrap => seccomp::TRAP,
        LinuxSeccompAction::ScmpActErrno => {
            let e = errno.unwrap_or(EPERM);
            if e > 0xffff {
                return Err(BundleError::Invalid(format!(
                    "linux.seccomp: errnoRet {e} is out of range"
                )));
            }
            seccomp::ERRNO | e
        }
        LinuxSeccompAction::ScmpActTrace => seccomp::TRACE | (errno.unwrap_or(0) & 0xffff),
        LinuxSeccompAction::ScmpActLog => seccomp::LOG,
        LinuxSeccompAction::ScmpActAllow => seccomp::ALLOW,
        LinuxSeccompAction::ScmpActNotify => {
            return Err(unsupported("SCMP_ACT_NOTIFY (a seccomp agent)"));
        }
    })
}

fn op(o: LinuxSeccompOperator) -> Op {
    match o {
        LinuxSeccompOperator::ScmpCmpNe => Op::Ne,
        LinuxSeccompOperator::ScmpCmpLt => Op::Lt,
        LinuxSeccompOperator::ScmpCmpLe => Op::Le,
        LinuxSeccompOperator::ScmpCmpEq => Op::Eq,
        LinuxSeccompOperator::ScmpCmpGe => Op::Ge,
        LinuxSeccompOperator::ScmpCmpGt => Op::Gt,
        LinuxSeccompOperator::ScmpCmpMaskedEq => Op::MaskedEq,
    }
}

/// The filter for the guest, in `qlib::seccomp`'s format.
pub fn compile(s: &LinuxSeccomp) -> Result<Vec<u8>, BundleError> {
    if s.listener_path().is_some() {
        return Err(unsupported("listenerPath (a seccomp agent)"));
    }
    if let Some(arches) = s.architectures()
        && !arches.is_empty()
        && !arches
            .iter()
            .any(|a| matches!(a, Arch::ScmpArchX86_64 | Arch::ScmpArchNative))
    {
        return Err(unsupported("architectures without SCMP_ARCH_X86_64"));
    }
    let default = action(s.default_action(), s.default_errno_ret())?;
    let mut rules = Vec::new();
    for sc in s.syscalls().iter().flatten() {
        let act = action(sc.action(), sc.errno_ret())?;
        let mut args = Vec::new();
        for a in sc.args().iter().flatten() {
            if a.index() >= 6 {
                return Err(BundleError::Invalid(format!(
                    "linux.seccomp: argument index {} (0..5)",
                    a.index()
                )));
            }
            args.push(ArgCmp {
                index: a.index() as u32,
                op: op(a.op()),
                value: a.value(),
                value_two: a.value_two().unwrap_or(0),
            });
        }
        if args.len() > 6 {
            return Err(BundleError::Invalid(
                "linux.seccomp: more than 6 argument comparisons in one rule".into(),
            ));
        }
        for name in sc.names() {
            // Names x86-64 does not have are skipped, as runc does.
            if let Some(nr) = qlib::syscall_names::number(name) {
                rules.push(Rule {
                    nr: nr as u32,
                    action: act,
                    args: args.clone(),
                });
            }
        }
    }
    seccomp::encode(default, &rules).map_err(|e| BundleError::Invalid(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use qlib::seccomp::Filter;

    fn parse(json: &str) -> Result<Vec<u8>, BundleError> {
        compile(&serde_json::from_str::<LinuxSeccomp>(json).expect("valid JSON"))
    }

    #[test]
    fn docker_like_profile_compiles() {
        let bytes = parse(
            r#"{"defaultAction":"SCMP_ACT_ERRNO","defaultErrnoRet":1,
               "architectures":["SCMP_ARCH_X86_64","SCMP_ARCH_X86","SCMP_ARCH_X32"],
               "syscalls":[
                 {"names":["getpid","socket","no_such_call"],"action":"SCMP_ACT_ALLOW"},
                 {"names":["socket"],"action":"SCMP_ACT_ERRNO","errnoRet":97,
                  "args":[{"index":0,"value":40,"op":"SCMP_CMP_EQ"}]},
                 {"names":["personality"],"action":"SCMP_ACT_ALLOW",
                  "args":[{"index":0,"value":8,"op":"SCMP_CMP_EQ"}]}]}"#,
        )
        .expect("compiles");
        let f = Filter::parse(&bytes).expect("valid");
        assert_eq!(f.evaluate(39, &[0; 6]), seccomp::ALLOW);
        assert_eq!(f.evaluate(41, &[2, 0, 0, 0, 0, 0]), seccomp::ALLOW);
        assert_eq!(f.evaluate(41, &[40, 0, 0, 0, 0, 0]), seccomp::ERRNO | 97);
        assert_eq!(f.evaluate(135, &[8, 0, 0, 0, 0, 0]), seccomp::ALLOW);
        assert_eq!(f.evaluate(135, &[9, 0, 0, 0, 0, 0]), seccomp::ERRNO | 1);
        assert_eq!(f.evaluate(0, &[0; 6]), seccomp::ERRNO | 1);
    }

    #[test]
    fn what_cannot_be_honoured_is_refused() {
        let notify = parse(r#"{"defaultAction":"SCMP_ACT_NOTIFY"}"#).unwrap_err();
        assert!(notify.to_string().contains("SCMP_ACT_NOTIFY"), "{notify}");
        let agent = parse(r#"{"defaultAction":"SCMP_ACT_ALLOW","listenerPath":"/run/agent.sock"}"#)
            .unwrap_err();
        assert!(agent.to_string().contains("listenerPath"), "{agent}");
        let arm = parse(r#"{"defaultAction":"SCMP_ACT_ALLOW","architectures":["SCMP_ARCH_ARM"]}"#)
            .unwrap_err();
        assert!(arm.to_string().contains("X86_64"), "{arm}");
        let index = parse(
            r#"{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["read"],
               "action":"SCMP_ACT_ERRNO","args":[{"index":6,"value":0,"op":"SCMP_CMP_EQ"}]}]}"#,
        )
        .unwrap_err();
        assert!(index.to_string().contains("index 6"), "{index}");
    }
}
