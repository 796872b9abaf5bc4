//! `qrun ctl SOCKET REQUEST`: one request to a sandbox's control socket
//! (`qvisor::ctl`), for tests and operators; prints the status as JSON.

use std::path::Path;
use std::time::Duration;

use qvisor::ctl::{Request, request};

use crate::report;

/// How long a request may take (a hibernation writes the whole memory).
const TIMEOUT: Duration = Duration::from_secs(120);

/// Runs `qrun ctl ARGS`; returns the exit status.
pub fn run(args: &[String]) -> i32 {
    let [socket, rest @ ..] = args else {
        eprintln!("qrun ctl: usage: qrun ctl SOCKET status|hibernate|wake|signal N");
        return 2;
    };
    let req = match Request::parse(&rest.join(" ")) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("qrun ctl: {e}");
            return 2;
        }
    };
    let socket = Path::new(socket);
    if let Some(why) = report::socket_path_problem(socket) {
        eprintln!("qrun ctl: control socket {}: {why}", socket.display());
        return 1;
    }
    match request(socket, req, TIMEOUT) {
        Ok(status) => {
            println!(
                "{}",
                serde_json::to_string(&status).unwrap_or_else(|_| "{}".into())
            );
            0
        }
        Err(e) => {
            eprintln!("qrun ctl: {}", report::chain(&e));
            1
        }
    }
}
