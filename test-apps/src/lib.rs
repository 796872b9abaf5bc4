//! Linux x86-64 test programs for the compatibility tests.
//!
//! `build.rs` compiles every `c/*.c` with `musl-gcc -static -O2`, every
//! `c-dyn/*.c` with the system `gcc` (dynamic, glibc, PIE) and as
//! `NAME_musl` with `musl-gcc` (dynamic, musl's loader), a few `c/*.c`
//! again as `NAME_glibc` with `gcc -static -pthread` (glibc), and the
//! bare `asm/*.S` programs with `gcc -nostdlib -static`, and the
//! `rust-hello` crate for `x86_64-unknown-linux-musl`, into `$OUT_DIR/bin`.
//! Each program prints the same bytes on every run (no pids, addresses or
//! times), so a native run and a sandboxed run can be compared byte for
//! byte:
//!
//! ```no_run
//! let hello = test_apps::path("hello");
//! assert!(hello.is_file());
//! ```

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

/// Every program `build.rs` produces, by name.
pub const ALL: &[&str] = &[
    "args_env",
    // YMM/ZMM/k registers across preemptive switches and signal handlers
    // (timeslice.rs, signals.rs).
    "avx_state",
    "badptr",
    // The bench_* programs are benchmarks for the `bench` harness: they
    // print timings, so unlike the others their output varies by run.
    "bench_fault",
    "bench_hostcall",
    "bench_procs",
    "bench_threads",
    "bench_syscall",
    // capget: the version probe and the caller's sets (linux_surface.rs).
    "caps",
    // clone's CLONE_FILES/CLONE_FS/CLONE_SIGHAND between processes,
    // unshare, execve in a sharing child (processes.rs).
    "cloneshare",
    "cloneshare_glibc",
    "creds",
    "devshm",
    // linux.devices, /dev/ptmx and the config's mounts in mountinfo (oci_dev).
    "ocidevs",
    "clocks",
    // Dynamically linked (PIE), from c-dyn/: against glibc with gcc, and
    // against musl (its loader /lib/ld-musl-x86_64.so.1) with musl-gcc.
    "dyn_hello",
    "dyn_hello_musl",
    "spawn",
    "spawn_musl",
    "cowmatrix",
    // CPU clocks per thread/process/child, rusage, times, ITIMER_VIRTUAL/PROF.
    "cpuclock",
    "escape",
    // execve: errors, what survives an exec, a `#!` script, /bin/echo.
    "exec_chain",
    "exit_code",
    "fault_regs",
    // Holds every fd it may open (files, sockets, pipes), then serves stdin.
    "fd_hog",
    // asm/: bare programs whose very first instruction is privileged
    // (or spins), for the first entry to user mode.
    "first_cli",
    "first_cr3_read",
    "first_cr3_write",
    "first_hlt",
    "first_kread",
    "first_out",
    "first_spin",
    "first_write",
    "flags_syscall",
    // Forks until the process limit (EAGAIN in the sandbox), then reaps.
    "forkbomb",
    // Hibernation while a forked child blocks on stdin (processes.rs).
    "forkhib",
    // Four processes on a ring of pipes and sockets, checksummed after
    // many hibernations (processes.rs).
    "hibcycles",
    // A MAP_SHARED anonymous page read back by one sharer only between
    // two hibernations stays shared (processes.rs).
    "hibshared",
    // fork, copy-on-write, wait4/waitid, kill to a child, vfork.
    "forkwait",
    // The program's GS base across syscalls, faults, signals, fork and
    // thread switches (smp.rs: the kernel keeps its per-CPU base in GS).
    "gsbase",
    "fileops",
    // Metadata seen again after changes, frozen rootfs cache (metacache.rs).
    "metacache",
    // MAP_PRIVATE file pages from the page cache stay private (filemap).
    "filemap_private",
    "filecopy",
    // Writable MAP_SHARED file mappings, native vs sandbox (filemap).
    "filemap_shared",
    // A file shrunk while mapped from the file window: SIGBUS (filemap).
    "filemap_truncated",
    // Whole-file mappings past the file window's cap (filemap).
    "filemap_many",
    "free_probe",
    "heapslack",
    // sendmmsg over UDP (linux_surface).
    "mmsg",
    // Anonymous memory touched in order: the fault-ahead (faults.rs).
    "seqfault",
    "fileops_special",
    "hello",
    // Signals to a container's pid 1 under runc and qrun (init_signals).
    "init_sig",
    // Hibernation tests and bench: a 64 MiB pattern driven over stdin.
    "hib_pattern",
    "http_server",
    "ioops",
    // alarm, setitimer, getitimer and SIGALRM.
    "itimer",
    // Job control: stopped and continued children, waits, SIGHUP on
    // hang-up (jobctl.rs).
    "jobctl",
    // getdents, utime, utimes, futimesat: old calls (compat_static).
    "legacy_calls",
    "malloc_stress",
    // POSIX message queues (linux_surface.rs).
    "mqnotify",
    "mqueue",
    "netops",
    // NETLINK_ROUTE dumps, getifaddrs/if_nameindex, SIOCGIF* ioctls.
    "netlink",
    // /proc system files: loadavg, meminfo, cpuinfo, mounts, sys/...
    "pipes",
    // A pod sandbox's pause container (cri.rs): pause() until SIGTERM.
    "pause",
    // Preempted threads keep XMM registers, FS base and the red zone (timeslice).
    "preempt_state",
    "procfs",
    // /proc/<pid>/ and /proc/self: stat, status, cmdline, links, fd/.
    "procpid",
    // The program's own sockets in /proc/net/{tcp,udp,unix} (linux_surface.rs).
    "procnet",
    // Raw and ICMP sockets are refused as for a process without CAP_NET_RAW.
    "rawsock",
    // gethostid from /etc/hostid (glibc).
    "futexshm",
    "hostid",
    "hostid_glibc",
    // pthreads under load (threads_stress.rs), with musl and, as
    // `pthread_stress_glibc`, statically against glibc.
    "pthread_stress",
    "pthread_stress_glibc",
    // Guest ptys (terminal.rs): /dev/ptmx, /dev/pts, termios, job control
    // basics; with musl and, as `pty_glibc`, statically against glibc.
    "pty",
    "pty_glibc",
    "reclaim_probe",
    "rust-hello",
    // linux.seccomp: what a few calls return (compared with runc).
    // SCM_RIGHTS between processes and in one.
    "scm",
    "ucred",
    "uts",
    // IP/IPv6 control messages, timestamps, truncation (linux_surface.rs).
    "cmsgip",
    "seccomp_probe",
    "segfault",
    // Hostile rt_sigreturn frames and stacks.
    "sig_badframe",
    // SIGTERM during a blocking call, sent by the test (not by itself).
    "sig_graceful",
    "signals",
    // SMP cases: munmap/mprotect race, affinity, CPU burn, fork from
    // threads, hibernation of computing threads (smp).
    "smp",
    // Copy-on-write faults on a secondary vCPU across hibernations (smp).
    "cowhib",
    // A pure user-mode loop: signals and control requests need a vCPU kick.
    "spin",
    // A server whose other thread spins: hibernated from the kick (servers).
    "spin_accept",
    "sysinfo",
    // Random syscalls with hostile arguments (security_fuzz.rs).
    "sysfuzz",
    // sysinfo, getrusage and CPU clocks, groups, priorities, prctl, statfs, sync.
    "sysinfo2",
    // mknod/mkfifo, fallocate, memfd_create, msync, affinity, pipe sizes,
    // O_PATH, non-UTF-8 names; `container` mode: what root may not do.
    "surface2",
    // pthreads, futexes, signals to threads, exec from a thread (threads).
    "threads",
    // Thread bombs and wild clone stacks/TLS (threads.rs).
    "threadbomb",
    // Threads and processes spinning without syscalls share the vCPU (timeslice).
    "timeslice",
    "touch_mem",
    // AF_UNIX paths and abstract names, symlink/link/chmod (security_unix).
    "unixsock",
    // A container in a user namespace of its own (oci_userns).
    "userns",
    // A vfork child on its parent's memory (processes.rs).
    "vdso",
    "vdso_dyn",
    "vdso_dyn_musl",
    "vdso_glibc",
    "vforkmem",
    "waits",
];

/// The directory holding the built programs.
pub fn bin_dir() -> &'static Path {
    Path::new(concat!(env!("OUT_DIR"), "/bin"))
}

/// The absolute path of the program `name` (one of [`ALL`]).
///
/// # Panics
///
/// If `name` is not in [`ALL`]: a typo should fail loudly, not as a
/// confusing "program not found" from the runtime under test.
pub fn path(name: &str) -> PathBuf {
    assert!(
        ALL.contains(&name),
        "unknown test program {name:?}; known: {ALL:?}"
    );
    bin_dir().join(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn every_program_is_built_and_executable() {
        for name in ALL {
            let p = path(name);
            let meta = std::fs::metadata(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            assert!(meta.is_file(), "{} is not a file", p.display());
            assert_ne!(
                meta.permissions().mode() & 0o111,
                0,
                "{} is not executable",
                p.display()
            );
        }
    }

    #[test]
    fn every_c_source_is_listed() {
        let c_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("c");
        for entry in std::fs::read_dir(&c_dir).expect("test-apps/c is readable") {
            let p = entry.expect("directory entry is readable").path();
            if p.extension().is_some_and(|e| e == "c") {
                let stem = p
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .expect("UTF-8 file name");
                assert!(ALL.contains(&stem), "{stem} is built but missing from ALL");
            }
        }
    }

    #[test]
    #[should_panic(expected = "unknown test program")]
    fn unknown_name_panics() {
        let _ = path("no-such-program");
    }
}
