//! One workload instance as an OCI container: its bundle (the shared
//! read-only image as `root.path`, the workload scripts bound read-only at
//! `/functionbench`, a tmpfs at `/tmp`, the host's network namespace so a
//! loopback port reaches it), and the runtime commands that drive it
//! (`create`, `start`, `state`, `kill`, `delete`, each with its own
//! `--root` and the runtime's global flags; for gVisor also `checkpoint`
//! and `restore`).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value as Json, json};

use super::interrupt;
use super::report::first_error_line;
use crate::runner;

/// Guest RAM for qrun and the memory cgroup limit for runc.
const MEMORY_LIMIT: u64 = 512 << 20;
/// How long a cold start may take before it counts as failed.
const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// How long one request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// A runtime binary, its state directory and the global flags every
/// command of it gets (runsc: `--network=host`, which it must see on
/// `create` and `start` alike).
pub struct Runtime {
    pub name: &'static str,
    pub bin: PathBuf,
    pub root: PathBuf,
    pub flags: Vec<String>,
}

impl Runtime {
    fn cmd(&self) -> Command {
        let mut c = Command::new(&self.bin);
        c.arg("--root")
            .arg(&self.root)
            .args(&self.flags)
            .stdin(Stdio::null());
        c
    }

    /// The ids `list -q` shows (runc and runsc keep files, not one
    /// directory per container, under their root).
    pub fn list(&self) -> Vec<String> {
        self.run(&["list", "-q"])
            .map(|out| {
                out.lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The gofer of a gVisor sandbox (a process beside the sandbox, not
    /// under it): `goferPid` in runsc's state file.
    fn gofer_pid(&self, id: &str) -> Option<i32> {
        let state = self.root.join(format!("{id}_sandbox:{id}.state"));
        let text = std::fs::read_to_string(state).ok()?;
        let j: Json = serde_json::from_str(&text).ok()?;
        j.get("goferPid")?
            .as_i64()
            .and_then(|p| i32::try_from(p).ok())
            .filter(|p| *p > 0)
    }

    fn run(&self, args: &[&str]) -> Result<String, String> {
        let out = runner::output(self.cmd().args(args))?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `state ID` as JSON.
    pub fn state(&self, id: &str) -> Result<Json, String> {
        let out = self.run(&["state", id])?;
        serde_json::from_str(&out).map_err(|e| format!("{} state {id}: {e}", self.name))
    }

    /// The control socket of a qrun container (`<root>/<id>/sandbox/ctl.sock`).
    pub fn ctl_socket(&self, id: &str) -> PathBuf {
        self.root.join(id).join("sandbox/ctl.sock")
    }

    /// `qrun ctl SOCKET status` as JSON.
    pub fn ctl_status(&self, id: &str) -> Result<Json, String> {
        let out = runner::output(
            Command::new(&self.bin)
                .arg("ctl")
                .arg(self.ctl_socket(id))
                .arg("status"),
        )?;
        serde_json::from_slice(&out.stdout).map_err(|e| format!("ctl status JSON: {e}"))
    }

    /// `kill ID SIGNAL`; returns its wall time in ms.
    pub fn kill(&self, id: &str, signal: &str) -> Result<f64, String> {
        let t0 = Instant::now();
        self.run(&["kill", id, signal])?;
        Ok(ms(t0))
    }

    /// Deletes the container whatever its state (best effort).
    pub fn remove(&self, id: &str) {
        let _ = self
            .cmd()
            .args(["delete", "--force", id])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// A started container; deleted when dropped (also on an error or an
/// interruption).
pub struct Instance<'a> {
    pub rt: &'a Runtime,
    pub id: String,
    pub port: u16,
    pub pid: i32,
    bundle: PathBuf,
    log: PathBuf,
}

impl Drop for Instance<'_> {
    fn drop(&mut self) {
        self.rt.remove(&self.id);
    }
}

impl<'a> Instance<'a> {
    /// Writes the bundle under `work`, creates and starts the container and
    /// waits for its first answer to `GET /`. Returns the instance and the
    /// cold start (create to first response) in ms.
    pub fn start(
        rt: &'a Runtime,
        work: &Path,
        image: &Path,
        scripts: &Path,
        args: &[&str],
        id: String,
    ) -> Result<(Self, f64), String> {
        let port = free_port()?;
        let bundle = work.join(format!("bundle-{id}"));
        let args: Vec<String> = args
            .iter()
            .map(|a| a.replace("{port}", &port.to_string()))
            .collect();
        write_bundle(&bundle, image, scripts, &args)?;
        let log = bundle.join("output.log");
        let logf = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let logf2 = logf.try_clone().map_err(|e| format!("log: {e}"))?;
        let t0 = Instant::now();
        // Its own process group: a Ctrl-C reaches only the bench, which
        // then deletes the containers itself.
        let status = rt
            .cmd()
            .args(["create", "--bundle"])
            .arg(&bundle)
            .arg(&id)
            .stdout(logf)
            .stderr(logf2)
            .process_group(0)
            .status()
            .map_err(|e| format!("{} create: {e}", rt.name))?;
        let mut inst = Self {
            rt,
            id,
            port,
            pid: 0,
            bundle,
            log,
        };
        if !status.success() {
            return Err(inst.failure(&format!("{} create: {status}", rt.name)));
        }
        rt.run(&["start", &inst.id]).map_err(|e| inst.failure(&e))?;
        inst.read_pid()?;
        inst.wait_ready(t0)?;
        Ok((inst, ms(t0)))
    }

    fn read_pid(&mut self) -> Result<(), String> {
        self.pid = self
            .rt
            .state(&self.id)?
            .get("pid")
            .and_then(Json::as_i64)
            .and_then(|p| i32::try_from(p).ok())
            .unwrap_or(0);
        Ok(())
    }

    /// `runsc checkpoint --image-path DIR ID` (the container stops once
    /// saved); its wall time in ms.
    pub fn checkpoint(&self, dir: &Path) -> Result<f64, String> {
        interrupt::check()?;
        let t0 = Instant::now();
        let out = self
            .rt
            .cmd()
            .arg("checkpoint")
            .arg("--image-path")
            .arg(dir)
            .arg(&self.id)
            .output()
            .map_err(|e| format!("{} checkpoint: {e}", self.rt.name))?;
        let t = ms(t0);
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            return Err(format!(
                "{} checkpoint: {}",
                self.rt.name,
                first_error_line(&err).unwrap_or_else(|| out.status.to_string())
            ));
        }
        Ok(t)
    }

    /// Deletes the checkpointed container and `runsc restore`s it from
    /// `dir` under the same id; returns the time from the restore command
    /// to the first response of `GET /`, in ms.
    pub fn restore(&mut self, dir: &Path) -> Result<f64, String> {
        interrupt::check()?;
        self.rt.run(&["delete", "--force", &self.id])?;
        let logf = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.log)
            .map_err(|e| format!("{}: {e}", self.log.display()))?;
        let logf2 = logf.try_clone().map_err(|e| format!("log: {e}"))?;
        let t0 = Instant::now();
        let status = self
            .rt
            .cmd()
            .arg("restore")
            .arg("--image-path")
            .arg(dir)
            .arg("--bundle")
            .arg(&self.bundle)
            .arg("--detach")
            .arg(&self.id)
            .stdout(logf)
            .stderr(logf2)
            .process_group(0)
            .status()
            .map_err(|e| format!("{} restore: {e}", self.rt.name))?;
        if !status.success() {
            return Err(self.failure(&format!("{} restore: {status}", self.rt.name)));
        }
        self.read_pid()?;
        self.wait_ready(t0)?;
        Ok(ms(t0))
    }

    /// The host processes of the instance: the container's pid and its
    /// descendants, and for gVisor its gofer.
    fn pids(&self) -> Vec<i32> {
        let mut pids = tree(self.pid);
        if let Some(g) = self.rt.gofer_pid(&self.id) {
            pids.extend(tree(g));
        }
        pids
    }

    /// Polls `GET /` until it answers 200; fails if the container stops
    /// or the timeout passes.
    fn wait_ready(&self, t0: Instant) -> Result<(), String> {
        let mut last_state = Instant::now();
        loop {
            interrupt::check()?;
            match http_get(
                self.port,
                "/",
                Duration::from_millis(REQUEST_TIMEOUT.as_millis() as u64),
            ) {
                Ok((200, _)) => return Ok(()),
                Ok((code, body)) => {
                    return Err(format!("GET / answered {code}: {}", body.trim()));
                }
                Err(_) => {}
            }
            if t0.elapsed() > READY_TIMEOUT {
                return Err(
                    self.failure(&format!("no answer within {} s", READY_TIMEOUT.as_secs()))
                );
            }
            if last_state.elapsed() > Duration::from_millis(100) {
                last_state = Instant::now();
                let status = self.rt.state(&self.id).ok();
                let status = status
                    .as_ref()
                    .and_then(|s| s.get("status"))
                    .and_then(Json::as_str)
                    .unwrap_or("gone");
                if status == "stopped" || status == "gone" {
                    return Err(self.failure(&format!("container {status} before answering")));
                }
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// `what`, with the first error line of the container's output.
    fn failure(&self, what: &str) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        match first_error_line(&text) {
            Some(line) => format!("{what}: {line}"),
            None => what.to_owned(),
        }
    }

    /// `err` from a step on this container (a `kill`, a `ctl status`),
    /// with the first error line of the container's output when it has
    /// one: when the sandbox died, that line says why, not the socket.
    pub fn explain(&self, err: String) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        match first_error_line(&text) {
            Some(line) if !err.contains(&line) => format!("{line} (then: {err})"),
            _ => err,
        }
    }

    /// One `GET /` on a new connection; its latency in ms.
    pub fn request(&self) -> Result<f64, String> {
        interrupt::check()?;
        let t0 = Instant::now();
        let (code, body) = http_get(self.port, "/", REQUEST_TIMEOUT)
            .map_err(|e| self.failure(&format!("GET /: {e}")))?;
        let t = ms(t0);
        if code != 200 {
            return Err(format!("GET / answered {code}: {}", body.trim()));
        }
        Ok(t)
    }

    /// PSS of the container's processes (the pid and its descendants), MiB.
    pub fn pss_mib(&self) -> Result<f64, String> {
        let mut kb = 0.0;
        for pid in self.pids() {
            let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
                .map_err(|e| format!("smaps_rollup of {pid}: {e}"))?;
            kb += super::report::pss_kb(&text).ok_or("no Pss line in smaps_rollup")?;
        }
        Ok(kb / 1024.0)
    }

    /// utime + stime of the container's processes, ms.
    pub fn cpu_ms(&self) -> Result<f64, String> {
        let mut ticks = 0.0;
        for pid in self.pids() {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map_err(|e| format!("stat of {pid}: {e}"))?;
            ticks += super::report::cpu_ticks(&stat).ok_or("bad /proc/PID/stat")?;
        }
        Ok(ticks * 1000.0 / TICKS_PER_S)
    }
}

/// `/proc/PID/stat` counts CPU time in USER_HZ ticks: 100 per second on
/// x86-64, whatever the kernel's own tick rate.
const TICKS_PER_S: f64 = 100.0;

/// `pid` and its descendants, from the parents in /proc/*/stat.
fn tree(pid: i32) -> Vec<i32> {
    let mut parents = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(p) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            if let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat"))
                && let Some(pp) = super::report::parent_pid(&stat)
            {
                parents.push((p, pp));
            }
        }
    }
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        let cur = out[i];
        out.extend(parents.iter().filter(|(_, pp)| *pp == cur).map(|(p, _)| *p));
        i += 1;
    }
    out
}

fn free_port() -> Result<u16, String> {
    let l = TcpListener::bind(("127.0.0.1", 0)).map_err(|e| format!("bind: {e}"))?;
    Ok(l.local_addr().map_err(|e| format!("bind: {e}"))?.port())
}

/// `GET path` on a new loopback connection: status code and body.
pub fn http_get(port: u16, path: &str, timeout: Duration) -> Result<(u16, String), String> {
    let mut c = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
    c.set_read_timeout(Some(timeout))
        .map_err(|e| format!("timeout: {e}"))?;
    write!(
        c,
        "GET {path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| format!("sending: {e}"))?;
    let mut resp = Vec::new();
    c.read_to_end(&mut resp)
        .map_err(|e| format!("reading: {e}"))?;
    super::report::parse_response(&String::from_utf8_lossy(&resp))
        .ok_or_else(|| "no HTTP response".to_owned())
}

/// The bundle: `config.json` only; the root is the shared image.
fn write_bundle(dir: &Path, image: &Path, scripts: &Path, args: &[String]) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let config = json!({
        "ociVersion": "1.0.2",
        "root": { "path": image, "readonly": true },
        "process": {
            "terminal": false,
            "user": { "uid": 0, "gid": 0 },
            "args": args,
            "env": [
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "HOME=/tmp",
                "LANG=C.UTF-8",
                "PYTHONDONTWRITEBYTECODE=1",
                "PYTHONUNBUFFERED=1",
                "OPENBLAS_NUM_THREADS=1",
                "OMP_NUM_THREADS=1",
                "MKL_NUM_THREADS=1",
                "OPENCV_FOR_THREADS_NUM=1",
            ],
            "cwd": "/",
            "noNewPrivileges": true,
            "rlimits": [{ "type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024 }],
        },
        "hostname": "functionbench",
        "mounts": [
            { "destination": "/proc", "type": "proc", "source": "proc" },
            { "destination": "/dev", "type": "tmpfs", "source": "tmpfs",
              "options": ["nosuid", "strictatime", "mode=755", "size=65536k"] },
            { "destination": "/dev/pts", "type": "devpts", "source": "devpts",
              "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"] },
            { "destination": "/dev/shm", "type": "tmpfs", "source": "shm",
              "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"] },
            { "destination": "/sys", "type": "sysfs", "source": "sysfs",
              "options": ["nosuid", "noexec", "nodev", "ro"] },
            { "destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
              "options": ["nosuid", "nodev", "mode=1777", "size=262144k"] },
            { "destination": "/functionbench", "type": "bind", "source": scripts,
              "options": ["rbind", "ro"] },
        ],
        "linux": {
            "resources": { "devices": [], "memory": { "limit": MEMORY_LIMIT } },
            // No network namespace: the function listens on the host's
            // loopback, the same for every runtime.
            "namespaces": [
                { "type": "pid" }, { "type": "ipc" }, { "type": "uts" }, { "type": "mount" },
            ],
        },
    });
    let path = dir.join("config.json");
    std::fs::write(&path, config.to_string()).map_err(|e| format!("{}: {e}", path.display()))
}

fn ms(t0: Instant) -> f64 {
    t0.elapsed().as_secs_f64() * 1e3
}
