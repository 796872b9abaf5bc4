//! File pages from the host page cache (docs/memory.md): a file a sandbox
//! maps is the VMM's read-only mapping of the host file (so sandboxes share
//! its pages), and a write to a `MAP_PRIVATE` mapping of it stays in that
//! mapping: the file, another mapping in the same sandbox, a child and
//! another sandbox all still see the file's bytes.
//!
//! Writable `MAP_SHARED` file mappings (`filemap_shared`) do what they do
//! natively, step by step, and leave the same file behind. A file shrunk
//! while mapped from the file window (by the program itself or on the
//! host) gives `SIGBUS` past its new end, as natively, and never stops the
//! sandbox (`filemap_truncated`). The window's cap (1 GiB): a file past it
//! is copied into guest RAM, and `ENOMEM` when that does not fit either
//! (`filemap_many`).
//!
//! Needs /dev/kvm: without it the test says SKIPPED loudly, and fails
//! under `CI=true`.

#![forbid(unsafe_code)]

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::tmp::TempDir;
use common::{
    assert_same, qrun, require_kvm, run_native, run_sandboxed, run_sandboxed_with, stdout,
};

/// `pid` and every process below it.
fn process_tree(pid: u32) -> Vec<u32> {
    let mut tree = vec![pid];
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
            let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
            // Fields after the `(comm)`: state, ppid, ...
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|s| s.parse::<u32>().ok());
            if ppid == Some(parent) && !tree.contains(&p) {
                tree.push(p);
            }
        }
        i += 1;
    }
    tree
}

#[test]
fn private_file_writes_stay_private_and_pages_come_from_the_host_file() {
    if !require_kvm() {
        return;
    }
    let dir = TempDir::new("filemap");
    let data = dir.path().join("data.bin");
    let mut bytes = b"ORIG".to_vec();
    bytes.resize(4096, b'x');
    bytes.resize(8192, b'P');
    std::fs::write(&data, &bytes).expect("write the data file");
    let prog = test_apps::path("filemap_private");

    // Sandbox A writes into its private mapping and holds it.
    let mut a = Command::new(qrun())
        .args(["do", "--"])
        .arg(&prog)
        .arg(&data)
        .arg("hold")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start qrun do");
    let mut out = BufReader::new(a.stdout.take().expect("stdout"));
    let mut line = String::new();
    let mut early = String::new();
    while out.read_line(&mut line).expect("read A's stdout") > 0 && line != "written\n" {
        early.push_str(&line);
        line.clear();
    }
    assert_eq!(line, "written\n", "sandbox A: {early}");
    assert!(!early.contains("FAIL"), "sandbox A: {early}");

    // A's VMM maps the host file itself: the guest's pages are the page
    // cache's, not copies in guest RAM.
    let name = data.to_string_lossy().into_owned();
    let mapped = process_tree(a.id()).iter().any(|p| {
        std::fs::read_to_string(format!("/proc/{p}/maps"))
            .unwrap_or_default()
            .lines()
            .any(|l| l.ends_with(&name))
    });
    assert!(mapped, "no process of sandbox A maps {name}");

    // While A holds its written copy, B and the host see the file's bytes.
    let b = run_sandboxed(&prog, &[&name], &[]);
    assert_eq!((b.status, stdout(&b)), (0, "ok\n".to_string()), "{b:?}");
    assert_eq!(std::fs::read(&data).expect("read the data file"), bytes);

    drop(a.stdin.take());
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).expect("read A's stdout");
    let status = a.wait().expect("wait for A");
    assert_eq!(rest, "ok\n");
    assert!(status.success(), "{status:?}");
}

#[test]
fn shared_writable_file_mappings_behave_as_natively() {
    if !require_kvm() {
        return;
    }
    let dir = TempDir::new("filemap-shared");
    let prog = test_apps::path("filemap_shared");
    let native_file = dir.path().join("native.bin");
    let sandbox_file = dir.path().join("sandbox.bin");
    let native = run_native(&prog, &[&native_file.to_string_lossy()], &[]);
    let sandboxed = run_sandboxed(&prog, &[&sandbox_file.to_string_lossy()], &[]);
    assert_eq!(native.status, 0, "{native:?}");
    assert_same("filemap_shared", &native, &sandboxed);
    // What it checks happened at all (natively, so in the sandbox too).
    let out = stdout(&native);
    for want in [
        "child write: pread 5 'CHILD'",
        "page past the end: sigbus code 2",
        "after shrinking, page 2: sigbus code 2",
        "after munmap: pread 5 'UNMAP'",
        "memfd: pread 5 'MEMFD'",
    ] {
        assert!(out.contains(want), "native run lacks {want:?}:\n{out}");
    }
    // The host file is the same, including the write through a mapping
    // the program neither synced nor unmapped before exiting.
    let (n, s) = (
        std::fs::read(&native_file).expect("read native file"),
        std::fs::read(&sandbox_file).expect("read sandbox file"),
    );
    assert_eq!(n.len(), s.len(), "file sizes");
    assert!(n == s, "the files differ after exit");
    assert_eq!(&s[600..606], b"ATEXIT");
}

/// Writes into a 24-page `MAP_PRIVATE` file mapping (`filecopy`): the
/// private copies of the file pages around each write are made by the VMM
/// (`Call::CopyPages`, docs/coldstart.md) and read as natively, and the
/// file stays as it was.
#[test]
fn private_copies_made_by_the_vmm_read_as_natively() {
    if !require_kvm() {
        return;
    }
    let dir = TempDir::new("filecopy");
    let data = dir.path().join("pages.bin");
    let bytes: Vec<u8> = (0..24u8)
        .flat_map(|i| std::iter::repeat_n(i + 1, 4096))
        .collect();
    std::fs::write(&data, &bytes).expect("write the data file");
    let prog = test_apps::path("filecopy");
    let path = data.to_string_lossy().into_owned();
    let native = run_native(&prog, &[&path], &[]);
    assert_eq!(native.status, 0, "{native:?}");
    let sandboxed = run_sandboxed_with(&["--stats"], &prog, &[&path], &[]);
    assert_eq!(
        (native.status, stdout(&native)),
        (sandboxed.status, stdout(&sandboxed)),
        "{sandboxed:?}"
    );
    let err = common::stderr(&sandboxed);
    let copies = common::host_call_count(&err, "CopyPages");
    assert!(copies >= 2, "the VMM made no private copies: {err}");
    assert_eq!(std::fs::read(&data).expect("read back"), bytes);
}

#[test]
fn a_file_shrunk_while_mapped_gives_sigbus_as_natively() {
    if !require_kvm() {
        return;
    }
    let dir = TempDir::new("filemap-truncated");
    let prog = test_apps::path("filemap_truncated");
    let native = run_native(&prog, &[&dir.path().join("n").to_string_lossy()], &[]);
    let sandboxed = run_sandboxed(&prog, &[&dir.path().join("s").to_string_lossy()], &[]);
    assert_eq!(native.status, 0, "{native:?}");
    assert!(
        stdout(&native).contains("page 2: sigbus code 2"),
        "{native:?}"
    );
    assert_same("filemap_truncated", &native, &sandboxed);
}

#[test]
fn a_file_shrunk_on_the_host_while_mapped_gives_sigbus() {
    if !require_kvm() {
        return;
    }
    let dir = TempDir::new("filemap-host-truncated");
    let prog = test_apps::path("filemap_truncated");
    // What the program prints natively when it shrinks the file itself.
    let native = run_native(&prog, &[&dir.path().join("n").to_string_lossy()], &[]);
    assert_eq!(native.status, 0, "{native:?}");
    let file = dir.path().join("s");
    let mut child = Command::new(qrun())
        .args(["do", "--"])
        .arg(&prog)
        .arg(&file)
        .arg("wait")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start qrun do");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut seen = String::new();
    let mut line = String::new();
    while out.read_line(&mut line).expect("read stdout") > 0 && line != "mapped\n" {
        seen.push_str(&line);
        line.clear();
    }
    assert_eq!(
        line, "mapped\n",
        "the sandbox never mapped the file: {seen}"
    );
    // The host shrinks the file under the sandbox's mappings.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .and_then(|f| f.set_len(4096 + 100))
        .expect("shrink the file on the host");
    std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), b"go\n").expect("go");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).expect("read stdout");
    let result = child.wait_with_output().expect("wait for qrun");
    assert!(
        result.status.success(),
        "{:?}: {}",
        result.status,
        String::from_utf8_lossy(&result.stderr)
    );
    assert_eq!(seen + &rest, stdout(&native));
}

#[test]
fn files_past_the_window_cap_are_copied_or_enomem() {
    if !require_kvm() {
        return;
    }
    let dir = TempDir::new("filemap-cap");
    // Sparse files: 3 x 500 MiB against a 1 GiB window and 256 MiB of
    // guest RAM; 30 MiB when 24 MiB of window are left.
    let mut names = Vec::new();
    for (name, size) in [
        ("a", 500u64 << 20),
        ("b", 500 << 20),
        ("c", 500 << 20),
        ("small", 30 << 20),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, name.as_bytes()).expect("write");
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_len(size))
            .expect("size the file");
        names.push(path.to_string_lossy().into_owned());
    }
    let args: Vec<&str> = names.iter().map(String::as_str).collect();
    let prog = test_apps::path("filemap_many");
    let native = run_native(&prog, &args, &[]);
    assert_eq!(
        stdout(&native),
        "a: ok a\nb: ok b\nc: ok c\nsmall: ok s\n",
        "{native:?}"
    );
    let sandboxed = run_sandboxed_with(&["--memory", "256M"], &prog, &args, &[]);
    assert_eq!(
        (sandboxed.status, stdout(&sandboxed)),
        (0, "a: ok a\nb: ok b\nc: ENOMEM\nsmall: ok s\n".to_string()),
        "{sandboxed:?}"
    );
}

#[test]
fn a_shared_file_mapping_survives_hibernation() {
    if !require_kvm() {
        return;
    }
    let dir = TempDir::new("filemap-shared-hib");
    let file = dir.path().join("f");
    let (mut c, line) = common::controlled::Controlled::start(
        "filemap-shared-hib",
        &test_apps::path("filemap_shared"),
        &[&file.to_string_lossy(), "hold"],
        Stdio::piped(),
    );
    assert_eq!(line, "holding\n");
    c.hibernate();
    // Written back before the hibernation: the host file has it.
    let bytes = std::fs::read(&file).expect("read the file");
    assert_eq!(&bytes[700..705], b"HIBER");
    c.ctl("wake");
    let mut stdin = c.child.stdin.take().expect("stdin");
    std::io::Write::write_all(&mut stdin, b"go\n").expect("go");
    drop(stdin);
    let (rest, status) = c.finish();
    assert_eq!(status, 0);
    assert_eq!(
        rest,
        "after wake: 'HIBER'\nafter wake: pread 5 'HIBER'\nwritten after wake: pread 5 'AGAIN'\n"
    );
}
