//! Hibernation through the real path (`qrun do` -> qvisor -> qkernel on
//! /dev/kvm): `hib_pattern` fills 64 MiB with a pattern and answers
//! commands on stdin; the tests hibernate and wake it through the control
//! socket (`qrun ctl`), signals, and data arriving on stdin, and check that
//! not a byte changes, that failures are loud and clean, and that no swap or
//! REAP file outlives the sandbox.
#![forbid(unsafe_code)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A running `hib_pattern` sandbox with its control socket and state dir.
struct Sandbox {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    socket: PathBuf,
    state_dir: PathBuf,
    /// The pattern's checksum as first printed.
    sum: String,
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("qrun-hib-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

impl Sandbox {
    fn start(name: &str, state_dir: Option<&Path>) -> Self {
        Self::start_via(name, state_dir, &[])
    }

    /// Like `start`, with `hib_pattern` run by `launcher` (a program that
    /// execs its arguments, such as `/usr/bin/env`).
    fn start_via(name: &str, state_dir: Option<&Path>, launcher: &[&str]) -> Self {
        let dir = scratch(name);
        let socket = dir.join("ctl.sock");
        let state_dir = state_dir.map_or_else(|| dir.join("state"), Path::to_path_buf);
        let mut child = common::qrun_do_controlled(&socket, &state_dir)
            .args(launcher)
            .arg(test_apps::path("hib_pattern"))
            .arg("64")
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn qrun");
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        stdout.read_line(&mut line).expect("read");
        let sum = line
            .strip_prefix("ready ")
            .unwrap_or_else(|| panic!("hib_pattern did not start: {line:?}"))
            .trim()
            .to_owned();
        common::wait_for_socket(&socket);
        Self {
            child,
            stdin,
            stdout,
            socket,
            state_dir,
            sum,
        }
    }

    /// Sends a command line; returns the answer line.
    fn cmd(&mut self, c: &str) -> String {
        let stdin = self.stdin.as_mut().expect("stdin open");
        // A sandbox that stopped reads nothing: the answer is then empty.
        let _ = stdin
            .write_all(format!("{c}\n").as_bytes())
            .and_then(|()| stdin.flush());
        let mut line = String::new();
        let _ = self.stdout.read_line(&mut line);
        line.trim().to_owned()
    }

    fn verify(&mut self) {
        let expected = format!("ok {}", self.sum);
        assert_eq!(self.cmd("verify"), expected, "the pattern must survive");
    }

    /// `qrun ctl SOCKET req`: Ok(status) or Err(message).
    fn ctl(&self, req: &str) -> Result<Value, String> {
        common::ctl(&self.socket, req)
    }

    fn state(&self) -> String {
        self.ctl("status").expect("status")["state"]
            .as_str()
            .expect("state")
            .to_owned()
    }

    fn files(&self) -> Vec<String> {
        common::dir_names(&self.state_dir)
    }

    /// Ends the program; returns (status, stderr).
    fn finish(mut self) -> (i32, String) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.write_all(b"quit\n");
        }
        let out = self.child.wait_with_output().expect("wait");
        (
            common::shell_status(out.status),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

fn wait_state(s: &Sandbox, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let st = s.state();
        if st == want {
            return;
        }
        assert!(Instant::now() < deadline, "state {st}, expected {want}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_hundred_hibernations_lose_nothing() {
    if !common::require_kvm() {
        return;
    }
    let mut s = Sandbox::start("cycles", None);
    s.verify();
    let (mut reap_wakes, mut fault_wakes) = (0, 0);
    for i in 0..100 {
        let st = s.ctl("hibernate").expect("hibernate");
        assert_eq!(st["state"], "hibernated", "cycle {i}: {st}");
        assert!(
            st["swapped_out_bytes"].as_u64().expect("bytes") >= 60 << 20,
            "cycle {i}: 64 MiB should leave: {st}"
        );
        if st["reap_bytes"].as_u64() > Some(0) {
            reap_wakes += 1;
        } else {
            fault_wakes += 1;
        }
        match i % 4 {
            // Woken by data on what the guest waits on (its stdin).
            0 => s.verify(),
            // Woken by the control socket, then a request.
            1 => {
                s.ctl("wake").expect("wake");
                s.verify();
            }
            // A smaller working set, then everything again.
            2 => {
                assert_eq!(s.cmd("touch 8"), "ok");
                s.verify();
            }
            // A new pattern: the working set's contents change.
            _ => {
                let sum = s.cmd(&format!("fill {}", i + 7));
                s.sum = sum.strip_prefix("ok ").expect("fill answer").to_owned();
                s.verify();
            }
        }
        assert_eq!(s.state(), "running");
    }
    assert!(fault_wakes >= 1, "page-fault wakes exercised");
    assert!(reap_wakes >= 50, "REAP wakes exercised: {reap_wakes}");
    let files = s.files();
    assert!(files.iter().any(|f| f.ends_with(".qswap")), "{files:?}");
    let dir = s.state_dir.clone();
    let (status, stderr) = s.finish();
    assert_eq!(status, 0, "{stderr}");
    let left = common::dir_names(&dir);
    assert!(
        left.is_empty(),
        "swap/REAP files must go with the sandbox: {left:?}"
    );
}

/// A program that `execve`d (the dynamic `/usr/bin/env` running the
/// static `hib_pattern`) hibernates and wakes like one started directly:
/// nothing in the kernel keeps the first program's page tables.
#[test]
fn hibernation_after_execve() {
    if !common::require_kvm() {
        return;
    }
    let mut s = Sandbox::start_via("after-exec", None, &["/usr/bin/env"]);
    s.verify();
    for i in 0..6 {
        let st = s.ctl("hibernate").expect("hibernate");
        assert_eq!(st["state"], "hibernated", "cycle {i}: {st}");
        if i % 2 == 0 {
            s.ctl("wake").expect("wake");
        }
        s.verify();
    }
    let (status, stderr) = s.finish();
    assert_eq!(status, 0, "{stderr}");
}

#[test]
fn bad_requests_get_clear_errors() {
    if !common::require_kvm() {
        return;
    }
    let mut s = Sandbox::start("bad", None);
    let e = s.ctl("wake").expect_err("wake while running");
    assert!(e.contains("running"), "{e}");
    s.ctl("hibernate").expect("hibernate");
    let e = s.ctl("hibernate").expect_err("hibernate twice");
    assert!(e.contains("hibernated"), "{e}");
    s.ctl("wake").expect("wake");
    s.verify();
    // Signals: SIGUSR2 hibernates, SIGCONT wakes.
    let pid = s.child.id().to_string();
    let kill = |sig: &str| {
        assert!(
            Command::new("kill")
                .args([sig, &pid])
                .status()
                .expect("kill")
                .success()
        );
    };
    kill("-USR2");
    wait_state(&s, "hibernated");
    // A reclaim request (SIGUSR1) leaves a hibernated sandbox asleep: its
    // memory is already with the host.
    kill("-USR1");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(s.state(), "hibernated", "SIGUSR1 woke the sandbox");
    kill("-CONT");
    wait_state(&s, "running");
    s.verify();
    kill("-TSTP");
    wait_state(&s, "hibernated");
    // A kill during hibernation ends the program (default action).
    s.ctl("signal 9").expect("signal");
    let dir = s.state_dir.clone();
    let (status, _) = s.finish();
    assert_eq!(status, 128 + 9);
    assert_eq!(common::dir_names(&dir), Vec::<String>::new());
}

#[test]
fn a_full_disk_aborts_and_the_guest_carries_on() {
    if !common::require_kvm() {
        return;
    }
    let mnt = scratch("full").join("mnt");
    std::fs::create_dir_all(&mnt).expect("mountpoint");
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=4m", "tmpfs"])
        .arg(&mnt)
        .status()
        .is_ok_and(|s| s.success());
    assert!(mounted, "mounting a 4 MiB tmpfs needs root");
    let mut s = Sandbox::start("full-sb", Some(&mnt.join("state")));
    let e = s
        .ctl("hibernate")
        .expect_err("a 4 MiB disk cannot take 64 MiB");
    assert!(e.contains("aborted") && e.contains("space"), "{e}");
    assert_eq!(s.state(), "running");
    s.verify();
    let e = s.ctl("hibernate").expect_err("still full");
    assert!(e.contains("aborted"), "{e}");
    s.verify();
    let (status, stderr) = s.finish();
    let _ = Command::new("umount").arg(&mnt).status();
    assert_eq!(status, 0, "{stderr}");
}

fn corrupt(path: &Path, offset: u64) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .expect("open for corruption");
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, offset).expect("read byte");
    b[0] ^= 0x40;
    f.write_all_at(&b, offset).expect("write byte");
}

#[test]
fn a_corrupted_swap_page_stops_the_sandbox_loudly() {
    if !common::require_kvm() {
        return;
    }
    // First hibernation: everything goes to the swap file (no working set
    // yet); the wake is by page faults.
    let mut s = Sandbox::start("corrupt-swap", None);
    s.ctl("hibernate").expect("hibernate");
    let swap = s.state_dir.join("swap.qswap");
    // A page in the middle of the data area (the 64 MiB buffer).
    corrupt(&swap, 4096 * 8000 + 123);
    let answer = s.cmd("verify");
    assert!(
        !answer.starts_with("ok"),
        "bad data reached the guest: {answer}"
    );
    let (status, stderr) = s.finish();
    assert_ne!(status, 0);
    assert!(stderr.contains("checksum mismatch"), "{stderr}");
}

#[test]
fn a_corrupted_or_truncated_reap_file_stops_the_sandbox_loudly() {
    if !common::require_kvm() {
        return;
    }
    // The parked kernel pages are a file of the same format, checked the
    // same way (`a_hibernated_sandbox_parks_its_kernel_pages`).
    for (tag, file, truncate) in [
        ("corrupt-reap", "reap.qreap", false),
        ("trunc-reap", "reap.qreap", true),
        ("corrupt-kernel", "kernel.qreap", false),
    ] {
        let mut s = Sandbox::start(tag, None);
        s.ctl("hibernate").expect("hibernate");
        s.verify();
        let st = s.ctl("hibernate").expect("hibernate");
        assert!(st["reap_bytes"].as_u64() > Some(60 << 20), "{st}");
        // The kernel pages go once the guest waits, just after the commit
        // that answered the request.
        std::thread::sleep(Duration::from_millis(300));
        let path = s.state_dir.join(file);
        if truncate {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .expect("open");
            f.set_len(4096 * 100).expect("truncate");
        } else {
            // A page of the data (the kernel file holds ~100).
            corrupt(
                &path,
                4096 * if file == "reap.qreap" { 5000 } else { 20 } + 7,
            );
        }
        let e = s.ctl("wake").expect_err("a bad REAP file cannot wake");
        assert!(e.contains("qreap"), "{tag}: {e}");
        let answer = s.cmd("verify");
        assert!(answer.is_empty(), "{tag}: the guest must not run: {answer}");
        let (status, stderr) = s.finish();
        assert_ne!(status, 0);
        assert!(stderr.contains("hibernation"), "{tag}: {stderr}");
    }
}

/// Resident pages of `pid`'s guest RAM (`size` bytes of read-write
/// mappings: anonymous, but for the kernel's code mapped from the qrun
/// binary in between) above the low pages, and how many of them are all
/// zero; from /proc/PID/pagemap and /proc/PID/mem.
fn resident_guest_pages(pid: u32, size: u64) -> (u64, u64) {
    use std::io::{Read, Seek, SeekFrom};
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).expect("maps");
    // (start, end, anonymous) of the read-write private mappings.
    let rw: Vec<(u64, u64, bool)> = maps
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (lo, hi) = f.first()?.split_once('-')?;
            let (lo, hi) = (
                u64::from_str_radix(lo, 16).ok()?,
                u64::from_str_radix(hi, 16).ok()?,
            );
            (f.get(1) == Some(&"rw-p")).then_some((lo, hi, f.len() == 5))
        })
        .collect();
    // An anonymous mapping from which contiguous read-write mappings
    // reach `size` bytes.
    let base = rw
        .iter()
        .filter(|m| m.2)
        .map(|m| m.0)
        .find(|&lo| {
            let mut end = lo;
            while let Some(m) = rw.iter().find(|m| m.0 == end) {
                end = m.1;
            }
            end - lo == size
        })
        .expect("the guest-RAM mapping");
    let mut pagemap = std::fs::File::open(format!("/proc/{pid}/pagemap")).expect("pagemap");
    let mut mem = std::fs::File::open(format!("/proc/{pid}/mem")).expect("mem");
    let mut entries = vec![0u8; (size / 4096 * 8) as usize];
    pagemap
        .seek(SeekFrom::Start(base / 4096 * 8))
        .expect("seek");
    pagemap.read_exact(&mut entries).expect("read pagemap");
    let (mut resident, mut zero) = (0, 0);
    let mut page = vec![0u8; 4096];
    // Above the boot page tables: the control and PV pages are the VMM's.
    for (i, e) in entries.chunks(8).enumerate().skip(0x10) {
        let e = u64::from_le_bytes(e.try_into().expect("8 bytes"));
        if e >> 63 == 0 {
            continue;
        }
        resident += 1;
        mem.seek(SeekFrom::Start(base + i as u64 * 4096))
            .expect("seek mem");
        mem.read_exact(&mut page).expect("read guest page");
        if page.iter().all(|&b| b == 0) {
            zero += 1;
        }
    }
    (resident, zero)
}

/// A hibernated sandbox keeps no all-zero guest page: they read back as
/// zero once the host dropped them (`GuestRam::discard_zero_pages`).
#[test]
fn a_hibernated_sandbox_keeps_no_zero_guest_pages() {
    if !common::require_kvm() {
        return;
    }
    let (mut c, line) = common::controlled::Controlled::start(
        "hib-zero",
        &test_apps::path("hib_pattern"),
        &["8"],
        Stdio::piped(),
    );
    assert!(line.starts_with("ready "), "{line}");
    c.hibernate();
    std::thread::sleep(Duration::from_millis(300));
    // `qrun do`'s default guest RAM.
    let (resident, zero) = resident_guest_pages(c.child.id(), 256 << 20);
    assert!(resident > 0, "no resident guest page at all?");
    assert_eq!(
        zero, 0,
        "{zero} of {resident} resident guest pages are zero"
    );
    c.ctl("wake");
    let mut stdin = c.child.stdin.take().expect("stdin");
    stdin.write_all(b"verify\nquit\n").expect("commands");
    drop(stdin);
    let (rest, status) = c.finish();
    assert_eq!(status, 0);
    assert!(rest.starts_with("ok "), "{rest}");
}

/// A hibernated sandbox that waits keeps almost none of its guest RAM:
/// the kernel's own pages (its heap with the page tables that hold the
/// swap entries, its data and stacks) go to the state directory's kernel
/// file and come back, checked, at the wake (issue 16; docs/memory.md,
/// "Kernel pages"). Two cycles: the second reuses the file.
#[test]
fn a_hibernated_sandbox_parks_its_kernel_pages() {
    if !common::require_kvm() {
        return;
    }
    let (mut c, line) = common::controlled::Controlled::start(
        "hib-kernel",
        &test_apps::path("hib_pattern"),
        &["8"],
        Stdio::piped(),
    );
    assert!(line.starts_with("ready "), "{line}");
    let mut stdin = c.child.stdin.take().expect("stdin");
    for cycle in 0..2 {
        c.hibernate();
        std::thread::sleep(Duration::from_millis(300));
        let (resident, _) = resident_guest_pages(c.child.id(), 256 << 20);
        eprintln!("cycle {cycle}: {resident} guest pages resident while hibernated");
        // Before: ~100 pages (the kernel heap, data and stacks).
        assert!(
            resident <= 4,
            "cycle {cycle}: {resident} guest pages kept while hibernated"
        );
        let parked = std::fs::metadata(c.state_dir().join("kernel.qreap"))
            .map(|m| m.len())
            .unwrap_or(0);
        assert!(
            parked > 64 << 10,
            "cycle {cycle}: kernel file of {parked} bytes"
        );
        c.ctl("wake");
        stdin.write_all(b"verify\n").expect("verify");
        let answer = c.read_line();
        assert!(answer.starts_with("ok "), "cycle {cycle}: {answer}");
    }
    stdin.write_all(b"quit\n").expect("quit");
    drop(stdin);
    let (_, status) = c.finish();
    assert_eq!(status, 0);
}

/// Free memory the program had just used (still resident when the
/// hibernation dropped it) is faulted back in at the wake, and reads as
/// zeros when the program maps memory again.
#[test]
fn warm_free_memory_comes_back_at_the_wake_as_zeros() {
    if !common::require_kvm() {
        return;
    }
    let (mut c, line) = common::controlled::Controlled::start(
        "hib-warm",
        &test_apps::path("free_probe"),
        &["hold", "16", "munmap"],
        Stdio::piped(),
    );
    assert_eq!(line, "touched\n");
    let mut stdin = c.child.stdin.take().expect("stdin");
    stdin.write_all(b"\n").expect("write");
    assert_eq!(c.read_line(), "freed\n");
    c.hibernate();
    let st = c.ctl("wake");
    let warm = st["warm_free_bytes"].as_u64().unwrap_or(0);
    assert!(
        warm >= 8 << 20,
        "the 16 MiB just freed should come back at the wake: {st}"
    );
    stdin.write_all(b"\n").expect("write");
    drop(stdin);
    let (rest, _) = c.finish();
    assert_eq!(rest, "zero ok\n");
}
