//! The Linux surface programs see beyond files and sockets: the system
//! files of `/proc` and the information, identity, priority, `prctl`,
//! `statfs` and sync calls. Two test programs run natively and in a
//! `qrun do` sandbox and must print the same (they print shapes and
//! errno names, never host- or run-specific values); a third run checks,
//! in the sandbox only, what a container's root may not do (natively the
//! tests may run with every capability); and busybox's `uptime`, `free`,
//! `mount`, `df`, `nproc` and `sysctl` must print sane output in the
//! sandbox.
//!
//! Every test needs /dev/kvm: without it a test says SKIPPED loudly, and
//! fails under `CI=true`.

#![forbid(unsafe_code)]

mod common;

use std::path::Path;

use common::tmp::TempDir;
use common::{Outcome, assert_same, require_kvm, run_native, run_qrun, run_sandboxed, stdout};

/// Runs test program `name args` natively (which must be sane: exit 0, no
/// FAIL line) and sandboxed, and asserts they agree.
fn compare(name: &str, args: &[&str]) -> Outcome {
    let prog = test_apps::path(name);
    let native = run_native(&prog, args, &[]);
    assert!(
        native.status == 0 && !stdout(&native).contains("FAIL"),
        "{name}: the native run already fails, fix the test program: {native:?}"
    );
    let sandboxed = run_sandboxed(&prog, args, &[]);
    assert_same(&format!("{name} {args:?}"), &native, &sandboxed);
    native
}

/// POSIX message queues (`mqueue`): open errors, attributes, priority
/// order, EMSGSIZE, EAGAIN, timeouts, EBADF, a receiver and a sender
/// blocked in a child, poll, fstat, unlink.
#[test]
fn posix_message_queues() {
    if !require_kvm() {
        return;
    }
    let out = compare("mqueue", &[]);
    assert!(stdout(&out).ends_with("done\n"), "{out:?}");
}

/// loadavg, uptime, meminfo, cpuinfo, stat, mounts, self/mountinfo,
/// version and the sys/ entries have Linux's shape.
#[test]
fn procfs_files() {
    if !require_kvm() {
        return;
    }
    let out = compare("procfs", &[]);
    assert!(
        stdout(&out).contains("/proc/sys/kernel lists hostname: yes"),
        "{out:?}"
    );
}

/// /proc/self and /proc/<pid>/ of this process and of a child: stat,
/// status, cmdline, environ, comm (the child's own after PR_SET_NAME),
/// the exe/cwd/root links, fd/, maps, statm, limits; Z once the child
/// exited, still with its name; gone once reaped.
#[test]
fn proc_pid_directories() {
    if !require_kvm() {
        return;
    }
    let prog = test_apps::path("procpid");
    let env = [("PROCPID_TEST", "1")];
    let native = run_native(&prog, &["a", "b c"], &env);
    assert!(
        native.status == 0 && !stdout(&native).contains("FAIL"),
        "procpid: the native run already fails: {native:?}"
    );
    let sandboxed = run_sandboxed(&prog, &["a", "b c"], &env);
    assert_same("procpid", &native, &sandboxed);
    for want in [
        "child comm: kid",
        "child stat: comm kid, state S",
        "exited child state: Z",
        "exited child stat: comm kid, 52 fields after it",
        "exited child status: Name:\tkid",
        "exited child comm: kid",
        "own comm after the child's PR_SET_NAME: procpid",
    ] {
        assert!(
            stdout(&sandboxed).contains(want),
            "no {want:?}: {sandboxed:?}"
        );
    }
}

/// mkfifo/mknod, fallocate, memfd_create, msync, sched_setaffinity,
/// F_GETPIPE_SZ/F_SETPIPE_SZ, chroot's lookups, O_PATH opens and names
/// that are not UTF-8, each side in a fresh scratch directory.
#[test]
fn surface_calls_and_files() {
    if !require_kvm() {
        return;
    }
    let prog = test_apps::path("surface2");
    let native_dir = TempDir::new("surface2");
    let native = run_native(&prog, &[native_dir.str()], &[]);
    assert!(
        native.status == 0 && !stdout(&native).contains("FAIL"),
        "surface2: the native run already fails: {native:?}"
    );
    let sandbox_dir = TempDir::new("surface2");
    let sandboxed = run_sandboxed(&prog, &[sandbox_dir.str()], &[]);
    assert_same("surface2", &native, &sandboxed);
    for want in [
        "memfd link: /memfd:surface (deleted)",
        "F_SETPIPE_SZ 131072: 131072",
        "open O_PATH: ok",
        "readdir returns the same bytes: yes",
    ] {
        assert!(
            stdout(&sandboxed).contains(want),
            "no {want:?}: {sandboxed:?}"
        );
    }
}

/// SCM_RIGHTS: an open file and a pipe end passed from a parent to its
/// child over a socketpair (the child reads from the sender's offset and
/// answers through the pipe); cmsg shape, MSG_CTRUNC, MSG_CMSG_CLOEXEC,
/// a bad fd, an unknown control message.
#[test]
fn scm_rights_fd_passing() {
    if !require_kvm() {
        return;
    }
    let prog = test_apps::path("scm");
    let native_dir = TempDir::new("scm");
    let native = run_native(&prog, &[native_dir.str()], &[]);
    assert!(
        native.status == 0 && !stdout(&native).contains("FAIL"),
        "scm: the native run already fails: {native:?}"
    );
    let sandbox_dir = TempDir::new("scm");
    let sandboxed = run_sandboxed(&prog, &[sandbox_dir.str()], &[]);
    assert_same("scm", &native, &sandboxed);
    assert!(
        stdout(&sandboxed).contains("parent heard: child got 2 fds, read 6: secret"),
        "{sandboxed:?}"
    );
}

/// SO_PEERCRED and SCM_CREDENTIALS: a socketpair's, a connection's (before
/// and after accept) and a datagram's peer, what a receiver with
/// SO_PASSCRED reads (the sending process, or what it claimed), creds
/// ahead of SCM_RIGHTS, MSG_CTRUNC, a claim of another pid refused.
#[test]
fn scm_credentials_name_the_sending_process() {
    if !require_kvm() {
        return;
    }
    let prog = test_apps::path("ucred");
    let native_dir = TempDir::new("ucred");
    let native = run_native(&prog, &[native_dir.str()], &[]);
    assert!(
        native.status == 0 && !stdout(&native).contains("FAIL"),
        "ucred: the native run already fails: {native:?}"
    );
    let sandbox_dir = TempDir::new("ucred");
    let sandboxed = run_sandboxed(&prog, &[sandbox_dir.str()], &[]);
    assert_same("ucred", &native, &sandboxed);
    for want in [
        "plain send: byte a controllen 32",
        "SCM_CREDENTIALS len 28 pid child uid same gid same",
        "accepted: peer child",
        "connector: peer parent",
    ] {
        assert!(
            stdout(&sandboxed).contains(want),
            "no {want:?}: {sandboxed:?}"
        );
    }
}

/// Ancillary data other than fds and credentials crosses as Linux gives
/// it: IPV6_HOPLIMIT/IPV6_TCLASS sent and received over ::1, IP_PKTINFO,
/// IP_TTL and IP_TOS over 127.0.0.1, SO_TIMESTAMP(NS), control buffers
/// that are exact, short, cut inside a message, empty or absent
/// (msg_controllen, MSG_CTRUNC), malformed outgoing data (EINVAL).
#[test]
fn ip_control_messages_cross() {
    if !require_kvm() {
        return;
    }
    let out = compare("cmsgip", &[]);
    for want in [
        "v6 room 48: 7 bytes controllen 48\n  IPV6_HOPLIMIT len 20 data 4: 07 00 00 00\n  IPV6_TCLASS len 20 data 4: 20 00 00 00\n",
        "v6 room 42: 7 bytes controllen 42 CTRUNC\n",
        "v6 room 0: 7 bytes controllen 0 CTRUNC\n",
        "IP_TOS len 17 data 1: 10\n",
        "SCM_TIMESTAMPNS len 32 data 16: near now yes\n",
        "v6 cmsg_len 8: sendmsg EINVAL\n",
        "done\n",
    ] {
        assert!(stdout(&out).contains(want), "no {want:?}: {out:?}");
    }
}

/// `sendmmsg` and `recvmmsg` (the raw calls: musl's wrappers loop over
/// `sendmsg`): three datagrams with their `msg_len`, vlen 0, a bad entry
/// after a good one (the count so far), bad pointers and fds, per-entry
/// addresses, a full non-blocking buffer; received with
/// `MSG_WAITFORONE`, `MSG_DONTWAIT`, a timeout written back, EINVAL.
#[test]
fn sendmmsg_and_recvmmsg_as_linux() {
    if !require_kvm() {
        return;
    }
    let out = compare("mmsg", &[]);
    for want in [
        "sendmmsg 3: 3\nmsg_len: 3 6 9\n",
        "sendmmsg good then bad: 1\nmsg_len: 3 7\n",
        "sendmmsg bad first: EFAULT\n",
        "addressed: 2 datagrams, then EAGAIN\n",
        "recvmmsg MSG_WAITFORONE: 3\n  3 bytes: one\n  6 bytes: second\n  9 bytes: third one\n",
        "timeout written back, 4 s < left <= 5 s: yes\n",
        "done\n",
    ] {
        assert!(stdout(&out).contains(want), "no {want:?}: {out:?}");
    }
}

/// What a container's root may not make or change: device nodes, the
/// host and domain names, another root directory.
#[test]
fn container_root_may_not_mknod_sethostname_chroot() {
    if !require_kvm() {
        return;
    }
    let dir = TempDir::new("surface2c");
    let out = run_sandboxed(&test_apps::path("surface2"), &["container", dir.str()], &[]);
    assert_eq!(out.status, 0, "{out:?}");
    assert_eq!(
        stdout(&out),
        "mknod char device: EPERM\n\
         mknod block device: EPERM\n\
         sethostname: EPERM\n\
         setdomainname: EPERM\n\
         chroot /: 0\n\
         chroot elsewhere: EPERM\n",
        "{out:?}"
    );
}

/// sysinfo, getrusage, times and the CPU clocks (not advancing while the
/// program sleeps), groups, saved ids, setuid/setgid/setreuid/setregid, priorities, getcpu, personality,
/// prctl, statfs/fstatfs and the sync family.
#[test]
fn info_and_identity_calls() {
    if !require_kvm() {
        return;
    }
    let out = compare("sysinfo2", &[]);
    let text = stdout(&out);
    for line in [
        "sleep: process CPU clock advances < 100 ms: yes",
        "setpriority 5: 0",
        "PR_GET_PDEATHSIG: 0",
        "statfs /proc: 0 type 0x9fa0",
        "fsync pipe: EINVAL",
        "setreuid(-1, -1): 0",
    ] {
        assert!(text.contains(line), "missing {line:?}: {out:?}");
    }
}

/// CPU time per thread, process and reaped children: the CPU clocks
/// (fixed ids, `pthread_getcpuclockid`, `clock_getcpuclockid` of a
/// child), getrusage SELF/THREAD/CHILDREN, times, wait4's rusage, and the
/// CPU-time interval timers ITIMER_VIRTUAL and ITIMER_PROF (their
/// signals come while a loop without syscalls computes, not while the
/// process sleeps).
#[test]
fn cpu_clocks_rusage_and_cpu_itimers() {
    if !require_kvm() {
        return;
    }
    let out = compare("cpuclock", &[]);
    let text = stdout(&out);
    for line in [
        "sleeping thread's clock < 50 ms: yes",
        "child's clock read by its parent >= 200 ms: yes",
        "RUSAGE_CHILDREN after the wait >= 200 ms: yes",
        "SIGVTALRM while sleeping 400 ms: 0",
        "SIGVTALRM after spinning: 1",
        "SIGPROF came 3 times: yes",
        "done",
    ] {
        assert!(text.contains(line), "missing {line:?}: {out:?}");
    }
}

/// NETLINK_ROUTE in the guest: getifaddrs, if_nameindex and
/// if_nametoindex, a raw socket's dumps and its answers to bad requests,
/// the SIOCGIF* ioctls; lo's entries in full, the same as natively. Then
/// busybox `ip addr` prints lo's addresses.
#[test]
fn netlink_route_and_interfaces() {
    if !require_kvm() {
        return;
    }
    let out = compare("netlink", &[]);
    let text = stdout(&out);
    for line in [
        "lo inet 127.0.0.1 netmask 255.0.0.0",
        "if_nameindex first: 1 lo",
        "dump: RTM_NEWLINK messages then NLMSG_DONE: yes",
        "RTM_GETLINK with a short payload: NLMSG_ERROR EINVAL",
        "header longer than the datagram: no answer (EAGAIN)",
        "SIOCGIFCONF lists lo 127.0.0.1: yes",
        "done",
    ] {
        assert!(text.contains(line), "missing {line:?}: {out:?}");
    }
    // Random requests (in the sandbox only: natively, as root, they could
    // change the host's network).
    let fuzz = run_sandboxed(&test_apps::path("netlink"), &["fuzz"], &[]);
    assert_eq!(fuzz.status, 0, "{fuzz:?}");
    assert_eq!(stdout(&fuzz), "fuzz: done\n", "{fuzz:?}");
    let ip = busybox(&["ip", "addr"]);
    for want in [
        "1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536",
        "inet 127.0.0.1/8 scope host lo",
        "inet6 ::1/128 scope host",
    ] {
        assert!(ip.contains(want), "ip addr: no {want:?} in {ip:?}");
    }
}

/// What a container's root may not do: set the clock, read the kernel
/// log, raise its priority, take a real-time policy or I/O class.
#[test]
fn container_root_limits() {
    if !require_kvm() {
        return;
    }
    let out = run_sandboxed(&test_apps::path("sysinfo2"), &["container"], &[]);
    assert_eq!(out.status, 0, "{out:?}");
    assert_eq!(
        stdout(&out),
        "clock_settime: EPERM\n\
         settimeofday: EPERM\n\
         syslog read: EPERM\n\
         setpriority 5: 0\n\
         setpriority back to 0 (no CAP_SYS_NICE): EACCES\n\
         sched_setscheduler FIFO: EPERM\n\
         ioprio_set realtime: EPERM\n\
         PR_CAPBSET_READ CAP_SYS_ADMIN: 0\n",
        "{out:?}"
    );
}

const BUSYBOX: &str = "/bin/busybox";

/// `busybox args` in the sandbox (rootfs `/`): exits 0; its stdout.
fn busybox(args: &[&str]) -> String {
    assert!(
        Path::new(BUSYBOX).is_file(),
        "{BUSYBOX} missing: install Debian's busybox-static (scripts/deps.sh)"
    );
    let out = run_sandboxed(Path::new(BUSYBOX), args, &[]);
    assert_eq!(out.status, 0, "busybox {args:?}: {out:?}");
    stdout(&out)
}

/// The numbers on the line of `text` starting with `label`.
fn numbers(text: &str, label: &str) -> Vec<u64> {
    let line = text
        .lines()
        .find(|l| l.starts_with(label))
        .unwrap_or_else(|| panic!("no {label:?} line in {text:?}"));
    line.split_whitespace()
        .filter_map(|w| w.trim_end_matches(',').parse().ok())
        .collect()
}

#[test]
fn busybox_system_tools() {
    if !require_kvm() {
        return;
    }
    let up = busybox(&["uptime"]);
    assert!(
        up.contains(" up ") && up.contains("load average: 0.00, 0.00, 0.00"),
        "uptime: {up:?}"
    );

    // Guest RAM is qrun's default 256 MiB; most of it is free.
    let free = busybox(&["free"]);
    let mem = numbers(&free, "Mem:");
    assert!(mem.len() >= 3, "free: {free:?}");
    assert_eq!(mem[0], 256 * 1024, "free: total: {free:?}");
    assert!(
        mem[2] > mem[0] / 2 && mem[1] + mem[2] <= mem[0],
        "free: {free:?}"
    );
    assert_eq!(numbers(&free, "Swap:"), [0, 0, 0], "free: {free:?}");

    let mount = busybox(&["mount"]);
    for want in [
        " on / type ",
        "proc on /proc type proc",
        " on /dev type tmpfs",
        "devpts on /dev/pts type devpts (rw,nosuid,noexec,relatime,mode=600,ptmxmode=666)",
    ] {
        assert!(mount.contains(want), "mount: no {want:?} in {mount:?}");
    }
    let mounts = busybox(&["cat", "/proc/mounts"]);
    assert!(
        mounts.lines().all(|l| l.split(' ').count() == 6),
        "{mounts:?}"
    );
    // The guest's ptys and message queues are listed where runc's
    // containers mount devpts and mqueue, under /dev's mount (id 4).
    let info = busybox(&["cat", "/proc/self/mountinfo"]);
    assert!(
        info.lines().any(|l| l
            == "5 4 0:83 / /dev/pts rw,nosuid,noexec,relatime - devpts devpts rw,mode=600,ptmxmode=666"),
        "{info:?}"
    );
    assert!(
        info.lines().any(|l| l.contains(" 4 0:84 / /dev/mqueue ")
            && l.ends_with(" rw,nosuid,nodev,noexec,relatime - mqueue mqueue rw")),
        "{info:?}"
    );

    // df finds the rootfs's mount and the host filesystem's size.
    let df = busybox(&["df", "/"]);
    let row = df.lines().nth(1).unwrap_or_default();
    assert!(
        row.ends_with(" /") && row.split_whitespace().count() == 6,
        "df: {df:?}"
    );

    // ps, pidof and top find the processes of the sandbox in /proc.
    let ps = busybox(&["sh", "-c", "ps -o pid,ppid,comm,args; echo; pidof busybox"]);
    let mut lines = ps.lines();
    assert_eq!(
        lines
            .next()
            .map(|l| l.split_whitespace().collect::<Vec<_>>()),
        Some(vec!["PID", "PPID", "COMMAND", "COMMAND"]),
        "ps: {ps:?}"
    );
    let rows: Vec<Vec<&str>> = lines
        .by_ref()
        .take_while(|l| !l.is_empty())
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert!(
        rows.len() == 2 && rows[0][..4] == ["1", "0", "busybox", "/bin/busybox"],
        "ps: {ps:?}"
    );
    assert_eq!(
        rows[1][1], "1",
        "ps: the ps process is pid 1's child: {ps:?}"
    );
    assert_eq!(lines.next(), Some("1"), "pidof busybox: {ps:?}");
    let top = busybox(&["top", "-bn1"]);
    assert!(
        top.contains("Load average: 0.00 0.00 0.00 1/1 1")
            && top
                .lines()
                .any(|l| l.split_whitespace().take(2).eq(["1", "0"]) && l.ends_with("top -bn1")),
        "top: {top:?}"
    );

    // One vCPU per host CPU (at most 8) without a CPU limit.
    let host = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(busybox(&["nproc"]), format!("{}\n", host.min(8)));
    let host = busybox(&["hostname"]);
    assert_eq!(
        busybox(&[
            "sysctl",
            "kernel.hostname",
            "kernel.ostype",
            "vm.overcommit_memory",
            "kernel.cap_last_cap"
        ]),
        format!(
            "kernel.hostname = {}\nkernel.ostype = Linux\nvm.overcommit_memory = 0\n\
             kernel.cap_last_cap = 40\n",
            host.trim()
        )
    );
}

/// /proc/net: the program's TCP listener, UDP socket, `AF_UNIX` path and
/// abstract name are listed in `tcp`, `udp` and `unix`, `dev` lists `lo`
/// and `route` has its header, natively and sandboxed; in a sandbox with
/// a rootfs of its own, the bound path is listed as the program named it,
/// not as the host's path under the rootfs.
#[test]
fn proc_net_lists_the_programs_sockets() {
    if !require_kvm() {
        return;
    }
    let tmp = TempDir::new("procnet");
    let sock = tmp.path().join("procnet.sock");
    let sock = sock.to_str().expect("a UTF-8 temp path");
    let native = compare("procnet", &[sock]);
    assert!(!stdout(&native).contains(": no"), "{native:?}");

    let root = TempDir::new("procnet-root");
    std::fs::copy(test_apps::path("procnet"), root.path().join("procnet")).expect("copy");
    let rooted = run_qrun(&[
        "do".to_string(),
        "--rootfs".into(),
        root.path().display().to_string(),
        "--".into(),
        "/procnet".into(),
        "/procnet.sock".into(),
    ]);
    assert_eq!(stdout(&rooted), stdout(&native), "{rooted:?}");
    assert_eq!(rooted.status, 0, "{rooted:?}");
}

/// `gethostid()` (glibc) reads the rootfs's `/etc/hostid`: the same value
/// natively under `chroot` and in a sandbox over the same rootfs.
#[test]
fn hostid_comes_from_the_rootfs() {
    if !require_kvm() {
        return;
    }
    let root = TempDir::new("hostid-root");
    std::fs::create_dir(root.path().join("etc")).expect("mkdir etc");
    std::fs::write(
        root.path().join("etc/hostid"),
        0x1234_abcd_u32.to_ne_bytes(),
    )
    .expect("hostid");
    std::fs::copy(test_apps::path("hostid_glibc"), root.path().join("hostid")).expect("copy");
    let native = std::process::Command::new("chroot")
        .arg(root.path())
        .arg("/hostid")
        .output()
        .expect("chroot runs (the tests run as root)");
    let native = String::from_utf8_lossy(&native.stdout).into_owned();
    assert_eq!(native, "hostid 1234abcd\n", "native");
    let sandboxed = run_qrun(&[
        "do".to_string(),
        "--rootfs".into(),
        root.path().display().to_string(),
        "--".into(),
        "/hostid".into(),
    ]);
    assert_eq!(stdout(&sandboxed), native, "{sandboxed:?}");
    assert_eq!(sandboxed.status, 0, "{sandboxed:?}");
}

/// mq_notify with SIGEV_SIGNAL: one signal (SI_MESGQ) when a message
/// reaches the empty queue, EBUSY for another process while registered,
/// removal with NULL, SIGEV_NONE, signal 0.
#[test]
fn mq_notify_signals_once() {
    if !require_kvm() {
        return;
    }
    let native = compare("mqnotify", &[]);
    assert!(
        stdout(&native).contains("first message: notified 1"),
        "{native:?}"
    );
}

/// Raw IP sockets and ICMP "ping" sockets are refused as a Linux process
/// without CAP_NET_RAW (and outside `ping_group_range`) sees it. Natively
/// the answer depends on the test's own rights: sandboxed run only.
#[test]
fn raw_and_icmp_sockets_are_refused() {
    if !require_kvm() {
        return;
    }
    let out = run_sandboxed(&test_apps::path("rawsock"), &[], &[]);
    assert_eq!(
        stdout(&out),
        "raw icmp: EPERM\nraw ipv6: EPERM\nping: EACCES\n",
        "{out:?}"
    );
    assert_eq!(out.status, 0, "{out:?}");
}
