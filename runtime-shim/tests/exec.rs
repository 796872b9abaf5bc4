//! `execve`: programs that replace themselves run natively and in a
//! `qrun do` sandbox (rootfs = the host's `/`), with the same stdout,
//! stderr and exit status: the `exec_chain` test program (errors with the
//! old program still running, what survives an exec, a `#!` script, a
//! dynamic Debian program at the end), Debian's `env` and `dash`, and
//! `#!` scripts such as container entrypoints.
//!
//! Every test needs /dev/kvm: without it a test says SKIPPED loudly, and
//! fails under `CI=true`.

#![forbid(unsafe_code)]

mod common;

use common::tmp::TempDir;
use common::{compare_programs, require_kvm, stdout};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

fn script(dir: &TempDir, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("writing a script");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path.to_str().expect("UTF-8 path").to_owned()
}

#[test]
fn exec_chain() {
    if !require_kvm() {
        return;
    }
    let out = compare_programs(&test_apps::path("exec_chain"), &["start"], &[("A", "1")]);
    let text = stdout(&out);
    assert!(!text.contains("FAIL"), "{out:?}");
    assert_eq!(out.status, 0, "{out:?}");
    assert!(text.contains("still running after the errors\n"), "{out:?}");
    assert!(text.ends_with("chain done\n"), "{out:?}");
}

/// Debian's `env` (glibc, dynamic) execs its argument.
#[test]
fn env_execs_programs() {
    if !require_kvm() {
        return;
    }
    let env = Path::new("/usr/bin/env");
    let out = compare_programs(env, &["-i", "A=1", "/bin/echo", "hi"], &[]);
    assert_eq!(stdout(&out), "hi\n");
    let out = compare_programs(env, &["-i", "A=1", "B=two words", "/usr/bin/env"], &[]);
    assert_eq!(stdout(&out), "A=1\nB=two words\n");
    // A static program from a dynamic one, and a PATH search (execvp
    // tries each directory: ENOENT, then the one that has it).
    let hello = test_apps::path("hello");
    let out = compare_programs(env, &[hello.to_str().expect("UTF-8")], &[]);
    assert_eq!(out.status, 0, "{out:?}");
    let out = compare_programs(
        env,
        &["echo", "via", "PATH"],
        &[("PATH", "/nonexistent:/bin")],
    );
    assert_eq!(stdout(&out), "via PATH\n");
    // Errors come back to env, which reports them as usual.
    let out = compare_programs(env, &["/nonexistent/prog"], &[]);
    assert_eq!(out.status, 127, "{out:?}");
    let out = compare_programs(env, &["/etc/passwd"], &[]);
    assert_eq!(out.status, 126, "{out:?}");
}

/// dash's `exec` builtin, nested.
#[test]
fn shell_exec_builtin() {
    if !require_kvm() {
        return;
    }
    let sh = Path::new("/bin/sh");
    let out = compare_programs(sh, &["-c", "exec /bin/echo from-exec"], &[]);
    assert_eq!(stdout(&out), "from-exec\n");
    let out = compare_programs(
        sh,
        &["-c", "exec /bin/sh -c 'exec /bin/echo nested \"$0\"' zero"],
        &[],
    );
    assert_eq!(stdout(&out), "nested zero\n");
    let out = compare_programs(sh, &["-c", "exec /nonexistent"], &[]);
    assert_eq!(out.status, 127, "{out:?}");
    let out = compare_programs(
        sh,
        &[
            "-c",
            "exec 3</etc/hostname; exec /bin/cat /proc/self/cmdline",
        ],
        &[],
    );
    assert_eq!(stdout(&out), "/bin/cat\0/proc/self/cmdline\0");
}

/// `#!` scripts exec'd by a program: an entrypoint ending in `exec "$@"`,
/// an interpreter argument, a relative interpreter-less script run from
/// the shell.
#[test]
fn scripts() {
    if !require_kvm() {
        return;
    }
    let dir = TempDir::new("exec-scripts");
    let echo = script(&dir, "echo.sh", "#!/bin/sh\nexec /bin/echo \"$@\"\n");
    let entry = script(
        &dir,
        "entrypoint.sh",
        "#!/bin/sh\nset -e\necho \"entrypoint: $#\"\nexec \"$@\"\n",
    );
    let with_arg = script(&dir, "arg.sh", "#! /bin/sh -eu \necho \"arg: $0 $*\"\n");
    let env = Path::new("/usr/bin/env");
    let out = compare_programs(env, &[&echo, "a", "b c"], &[]);
    assert_eq!(stdout(&out), "a b c\n");
    let out = compare_programs(env, &[&entry, &echo, "from", "entrypoint"], &[]);
    assert_eq!(stdout(&out), "entrypoint: 3\nfrom entrypoint\n");
    let out = compare_programs(env, &[&with_arg, "x"], &[]);
    assert_eq!(stdout(&out), format!("arg: {with_arg} x\n"));
    let sh = Path::new("/bin/sh");
    let cmd = format!("cd {} && exec ./echo.sh relative", dir.str());
    let out = compare_programs(sh, &["-c", &cmd], &[]);
    assert_eq!(stdout(&out), "relative\n");
}
