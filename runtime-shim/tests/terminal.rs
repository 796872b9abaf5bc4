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
//! interrupts the foreground job, and the exit status.
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
    for applet in ["sh", "sleep", "tty"] {
        std::os::unix::fs::symlink("busybox", dir.join("rootfs/bin").join(applet))
            .expect("applet link");
    }
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
    let start = read_until(&mut master, "# ", 20);
    assert!(
        !start.contains("job control turned off") && !start.contains("can't access tty"),
        "the shell has no job control: {start:?}"
    );
    master.write_all(b"tty; echo a$((6*7))b\n").expect("write");
    let out = read_until(&mut master, "a42b", 20);
    assert!(
        out.contains("/dev/pts/0"),
        "tty names the guest pty: {out:?}"
    );
    // The command line was echoed with the guest's ONLCR.
    assert!(out.contains("echo a$((6*7))b\r\n"), "echo: {out:?}");
    // ^C ends the foreground job (SIGINT to its process group), not the shell.
    master.write_all(b"sleep 30\n").expect("write");
    read_until(&mut master, "sleep 30\r\n", 10);
    std::thread::sleep(Duration::from_millis(300));
    let before = Instant::now();
    master.write_all(b"\x03").expect("write");
    master.write_all(b"echo status $?\n").expect("write");
    let out = read_until(&mut master, "status 130", 20);
    assert!(out.contains("status 130"), "^C did not end sleep: {out:?}");
    assert!(before.elapsed() < Duration::from_secs(20));
    master.write_all(b"exit 3\n").expect("write");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("qrun run did not end after exit");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(
        status.code(),
        Some(3),
        "{}",
        std::fs::read_to_string(b.join("qrun.log")).unwrap_or_default()
    );
}
