//! Long-running children (servers): spawned in their own process group,
//! their stdout read line by line, their CPU time read from /proc, and
//! their whole group killed when the handle is dropped, so a failing
//! assertion never leaves a sandbox running.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

pub struct Server {
    child: Child,
    what: String,
    lines: Receiver<String>,
    stderr: Option<JoinHandle<String>>,
}

impl Server {
    /// Spawns `cmd` with stdin from /dev/null and stdout/stderr captured.
    pub fn spawn(mut cmd: Command) -> Self {
        let what = format!("{cmd:?}");
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {what}: {e}"));
        let out = child.stdout.take().expect("stdout is piped");
        let mut err = child.stderr.take().expect("stderr is piped");
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Some(thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        }));
        Self {
            child,
            what,
            lines,
            stderr,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The rest of the first stdout line starting with `prefix`; panics
    /// (killing the group) if none comes within `timeout`.
    pub fn wait_line(&mut self, prefix: &str, timeout: Duration) -> String {
        self.try_wait_line(prefix, timeout)
            .unwrap_or_else(|why| panic!("{why}"))
    }

    /// [`Self::wait_line`] that says why instead of panicking (the group
    /// is killed then too).
    pub fn try_wait_line(&mut self, prefix: &str, timeout: Duration) -> Result<String, String> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    if let Some(rest) = line.strip_prefix(prefix) {
                        return Ok(rest.to_owned());
                    }
                }
                Err(e) => {
                    let status = self.kill();
                    return Err(format!(
                        "{}: no line starting with {prefix:?} ({e:?}); {status}",
                        self.what
                    ));
                }
            }
        }
    }

    /// Waits up to `timeout` for the child to exit by itself; returns its
    /// shell status and its stderr. Panics (killing the group) on timeout.
    pub fn wait_exit(&mut self, timeout: Duration) -> (i32, String) {
        let deadline = Instant::now() + timeout;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    let err = self.stderr.take().map(|h| h.join().unwrap_or_default());
                    return (super::shell_status(status), err.unwrap_or_default());
                }
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(10)),
                Ok(None) => {
                    let status = self.kill();
                    panic!("{} did not exit within {timeout:?}; {status}", self.what);
                }
                Err(e) => panic!("waiting for {}: {e}", self.what),
            }
        }
    }

    /// Kills the process group and says how it ended, with its stderr.
    pub fn kill(&mut self) -> String {
        kill_group(self.child.id());
        let status = self.child.wait();
        let err = self.stderr.take().map(|h| h.join().unwrap_or_default());
        format!(
            "killed it ({status:?}); stderr: {}",
            err.unwrap_or_default().trim()
        )
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            kill_group(self.child.id());
            let _ = self.child.wait();
        }
    }
}

fn kill_group(pgid: u32) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pgid}")])
        .stderr(Stdio::null())
        .status();
}

/// CPU time (user + system, in clock ticks) of every live process in the
/// process group `pgid`, plus what they collected from waited-for
/// children: a server spawned by [`Server::spawn`] and anything it runs.
pub fn group_cpu_ticks(pgid: u32) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir("/proc")
        .expect("/proc is readable")
        .flatten()
    {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue; // not a process, or it just exited
        };
        if let Some((pgrp, ticks)) = parse_stat(&stat)
            && pgrp == pgid
        {
            total += ticks;
        }
    }
    total
}

/// `(pgrp, utime + stime + cutime + cstime)` from a `/proc/<pid>/stat`
/// line. Fields after the parenthesised command name, counted from 1 at
/// `state`: pgrp is the 3rd, utime..cstime the 12th to 15th.
fn parse_stat(stat: &str) -> Option<(u32, u64)> {
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let pgrp = f.get(2)?.parse().ok()?;
    let mut ticks = 0u64;
    for i in 11..15 {
        ticks += f.get(i)?.parse::<u64>().ok()?;
    }
    Some((pgrp, ticks))
}

/// Clock ticks per second (`getconf CLK_TCK`; Linux's USER_HZ is 100).
pub fn ticks_per_sec() -> u64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100)
}
