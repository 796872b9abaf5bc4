//! The vDSO (docs/vdso.md): `test-apps/c/vdso.c` run natively and in a
//! `qrun do` sandbox, built four ways (musl and glibc, static and
//! dynamic), must print the same lines: `AT_SYSINFO_EHDR`, the symbols
//! found through DT_HASH and DT_GNU_HASH at version LINUX_2.6, clocks that
//! never go backwards when the vDSO and the system call are mixed, the
//! fallbacks (bad ids, CPU clocks), `[vdso]`/`[vvar]` in
//! `/proc/self/maps`, fork and `munmap`, and C library clock calls that
//! take no system time. Then the vDSO's clocks across a hibernation.
//! (Go's runtime through the vDSO: `runtimes.rs`, `go_time_through_the_vdso`.)
//!
//! Every test needs /dev/kvm: without it a test says SKIPPED loudly, and
//! fails under `CI=true`.

#![forbid(unsafe_code)]

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::controlled::Controlled;
use common::{compare_programs, require_kvm, stdout};

/// Every check line the program prints, in order.
const EXPECTED: &str = "\
AT_SYSINFO_EHDR set: yes
ELF tables (DT_HASH, DT_GNU_HASH, DT_VERSYM, DT_VERDEF): yes
version LINUX_2.6 defined: yes
symbols found: 9 of 9, DT_HASH and DT_GNU_HASH agree: yes
clock 1: vDSO, libc and syscall mixed never go backwards: yes
clock 7: vDSO, libc and syscall mixed never go backwards: yes
clock 4: vDSO, libc and syscall mixed never go backwards: yes
vDSO realtime between two syscall readings: yes
gettimeofday vDSO vs syscall within 50 ms: yes
time vDSO vs syscall within 1 s: yes
monotonic coarse <= precise: yes
realtime coarse <= precise: yes
CLOCK_TAI: 0
vDSO bad clock 12345: -EINVAL
libc bad clock 12345: -1 EINVAL
vDSO getres bad clock: -EINVAL
vDSO getres monotonic: 0 0.000000001
vDSO process CPU clock: 0, > 0: yes
vDSO thread CPU clock: 0, > 0: yes
vDSO getcpu: 0, cpu allowed: yes, node 0
maps: [vdso] at AT_SYSINFO_EHDR: yes, [vvar]: yes
forked child used then unmapped the vDSO: yes
parent's vDSO after that: 0
vDSO write refused: yes
libc clock_gettime, gettimeofday, time x 200000: system time < 20 ms: yes
done
";

fn check(name: &str) {
    if !require_kvm() {
        return;
    }
    let out = compare_programs(&test_apps::path(name), &[], &[]);
    assert_eq!(out.status, 0, "{name}: {out:?}");
    assert_eq!(stdout(&out), EXPECTED, "{name}");
}

#[test]
fn vdso_musl_static() {
    check("vdso");
}

#[test]
fn vdso_glibc_static() {
    check("vdso_glibc");
}

#[test]
fn vdso_glibc_dynamic() {
    check("vdso_dyn");
}

#[test]
fn vdso_musl_dynamic() {
    check("vdso_dyn_musl");
}

/// Time goes on across a hibernation, and the vDSO (whose vvar page is a
/// kernel page, never swapped) still agrees with the system call after
/// the wake.
#[test]
fn vdso_clocks_across_a_hibernation() {
    if !require_kvm() {
        return;
    }
    let (mut c, first) = Controlled::start(
        "vdso-hib",
        &test_apps::path("vdso"),
        &["hib"],
        Stdio::piped(),
    );
    assert_eq!(first, "AT_SYSINFO_EHDR set: yes\n");
    while c.read_line() != "waiting\n" {}
    c.hibernate();
    std::thread::sleep(Duration::from_millis(300));
    c.ctl("wake");
    let mut stdin = c.child.stdin.take().expect("stdin");
    std::io::Write::write_all(&mut stdin, b"300\n").expect("write");
    drop(stdin);
    let (rest, _) = c.finish();
    assert_eq!(
        rest,
        "monotonic: vDSO advanced by the wait (the test's ms): yes\n\
         monotonic: vDSO <= next syscall: yes\n\
         realtime: vDSO advanced as monotonic within 50 ms: yes\n\
         realtime: vDSO <= next syscall: yes\n"
    );
}
