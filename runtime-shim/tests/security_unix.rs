//! `AF_UNIX` sockets and path operations stay inside the sandbox: the
//! `unixsock` test program (test-apps/c/unixsock.c).
//!
//! - Escapes: symlinks in the rootfs (absolute, relative with `..`, a
//!   symlinked directory) and host paths lead to host sockets outside the
//!   rootfs, and a host process listens on an abstract name. Natively every
//!   probe reaches them (the probes are real); sandboxed none may, with the
//!   errors Linux gives in a chroot of its own network namespace (ENOENT,
//!   ECONNREFUSED), and the host sockets see nothing.
//! - Inside: binding, connecting (through symlinks too), abstract names of
//!   the sandbox's own, symlink, link, `linkat(AT_SYMLINK_FOLLOW)`, chmod,
//!   chown and utimes print the same natively, under `qrun do` and in an
//!   OCI container (with and without a network namespace of its own).

#![forbid(unsafe_code)]

mod common;

use std::io::ErrorKind;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram, UnixListener};
use std::path::Path;

use common::bundle::{bundle, qrun_at};
use common::tmp::TempDir;
use common::{Outcome, assert_same, require_kvm, run_native, run_qrun, stdout};

/// Host sockets outside a rootfs, and a rootfs whose symlinks lead to them.
struct Setup {
    rootfs: TempDir,
    outside: TempDir,
    listener: UnixListener,
    dgram: UnixDatagram,
    abstract_name: String,
    abstract_listener: UnixListener,
    abstract_dgram: UnixDatagram,
}

fn setup() -> Setup {
    let rootfs = TempDir::new("unix-root");
    let outside = TempDir::new("unix-outside");
    std::fs::copy(test_apps::path("unixsock"), rootfs.join("unixsock")).expect("copy unixsock");
    std::fs::create_dir(rootfs.join("sub")).expect("mkdir sub");
    let listener = UnixListener::bind(outside.join("host.sock")).expect("host listener");
    listener.set_nonblocking(true).expect("nonblocking");
    let dgram = UnixDatagram::bind(outside.join("host.dgram")).expect("host datagram");
    dgram.set_nonblocking(true).expect("nonblocking");
    // Unique per setup: the tests of this file run in parallel.
    let abstract_name = format!("qrun-test-host-{}", rootfs.str());
    let addr = SocketAddr::from_abstract_name(&abstract_name).expect("abstract name");
    let abstract_listener = UnixListener::bind_addr(&addr).expect("abstract listener");
    abstract_listener
        .set_nonblocking(true)
        .expect("nonblocking");
    let addr =
        SocketAddr::from_abstract_name(format!("{abstract_name}.dgram")).expect("abstract name");
    let abstract_dgram = UnixDatagram::bind_addr(&addr).expect("abstract datagram");
    abstract_dgram.set_nonblocking(true).expect("nonblocking");

    let up = "../".repeat(20);
    let out = outside.str();
    for (name, target) in [
        ("abs.sock", format!("{out}/host.sock")),
        ("rel.sock", format!("{up}{out}/host.sock")),
        ("sub/rel.sock", format!("{up}{out}/host.sock")),
        ("abs.dgram", format!("{out}/host.dgram")),
        ("rel.dgram", format!("{up}{out}/host.dgram")),
        ("dirlink", out.to_string()),
    ] {
        std::os::unix::fs::symlink(target, rootfs.join(name)).expect("symlink");
    }
    Setup {
        rootfs,
        outside,
        listener,
        dgram,
        abstract_name,
        abstract_listener,
        abstract_dgram,
    }
}

impl Setup {
    /// Connections and datagrams the host sockets got: (path listener,
    /// path datagrams, abstract listener, abstract datagrams).
    fn received(&self) -> [usize; 4] {
        fn drain<T>(mut f: impl FnMut() -> std::io::Result<T>) -> usize {
            let mut n = 0;
            loop {
                match f() {
                    Ok(_) => n += 1,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return n,
                    Err(e) => panic!("host socket: {e}"),
                }
            }
        }
        let mut buf = [0u8; 16];
        [
            drain(|| self.listener.accept()),
            drain(|| self.dgram.recv(&mut buf)),
            drain(|| self.abstract_listener.accept()),
            drain(|| self.abstract_dgram.recv(&mut buf)),
        ]
    }
}

/// The value of the line `name: VALUE` of `out`.
fn probe<'a>(out: &'a str, name: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(": "))
        .unwrap_or_else(|| panic!("no line for probe {name:?} in:\n{out}"))
}

const PATH_PROBES: &[&str] = &[
    "connect abs.sock",
    "connect rel.sock",
    "connect dirlink/host.sock",
    "connect sub/rel.sock",
    "sendto abs.dgram",
    "sendto rel.dgram",
    "sendto dirlink/host.dgram",
    "sendto the host path",
    "bind dirlink/planted.sock",
];

const ABSTRACT_PROBES: &[&str] = &["connect host abstract", "sendto host abstract"];

/// Natively, with the rootfs as a path prefix, every probe reaches the
/// host sockets: they are real escapes.
#[test]
fn probes_reach_host_sockets_natively() {
    let s = setup();
    let host_dgram = s.outside.join("host.dgram");
    let args = [
        "escape",
        s.rootfs.str(),
        &s.abstract_name,
        host_dgram.to_str().expect("UTF-8"),
    ];
    let out = run_native(&s.rootfs.join("unixsock"), &args, &[]);
    let text = stdout(&out);
    assert_eq!(out.status, 0, "{out:?}");
    for name in PATH_PROBES.iter().chain(ABSTRACT_PROBES) {
        let v = probe(&text, name);
        assert!(
            ["connected", "sent", "bound"].contains(&v),
            "natively, {name:?} should reach the host, got {v:?}:\n{text}"
        );
    }
    assert_eq!(s.received(), [4, 4, 1, 1], "{text}");
    assert!(s.outside.join("planted.sock").exists());
}

#[test]
fn sandbox_reaches_no_host_socket() {
    if !require_kvm() {
        return;
    }
    let s = setup();
    let host_dgram = s.outside.join("host.dgram");
    let out = run_qrun(&[
        "do",
        "--rootfs",
        s.rootfs.str(),
        "--",
        "/unixsock",
        "escape",
        "",
        &s.abstract_name,
        host_dgram.to_str().expect("UTF-8"),
    ]);
    let text = stdout(&out);
    // What matters most first: the host sockets saw nothing.
    assert_eq!(
        s.received(),
        [0; 4],
        "a host socket was reached from the sandbox:\n{out:?}"
    );
    assert!(
        !s.outside.join("planted.sock").exists(),
        "the sandbox bound a socket outside its rootfs:\n{out:?}"
    );
    assert_eq!(out.status, 0, "{out:?}");
    assert!(text.ends_with("done\n"), "{out:?}");
    // As Linux in a chroot: the symlinks resolve inside, to nothing.
    for name in PATH_PROBES {
        assert_eq!(probe(&text, name), "-1 ENOENT", "{name:?}:\n{text}");
    }
    // As Linux in a network namespace of its own: nobody listens there.
    for name in ABSTRACT_PROBES {
        assert_eq!(probe(&text, name), "-1 ECONNREFUSED", "{name:?}:\n{text}");
    }
}

/// `unixsock ops` natively in a scratch directory.
fn native_ops() -> Outcome {
    let dir = TempDir::new("unix-native");
    let out = run_native(&test_apps::path("unixsock"), &["ops", dir.str()], &[]);
    assert_eq!(out.status, 0, "{out:?}");
    let text = stdout(&out);
    assert!(
        !text.contains("FAIL"),
        "the native run fails a check:\n{text}"
    );
    assert!(text.ends_with("done\n"), "{text}");
    out
}

/// Sockets, symlinks, links, chmod and abstract names inside a `qrun do`
/// rootfs behave as natively.
#[test]
fn unix_ops_in_a_rootfs_match_native() {
    if !require_kvm() {
        return;
    }
    let native = native_ops();
    let rootfs = TempDir::new("unix-ops-root");
    std::fs::copy(test_apps::path("unixsock"), rootfs.join("unixsock")).expect("copy");
    std::fs::create_dir(rootfs.join("data")).expect("mkdir");
    let out = run_qrun(&[
        "do",
        "--rootfs",
        rootfs.str(),
        "--",
        "/unixsock",
        "ops",
        "/data",
    ]);
    assert_same("unixsock ops under qrun do --rootfs", &native, &out);
    assert!(
        rootfs.join("data/hard.follow").is_file(),
        "the links were made inside the rootfs"
    );
}

/// The same in an OCI container; `own_netns` keeps the default network
/// namespace, else the container shares the host's.
fn oci_ops(own_netns: bool) {
    if !require_kvm() {
        return;
    }
    let native = native_ops();
    let (b, root) = (TempDir::new("unix-bundle"), TempDir::new("unix-state"));
    let prog = test_apps::path("unixsock");
    bundle(
        b.path(),
        &[("/unixsock", &prog)],
        &["/unixsock", "ops", "/data"],
        |c| {
            c["root"]["readonly"] = false.into();
            if !own_netns {
                let ns = c["linux"]["namespaces"]
                    .as_array_mut()
                    .expect("default namespaces");
                ns.retain(|n| n["type"] != "network");
            }
        },
    );
    std::fs::create_dir(b.join("rootfs/data")).expect("mkdir");
    // Each test its own id: the two run at once, and the container's
    // cgroups are named by its id (one deleting `qrun/u` while the other
    // joined it failed the run).
    let id = if own_netns { "u-netns" } else { "u-hostnet" };
    let out = qrun_at(root.path(), &["run", "--bundle", b.str(), id]);
    assert_same("unixsock ops in an OCI container", &native, &out);
    assert!(Path::new(&b.join("rootfs/data/hard.follow")).is_file());
}

#[test]
fn unix_ops_in_an_oci_container_match_native() {
    oci_ops(true);
}

#[test]
fn unix_ops_in_an_oci_container_on_the_host_network_match_native() {
    oci_ops(false);
}
