//! A program under `qrun do` with a control socket: started, its first
//! stdout line read, then hibernated, woken and signalled through `qrun
//! ctl`, and finished (waits.rs, pipes.rs).

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Stdio};

use super::tmp::TempDir;

/// A running sandbox and its control socket.
pub struct Controlled {
    pub child: Child,
    out: BufReader<ChildStdout>,
    socket: PathBuf,
    _dir: TempDir,
}

impl Controlled {
    /// Starts `prog args` (empty environment, stdin `stdin`) and returns
    /// it with the first line it printed, once its socket is up.
    pub fn start(tag: &str, prog: &Path, args: &[&str], stdin: Stdio) -> (Controlled, String) {
        Self::start_with(tag, &[], prog, args, stdin)
    }

    /// Like [`Controlled::start`], with extra `qrun do` options (e.g.
    /// `--cpus 2`).
    pub fn start_with(
        tag: &str,
        opts: &[&str],
        prog: &Path,
        args: &[&str],
        stdin: Stdio,
    ) -> (Controlled, String) {
        Self::start_with_vmm_env(tag, opts, &[], prog, args, stdin)
    }

    /// Like [`Controlled::start_with`], with `vmm_env` in the environment
    /// of `qrun` itself (the VMM's test hooks, e.g. `QVISOR_IDLE_DELAY_MS`).
    pub fn start_with_vmm_env(
        tag: &str,
        opts: &[&str],
        vmm_env: &[(&str, &str)],
        prog: &Path,
        args: &[&str],
        stdin: Stdio,
    ) -> (Controlled, String) {
        let dir = TempDir::new(tag);
        let socket = dir.join("ctl.sock");
        let state = dir.join("state");
        let mut child = super::qrun_do_controlled_with(&socket, &state, opts)
            .arg(prog)
            .args(args)
            .env_clear()
            .envs(vmm_env.iter().copied())
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn qrun");
        let mut out = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        out.read_line(&mut line).expect("read the first line");
        super::wait_for_socket(&socket);
        let c = Controlled {
            child,
            out,
            socket,
            _dir: dir,
        };
        (c, line)
    }

    /// The sandbox's state directory (its swap, REAP and kernel files).
    pub fn state_dir(&self) -> PathBuf {
        self.socket.with_file_name("state")
    }

    /// A `qrun ctl` request; its JSON answer.
    pub fn ctl(&self, req: &str) -> serde_json::Value {
        super::ctl(&self.socket, req).unwrap_or_else(|e| panic!("ctl {req}: {e}"))
    }

    /// A `qrun ctl` request; its JSON answer or the error text.
    pub fn try_ctl(&self, req: &str) -> Result<serde_json::Value, String> {
        super::ctl(&self.socket, req)
    }

    /// Hibernates (the program waits somewhere) and checks the state.
    pub fn hibernate(&self) -> serde_json::Value {
        let st = self.ctl("hibernate");
        assert_eq!(st["state"], "hibernated", "{st}");
        st
    }

    /// The next line of stdout.
    pub fn read_line(&mut self) -> String {
        let mut line = String::new();
        self.out.read_line(&mut line).expect("read a line");
        line
    }

    /// The rest of stdout and the exit status, which must be a success.
    pub fn finish(self) -> (String, i32) {
        let (rest, err, code) = self.finish_with_stderr();
        assert_eq!(code, 0, "stdout: {rest}, stderr: {err}");
        (rest, code)
    }

    /// Like [`Controlled::finish`], with stderr too.
    pub fn finish_with_stderr(mut self) -> (String, String, i32) {
        let mut rest = String::new();
        self.out.read_to_string(&mut rest).expect("stdout");
        let out = self.child.wait_with_output().expect("wait");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            out.status.success(),
            "status {:?}, stdout: {rest}, stderr: {err}",
            out.status
        );
        (rest, err, super::shell_status(out.status))
    }
}
