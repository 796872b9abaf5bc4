//! Programs that print "ready" and then wait or spin until the test acts:
//! spawned with piped output, given time to get from "ready" into their
//! wait, acted on (a signal, a control request), and collected with a
//! deadline, their whole output included.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{Outcome, shell_status};

/// `cmd` with a cleared environment, stdin from /dev/null and stdout and
/// stderr piped.
pub fn spawn(mut cmd: Command) -> Child {
    cmd.env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn")
}

/// Waits for the "ready" line of `child`, sleeps `settle`, runs `act`,
/// then collects the outcome ("ready" line included); the program must end
/// within `deadline` after `act` returned. Returns the outcome and how
/// long the end took.
pub fn run_after_ready(
    mut child: Child,
    settle: Duration,
    deadline: Duration,
    act: impl FnOnce(&Child),
) -> (Outcome, Duration) {
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    stdout.read_line(&mut first).expect("read ready");
    assert_eq!(first, "ready\n", "the program did not get ready");
    std::thread::sleep(settle);
    act(&child);
    let t0 = Instant::now();
    loop {
        if child.try_wait().expect("try_wait").is_some() {
            break;
        }
        if t0.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the program did not end within {deadline:?}");
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let took = t0.elapsed();
    let status = shell_status(child.wait().expect("wait"));
    let mut rest = Vec::new();
    stdout.read_to_end(&mut rest).expect("read stdout");
    let mut stderr = Vec::new();
    if let Some(mut e) = child.stderr.take() {
        e.read_to_end(&mut stderr).expect("read stderr");
    }
    let mut all = first.into_bytes();
    all.extend(rest);
    (
        Outcome {
            stdout: all,
            stderr,
            status,
        },
        took,
    )
}

/// `kill -TERM` to `child`.
pub fn kill_term(child: &Child) {
    let st = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(st.success(), "kill -TERM failed");
}
