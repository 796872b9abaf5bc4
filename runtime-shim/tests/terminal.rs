//! Guest pseudo-terminals (docs/terminal.md): the `pty` program checks
//! /dev/ptmx and /dev/pts (openpty, ptsname, ttyname, stat), termios
//! modes, canonical editing, echo, ICRNL/ONLCR, raw mode and VMIN/VTIME,
//! window size, EIO after either side closes, and a forkpty child's
//! controlling terminal (/dev/tty, ^C as SIGINT to the foreground group,
//! SIGWINCH, SIGTTIN for a background read, setsid and TIOCNOTTY). It
//! runs natively and sandboxed, built against musl and against glibc
//! (whose openpty uses TIOCGPTPEER), and the runs must print the same.
//!
//! Every test needs /dev/kvm: without it a test says SKIPPED loudly, and
//! fails under `CI=true`.

#![forbid(unsafe_code)]

mod common;

use common::{assert_same, require_kvm, run_native, run_sandboxed, stdout};

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
