//! An HTTP client for the function server (test-apps/c/http_server.c):
//! start it (`--port 0`, waiting for its "listening on PORT" line), curl,
//! raw keep-alive and pipelined requests, and the checksum its `/work` and
//! `/fill` compute.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use super::server::Server;

const START: Duration = Duration::from_secs(30);

pub fn start(mut cmd: Command) -> (Server, u16) {
    cmd.env_clear().args(["--port", "0"]);
    let mut server = Server::spawn(cmd);
    let port = server.wait_line("listening on ", START);
    let port = port
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("bad port line {port:?}: {e}"));
    (server, port)
}

/// `curl -sS ARGS` with no proxy; its status, stdout and stderr.
pub fn curl(args: &[&str]) -> (i32, String, String) {
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "--noproxy", "*", "--max-time", "30"])
        .args(args)
        .env_clear();
    if let Some(path) = std::env::var_os("PATH") {
        cmd.env("PATH", path);
    }
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running curl: {e}; install Debian's curl (scripts/deps.sh)"));
    (
        super::shell_status(out.status),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `GET path` with curl: the HTTP status and the body.
pub fn get(port: u16, path: &str) -> (u32, String) {
    let url = format!("http://127.0.0.1:{port}{path}");
    let (status, out, err) = curl(&["-w", "\n%{http_code}", &url]);
    assert_eq!(status, 0, "curl {url}: {err}");
    let (body, code) = out.rsplit_once('\n').expect("curl printed the code");
    let code = code.parse().expect("a numeric HTTP status");
    (code, body.to_owned())
}

/// The checksum the server computes for N MiB of its pattern.
pub fn checksum(mb: u64) -> u64 {
    let mut sum = 0u64;
    for i in 0..mb << 17 {
        let x = (i + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ mb;
        sum = (sum ^ (x ^ (x >> 29))).wrapping_mul(0x0100_0000_01b3);
    }
    sum
}

/// Sends `chunks` on one connection (pausing between them), then reads
/// `n` responses: their statuses and bodies.
pub fn raw(port: u16, chunks: &[&str], n: usize) -> Vec<(u32, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("set timeout");
    for c in chunks {
        s.write_all(c.as_bytes()).expect("send");
        std::thread::sleep(Duration::from_millis(30));
    }
    let mut buf = Vec::new();
    let mut out = Vec::new();
    while out.len() < n {
        if let Some((resp, used)) = parse_response(&buf) {
            out.push(resp);
            buf.drain(..used);
            continue;
        }
        let mut chunk = [0u8; 4096];
        let got = s.read(&mut chunk).expect("read a response");
        assert!(got > 0, "connection closed after {} responses", out.len());
        buf.extend_from_slice(&chunk[..got]);
    }
    out
}

/// One complete response at the start of `buf`, and its length.
pub fn parse_response(buf: &[u8]) -> Option<((u32, String), usize)> {
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = String::from_utf8_lossy(&buf[..end]);
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    let len: usize = head.lines().find_map(|l| {
        l.to_ascii_lowercase()
            .strip_prefix("content-length:")?
            .trim()
            .parse()
            .ok()
    })?;
    let body = buf.get(end..end + len)?;
    Some((
        (status, String::from_utf8_lossy(body).into_owned()),
        end + len,
    ))
}
