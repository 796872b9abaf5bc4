//! Program loading and FIFOs, end to end: nothing the guest or a bundle
//! names may hang `qrun` or make it fail without saying why.
//!
//! - A FIFO as the program, a `#!` interpreter, a `PT_INTERP` loader,
//!   `config.json` or a namespace path is refused at once (exit 126 and one
//!   line, like Linux's `EACCES` for running a non-regular file); the
//!   guest's own `execve` of such a file says `EACCES` like the host's.
//! - A guest `open` of a FIFO waits for its peer as on Linux, but that
//!   wait still serves SIGTERM and hibernation.
//! - Every program the loader refuses, and a too-small `--memory`, gives
//!   one line on stderr naming the cause.
//! - Mutated ELF files end within a deadline, either running or with one
//!   clear line.
//!
//! ELF files are made here by a small builder ([`Elf`]). Every test needs
//! /dev/kvm: without it a test says SKIPPED loudly, and fails under
//! `CI=true`.

#![forbid(unsafe_code)]

mod common;

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::server::Server;
use common::tmp::TempDir;
use common::{compare_programs, qrun, require_kvm};

/// How long a refusal may take.
const PROMPT: Duration = Duration::from_secs(10);

const PT_LOAD: u32 = 1;
const PT_INTERP: u32 = 3;
const ET_EXEC: u16 = 2;
const ET_DYN: u16 = 3;

/// A one-segment x86-64 ELF whose code (at file offset and vaddr offset
/// 0x1000) exits with status 7, optionally naming an interpreter.
struct Elf {
    e_type: u16,
    /// `p_vaddr` of the one `PT_LOAD` (file offset 0).
    base: u64,
    /// Zero bytes after the file's.
    bss: u64,
    interp: Option<String>,
}

impl Elf {
    fn exec(base: u64) -> Self {
        Self {
            e_type: ET_EXEC,
            base,
            bss: 0,
            interp: None,
        }
    }

    fn pie() -> Self {
        Self {
            e_type: ET_DYN,
            ..Self::exec(0)
        }
    }

    fn bytes(&self) -> Vec<u8> {
        // mov edi, 7; mov eax, 60; syscall
        const CODE: [u8; 12] = [0xbf, 7, 0, 0, 0, 0xb8, 60, 0, 0, 0, 0x0f, 0x05];
        let mut f = vec![0u8; 0x1000 + CODE.len()];
        f[0x1000..].copy_from_slice(&CODE);
        let len = f.len() as u64;
        let mut phdrs = vec![(
            PT_LOAD,
            5u32,
            0u64,
            self.base,
            len,
            len + self.bss,
            0x1000u64,
        )];
        if let Some(path) = &self.interp {
            let at = 0x200;
            f[at..at + path.len()].copy_from_slice(path.as_bytes());
            let n = path.len() as u64 + 1;
            phdrs.insert(0, (PT_INTERP, 4, at as u64, self.base + at as u64, n, n, 1));
        }
        f[..4].copy_from_slice(b"\x7fELF");
        f[4] = 2; // 64-bit
        f[5] = 1; // little endian
        f[6] = 1;
        put(&mut f, 16, &self.e_type.to_le_bytes());
        put(&mut f, 18, &62u16.to_le_bytes()); // x86-64
        put(&mut f, 20, &1u32.to_le_bytes());
        put(&mut f, 24, &(self.base + 0x1000).to_le_bytes());
        put(&mut f, 32, &64u64.to_le_bytes());
        put(&mut f, 52, &64u16.to_le_bytes());
        put(&mut f, 54, &56u16.to_le_bytes());
        put(&mut f, 56, &(phdrs.len() as u16).to_le_bytes());
        for (i, (t, flags, off, vaddr, filesz, memsz, align)) in phdrs.into_iter().enumerate() {
            let p = 64 + 56 * i;
            put(&mut f, p, &t.to_le_bytes());
            put(&mut f, p + 4, &flags.to_le_bytes());
            for (k, v) in [off, vaddr, vaddr, filesz, memsz, align].iter().enumerate() {
                put(&mut f, p + 8 + 8 * k, &v.to_le_bytes());
            }
        }
        f
    }
}

fn put(f: &mut [u8], at: usize, bytes: &[u8]) {
    f[at..at + bytes.len()].copy_from_slice(bytes);
}

fn write_exec(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).expect("writing a program");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

fn mkfifo(path: &Path) {
    let st = Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("running mkfifo");
    assert!(st.success(), "mkfifo {}", path.display());
}

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// Runs `qrun ARGS` and waits for it at most [`PROMPT`]: (status, stdout
/// lines, stderr).
fn qrun_within(args: &[&str], limit: Duration) -> (i32, String) {
    let mut cmd = Command::new(qrun());
    cmd.args(args);
    Server::spawn(cmd).wait_exit(limit)
}

/// Asserts `qrun do ARGS` is refused promptly: status `want`, exactly one
/// stderr line, containing every one of `needles`.
#[track_caller]
fn refused(args: &[&str], want: i32, needles: &[&str]) {
    let (status, err) = qrun_within(args, PROMPT);
    assert_eq!(status, want, "{args:?}: {err}");
    assert_eq!(
        err.lines().count(),
        1,
        "{args:?}: one line expected: {err:?}"
    );
    for n in needles {
        assert!(err.contains(n), "{args:?}: {n:?} not in {err:?}");
    }
}

#[test]
fn fifo_program_script_or_interpreter_is_refused_at_once() {
    if !require_kvm() {
        return;
    }
    let dir = TempDir::new("fifo-exec");
    let fifo = dir.join("fifo");
    mkfifo(&fifo);
    let script = dir.join("script");
    write_exec(&script, format!("#!{}\n", s(&fifo)).as_bytes());
    let dynamic = dir.join("dynamic");
    let mut elf = Elf::exec(0x40_0000);
    elf.interp = Some(s(&fifo).into());
    write_exec(&dynamic, &elf.bytes());
    for prog in [&fifo, &script, &dynamic] {
        refused(&["do", "--", s(prog)], 126, &["FIFO", "Permission denied"]);
    }
    // Natively the same three are EACCES.
    for prog in [&fifo, &script, &dynamic] {
        let e = Command::new(prog).status().expect_err("not runnable");
        assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied, "{prog:?}");
    }
}

#[test]
fn guest_execve_of_a_fifo_interpreter_is_eacces_like_linux() {
    if !require_kvm() {
        return;
    }
    let dir = TempDir::new("fifo-guest-exec");
    let fifo = dir.join("fifo");
    mkfifo(&fifo);
    let script = dir.join("script");
    write_exec(&script, format!("#!{}\n", s(&fifo)).as_bytes());
    let dynamic = dir.join("dynamic");
    let mut elf = Elf::exec(0x40_0000);
    elf.interp = Some(s(&fifo).into());
    write_exec(&dynamic, &elf.bytes());
    let busybox = Path::new("/bin/busybox");
    // The guest cannot fork: `sh -c PROG` execs PROG itself.
    for prog in [&fifo, &script, &dynamic] {
        let out = compare_programs(busybox, &["sh", "-c", s(prog)], &[]);
        assert_eq!(out.status, 126, "{prog:?}: {out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("Permission denied"),
            "{out:?}"
        );
    }
}

#[test]
fn empty_shebang_interpreter_agrees_with_linux() {
    if !require_kvm() {
        return;
    }
    let dir = TempDir::new("empty-shebang");
    let script = dir.join("script");
    write_exec(&script, b"#!\0\n");
    // Linux opens "" (the cwd, a directory): EACCES, so 126.
    let e = Command::new(&script).status().expect_err("not runnable");
    assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied);
    refused(
        &["do", "--", s(&script)],
        126,
        &["empty interpreter", "Permission denied"],
    );
    let out = compare_programs(Path::new("/bin/busybox"), &["sh", "-c", s(&script)], &[]);
    assert_eq!(out.status, 126, "{out:?}");
}

/// Opens `path` for writing once a reader is there (at most 10 s).
fn open_writer(path: &Path) -> std::fs::File {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
        {
            Ok(f) => return f,
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("no reader on {}: {e}", path.display()),
        }
    }
}

#[test]
fn guest_fifo_open_waits_for_its_peer_and_reads_or_writes() {
    if !require_kvm() {
        return;
    }
    let dir = TempDir::new("fifo-peer");
    let fifo = dir.join("fifo");
    mkfifo(&fifo);
    // The guest reads: its open waits for our writer.
    let mut cmd = Command::new(qrun());
    cmd.args(["do", "--", "/bin/busybox", "cat", s(&fifo)]);
    let mut reader = Server::spawn(cmd);
    std::thread::sleep(Duration::from_millis(300));
    let mut w = open_writer(&fifo);
    w.write_all(b"through the fifo\n").expect("write");
    drop(w);
    assert_eq!(reader.wait_line("through", PROMPT), " the fifo");
    assert_eq!(reader.wait_exit(PROMPT).0, 0);
    // The guest writes: its open waits for our reader.
    let mut cmd = Command::new(qrun());
    let script = format!("echo from the guest > {}", s(&fifo));
    cmd.args(["do", "--", "/bin/busybox", "sh", "-c", &script]);
    let mut writer = Server::spawn(cmd);
    std::thread::sleep(Duration::from_millis(300));
    let got = std::fs::read_to_string(&fifo).expect("reading the fifo");
    assert_eq!(got, "from the guest\n");
    let (status, err) = writer.wait_exit(PROMPT);
    assert_eq!(status, 0, "{err}");
}

#[test]
fn guest_fifo_open_without_a_peer_ends_on_sigterm() {
    if !require_kvm() {
        return;
    }
    let dir = TempDir::new("fifo-term");
    let fifo = dir.join("fifo");
    mkfifo(&fifo);
    let redirect = format!("echo x > {}", s(&fifo));
    let cases: [&[&str]; 2] = [
        &["/bin/busybox", "cat", s(&fifo)],
        &["/bin/busybox", "sh", "-c", &redirect],
    ];
    for prog in cases {
        let mut cmd = Command::new(qrun());
        cmd.arg("do").arg("--").args(prog);
        let mut sb = Server::spawn(cmd);
        std::thread::sleep(Duration::from_millis(500));
        let st = Command::new("kill")
            .args(["-TERM", &sb.pid().to_string()])
            .status()
            .expect("kill");
        assert!(st.success());
        let (status, err) = sb.wait_exit(PROMPT);
        assert_eq!(status, 143, "{prog:?}: {err}");
    }
}

#[test]
fn guest_fifo_open_can_hibernate_and_be_signalled_through_ctl() {
    if !require_kvm() {
        return;
    }
    let dir = TempDir::new("fifo-ctl");
    let fifo = dir.join("fifo");
    mkfifo(&fifo);
    let socket = dir.join("ctl.sock");
    let state = dir.join("state");
    std::fs::create_dir(&state).expect("mkdir");
    let mut cmd = common::qrun_do_controlled(&socket, &state);
    cmd.args(["/bin/busybox", "cat", s(&fifo)]);
    let mut sb = Server::spawn(cmd);
    common::wait_for_socket(&socket);
    std::thread::sleep(Duration::from_millis(300));
    let st = common::ctl(&socket, "hibernate").expect("hibernate while in open");
    assert_eq!(st["state"], "hibernated", "{st}");
    let mut w = open_writer(&fifo);
    w.write_all(b"after hibernation\n").expect("write");
    drop(w);
    assert_eq!(sb.wait_line("after", PROMPT), " hibernation");
    assert_eq!(sb.wait_exit(PROMPT).0, 0);
    // And a signal through the control socket ends a waiting open.
    let mut cmd = common::qrun_do_controlled(&socket, &state);
    cmd.args(["/bin/busybox", "cat", s(&fifo)]);
    let mut sb = Server::spawn(cmd);
    common::wait_for_socket(&socket);
    std::thread::sleep(Duration::from_millis(300));
    common::ctl(&socket, "signal 15").expect("signal");
    assert_eq!(sb.wait_exit(PROMPT).0, 143);
}

#[test]
fn fifo_config_json_or_namespace_path_is_refused_at_once() {
    if !require_kvm() {
        return;
    }
    let (b, root) = (TempDir::new("fifo-bundle"), TempDir::new("fifo-root"));
    common::bundle::hello_bundle(b.path());
    let config = b.join("config.json");
    let good = std::fs::read(&config).expect("config");
    let fifo = b.join("ns-fifo");
    mkfifo(&fifo);
    let mut text: serde_json::Value = serde_json::from_slice(&good).expect("JSON");
    let namespaces = text["linux"]["namespaces"]
        .as_array_mut()
        .expect("namespaces");
    namespaces.retain(|n| n["type"] != "uts");
    namespaces.push(serde_json::json!({"type": "uts", "path": s(&fifo)}));
    std::fs::write(&config, serde_json::to_vec(&text).expect("JSON")).expect("write");
    let root_arg = s(root.path());
    for cmd in ["create", "run"] {
        let (status, err) = qrun_within(
            &["--root", root_arg, cmd, "--bundle", s(b.path()), "ns"],
            PROMPT,
        );
        assert_ne!(status, 0, "{cmd}: {err}");
        assert!(err.contains(s(&fifo)), "{cmd}: {err}");
        let _ = qrun_within(&["--root", root_arg, "delete", "--force", "ns"], PROMPT);
    }
    std::fs::remove_file(&config).expect("rm");
    mkfifo(&config);
    for cmd in ["create", "run"] {
        let (status, err) = qrun_within(
            &["--root", root_arg, cmd, "--bundle", s(b.path()), "cfg"],
            PROMPT,
        );
        assert_ne!(status, 0, "{cmd}: {err}");
        assert_eq!(err.lines().count(), 1, "{cmd}: {err}");
        assert!(
            err.contains("config.json: not a regular file"),
            "{cmd}: {err}"
        );
    }
}

#[test]
fn loader_refusals_say_why_in_one_line() {
    if !require_kvm() {
        return;
    }
    let dir = TempDir::new("refusals");
    let run = |name: &str, elf: &Elf, opts: &[&str], needles: &[&str]| {
        let path = dir.join(name);
        write_exec(&path, &elf.bytes());
        let mut args = vec!["do"];
        args.extend_from_slice(opts);
        args.extend(["--", s(&path)]);
        refused(&args, 126, needles);
    };
    // The builder's programs run: the refusals below are the loader's.
    let (status, err) = {
        let ok = dir.join("ok");
        write_exec(&ok, &Elf::exec(0x40_0000).bytes());
        qrun_within(&["do", "--", s(&ok)], PROMPT)
    };
    assert_eq!(status, 7, "{err}");
    let big_bss = Elf {
        bss: 1 << 30,
        ..Elf::exec(0x40_0000)
    };
    run(
        "bss",
        &big_bss,
        &["--memory", "64M"],
        &["out of guest memory"],
    );
    let limit = ["above the highest address a program may use"];
    run("stack", &Elf::exec(0x7fff_fff0_0000), &[], &limit);
    run("stub", &Elf::exec(0x7fff_ffff_e000), &[], &limit);
    let huge_pie = Elf {
        bss: 0x7000_0000_0000,
        ..Elf::pie()
    };
    run("pie", &huge_pie, &[], &limit);

    // A program placed where its interpreter goes.
    let ld = dir.join("ld");
    write_exec(&ld, &Elf::pie().bytes());
    let mut dynamic = Elf::exec(0x40_0000);
    dynamic.interp = Some(s(&ld).into());
    let path = dir.join("dynamic");
    write_exec(&path, &dynamic.bytes());
    let (status, err) = qrun_within(&["do", "--", s(&path)], PROMPT);
    assert_eq!(status, 7, "a tiny dynamic program runs: {err}");
    dynamic.base = 0x7f00_0000_0000;
    run("overlap", &dynamic, &[], &["overlap"]);
}

#[test]
fn too_little_memory_says_the_minimum() {
    if !require_kvm() {
        return;
    }
    let mut min = None;
    for mem in ["16M", "17M", "20M", "24M"] {
        let (status, err) = qrun_within(&["do", "--memory", mem, "--", "/bin/true"], PROMPT);
        assert_eq!(status, 1, "{mem}: {err}");
        assert_eq!(err.lines().count(), 1, "{mem}: {err}");
        let n: u64 = err
            .split("at least ")
            .nth(1)
            .and_then(|r| r.split(" MiB").next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{mem}: no minimum in {err:?}"));
        assert!(min.is_none_or(|m| m == n), "{mem}: {err}");
        min = Some(n);
    }
    let min = format!("{}M", min.expect("a minimum"));
    let (status, err) = qrun_within(&["do", "--memory", &min, "--", "/bin/true"], PROMPT);
    assert_eq!(status, 0, "the minimum {min} runs /bin/true: {err}");
}

#[test]
fn arguments_as_large_as_linux_allows_run() {
    if !require_kvm() {
        return;
    }
    let args: Vec<String> = (0..100_000).map(|i| i.to_string()).collect();
    let mut all = vec!["sh", "-c", "echo $#", "zero"];
    all.extend(args.iter().map(String::as_str));
    let out = compare_programs(Path::new("/bin/busybox"), &all, &[]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "100000\n", "{out:?}");
}

use qlib::test_rng::Rng;

/// `elf` with one header or program-header field set to an edge value.
fn mutate(elf: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut f = elf.to_vec();
    let phoff = u64::from_le_bytes(f[32..40].try_into().expect("8 bytes")) as usize;
    let phnum = u16::from_le_bytes([f[56], f[57]]) as usize;
    // (offset, width) of the fields a loader reads.
    let mut fields: Vec<(usize, usize)> = vec![(16, 2), (24, 8), (32, 8), (54, 2), (56, 2)];
    for i in 0..phnum {
        let p = phoff + 56 * i;
        fields.extend([(p, 4), (p + 4, 4), (p + 8, 8), (p + 16, 8), (p + 32, 8)]);
        fields.extend([(p + 40, 8), (p + 48, 8)]);
    }
    let (at, width) = fields[rng.below(fields.len() as u64) as usize];
    let old = {
        let mut b = [0u8; 8];
        b[..width].copy_from_slice(&f[at..at + width]);
        u64::from_le_bytes(b)
    };
    let value = match rng.below(8) {
        0 => 0,
        1 => u64::MAX,
        2 => old.wrapping_add(1 + rng.below(0x2000)),
        3 => old.wrapping_sub(1 + rng.below(0x2000)),
        4 => 1 << rng.below(64),
        5 => old ^ (1 << rng.below(64)),
        6 => 0x7fff_ffff_f000 - rng.below(4) * 0x1000,
        _ => rng.next_u64(),
    };
    f[at..at + width].copy_from_slice(&value.to_le_bytes()[..width]);
    if rng.below(4) == 0 {
        f.truncate(rng.below(f.len() as u64) as usize);
    }
    f
}

#[test]
fn mutated_programs_run_or_are_refused_clearly() {
    if !require_kvm() {
        return;
    }
    let dir = TempDir::new("elf-fuzz");
    let hello = std::fs::read(test_apps::path("hello")).expect("hello");
    let tiny = Elf::exec(0x40_0000).bytes();
    let mut rng = Rng(0x5eed_1e55_0ade_f00d);
    let started = Instant::now();
    for case in 0..40 {
        let base = if case % 2 == 0 { &hello } else { &tiny };
        let bytes = mutate(base, &mut rng);
        let path = dir.join(format!("m{case}"));
        write_exec(&path, &bytes);
        let (status, err) = qrun_within(&["do", "--memory", "64M", "--", s(&path)], PROMPT);
        assert!(!err.contains("panic"), "case {case}: {err}");
        assert!(!err.contains("vCPU failed"), "case {case}: {err}");
        if status == 126 || status == 127 {
            assert_eq!(err.lines().count(), 1, "case {case} ({status}): {err:?}");
            assert!(err.starts_with("qrun: "), "case {case}: {err:?}");
        } else {
            assert!(
                (0..=255).contains(&status) && status != 1,
                "case {case}: status {status}: {err}"
            );
        }
    }
    assert!(started.elapsed() < Duration::from_secs(60));
}
