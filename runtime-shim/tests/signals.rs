//! Signal delivery to the program's handlers: `signals` runs natively and
//! sandboxed and must print the same lines; `sig_graceful` blocks in a
//! read, epoll_wait, nanosleep or pause until the test sends SIGTERM (to
//! the native process, or to `qrun do` / through `qrun ctl SOCKET signal
//! 15`): its handler must run, the blocked call return EINTR (or restart
//! with SA_RESTART), and the program print "graceful" and exit 0. A
//! hibernation while it waits must not look like a signal.
//!
//! Every test needs /dev/kvm: without it a test says SKIPPED loudly, and
//! fails under `CI=true`.

#![forbid(unsafe_code)]

mod common;

use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

use common::ready::{kill_term, run_after_ready, spawn};
use common::{Outcome, assert_same, require_kvm, run_native, run_sandboxed};

#[test]
fn signals_native_and_sandboxed() {
    if !require_kvm() {
        return;
    }
    let prog = test_apps::path("signals");
    let native = run_native(&prog, &[], &[]);
    let out = String::from_utf8_lossy(&native.stdout).into_owned();
    assert!(!out.contains("FAIL"), "the native run fails: {native:?}");
    assert_eq!(native.status, 0, "{native:?}");
    assert!(out.ends_with("done\n"), "{native:?}");
    let sandboxed = run_sandboxed(&prog, &[], &[]);
    assert_same("signals", &native, &sandboxed);
}

/// `alarm`, `setitimer`/`getitimer` and SIGALRM (`itimer`): a handler cuts
/// `pause` and `sleep` short, an interval timer interrupts a program that
/// only computes (the VMM's timerfd kicks the vCPU), a blocked SIGALRM
/// stays pending, bad input gets EINVAL/EFAULT; and with no handler the
/// alarm kills the program (142), natively and sandboxed alike.
#[test]
fn alarm_and_interval_timers_native_and_sandboxed() {
    if !require_kvm() {
        return;
    }
    let prog = test_apps::path("itimer");
    let native = run_native(&prog, &[], &[]);
    let out = String::from_utf8_lossy(&native.stdout).into_owned();
    assert!(!out.contains('?') && !out.contains("wrong"), "{native:?}");
    assert_eq!(native.status, 0, "{native:?}");
    assert_same("itimer", &native, &run_sandboxed(&prog, &[], &[]));
    let native = run_native(&prog, &["default"], &[]);
    assert_eq!(native.status, 142, "{native:?}");
    assert_same(
        "itimer default",
        &native,
        &run_sandboxed(&prog, &["default"], &[]),
    );
}

/// Time for the program to go from "ready" into its blocking call.
const SETTLE: Duration = Duration::from_millis(300);

/// How a test stops the program.
enum Stop<'a> {
    /// `kill -TERM` to the process (the program natively, `qrun do` else).
    Kill,
    /// `qrun ctl SOCKET signal 15`.
    Ctl(&'a Path),
}

/// Waits for the "ready" line of `child`, runs `between` (if any), sends
/// SIGTERM and collects the outcome (the "ready" line included). The
/// program prints "ready" just before it blocks; a signal that came before
/// the blocking call would be handled (correctly) without any EINTR, so
/// the test gives it time to get there first.
fn stop_when_ready(child: Child, stop: Stop<'_>, between: impl FnOnce()) -> Outcome {
    let deadline = Duration::from_secs(20);
    run_after_ready(child, SETTLE, deadline, |child| {
        between();
        match stop {
            Stop::Kill => kill_term(child),
            Stop::Ctl(socket) => {
                common::ctl(socket, "signal 15").expect("qrun ctl signal 15");
            }
        }
    })
    .0
}

fn native(mode: &str) -> Outcome {
    let mut cmd = Command::new(test_apps::path("sig_graceful"));
    cmd.arg(mode);
    stop_when_ready(spawn(cmd), Stop::Kill, || {})
}

fn sandboxed(mode: &str) -> Outcome {
    let mut cmd = Command::new(common::qrun());
    cmd.args(["do", "--"])
        .arg(test_apps::path("sig_graceful"))
        .arg(mode);
    stop_when_ready(spawn(cmd), Stop::Kill, || {})
}

fn graceful(mode: &str) {
    if !require_kvm() {
        return;
    }
    let native = native(mode);
    let out = String::from_utf8_lossy(&native.stdout).into_owned();
    assert!(out.ends_with("graceful\n"), "{native:?}");
    assert_eq!(native.status, 0, "{native:?}");
    assert_same(&format!("sig_graceful {mode}"), &native, &sandboxed(mode));
}

#[test]
fn sigterm_interrupts_read() {
    graceful("read");
}

#[test]
fn sigterm_interrupts_epoll_wait() {
    graceful("epoll");
}

#[test]
fn sigterm_interrupts_nanosleep() {
    graceful("sleep");
}

#[test]
fn sigterm_interrupts_pause() {
    graceful("pause");
}

/// SIGTERM blocked but for the ppoll's own mask.
#[test]
fn sigterm_interrupts_ppoll_with_sigmask() {
    graceful("ppoll");
}

/// With SA_RESTART the read is restarted after the handler and returns
/// the byte the handler wrote.
#[test]
fn sigterm_restarts_read_with_sa_restart() {
    graceful("restart");
}

/// `qrun ctl SOCKET signal 15`, after a hibernation and a wake while the
/// program waits: the hibernation is no signal (the read goes on waiting,
/// no EINTR), the SIGTERM is.
#[test]
fn sigterm_via_control_socket_after_hibernation() {
    if !require_kvm() {
        return;
    }
    let dir = common::tmp::TempDir::new("sigterm");
    let socket = dir.join("ctl.sock");
    let mut cmd = common::qrun_do_controlled(&socket, &dir.join("state"));
    cmd.arg(test_apps::path("sig_graceful")).arg("read");
    let child = spawn(cmd);
    let out = stop_when_ready(child, Stop::Ctl(&socket), || {
        common::wait_for_socket(&socket);
        common::ctl(&socket, "hibernate").expect("hibernate");
        common::ctl(&socket, "wake").expect("wake");
    });
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "ready\nread returned: EINTR, stop=1\ngraceful\n",
        "{out:?}"
    );
    assert_eq!(out.status, 0, "{out:?}");
}

/// Hostile `rt_sigreturn` frames and stacks: RFLAGS sanitized, a
/// non-canonical RIP, an unmapped frame or fpstate, a handler with no
/// stack: the program survives or dies by SIGSEGV exactly as on Linux, and
/// the sandbox's kernel never panics.
#[test]
fn hostile_frames() {
    if !require_kvm() {
        return;
    }
    let prog = test_apps::path("sig_badframe");
    for (mode, status) in [
        ("flags", 0),
        ("noncanonical", 139),
        ("unmapped", 139),
        ("badfp", 139),
        ("badstack", 139),
    ] {
        let native = run_native(&prog, &[mode], &[]);
        assert_eq!(native.status, status, "native {mode}: {native:?}");
        let sandboxed = run_sandboxed(&prog, &[mode], &[]);
        assert_same(&format!("sig_badframe {mode}"), &native, &sandboxed);
    }
}

/// A handler that zeroes every YMM, ZMM and opmask register (`avx_state
/// signal`, 20,000 signals from a raw `tgkill` between the load and the
/// check of the registers): after `rt_sigreturn` the interrupted code has
/// its own back, as on Linux, whose signal frame holds the XSAVE state.
/// Before the frame did (FXSAVE only), only the low 128 bits of XMM0-15
/// came back and this failed. On a host without AVX both runs print
/// "no avx" and the test checks nothing more.
#[test]
fn handlers_do_not_clobber_avx_registers() {
    if !require_kvm() {
        return;
    }
    let prog = test_apps::path("avx_state");
    let native = run_native(&prog, &["signal"], &[]);
    assert_eq!(native.status, 0, "the native run fails: {native:?}");
    let sandboxed = run_sandboxed(&prog, &["signal"], &[]);
    assert_same("avx_state signal", &native, &sandboxed);
}
