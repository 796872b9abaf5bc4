//! Dynamically linked programs: a glibc PIE test program and Debian's own
//! binaries run natively and in a `qrun do` sandbox (rootfs = the host's
//! `/`, so the same `ld-linux-x86-64.so.2` and `libc.so.6` load on both
//! sides); stdout, stderr and status must match byte for byte. Then bad
//! interpreters, which must give a clear one-line refusal.
//!
//! Every test needs /dev/kvm: without it a test says SKIPPED loudly, and
//! fails under `CI=true`.

#![forbid(unsafe_code)]

mod common;

use common::tmp::TempDir;
use common::{compare_programs, require_kvm, run_qrun, stderr, stdout};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// The interpreter Debian's glibc programs name.
const GLIBC_LD: &str = "/lib64/ld-linux-x86-64.so.2";

#[test]
fn dyn_hello() {
    if !require_kvm() {
        return;
    }
    let prog = test_apps::path("dyn_hello");
    let out = compare_programs(&prog, &["one", "two words"], &[("QTEST", "dynamic")]);
    assert_eq!(out.status, 0, "{out:?}");
    let text = stdout(&out);
    assert!(!text.contains("FAIL"), "{out:?}");
    assert!(
        text.contains("argv[2]=two words\nQTEST=dynamic\n"),
        "{out:?}"
    );
    assert!(text.contains("AT_BASE set\n"), "{out:?}");
    let out = compare_programs(&prog, &["exit3"], &[]);
    assert_eq!(out.status, 3, "{out:?}");
}

#[test]
fn dyn_hello_musl() {
    if !require_kvm() {
        return;
    }
    let prog = test_apps::path("dyn_hello_musl");
    let out = compare_programs(&prog, &["musl"], &[("QTEST", "loader")]);
    assert_eq!(out.status, 0, "{out:?}");
    assert!(!stdout(&out).contains("FAIL"), "{out:?}");
    assert!(stdout(&out).contains("AT_BASE set\n"), "{out:?}");
}

/// The loader run as the program (`ld.so PROG ARGS`), which maps `PROG`
/// itself with `mmap`.
#[test]
fn glibc_loader_as_the_program() {
    if !require_kvm() {
        return;
    }
    let out = compare_programs(Path::new(GLIBC_LD), &["/bin/echo", "via", "ld.so"], &[]);
    assert_eq!(stdout(&out), "via ld.so\n");
}

#[test]
fn host_echo() {
    if !require_kvm() {
        return;
    }
    let out = compare_programs(Path::new("/bin/echo"), &["hello", "world"], &[]);
    assert_eq!(stdout(&out), "hello world\n");
}

#[test]
fn host_env_prints_exactly_its_environment() {
    if !require_kvm() {
        return;
    }
    let out = compare_programs(Path::new("/usr/bin/env"), &[], &[("QTEST", "only me")]);
    assert_eq!(stdout(&out), "QTEST=only me\n");
}

#[test]
fn host_true_and_false() {
    if !require_kvm() {
        return;
    }
    assert_eq!(compare_programs(Path::new("/bin/true"), &[], &[]).status, 0);
    assert_eq!(
        compare_programs(Path::new("/bin/false"), &[], &[]).status,
        1
    );
}

#[test]
fn host_cat() {
    if !require_kvm() {
        return;
    }
    let dir = TempDir::new("dyn-cat");
    let file = dir.join("poem.txt");
    let text = "line one\nline two\n".repeat(500);
    std::fs::write(&file, &text).expect("writing the test file");
    let path = file.to_str().expect("UTF-8 temp path");
    let out = compare_programs(Path::new("/bin/cat"), &[path, path], &[]);
    assert_eq!(stdout(&out), text.repeat(2));
}

#[test]
fn host_ls_long_listing() {
    if !require_kvm() {
        return;
    }
    // A directory of our own inside another, so `.` and `..` do not change
    // while the two runs happen.
    let dir = TempDir::new("dyn-ls");
    let listed = dir.join("listed");
    std::fs::create_dir(&listed).expect("mkdir");
    std::fs::create_dir(listed.join("subdir")).expect("mkdir");
    std::fs::write(listed.join("file.txt"), "some bytes\n").expect("write");
    let exe = listed.join("script.sh");
    std::fs::write(&exe, "#!/bin/sh\n").expect("write");
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o750)).expect("chmod");
    std::os::unix::fs::symlink("file.txt", listed.join("link")).expect("symlink");
    let path = listed.to_str().expect("UTF-8 temp path");
    let out = compare_programs(Path::new("/bin/ls"), &["-la", path], &[]);
    assert_eq!(out.status, 0, "{out:?}");
    assert!(stdout(&out).contains("link -> file.txt\n"), "{out:?}");
}

// ---- bad interpreters ----

/// A rootfs holding a copy of the host's dynamic `/bin/true` as `/true`
/// and, when `interp` is given, those bytes as its interpreter.
fn rootfs_with(tag: &str, interp: Option<&[u8]>) -> TempDir {
    let root = TempDir::new(tag);
    std::fs::copy("/bin/true", root.join("true")).expect("copying /bin/true");
    if let Some(bytes) = interp {
        let path = root.join(GLIBC_LD.trim_start_matches('/'));
        std::fs::create_dir_all(path.parent().expect("has a parent")).expect("mkdir");
        std::fs::write(&path, bytes).expect("writing the interpreter");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    root
}

/// `qrun do --rootfs ROOT -- /true`, which must be refused with `status`
/// and one line naming the program, the interpreter and `reason`.
#[track_caller]
fn assert_interp_refused(root: &TempDir, status: i32, reason: &str) {
    let out = run_qrun(&["do", "--rootfs", root.str(), "--", "/true"]);
    assert_eq!(out.status, status, "{out:?}");
    let msg = stderr(&out);
    assert_eq!(msg.trim_end().lines().count(), 1, "one line: {out:?}");
    for want in ["/true", "interpreter", GLIBC_LD, reason] {
        assert!(msg.contains(want), "message lacks {want:?}: {out:?}");
    }
    assert!(out.stdout.is_empty(), "{out:?}");
}

#[test]
fn missing_interpreter_is_127() {
    if !require_kvm() {
        return;
    }
    assert_interp_refused(&rootfs_with("dyn-noint", None), 127, "not found");
}

#[test]
fn text_interpreter_is_126() {
    if !require_kvm() {
        return;
    }
    let root = rootfs_with("dyn-textint", Some(b"#!/bin/sh\necho not a loader\n"));
    assert_interp_refused(&root, 126, "not an ELF");
}

#[test]
fn elf32_interpreter_is_126() {
    if !require_kvm() {
        return;
    }
    let mut elf32 = vec![0u8; 64];
    elf32[..7].copy_from_slice(b"\x7fELF\x01\x01\x01");
    let root = rootfs_with("dyn-int32", Some(&elf32));
    assert_interp_refused(&root, 126, "32-bit");
}

#[test]
fn truncated_interpreter_is_126() {
    if !require_kvm() {
        return;
    }
    let real = std::fs::read(GLIBC_LD).expect("reading the host's glibc loader");
    let root = rootfs_with("dyn-intcut", Some(&real[..200]));
    assert_interp_refused(&root, 126, "truncated");
}
