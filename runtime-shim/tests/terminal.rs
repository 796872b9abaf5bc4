//! Guest pseudo-terminals (docs/terminal.md): the `pty` program checks
//! /dev/ptmx and /dev/pts (openpty, ptsname, ttyname, stat), termios
//! modes, canonical editing, echo, ICRNL/ONLCR, raw mode and VMIN/VTIME,
//! window size, EIO after either side closes, and a forkpty child's
//! controlling terminal (/dev/tty, ^C as SIGINT to the foreground group,
//! SIGWINCH, SIGTTIN for a background read, setsid and TIOCNOTTY). It
//! runs natively and sandboxed, built against musl and against glibc
//! (whose openpty uses TIOCGPTPEER), and the runs must print the same.
//!
//! A `qrun run` bundle with `process.terminal` and `--console-socket`:
//! the test receives the terminal's master over the socket (runc's
//! protocol), drives busybox `sh` through it and checks that the shell
//! has job control (its terminal is a guest pty it controls), that ^C
//! interrupts the foreground job, that ^Z stops it (`jobs`, `fg`, `kill
//! %1` as on Linux), and the exit status. `qrun exec --tty
//! --console-socket` does the same for a shell started in a running
//! container, twice (the first terminal's guest pty goes when it ends).
//!
//! Every test needs /dev/kvm: without it a test says SKIPPED loudly, and
//! fails under `CI=true`.

mod common;

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::bundle::bundle;
use common::tmp::TempDir;
use common::{assert_same, qrun, require_kvm, run_native, run_sandboxed, stdout};

fn same_as_linux(prog: &str) {
    if !require_kvm() {
        return;
    }
    let prog = test_apps::path(prog);
    let native = run_native(&prog, &[], &[]);
    let text = stdout(&native);
    assert!(
        !text.contains("FAIL") && native.status == 0 && text.contains("child status 0"),
        "the native run already fails: {native:?}"
    );
    let sandboxed = run_sandboxed(&prog, &[], &[]);
    assert_same(prog.to_str().unwrap_or("pty"), &native, &sandboxed);
}

/// Every check, musl's openpty/forkpty (ptsname + open of /dev/pts/N).
#[test]
fn pty_semantics_match_linux_musl() {
    same_as_linux("pty");
}

/// Every check, glibc's openpty/forkpty (TIOCGPTPEER).
#[test]
fn pty_semantics_match_linux_glibc() {
    same_as_linux("pty_glibc");
}

/// The terminal master a console socket received (runc's protocol: one
/// message whose SCM_RIGHTS carries the fd).
fn receive_master(listener: &UnixListener, child: &mut Child) -> std::fs::File {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    listener.set_nonblocking(true).expect("nonblocking");
    let deadline = Instant::now() + Duration::from_secs(30);
    let stream = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if let Some(st) = child.try_wait().expect("wait") {
                    panic!("qrun ended ({st}) before sending the terminal");
                }
                assert!(
                    Instant::now() < deadline,
                    "no connection to the console socket"
                );
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("accept: {e}"),
        }
    };
    stream.set_nonblocking(false).expect("blocking");
    let mut name = [0u8; 64];
    let mut iov = [std::io::IoSliceMut::new(&mut name)];
    let mut space = nix::cmsg_space!([std::os::fd::RawFd; 1]);
    let msg = recvmsg::<()>(
        stream.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::empty(),
    )
    .expect("recvmsg on the console socket");
    for c in msg.cmsgs().expect("control messages") {
        if let ControlMessageOwned::ScmRights(fds) = c
            && let Some(&fd) = fds.first()
        {
            // SAFETY: SCM_RIGHTS just installed `fd` in this process;
            // nothing else owns it.
            let owned = unsafe { OwnedFd::from_raw_fd(fd) };
            return std::fs::File::from(owned);
        }
    }
    panic!("the console socket message carried no fd");
}

/// Reads from the master until `needle` appears or `secs` pass; returns
/// everything read.
fn read_until(master: &mut std::fs::File, needle: &str, secs: u64) -> String {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut got = Vec::new();
    while Instant::now() < deadline && !String::from_utf8_lossy(&got).contains(needle) {
        let mut fds = [PollFd::new(
            std::os::fd::AsFd::as_fd(&*master),
            PollFlags::POLLIN,
        )];
        if poll(&mut fds, PollTimeout::from(100u8)).unwrap_or(0) == 0 {
            continue;
        }
        let mut buf = [0u8; 4096];
        match master.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// A busybox rootfs with `sh`, `sleep` and `tty` links.
fn shell_bundle(dir: &Path) {
    let busybox = Path::new("/bin/busybox");
    assert!(
        busybox.is_file(),
        "/bin/busybox is missing: scripts/deps.sh installs busybox-static"
    );
    bundle(dir, &[("/bin/busybox", busybox)], &["/bin/sh"], |c| {
        c["process"]["terminal"] = serde_json::Value::Bool(true);
    });
    for applet in ["sh", "sleep", "tty", "stty"] {
        std::os::unix::fs::symlink("busybox", dir.join("rootfs/bin").join(applet))
            .expect("applet link");
    }
}

/// Waits at most 30 s for `child` to end; its exit code.
fn exit_code(child: &mut Child, log: &Path) -> Option<i32> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(s) = child.try_wait().expect("wait") {
            return s.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!(
                "qrun did not end after exit: {}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Drives the interactive busybox shell on `master`: job control, the
/// guest pty as its terminal, echo, ^C ending the foreground job; then
/// `exit CODE`.
fn drive_shell(master: &mut std::fs::File, code: u8) {
    let start = read_until(master, "# ", 20);
    assert!(
        !start.contains("job control turned off") && !start.contains("can't access tty"),
        "the shell has no job control: {start:?}"
    );
    master.write_all(b"tty; echo a$((6*7))b\n").expect("write");
    let out = read_until(master, "a42b", 20);
    assert!(out.contains("/dev/pts/"), "tty names a guest pty: {out:?}");
    // The command line was echoed with the guest's ONLCR.
    assert!(out.contains("echo a$((6*7))b\r\n"), "echo: {out:?}");
    // The console socket's owner resizes the terminal: the guest pty
    // takes the size when asked.
    let ws = libc::winsize {
        ws_row: 33,
        ws_col: 111,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads one winsize from a valid reference.
    let rc = unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCSWINSZ, &ws) };
    assert_eq!(rc, 0, "TIOCSWINSZ on the master");
    master.write_all(b"stty size\n").expect("write");
    let out = read_until(master, "33 111", 20);
    assert!(out.contains("33 111"), "window size: {out:?}");
    // ^C ends the foreground job (SIGINT to its process group), not the shell.
    master.write_all(b"sleep 30\n").expect("write");
    read_until(master, "sleep 30\r\n", 10);
    std::thread::sleep(Duration::from_millis(300));
    master.write_all(b"\x03").expect("write");
    master.write_all(b"echo status $?\n").expect("write");
    let out = read_until(master, "status 130", 20);
    assert!(out.contains("status 130"), "^C did not end sleep: {out:?}");
    job_control(master);
    master
        .write_all(format!("exit {code}\n").as_bytes())
        .expect("write");
}

/// ^Z stops the foreground job (SIGTSTP to its group; the shell's
/// `wait4(WUNTRACED)` sees it), `jobs` lists it, `fg` continues it and ^C
/// ends it; `kill %1` to a stopped job waits for its `fg` (SIGTERM stays
/// pending while it is stopped, as on Linux). The lines are busybox ash's
/// on Linux.
fn job_control(master: &mut std::fs::File) {
    let stop = |master: &mut std::fs::File, cmd: &str| {
        master
            .write_all(format!("{cmd}\n").as_bytes())
            .expect("write");
        read_until(master, &format!("{cmd}\r\n"), 10);
        std::thread::sleep(Duration::from_millis(300));
        master.write_all(b"\x1a").expect("write");
        let want = format!("[1]+  Stopped                    {cmd}");
        let out = read_until(master, &want, 20);
        assert!(out.contains(&want), "^Z did not stop {cmd}: {out:?}");
    };
    stop(master, "sleep 31");
    master.write_all(b"jobs\n").expect("write");
    let out = read_until(master, "Stopped                    sleep 31\r\n/ # ", 20);
    assert!(out.contains("[1]+  Stopped"), "jobs: {out:?}");
    master.write_all(b"fg\n").expect("write");
    read_until(master, "sleep 31\r\n", 10);
    std::thread::sleep(Duration::from_millis(300));
    master.write_all(b"\x03").expect("write");
    master.write_all(b"echo status $?\n").expect("write");
    let out = read_until(master, "status 130", 20);
    assert!(out.contains("status 130"), "fg then ^C: {out:?}");
    stop(master, "sleep 32");
    master.write_all(b"kill %1; jobs\n").expect("write");
    let out = read_until(master, "Stopped                    sleep 32\r\n/ # ", 20);
    assert!(
        out.contains("[1]+  Stopped"),
        "kill %1 ended a stopped job: {out:?}"
    );
    master.write_all(b"fg\n").expect("write");
    let out = read_until(master, "Terminated", 20);
    assert!(out.contains("Terminated"), "fg after kill %1: {out:?}");
    master.write_all(b"echo status $?\n").expect("write");
    let out = read_until(master, "status 143", 20);
    assert!(out.contains("status 143"), "status after kill %1: {out:?}");
}

/// `qrun run --console-socket` with `process.terminal`: an interactive
/// shell with job control on a guest pty relayed to the console's pty.
#[test]
fn run_with_a_console_socket_gives_a_controlling_terminal() {
    if !require_kvm() {
        return;
    }
    let (b, root) = (TempDir::new("tty-b"), TempDir::new("tty-root"));
    shell_bundle(b.path());
    let sock = b.join("console.sock");
    let listener = UnixListener::bind(&sock).expect("binding the console socket");
    let log = std::fs::File::create(b.join("qrun.log")).expect("log");
    let mut child = Command::new(qrun())
        .arg("--root")
        .arg(root.path())
        .args(["run", "--bundle", b.str(), "--console-socket"])
        .arg(&sock)
        .arg("c")
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("dup"))
        .stderr(log)
        .spawn()
        .expect("spawning qrun run");
    let mut master = receive_master(&listener, &mut child);
    drive_shell(&mut master, 3);
    assert_eq!(exit_code(&mut child, &b.join("qrun.log")), Some(3));
}

/// `qrun exec --tty --console-socket` in a running container (pid 1 is
/// `sleep`, without a terminal): the exec'd shell leads its session on a
/// guest pty of its own. Twice: the first one's pty is released.
#[test]
fn exec_tty_with_a_console_socket() {
    if !require_kvm() {
        return;
    }
    let (b, root) = (TempDir::new("tty-eb"), TempDir::new("tty-eroot"));
    shell_bundle(b.path());
    let path = b.join("config.json");
    let mut config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).expect("config")).expect("JSON");
    config["process"]["terminal"] = serde_json::Value::Bool(false);
    config["process"]["args"] = serde_json::json!(["/bin/sleep", "1000"]);
    std::fs::write(&path, serde_json::to_vec(&config).expect("JSON")).expect("config");
    let out = common::bundle::qrun_detached(
        root.path(),
        &["run", "--detach", "--bundle", b.str(), "c"],
        &b.join("run.log"),
    );
    assert_eq!(out.status, 0, "run --detach: {out:?}");
    for code in [4u8, 5] {
        let sock = b.join(format!("exec{code}.sock"));
        let listener = UnixListener::bind(&sock).expect("binding the console socket");
        let log_path = b.join(format!("exec{code}.log"));
        let log = std::fs::File::create(&log_path).expect("log");
        let mut child = Command::new(qrun())
            .arg("--root")
            .arg(root.path())
            .args(["exec", "--tty", "--console-socket"])
            .arg(&sock)
            .args(["c", "/bin/sh"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("dup"))
            .stderr(log)
            .spawn()
            .expect("spawning qrun exec");
        let mut master = receive_master(&listener, &mut child);
        drive_shell(&mut master, code);
        assert_eq!(exit_code(&mut child, &log_path), Some(i32::from(code)));
    }
    let out = common::bundle::qrun_at(root.path(), &["delete", "--force", "c"]);
    assert_eq!(out.status, 0, "delete: {out:?}");
}
