//! The HTTP function server (test-apps/c/http_server.c) hibernated in
//! `qrun do` and woken by its clients (issue 5): a new connection to the
//! listening socket, and new data on an established keep-alive connection,
//! each wake the sandbox, and the request that woke it gets the right
//! answer: `/verify` re-checks a 64 MiB buffer filled before the first
//! hibernation. The first wake swaps pages in by fault, the later ones
//! read the REAP file. No swap or REAP file survives the sandbox.

#![forbid(unsafe_code)]

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use common::http::{checksum, get, parse_response, start};
use common::tmp::TempDir;
use serde_json::Value;

const MB: u64 = 64;

fn hibernate(socket: &Path) -> Value {
    let st = common::ctl(socket, "hibernate").expect("hibernate");
    assert_eq!(st["state"], "hibernated", "{st}");
    assert!(
        st["swapped_out_bytes"].as_u64().expect("bytes") >= (MB - 4) << 20,
        "the 64 MiB buffer should leave guest memory: {st}"
    );
    st
}

fn status(socket: &Path) -> Value {
    common::ctl(socket, "status").expect("status")
}

/// One request on an open keep-alive connection: status and body.
fn request(conn: &mut TcpStream, path: &str) -> (u32, String) {
    conn.write_all(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
        .expect("send");
    let mut buf = Vec::new();
    loop {
        if let Some((resp, _)) = parse_response(&buf) {
            return resp;
        }
        let mut chunk = [0u8; 4096];
        let n = conn.read(&mut chunk).expect("read a response");
        assert!(n > 0, "the server closed the connection");
        buf.extend_from_slice(&chunk[..n]);
    }
}

#[test]
fn a_client_wakes_the_hibernated_server_and_gets_its_answer() {
    if !common::require_kvm() {
        return;
    }
    let dir = TempDir::new("http-hib");
    let socket = dir.join("ctl.sock");
    let state_dir = dir.join("state");
    let mut cmd = common::qrun_do_controlled(&socket, &state_dir);
    cmd.arg(test_apps::path("http_server"));
    let (mut server, port) = start(cmd);
    let sum = format!("{:016x}", checksum(MB));
    assert_eq!(
        get(port, &format!("/fill?mb={MB}")),
        (200, format!("filled mb={MB} checksum={sum}\n"))
    );
    let verified = (200, format!("ok {sum}\n"));

    // 1. A new connection wakes it; pages come back by fault.
    let st = hibernate(&socket);
    assert_eq!(st["reap_bytes"], 0, "no working set yet: {st}");
    assert_eq!(get(port, "/verify"), verified);
    let st = status(&socket);
    assert_eq!(st["state"], "running", "{st}");
    assert!(
        st["swap_faults"].as_u64() > Some(0),
        "a page-fault wake: {st}"
    );

    // 2. Data on an established connection wakes it; this time from the
    //    REAP file recorded by the first wake.
    let mut conn = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    assert_eq!(request(&mut conn, "/"), (200, "hello\n".to_owned()));
    let st = hibernate(&socket);
    assert!(
        st["reap_bytes"].as_u64() >= Some((MB - 4) << 20),
        "the working set goes to the REAP file: {st}"
    );
    assert_eq!(request(&mut conn, "/verify"), verified);
    let st = status(&socket);
    assert_eq!(st["state"], "running", "{st}");
    assert!(
        st["read_back_bytes"].as_u64() >= Some((MB - 4) << 20),
        "a REAP wake reads the working set back: {st}"
    );

    // 3. Again, with the connection kept across a wake from the control
    //    socket, then real work on fresh memory.
    hibernate(&socket);
    common::ctl(&socket, "wake").expect("wake");
    assert_eq!(request(&mut conn, "/verify"), verified);
    let work = format!("work mb=8 checksum={:016x}\n", checksum(8));
    assert_eq!(request(&mut conn, "/work?mb=8"), (200, work));
    drop(conn);

    assert_eq!(get(port, "/quit"), (200, "bye\n".to_owned()));
    let (status, stderr) = server.wait_exit(Duration::from_secs(20));
    assert_eq!(status, 0, "exit status after /quit; stderr: {stderr}");
    let left = common::dir_names(&state_dir);
    assert!(
        left.is_empty(),
        "swap/REAP files outlived the sandbox: {left:?}"
    );
}
