//! Differential compatibility tests: each static test program runs natively
//! and in a `qrun do` sandbox with the same arguments and environment; their
//! stdout, stderr and exit status must match byte for byte. Then a few bad
//! inputs to `qrun do` itself.
//!
//! Every test needs /dev/kvm: without it a test says SKIPPED loudly, and
//! fails under `CI=true`.

#![forbid(unsafe_code)]

mod common;

use common::{
    Outcome, assert_same, require_kvm, run_native, run_qrun, run_sandboxed, stderr, stdout,
};
use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Runs test program `name` natively and sandboxed and asserts they agree.
/// The native run must itself be sane (no "FAIL" line), so a broken test
/// program is reported as such rather than as a sandbox difference.
fn compare(name: &str, args: &[&str], env: &[(&str, &str)]) -> Outcome {
    let prog = test_apps::path(name);
    let what = format!("{name} {args:?} env {env:?}");
    let native = run_native(&prog, args, env);
    assert!(
        !String::from_utf8_lossy(&native.stdout).contains("FAIL"),
        "{what}: the native run already fails, fix the test program: {native:?}"
    );
    let sandboxed = run_sandboxed(&prog, args, env);
    assert_same(&what, &native, &sandboxed);
    native
}

#[test]
fn hello() {
    if !require_kvm() {
        return;
    }
    let native = compare("hello", &[], &[]);
    assert_eq!(stdout(&native), "hello from a static binary\n");
    assert_eq!(native.status, 0);
}

/// Registers and flags survive a page fault (the kernel returns from
/// exceptions with `sysretq` through a stub that restores RCX and R11).
#[test]
fn fault_regs() {
    if !require_kvm() {
        return;
    }
    let native = compare("fault_regs", &[], &[]);
    assert_eq!(native.status, 0, "{native:?}");
    assert!(stdout(&native).ends_with("ok\n"), "{native:?}");
}

/// A syscall made with NT or TF set in RFLAGS (which the hypervisor does
/// not mask on entry) neither crashes the guest kernel nor differs from
/// Linux: NT is harmless, TF ends in SIGTRAP after the call.
#[test]
fn flags_syscall() {
    if !require_kvm() {
        return;
    }
    let native = compare("flags_syscall", &[], &[]);
    assert_eq!(native.status, 0, "{native:?}");
    let native = compare("flags_syscall", &["tf"], &[]);
    assert_eq!(native.status, 128 + 5, "{native:?}");
}

#[test]
fn args_env() {
    if !require_kvm() {
        return;
    }
    let args = ["one", "two words", "", "--flag=x"];
    let env = [("QTEST", "1"), ("SECOND_VAR", "a=b c")];
    let native = compare("args_env", &args, &env);
    assert_eq!(native.status, 0, "{native:?}");
    let out = stdout(&native);
    assert!(
        out.contains("argc 5\n") && out.contains("argv[2] two words\n"),
        "{out}"
    );
    assert!(out.contains("env QTEST=1\nenv SECOND_VAR=a=b c\n"), "{out}");
}

#[test]
fn exit_code() {
    if !require_kvm() {
        return;
    }
    for status in ["0", "1", "42", "255"] {
        for how in ["exit", "_exit", "return"] {
            let native = compare("exit_code", &[status, how], &[]);
            assert_eq!(
                native.status.to_string(),
                status,
                "exit_code {status} {how}: {native:?}"
            );
        }
    }
}

#[test]
fn malloc_stress() {
    if !require_kvm() {
        return;
    }
    let native = compare("malloc_stress", &[], &[]);
    assert_eq!(native.status, 0, "{native:?}");
    assert!(stdout(&native).ends_with("ok\n"));
}

#[test]
fn touch_mem() {
    if !require_kvm() {
        return;
    }
    // 64 MiB: the default size; the sandbox's default memory must fit it.
    let native = compare("touch_mem", &[], &[]);
    assert_eq!(native.status, 0, "{native:?}");
    assert!(stdout(&native).contains("mremap ok\n"));
}

#[test]
fn clocks() {
    if !require_kvm() {
        return;
    }
    let native = compare("clocks", &[], &[]);
    assert_eq!(native.status, 0, "{native:?}");
}

#[test]
fn sysinfo() {
    if !require_kvm() {
        return;
    }
    let native = compare("sysinfo", &[], &[]);
    assert_eq!(native.status, 0, "{native:?}");
    assert!(stdout(&native).starts_with("sysname Linux\nmachine x86_64\n"));
}

#[test]
fn segfault() {
    if !require_kvm() {
        return;
    }
    let native = compare("segfault", &[], &[]);
    assert_eq!(
        native.status, 139,
        "native run was not killed by SIGSEGV: {native:?}"
    );
    assert_eq!(stdout(&native), "about to fault\n");
}

#[test]
fn reclaim_probe_at_eof() {
    if !require_kvm() {
        return;
    }
    // stdin is /dev/null: the probe does not wait, it remaps at once.
    let native = compare("reclaim_probe", &["32"], &[]);
    assert_eq!(stdout(&native), "unmapped\nzero ok\n");
}

/// The old calls old static programs still make (runtime-tools' busybox
/// lists directories with `getdents` and touches files with `utimes`):
/// `getdents` in small batches, `utimes`, `utime`, `futimesat` and their
/// errors, natively and in the guest.
#[test]
fn legacy_calls() {
    if !require_kvm() {
        return;
    }
    let native = compare("legacy_calls", &[], &[]);
    assert_eq!(native.status, 0, "{native:?}");
    let out = stdout(&native);
    assert!(
        out.contains("getdents: 7 entries, more than one call: yes, bad records: 0"),
        "{out}"
    );
    assert!(
        out.contains("a after utimes: atime 1000000000.500000000 mtime 1200000000.250000000"),
        "{out}"
    );
}

#[test]
fn rust_hello() {
    if !require_kvm() {
        return;
    }
    let native = compare(
        "rust-hello",
        &["first", "second arg"],
        &[("QTEST", "from the test")],
    );
    assert_eq!(native.status, 0, "{native:?}");
    assert!(stdout(&native).contains("QTEST=from the test\n"));
}

// ---- bad inputs to `qrun do` ----

/// A scratch directory removed on drop.
struct ScratchDir(PathBuf);

impl ScratchDir {
    fn new(test: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("qrun-compat-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("creating a scratch dir in the temp dir");
        Self(dir)
    }

    /// Writes an executable file `name` holding `bytes`.
    fn executable(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, bytes).expect("writing into the scratch dir");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .expect("chmod in the scratch dir");
        path
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn qrun_do(prog: &Path) -> Outcome {
    run_qrun(&[OsStr::new("do"), OsStr::new("--"), prog.as_os_str()])
}

/// Asserts a refusal with `status` and a one-line message naming `prog`.
#[track_caller]
fn assert_refused(prog: &Path, out: &Outcome, status: i32) {
    assert_eq!(out.status, status, "qrun do {}: {out:?}", prog.display());
    let msg = stderr(out);
    assert_eq!(
        msg.trim_end().lines().count(),
        1,
        "want a one-line message: {out:?}"
    );
    assert!(
        msg.contains(&*prog.to_string_lossy()),
        "message does not name {}: {out:?}",
        prog.display()
    );
    assert!(out.stdout.is_empty(), "{out:?}");
}

#[test]
fn missing_program_is_127() {
    if !require_kvm() {
        return;
    }
    let dir = ScratchDir::new("missing");
    let prog = dir.0.join("no-such-program");
    assert_refused(&prog, &qrun_do(&prog), 127);
}

#[test]
fn text_file_is_126() {
    if !require_kvm() {
        return;
    }
    let dir = ScratchDir::new("text");
    let prog = dir.executable("not-a-program", b"this is plain text, not an ELF file\n");
    assert_refused(&prog, &qrun_do(&prog), 126);
}

/// A real program without execute permission: a shell says "Permission
/// denied" and 126 (Linux's `execve` gives `EACCES`, root included).
#[test]
fn program_without_x_bit_is_126() {
    if !require_kvm() {
        return;
    }
    let dir = ScratchDir::new("noexec");
    let hello = std::fs::read(test_apps::path("hello")).expect("reading the hello test program");
    let prog = dir.executable("hello", &hello);
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let out = qrun_do(&prog);
    assert_refused(&prog, &out, 126);
    assert!(stderr(&out).contains("Permission denied"), "{out:?}");
}

#[test]
fn truncated_elf_is_126() {
    if !require_kvm() {
        return;
    }
    let hello = std::fs::read(test_apps::path("hello")).expect("reading the hello test program");
    let dir = ScratchDir::new("truncated");
    let prog = dir.executable("truncated-hello", &hello[..100]);
    assert_refused(&prog, &qrun_do(&prog), 126);
}

#[test]
fn wild_pointers_get_efault() {
    if !require_kvm() {
        return;
    }
    let native = compare("badptr", &[], &[]);
    assert_eq!(native.status, 0);
    assert_eq!(
        stdout(&native).matches("Bad address").count(),
        7,
        "{native:?}"
    );
}

#[test]
fn user_port_io_cannot_reach_the_vmm() {
    if !require_kvm() {
        return;
    }
    // Natively and in the sandbox, `out` from user mode is a SIGSEGV.
    let native = compare("badptr", &["out"], &[]);
    assert_eq!(native.status, 139, "{native:?}");
    assert!(!stdout(&native).contains("went through"));
}
