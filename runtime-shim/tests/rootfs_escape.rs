//! Attempts to leave the rootfs are refused: the `escape` test program
//! (test-apps/c/escape.c) runs in `qrun do --rootfs DIR` and tries to read
//! a secret file that lives outside DIR (by its host path, `..` chains,
//! absolute and relative symlinks, /proc/self/{root,cwd,fd}, a dirfd and
//! chdir), to create files outside through symlinks and `..`, and to open a
//! raw packet socket. It must read the files inside the rootfs (also
//! through `..` and absolute symlinks, which resolve inside it), never the
//! secret, and get ENOENT where Linux in a chroot-like root would.
//!
//! The same program first runs natively with DIR as a path prefix: there
//! every probe must reach the secret, which shows the probes are real
//! attacks and not typos that would fail anyway.

#![forbid(unsafe_code)]

mod common;

use common::tmp::TempDir;
use common::{Outcome, require_kvm, run_native, run_qrun};

const INSIDE: &str = "inside\n";

/// Probes that must read the secret natively and get ENOENT sandboxed.
const ENOENT_PROBES: &[&str] = &[
    "host absolute path",
    "dotdot chain",
    "dotdot chain to /etc/hostname",
    "absolute symlink",
    "absolute symlink to a dir",
    "relative symlink with dotdots",
    "stat through absolute symlink",
    "openat root dirfd dotdots",
    "chdir dotdots then relative",
    "create through absolute dir symlink",
    "create through dotdots",
    "mkdir through absolute dir symlink",
    "rename out through absolute dir symlink",
];

/// Probes through /proc: any error will do (ENOENT, ELOOP, EXDEV ...).
const PROC_PROBES: &[&str] = &[
    "/proc/self/root",
    "/proc/self/cwd dotdots",
    "/proc/self/fd/N dotdots",
];

/// Files the write probes would create next to the secret.
const PLANTED: &[&str] = &["planted", "planted2", "planted_dir", "moved"];

/// A rootfs with the escape program and a secret directory beside it.
struct Setup {
    rootfs: TempDir,
    secret_dir: TempDir,
    secret: String,
}

fn setup() -> Setup {
    let rootfs = TempDir::new("escape-root");
    let secret_dir = TempDir::new("escape-secret");
    let secret_path = secret_dir.join("secret");
    // Unique per run, so that a match cannot be a coincidence.
    let secret = format!(
        "SECRET-{}-{:?}",
        std::process::id(),
        std::time::Instant::now()
    );
    std::fs::write(&secret_path, format!("{secret}\n")).expect("write the secret");
    std::fs::copy(test_apps::path("escape"), rootfs.join("escape")).expect("copy escape");
    std::fs::write(rootfs.join("inside.txt"), INSIDE).expect("write inside.txt");
    std::fs::create_dir(rootfs.join("sub")).expect("mkdir sub");
    let link = |target: &str, name: &str| {
        std::os::unix::fs::symlink(target, rootfs.join(name)).expect("symlink");
    };
    let sp = secret_path.to_str().expect("UTF-8 temp path");
    link("inside.txt", "good_link");
    link("/inside.txt", "good_abs");
    link(sp, "abs_link");
    link(secret_dir.str(), "abs_dirlink");
    link(&format!("{}{sp}", "../".repeat(20)), "rel_link");
    Setup {
        rootfs,
        secret_dir,
        secret,
    }
}

/// The value of the line `name: VALUE` of the program's output.
fn probe<'a>(out: &'a str, name: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(": "))
        .unwrap_or_else(|| panic!("no line for probe {name:?} in:\n{out}"))
}

fn text(o: &Outcome) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The probes are real: natively, with the rootfs as a path prefix, each
/// one reaches the secret or writes beside it.
#[test]
fn probes_escape_natively() {
    let s = setup();
    let secret_path = s.secret_dir.join("secret");
    let args = [secret_path.to_str().expect("UTF-8"), s.rootfs.str()];
    let out = run_native(&s.rootfs.join("escape"), &args, &[]);
    let stdout = text(&out);
    assert_eq!(out.status, 0, "{out:?}");
    assert!(stdout.ends_with("done\n"), "{stdout}");
    let secret_read = format!("read {} '{}'", s.secret.len() + 1, s.secret);
    for name in ENOENT_PROBES.iter().chain(PROC_PROBES) {
        let v = probe(&stdout, name);
        let ok = match *name {
            "dotdot chain to /etc/hostname" => {
                v.starts_with("read") || !std::path::Path::new("/etc/hostname").exists()
            }
            "stat through absolute symlink" => v.starts_with("size"),
            n if n.starts_with("create") || n.starts_with("mkdir") || n.starts_with("rename") => {
                v == "created"
            }
            _ => v == secret_read,
        };
        assert!(
            ok,
            "natively, probe {name:?} should escape, got {v:?}:\n{stdout}"
        );
    }
    for f in PLANTED {
        assert!(s.secret_dir.join(f).exists(), "natively, {f} should exist");
    }
}

#[test]
fn sandbox_refuses_every_escape() {
    if !require_kvm() {
        return;
    }
    let s = setup();
    let secret_path = s.secret_dir.join("secret");
    let sp = secret_path.to_str().expect("UTF-8");
    let args: [&std::ffi::OsStr; 6] = [
        "do".as_ref(),
        "--rootfs".as_ref(),
        s.rootfs.path().as_os_str(),
        "--".as_ref(),
        "/escape".as_ref(),
        sp.as_ref(),
    ];
    let out = run_qrun(&args);
    let stdout = text(&out);
    let all = format!("{stdout}{}", String::from_utf8_lossy(&out.stderr));

    // First what matters most: nothing leaked, nothing was planted.
    assert!(!all.contains(&s.secret), "THE SECRET LEAKED:\n{all}");
    for f in PLANTED {
        assert!(
            !s.secret_dir.join(f).exists(),
            "the sandbox created {f} outside its rootfs:\n{all}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(&secret_path).expect("the secret is still there"),
        format!("{}\n", s.secret)
    );
    assert!(stdout.ends_with("done\n"), "escape did not finish: {out:?}");
    assert_eq!(out.status, 0, "{out:?}");

    // The rootfs itself is readable, also through `..` and symlinks.
    let inside = format!("read {} 'inside'", INSIDE.len());
    for name in [
        "inside",
        "inside via sub/..",
        "inside via relative symlink",
        "inside via absolute symlink",
    ] {
        assert_eq!(probe(&stdout, name), inside, "probe {name:?}:\n{stdout}");
    }
    for name in ENOENT_PROBES {
        assert_eq!(
            probe(&stdout, name),
            "-1 ENOENT",
            "probe {name:?}:\n{stdout}"
        );
    }
    for name in PROC_PROBES {
        let v = probe(&stdout, name);
        assert!(v.starts_with("-1 "), "probe {name:?} must fail, got {v:?}");
    }
    // A symlink or hard link made inside may exist, but must not lead out.
    for name in ["read a symlink made inside", "read the hard link"] {
        let v = probe(&stdout, name);
        assert!(v.starts_with("-1 "), "probe {name:?} must fail, got {v:?}");
    }
    let packet = probe(&stdout, "packet socket");
    assert_ne!(packet, "created", "a raw packet socket was created");
}
