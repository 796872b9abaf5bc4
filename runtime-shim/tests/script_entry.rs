//! `#!` scripts as the *first* program: `qrun do -- SCRIPT ARGS` and an
//! OCI `process.args[0]` that is a script run its interpreter as Linux's
//! `execve` does (argv `[interp, optional arg, script, args...]`), with the
//! same output and status as natively; a missing interpreter is 127, a
//! file that is neither an ELF nor a valid `#!` script 126.
//!
//! Every test needs /dev/kvm: without it a test says SKIPPED loudly, and
//! fails under `CI=true`.

#![forbid(unsafe_code)]

mod common;

use common::tmp::TempDir;
use common::{
    Outcome, assert_same, compare_programs, require_kvm, run_native_in, run_sandboxed,
    run_sandboxed_in, stderr, stdout,
};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

fn script(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().expect("has a parent")).expect("mkdir");
    std::fs::write(&path, text).expect("writing a script");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path.to_str().expect("UTF-8 path").to_owned()
}

/// Runs the script `prog args` natively and sandboxed, asserts they agree.
fn compare(prog: &str, args: &[&str]) -> Outcome {
    compare_programs(Path::new(prog), args, &[])
}

#[test]
fn scripts_run_directly() {
    if !require_kvm() {
        return;
    }
    let dir = TempDir::new("script-entry");
    let sh = script(
        dir.path(),
        "sh.sh",
        "#!/bin/sh\necho \"$0\" \"$@\"\nexit 3\n",
    );
    let out = compare(&sh, &["a", "b c"]);
    assert_eq!((stdout(&out), out.status), (format!("{sh} a b c\n"), 3));

    let env = script(
        dir.path(),
        "env.sh",
        "#!/usr/bin/env sh\necho env \"$0\" $#\n",
    );
    let out = compare(&env, &["x"]);
    assert_eq!(stdout(&out), format!("env {env} 1\n"));

    let arg = script(
        dir.path(),
        "arg.sh",
        "#! /bin/sh -eu \necho \"$0 $*\"\necho \"$UNSET\"\n",
    );
    let out = compare(&arg, &["1", "2"]);
    assert_ne!(out.status, 0, "-u is in force: {out:?}");
    assert!(stdout(&out).starts_with(&format!("{arg} 1 2\n")), "{out:?}");

    // A script whose interpreter is a script, with the outer one's argument.
    let outer = script(dir.path(), "outer", &format!("#!{sh} inner-arg\n"));
    let out = compare(&outer, &["z"]);
    assert_eq!(stdout(&out), format!("{sh} inner-arg {outer} z\n"));
}

#[test]
fn relative_script_with_cwd() {
    if !require_kvm() {
        return;
    }
    let dir = TempDir::new("script-rel");
    script(dir.path(), "run.sh", "#!/bin/sh\necho \"$0\" \"$@\"; pwd\n");
    let native = run_native_in(dir.path(), None, Path::new("./run.sh"), &["q"], &[]);
    let sandboxed = run_sandboxed_in(Path::new("/"), dir.str(), None, "./run.sh", &["q"], &[]);
    assert_same("./run.sh q", &native, &sandboxed);
    assert_eq!(stdout(&native), format!("./run.sh q\n{}\n", dir.str()));
}

#[test]
fn script_in_a_rootfs_uses_its_interpreter() {
    if !require_kvm() {
        return;
    }
    let root = TempDir::new("script-rootfs");
    std::fs::create_dir_all(root.join("bin")).expect("mkdir");
    std::fs::copy("/bin/busybox", root.join("bin/sh"))
        .expect("/bin/busybox (scripts/deps.sh installs busybox-static)");
    script(
        root.path(),
        "app/run.sh",
        "#!/bin/sh\necho \"$0\" \"$@\" in-root\n",
    );
    let out = run_sandboxed_in(root.path(), "/app", None, "/app/run.sh", &["a", "b"], &[]);
    assert_eq!(out.status, 0, "{out:?}");
    assert_eq!(stdout(&out), "/app/run.sh a b in-root\n");
    let out = run_sandboxed_in(root.path(), "/app", None, "run.sh", &["r"], &[]);
    assert_eq!((out.status, stdout(&out)), (0, "run.sh r in-root\n".into()));
}

#[test]
fn bad_scripts_are_refused() {
    if !require_kvm() {
        return;
    }
    let dir = TempDir::new("script-bad");
    let gone = script(dir.path(), "gone.sh", "#!/nonexistent/sh\necho no\n");
    let out = run_sandboxed(Path::new(&gone), &[], &[]);
    assert_eq!(out.status, 127, "{out:?}");
    let want = format!("{gone}: interpreter /nonexistent/sh: not found");
    assert!(stderr(&out).contains(&want), "{out:?}");

    let plain = script(dir.path(), "plain.sh", "echo no shebang\n");
    let out = run_sandboxed(Path::new(&plain), &[], &[]);
    assert_eq!((out.status, stdout(&out)), (126, String::new()), "{out:?}");

    let mut long = String::from("#!/");
    long.push_str(&"a".repeat(300));
    let long = script(dir.path(), "long.sh", &long);
    let out = run_sandboxed(Path::new(&long), &[], &[]);
    assert_eq!(out.status, 126, "{out:?}");
    assert!(stderr(&out).contains("too long"), "{out:?}");

    let looping = dir.join("loop.sh");
    let looping = looping.to_str().expect("UTF-8");
    script(dir.path(), "loop.sh", &format!("#!{looping}\n"));
    let out = run_sandboxed(Path::new(looping), &[], &[]);
    assert_eq!(out.status, 126, "{out:?}");
    assert!(stderr(&out).contains("ELOOP"), "{out:?}");
}

#[test]
fn oci_entrypoint_script() {
    use common::bundle::{bundle, qrun_at};
    if !require_kvm() {
        return;
    }
    let (b, root, src) = (TempDir::new("b"), TempDir::new("root"), TempDir::new("src"));
    let entry = script(
        &src.0,
        "entry.sh",
        "#!/bin/busybox sh\necho \"entry $0 $*\"\n",
    );
    bundle(
        &b.0,
        &[
            ("/bin/busybox", Path::new("/bin/busybox")),
            ("/entry.sh", Path::new(&entry)),
        ],
        &["/entry.sh", "go"],
        |_| {},
    );
    let out = qrun_at(&root.0, &["run", "--bundle", &b.0.to_string_lossy(), "s1"]);
    assert_eq!(out.status, 0, "{out:?}");
    assert_eq!(stdout(&out), "entry /entry.sh go\n");
}
