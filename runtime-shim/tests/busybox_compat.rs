//! Debian's busybox-static, applets that do not fork, over files in a
//! small rootfs: each invocation runs natively and in `qrun do --rootfs
//! DIR --cwd /work`, and stdout, stderr and exit status must match.
//!
//! Both sides see the same files under the same relative paths: the rootfs
//! is `DIR/{bin/busybox, etc/passwd, etc/group, work/data/...}`; the native
//! run is the same busybox binary started in `DIR/work`, the sandboxed one
//! is `/bin/busybox` with cwd `/work` inside the rootfs. Every path on the
//! command line is relative. `etc/passwd` and `etc/group` are copies of
//! the host's, which the native run reads, so user names agree. `TZ=UTC`
//! on both sides. Every file, directory and symlink gets one fixed mtime
//! (`touch -h -d @FIXED`), so `ls -la --full-time` is deterministic and
//! shows that the sandbox reports the real times. `stat` is run with a
//! format of stable fields (name, size, type, mode, links, owner, mtime):
//! inode and device numbers are the host's business.
//!
//! `find` and `grep -r` print in directory order, which Linux does not
//! specify; their lines are compared sorted. Write applets (cp, mv, rm,
//! mkdir) run on two fresh identical rootfs trees, and the trees are then
//! compared as well (paths, types, modes, sizes, contents, link targets,
//! and whether each mtime is still the fixed one). The native side runs
//! under `umask 022`, the OCI default a sandbox starts with.

#![forbid(unsafe_code)]

mod common;

use std::fmt::Write as _;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

use common::tmp::TempDir;
use common::{Outcome, differences, line_diff, require_kvm, run_native_in, run_sandboxed_in};

const BUSYBOX: &str = "/bin/busybox";
/// 2020-01-02 03:04:05 UTC.
const FIXED: i64 = 1_577_934_245;
const ENV: &[(&str, &str)] = &[("TZ", "UTC")];

const FILES: &[(&str, &str, u32)] = &[
    ("a.txt", "line one\nline two\nline three\n", 0o644),
    (
        "b.txt",
        "alpha beta\ngamma two\n\nlast line without newline",
        0o644,
    ),
    (
        "words.txt",
        "pear\napple\nfig\napple\nbanana\nfig\napple\nkiwi\n",
        0o644,
    ),
    ("sorted.txt", "a\na\nb\nc\nc\nc\nd\n", 0o644),
    ("nums.txt", "10\n9\n100\n-3\n42\n7\n", 0o644),
    ("table.txt", "x:3\ny:14\nz:1\nw:7\n", 0o644),
    ("empty", "", 0o644),
    ("exec.sh", "#!/bin/sh\necho needle\n", 0o755),
    ("private", "needle in private\n", 0o600),
    ("sub/c.txt", "c file\nneedle here\n", 0o644),
    ("sub/deeper/d.txt", "deep\n", 0o640),
];

/// Whether the ELF file at `path` has no program interpreter (PT_INTERP),
/// i.e. is statically linked; the sandbox has no dynamic loader yet.
fn is_static_elf(path: &str) -> bool {
    let elf = std::fs::read(path).unwrap_or_else(|e| {
        panic!("reading {path}: {e}; install Debian's busybox-static (scripts/deps.sh)")
    });
    let u16_at = |o: usize| u16::from_le_bytes([elf[o], elf[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(elf[0x20..0x28].try_into().expect("8 bytes")) as usize;
    let (phentsize, phnum) = (u16_at(0x36), u16_at(0x38));
    assert!(elf.starts_with(b"\x7fELF\x02") && phoff + phentsize * phnum <= elf.len());
    (0..phnum).all(|i| elf[phoff + i * phentsize..][..4] != 3u32.to_le_bytes())
}

/// A rootfs with busybox and the data files, every mtime set to FIXED.
fn rootfs() -> TempDir {
    assert!(
        is_static_elf(BUSYBOX),
        "{BUSYBOX} is dynamically linked: install Debian's busybox-static (scripts/deps.sh)"
    );
    let root = TempDir::new("busybox");
    let data = root.join("work/data");
    std::fs::create_dir_all(data.join("sub/deeper")).expect("mkdir data");
    std::fs::create_dir_all(root.join("bin")).expect("mkdir bin");
    std::fs::create_dir_all(root.join("etc")).expect("mkdir etc");
    std::fs::copy(BUSYBOX, root.join("bin/busybox")).unwrap_or_else(|e| {
        panic!("copying {BUSYBOX}: {e}; install Debian's busybox-static (scripts/deps.sh)")
    });
    for f in ["passwd", "group"] {
        std::fs::copy(Path::new("/etc").join(f), root.join("etc").join(f)).expect("copy /etc");
    }
    for (name, text, mode) in FILES {
        let p = data.join(name);
        std::fs::write(&p, text).expect("write a data file");
        std::fs::set_permissions(&p, PermissionsExt::from_mode(*mode)).expect("chmod");
    }
    std::os::unix::fs::symlink("a.txt", data.join("link")).expect("symlink");
    std::os::unix::fs::symlink("sub", data.join("dirlink")).expect("symlink");
    let sums = Command::new(BUSYBOX)
        .args(["md5sum", "data/a.txt", "data/b.txt", "data/empty"])
        .current_dir(root.join("work"))
        .output()
        .expect("busybox md5sum");
    std::fs::write(data.join("sums.md5"), sums.stdout).expect("write sums.md5");
    let touched = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "find . -exec touch -h -d @{FIXED} {{}} + && touch -h -d @{FIXED} ."
        ))
        .current_dir(root.path())
        .status()
        .expect("touch");
    assert!(touched.success(), "setting mtimes failed");
    root
}

/// `busybox args` natively in `root/work` under `umask 022`, stdin from
/// `root/work/<stdin>` if given.
fn native(root: &TempDir, stdin: Option<&str>, args: &[&str]) -> Outcome {
    let work = root.join("work");
    let busybox = root.join("bin/busybox");
    // sh -c 'umask 022 && exec "$0" "$@"' DIR/bin/busybox args...
    let mut sh_args = vec!["-c", "umask 022 && exec \"$0\" \"$@\""];
    sh_args.push(busybox.to_str().expect("UTF-8 temp path"));
    sh_args.extend_from_slice(args);
    let input = stdin.map(|s| work.join(s));
    run_native_in(&work, input.as_deref(), Path::new("/bin/sh"), &sh_args, ENV)
}

/// `/bin/busybox args` in a sandbox over the rootfs `root`, cwd `/work`.
fn sandboxed(root: &TempDir, stdin: Option<&str>, args: &[&str]) -> Outcome {
    let input = stdin.map(|s| root.join("work").join(s));
    run_sandboxed_in(
        root.path(),
        "/work",
        input.as_deref(),
        "/bin/busybox",
        args,
        ENV,
    )
}

fn sorted(mut o: Outcome) -> Outcome {
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort_unstable();
    o.stdout = lines
        .iter()
        .map(|l| format!("{l}\n"))
        .collect::<String>()
        .into_bytes();
    o
}

/// Read-only invocations: `(stdin file, args, compare sorted, native status)`.
type Case = (Option<&'static str>, &'static [&'static str], bool, i32);

const READ_ONLY: &[Case] = &[
    (
        None,
        &["cat", "data/a.txt", "data/b.txt", "data/link"],
        false,
        0,
    ),
    (None, &["cat", "data/missing"], false, 1),
    (None, &["ls", "-la", "data"], false, 0),
    (
        None,
        &["ls", "-la", "--full-time", "data", "data/sub"],
        false,
        0,
    ),
    (None, &["ls", "-lanR", "data"], false, 0),
    (None, &["ls", "-la", "data/missing"], false, 1),
    (
        None,
        &["wc", "data/a.txt", "data/b.txt", "data/words.txt"],
        false,
        0,
    ),
    (None, &["wc", "-l", "data/empty"], false, 0),
    (None, &["sort", "data/words.txt"], false, 0),
    (None, &["sort", "-u", "-r", "data/words.txt"], false, 0),
    (None, &["sort", "-n", "data/nums.txt"], false, 0),
    (
        None,
        &["sort", "-t:", "-k2", "-n", "data/table.txt"],
        false,
        0,
    ),
    (None, &["uniq", "-c", "data/sorted.txt"], false, 0),
    (None, &["uniq", "-d", "data/sorted.txt"], false, 0),
    (None, &["head", "-n", "3", "data/words.txt"], false, 0),
    (
        None,
        &["head", "-c", "10", "data/a.txt", "data/b.txt"],
        false,
        0,
    ),
    (None, &["tail", "-n", "2", "data/words.txt"], false, 0),
    (None, &["tail", "-c", "15", "data/b.txt"], false, 0),
    (Some("data/a.txt"), &["tr", "a-z", "A-Z"], false, 0),
    (Some("data/words.txt"), &["tr", "-d", "aeiou"], false, 0),
    (
        None,
        &["md5sum", "data/a.txt", "data/b.txt", "data/empty"],
        false,
        0,
    ),
    (None, &["md5sum", "-c", "data/sums.md5"], false, 0),
    (
        None,
        &["sha256sum", "data/a.txt", "data/sub/c.txt"],
        false,
        0,
    ),
    (None, &["find", "data"], true, 0),
    (
        None,
        &["find", "data", "-type", "f", "-name", "*.txt"],
        true,
        0,
    ),
    (None, &["find", "data", "-type", "l"], true, 0),
    (None, &["find", "data/missing"], true, 1),
    (
        None,
        &["grep", "-n", "two", "data/a.txt", "data/b.txt"],
        false,
        0,
    ),
    (None, &["grep", "-c", "p", "data/words.txt"], false, 0),
    (None, &["grep", "-v", "-i", "TWO", "data/a.txt"], false, 0),
    (None, &["grep", "-r", "needle", "data"], true, 0),
    (None, &["grep", "nomatch", "data/a.txt"], false, 1),
    (None, &["sed", "-n", "2,3p", "data/a.txt"], false, 0),
    (
        None,
        &["sed", "-e", "s/line/LINE/g", "-e", "1d", "data/a.txt"],
        false,
        0,
    ),
    (
        None,
        &[
            "awk",
            "-F:",
            "{s += $2} END {print s, NR}",
            "data/table.txt",
        ],
        false,
        0,
    ),
    (None, &["awk", "{print NF, $1}", "data/b.txt"], false, 0),
    (
        None,
        &[
            "stat",
            "-c",
            "%n %s %F %a %h %U %G %Y",
            "data/a.txt",
            "data/sub",
            "data/link",
            "data/exec.sh",
            "data/private",
        ],
        false,
        0,
    ),
    (
        None,
        &["stat", "-L", "-c", "%n %s %F", "data/link", "data/dirlink"],
        false,
        0,
    ),
    (None, &["stat", "data/missing"], false, 1),
];

#[test]
fn read_only_applets_match_native() {
    let root = rootfs();
    let natives: Vec<Outcome> = READ_ONLY
        .iter()
        .map(|&(stdin, args, _, want)| {
            let out = native(&root, stdin, args);
            assert_eq!(out.status, want, "busybox {args:?} natively: {out:?}");
            out
        })
        .collect();
    if !require_kvm() {
        return;
    }
    let mut failures = String::new();
    for (&(stdin, args, sort, _), native) in READ_ONLY.iter().zip(natives) {
        let sandboxed = sandboxed(&root, stdin, args);
        let (native, sandboxed) = if sort {
            (sorted(native), sorted(sandboxed))
        } else {
            (native, sandboxed)
        };
        // Every difference, not just the first.
        if let Some(d) = differences(&format!("busybox {args:?}"), &native, &sandboxed) {
            failures.push_str(&d);
        }
    }
    assert!(failures.is_empty(), "{failures}");
}

/// Paths, types, modes, sizes, contents and link targets of the tree
/// under `root/work`, and whether each mtime is still FIXED.
fn snapshot(root: &Path) -> String {
    fn walk(dir: &Path, rel: &str, out: &mut String) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .expect("read_dir")
            .map(|e| e.expect("dir entry"))
            .collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let name = format!("{rel}/{}", e.file_name().to_string_lossy());
            let m = std::fs::symlink_metadata(e.path()).expect("lstat");
            let fixed = if m.mtime() == FIXED { "fixed" } else { "new" };
            let _ = write!(out, "{name} mode {:o} mtime {fixed}", m.mode());
            if m.file_type().is_symlink() {
                let target = std::fs::read_link(e.path()).expect("readlink");
                let _ = writeln!(out, " -> {}", target.display());
            } else if m.is_dir() {
                let _ = writeln!(out, " nlink {}", m.nlink());
                walk(&e.path(), &name, out);
            } else {
                let text = std::fs::read(e.path()).expect("read");
                let _ = writeln!(out, " {:?}", String::from_utf8_lossy(&text));
            }
        }
    }
    let mut out = String::new();
    walk(&root.join("work"), "", &mut out);
    out
}

/// Write invocations and their native exit status.
const WRITES: &[(&[&str], i32)] = &[
    (&["cp", "data/a.txt", "data/copy.txt"], 0),
    (&["cp", "-r", "data/sub", "data/subcopy"], 0),
    (&["cp", "-p", "data/private", "data/exec.sh", "data/sub"], 0),
    (&["cp", "data/missing", "data/x"], 1),
    (&["mv", "data/a.txt", "data/moved.txt"], 0),
    (&["mv", "data/sub", "data/sub2"], 0),
    (&["mv", "data/b.txt", "data/link", "data/sub/"], 0),
    (&["mv", "data/missing", "data/y"], 1),
    (&["rm", "data/b.txt", "data/link"], 0),
    (&["rm", "-r", "data/sub"], 0),
    (&["rm", "data/sub"], 1),
    (&["rm", "data/missing"], 1),
    (&["rm", "-f", "data/missing"], 0),
    (&["mkdir", "newdir", "data/sub/new"], 0),
    (&["mkdir", "-p", "x/y/z"], 0),
    (&["mkdir", "-m", "700", "priv"], 0),
    (&["mkdir", "data"], 1),
];

#[test]
fn write_applets_match_native_and_leave_the_same_tree() {
    let natives: Vec<(Outcome, String)> = WRITES
        .iter()
        .map(|&(args, want)| {
            let root = rootfs();
            let out = native(&root, None, args);
            assert_eq!(out.status, want, "busybox {args:?} natively: {out:?}");
            (out, snapshot(root.path()))
        })
        .collect();
    if !require_kvm() {
        return;
    }
    let mut failures = String::new();
    for (&(args, _), (native, native_tree)) in WRITES.iter().zip(natives) {
        let root = rootfs();
        let sandboxed = sandboxed(&root, None, args);
        let what = format!("busybox {args:?}");
        if let Some(d) = differences(&what, &native, &sandboxed) {
            failures.push_str(&d);
        }
        let tree = snapshot(root.path());
        if tree != native_tree {
            let _ = writeln!(
                failures,
                "{what}: the trees differ (- native, + sandboxed):"
            );
            failures.push_str(&line_diff(&native_tree, &tree));
        }
    }
    assert!(failures.is_empty(), "{failures}");
}
