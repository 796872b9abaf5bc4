//! The four language runtimes' HTTP servers as OCI containers (issue 14):
//! the counting hello server of `test-apps/servers` (README.md there) in
//! Python (`ThreadingHTTPServer`), Node.js (`http`), Go (`net/http`,
//! `CGO_ENABLED=0`) and Java (`com.sun.net.httpserver`), each run with
//! `qrun run` from a bundle whose root is the FunctionBench Debian image
//! (scripts/functionbench-image.sh: python3, Node.js 18, openjdk-17 JRE;
//! built once and cached, see `image`), the server files bound read-only
//! at `/srv`, the host's network namespace.
//!
//! Per runtime: the same container under runc (the native reference)
//! answers 1,000 `GET /r/K`, a 404 and `GET /sum`; under qrun each answer
//! must be the same, status and body. Then 20 cycles of `qrun kill ID
//! SIGSTOP` (hibernate), a pause with no request (3 s in the first and
//! last cycles: the state stays `hibernated` with no swap fault — a JVM
//! and the Go runtime have periodic timers that must not wake it), and one
//! `GET /r/K` that wakes it and is answered; after them `GET /sum` must
//! be the count and hash the test computes, and `GET /quit` ends `run`
//! with 0.
//!
//! The idle tests measure the CPU time (utime + stime of `run` and its
//! descendants) of an idle Go and Java server over 10 s under qrun and
//! under runc, one after the other.
//!
//! Each test takes up to about 60 s here (a JVM starts in several seconds
//! in the sandbox on this loaded machine). The image, the runtimes used
//! to build the servers (`go`, `javac`) and runc are needed: a missing one
//! is SKIPPED loudly and fails under `CI=true`, as /dev/kvm does.

#![forbid(unsafe_code)]

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::server::Server;
use common::tmp::TempDir;
use serde_json::{Value, json};

/// How long a server may take to print "listening on".
const START: Duration = Duration::from_secs(45);
/// Requests compared with the native run.
const REQUESTS: u32 = 1000;
/// Hibernation cycles.
const CYCLES: u32 = 20;
/// The pause with no request in the first and last cycles.
const LONG_IDLE: Duration = Duration::from_secs(3);
/// ... and in the others.
const SHORT_IDLE: Duration = Duration::from_millis(200);
/// The pause after a request before a hibernation.
const SETTLE: Duration = Duration::from_millis(200);
/// Guest RAM under qrun, the memory limit under runc.
const MEMORY: u64 = 512 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lang {
    Python,
    Node,
    Go,
    Java,
}

impl Lang {
    fn name(self) -> &'static str {
        match self {
            Lang::Python => "python",
            Lang::Node => "node",
            Lang::Go => "go",
            Lang::Java => "java",
        }
    }

    /// The container's command line, `{port}` for the port.
    fn argv(self, port: u16) -> Vec<String> {
        let port = port.to_string();
        let v: Vec<&str> = match self {
            Lang::Python => vec!["/usr/bin/python3", "/srv/counter.py", &port],
            Lang::Node => vec!["/usr/bin/node", "/srv/counter.js", &port],
            // Through env: `qrun run` looks for args[0] in the rootfs
            // before the mounts (runc after them), so a program on a bind
            // mount is refused as "no such executable file".
            Lang::Go => vec!["/usr/bin/env", "/srv/counter_go", &port],
            Lang::Java => vec!["/usr/bin/java", "-cp", "/srv/java", "Counter", &port],
        };
        v.into_iter().map(str::to_owned).collect()
    }

    /// The image's stamp line saying the runtime is installed.
    fn stamp_line(self) -> &'static str {
        match self {
            Lang::Python => "python ",
            Lang::Node => "node v",
            Lang::Go => "",
            Lang::Java => "java openjdk",
        }
    }
}

/// Says SKIPPED (or fails under `CI=true`) and returns `None`.
fn missing<T>(msg: &str) -> Option<T> {
    let ci = std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1");
    assert!(!ci, "{msg}");
    eprintln!("SKIPPED: {msg}");
    None
}

/// `prog` found on the PATH (or in /usr/local/go/bin, where
/// scripts/deps.sh puts Go).
fn have(prog: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.push("/usr/local/go/bin".into());
    dirs.into_iter()
        .map(|d| d.join(prog))
        .find(|p| p.is_file())
        .or_else(|| missing(&format!("{prog} is not installed (scripts/deps.sh)")))
}

/// The FunctionBench image's rootfs, built by its script when the cache
/// lacks it (debootstrap, apt and pip: tens of minutes, once; needs root)
/// and then reused (the script returns at once). `lang`'s runtime must be
/// in it.
fn image(lang: Lang) -> Option<PathBuf> {
    static LOCK: Mutex<()> = Mutex::new(());
    let _one = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/functionbench-image.sh");
    let t = Instant::now();
    let out = Command::new("bash")
        .arg(&script)
        .output()
        .expect("running scripts/functionbench-image.sh");
    if !out.status.success() {
        return missing(&format!(
            "the FunctionBench image could not be built: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    if t.elapsed() > Duration::from_secs(5) {
        eprintln!("built the FunctionBench image in {:?}", t.elapsed());
    }
    let rootfs = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let stamp = std::fs::read_to_string(rootfs.with_file_name("rootfs.stamp")).unwrap_or_default();
    if !stamp.lines().any(|l| l.starts_with(lang.stamp_line())) {
        return missing(&format!(
            "the FunctionBench image has no {} (its stamp: {stamp:?})",
            lang.name()
        ));
    }
    Some(rootfs)
}

/// The directory bound at `/srv`: the servers' sources, the Go binary
/// (built with `CGO_ENABLED=0` when `main.go` is newer) and the Java
/// class (`javac --release 17`, the image's JRE), for `lang`.
fn apps(lang: Lang) -> Option<PathBuf> {
    static LOCK: Mutex<()> = Mutex::new(());
    let _one = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../test-apps/servers");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("servers-srv");
    std::fs::create_dir_all(dir.join("java")).expect("mkdir");
    let stale = |out: &Path, input: &Path| {
        let time = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
        time(out).is_none() || time(out) < time(input)
    };
    match lang {
        Lang::Python | Lang::Node => {
            for f in ["counter.py", "counter.js"] {
                std::fs::copy(src.join(f), dir.join(f)).expect("copying a server");
            }
        }
        Lang::Go => {
            let go = have("go")?;
            let out = dir.join("counter_go");
            if stale(&out, &src.join("go/main.go")) {
                let st = Command::new(go)
                    .args(["build", "-trimpath", "-o"])
                    .arg(&out)
                    .arg(".")
                    .current_dir(src.join("go"))
                    .env("CGO_ENABLED", "0")
                    .env("GOFLAGS", "-buildvcs=false")
                    .status()
                    .expect("running go build");
                assert!(st.success(), "go build of test-apps/servers/go failed");
            }
        }
        Lang::Java => {
            let javac = have("javac")?;
            let out = dir.join("java/Counter.class");
            if stale(&out, &src.join("Counter.java")) {
                let st = Command::new(javac)
                    .args(["--release", "17", "-d"])
                    .arg(dir.join("java"))
                    .arg(src.join("Counter.java"))
                    .status()
                    .expect("running javac");
                assert!(st.success(), "javac Counter.java failed");
            }
        }
    }
    Some(dir)
}

/// A port nobody listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// The bundle's config.json: the image read-only as the root, `srv` at
/// /srv, a tmpfs /tmp, no network namespace (the server listens on the
/// host's loopback), as the FunctionBench containers.
fn write_bundle(dir: &Path, image: &Path, srv: &Path, args: &[String]) {
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
            ],
            "cwd": "/",
            "noNewPrivileges": true,
            "rlimits": [{ "type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024 }],
        },
        "hostname": "servers",
        "mounts": [
            { "destination": "/proc", "type": "proc", "source": "proc" },
            { "destination": "/dev", "type": "tmpfs", "source": "tmpfs",
              "options": ["nosuid", "strictatime", "mode=755", "size=65536k"] },
            { "destination": "/dev/shm", "type": "tmpfs", "source": "shm",
              "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"] },
            { "destination": "/sys", "type": "sysfs", "source": "sysfs",
              "options": ["nosuid", "noexec", "nodev", "ro"] },
            { "destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
              "options": ["nosuid", "nodev", "mode=1777", "size=131072k"] },
            { "destination": "/srv", "type": "bind", "source": srv,
              "options": ["rbind", "ro"] },
        ],
        "linux": {
            "resources": { "devices": [], "memory": { "limit": MEMORY } },
            "namespaces": [
                { "type": "pid" }, { "type": "ipc" }, { "type": "uts" }, { "type": "mount" },
            ],
        },
    });
    std::fs::create_dir_all(dir).expect("mkdir bundle");
    std::fs::write(dir.join("config.json"), config.to_string()).expect("writing config.json");
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rt {
    Runc,
    Qrun,
}

impl Rt {
    fn cmd(self, root: &Path) -> Command {
        let mut c = match self {
            Rt::Runc => Command::new("runc"),
            Rt::Qrun => Command::new(common::qrun()),
        };
        c.arg("--root").arg(root);
        c
    }

    /// `cmd` with, for qrun, the VMM's log (`info`, or `debug` with
    /// `QRUN_SERVERS_DEBUG=1`) appended to `log`.
    fn logged_cmd(self, root: &Path, log: &Path) -> Command {
        let mut c = self.cmd(root);
        if self == Rt::Qrun {
            c.arg("--log").arg(log);
            if std::env::var_os("QRUN_SERVERS_DEBUG").is_some() {
                c.arg("--debug");
            }
        }
        c
    }
}

/// A server container run in the foreground (`run`), force-deleted when
/// dropped.
struct Container {
    rt: Rt,
    lang: Lang,
    root: TempDir,
    id: String,
    port: u16,
    server: Server,
    /// The VMM's log (kept in the test target dir for a failure).
    log: PathBuf,
    _bundle: TempDir,
}

impl Container {
    fn start(rt: Rt, lang: Lang, image: &Path, srv: &Path) -> Container {
        Self::try_start(rt, lang, image, srv).unwrap_or_else(|why| panic!("{why}"))
    }

    /// The reference under runc, started again once if it failed to
    /// start: under CI load the JVM under runc once exited with status 1
    /// before listening, printing nothing. A second failure fails the
    /// test, as any failure under qrun does at once.
    fn start_reference(lang: Lang, image: &Path, srv: &Path) -> Container {
        Self::try_start(Rt::Runc, lang, image, srv).unwrap_or_else(|why| {
            eprintln!("the reference did not start, once more: {why}");
            Self::start(Rt::Runc, lang, image, srv)
        })
    }

    fn try_start(rt: Rt, lang: Lang, image: &Path, srv: &Path) -> Result<Container, String> {
        let bundle = TempDir::new("servers-bundle");
        let root = TempDir::new("servers-root");
        let port = free_port();
        write_bundle(bundle.path(), image, srv, &lang.argv(port));
        let id = format!("{}-{:?}-{}", lang.name(), rt, std::process::id()).to_lowercase();
        let logs = Path::new(env!("CARGO_TARGET_TMPDIR")).join("servers-logs");
        std::fs::create_dir_all(&logs).expect("mkdir");
        let log = logs.join(format!("{id}.log"));
        let _ = std::fs::remove_file(&log);
        let mut cmd = rt.logged_cmd(root.path(), &log);
        cmd.args(["run", "--bundle"]).arg(bundle.path()).arg(&id);
        let t = Instant::now();
        let mut server = Server::spawn(cmd);
        server.try_wait_line("listening on", START)?;
        eprintln!(
            "{} under {rt:?}: listening after {:?}",
            lang.name(),
            t.elapsed()
        );
        Ok(Container {
            rt,
            lang,
            root,
            id,
            port,
            server,
            log,
            _bundle: bundle,
        })
    }

    fn what(&self) -> String {
        format!("{} under {:?}", self.lang.name(), self.rt)
    }

    fn get(&mut self, path: &str) -> (u16, String) {
        match get(self.port, path) {
            Ok(a) => a,
            Err(e) => self.fail(&format!("GET {path}: {e}")),
        }
    }

    /// Fails (as [`Self::fail`]) unless `ok`.
    fn check(&mut self, ok: bool, msg: &str) {
        if !ok {
            self.fail(msg);
        }
    }

    /// Kills the container and panics with `msg`, its stderr and the end
    /// of the VMM's log.
    fn fail(&mut self, msg: &str) -> ! {
        let how = self.server.kill();
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        let tail = lines[lines.len().saturating_sub(40)..].join("\n");
        panic!(
            "{}: {msg}; {how}\nthe VMM's log ({}) ends with:\n{tail}",
            self.what(),
            self.log.display()
        );
    }

    /// `qrun kill ID SIGNAL`, which must succeed.
    fn kill(&mut self, signal: &str) {
        let out = self
            .rt
            .cmd(self.root.path())
            .args(["kill", &self.id, signal])
            .output()
            .expect("running kill");
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr).into_owned();
            self.fail(&format!("kill {signal}: {err}"));
        }
    }

    /// The `qrun.hibernation` annotation of `state`.
    fn hibernation(&self) -> String {
        let out = self
            .rt
            .cmd(self.root.path())
            .args(["state", &self.id])
            .output()
            .expect("running state");
        let st: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        st["annotations"]["qrun.hibernation"]
            .as_str()
            .unwrap_or("<none>")
            .to_owned()
    }

    /// The sandbox's own status (control socket).
    fn ctl_status(&mut self) -> Value {
        let socket = self.root.join(&self.id).join("sandbox/ctl.sock");
        match common::ctl(&socket, "status") {
            Ok(st) => st,
            Err(e) => self.fail(&format!("status: {e}")),
        }
    }

    /// `GET /quit`, then `run` must end with 0.
    fn quit(mut self) {
        assert_eq!(
            self.get("/quit"),
            (200, "bye\n".to_owned()),
            "{}",
            self.what()
        );
        let (status, stderr) = self.server.wait_exit(Duration::from_secs(20));
        assert_eq!(status, 0, "{}: run's status; stderr: {stderr}", self.what());
    }

    /// CPU time (ns) of each live thread of `run` and its descendants
    /// (the first field of its `/proc/PID/task/TID/schedstat`): TID ->
    /// (name, ns).
    fn cpu_by_thread(&self) -> std::collections::BTreeMap<u32, (String, u64)> {
        let mut by = std::collections::BTreeMap::new();
        for pid in tree(self.server.pid()) {
            let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
                continue;
            };
            for t in tasks.flatten() {
                let Some(tid) = t.file_name().to_str().and_then(|s| s.parse().ok()) else {
                    continue;
                };
                let ns = std::fs::read_to_string(t.path().join("schedstat"))
                    .ok()
                    .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
                    .unwrap_or(0);
                let name = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
                by.insert(tid, (name.trim().to_owned(), ns));
            }
        }
        by
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = self
            .rt
            .cmd(self.root.path())
            .args(["delete", "--force", &self.id])
            .output();
    }
}

/// The parent pid in a `/proc/PID/stat` line (the second field after the
/// command name).
fn parent(stat: &str) -> Option<u32> {
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// `pid` and its live descendants.
fn tree(pid: u32) -> Vec<u32> {
    let mut parents = Vec::new();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(p) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if let Some(pp) = std::fs::read_to_string(e.path().join("stat"))
            .ok()
            .and_then(|s| parent(&s))
        {
            parents.push((p, pp));
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

/// `GET path` on a new loopback connection (`Connection: close`): the
/// status and body.
fn get(port: u16, path: &str) -> Result<(u16, String), String> {
    let mut c = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
    c.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| e.to_string())?;
    write!(
        c,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| format!("send: {e}"))?;
    let mut buf = Vec::new();
    c.read_to_end(&mut buf).map_err(|e| format!("read: {e}"))?;
    let ((status, body), _) = common::http::parse_response(&buf)
        .ok_or_else(|| format!("no HTTP response in {:?}", String::from_utf8_lossy(&buf)))?;
    Ok((status as u16, body))
}

/// The K of the `i`th request (spread over 0..1,000,000).
fn key(i: u32) -> u32 {
    (i * 7919 + 13) % 1_000_000
}

/// The servers' state after the requests `keys`, as `GET /sum` shows it.
fn expected_sum(keys: impl IntoIterator<Item = u32>) -> String {
    let (mut count, mut hash) = (0u64, 0u64);
    for k in keys {
        count += 1;
        hash = (hash * 1_000_003 + u64::from(k)) % 2_147_483_647;
    }
    format!("count {count} hash {hash}\n")
}

/// The requests compared with native: `REQUESTS` hits, a 404, the sum.
fn answers(c: &mut Container) -> Vec<(String, (u16, String))> {
    let t = Instant::now();
    let mut paths: Vec<String> = (0..REQUESTS).map(|i| format!("/r/{}", key(i))).collect();
    paths.push("/nothing-here".into());
    paths.push("/sum".into());
    let out = paths
        .into_iter()
        .map(|p| {
            let a = c.get(&p);
            (p, a)
        })
        .collect();
    eprintln!(
        "{}: {} requests in {:?}",
        c.what(),
        REQUESTS + 2,
        t.elapsed()
    );
    out
}

/// /dev/kvm, the image, the servers built for `lang` and runc (the
/// reference): `None` (after SKIPPED, or a failure under `CI=true`) when
/// one is missing.
fn prerequisites(lang: Lang) -> Option<(PathBuf, PathBuf)> {
    if !common::require_kvm() {
        return None;
    }
    let (Some(image), Some(srv)) = (image(lang), apps(lang)) else {
        return None;
    };
    have("runc")?;
    Some((image, srv))
}

/// 1,000 requests the same as under runc, then 20 hibernation cycles with
/// their checksum.
fn serve(lang: Lang) {
    let Some((image, srv)) = prerequisites(lang) else {
        return;
    };
    let native = {
        let mut c = Container::start_reference(lang, &image, &srv);
        let a = answers(&mut c);
        c.quit();
        a
    };
    let want_sum = expected_sum((0..REQUESTS).map(key));
    assert_eq!(
        native.last().map(|(_, a)| a.clone()),
        Some((200, want_sum.clone())),
        "{lang:?} natively: the state after {REQUESTS} requests"
    );

    let mut c = Container::start(Rt::Qrun, lang, &image, &srv);
    let sandboxed = answers(&mut c);
    for ((path, n), (_, s)) in native.iter().zip(&sandboxed) {
        assert_eq!(n, s, "{lang:?}: GET {path}: native vs qrun");
    }
    assert_eq!(native.len(), sandboxed.len());

    let mut keys: Vec<u32> = (0..REQUESTS).map(key).collect();
    let t = Instant::now();
    for cycle in 0..CYCLES {
        // The last connection's teardown first: Node.js half-closes and
        // waits for the client's FIN, which, if it is still unread when
        // the sandbox hibernates, wakes it at once (a ready fd the program
        // waits on), as seen under load.
        std::thread::sleep(SETTLE);
        let t0 = Instant::now();
        c.kill("SIGSTOP");
        let hib = t0.elapsed();
        let h = c.hibernation();
        c.check(
            h == "hibernated",
            &format!("cycle {cycle}: after SIGSTOP: {h}"),
        );
        let idle = if cycle == 0 || cycle == CYCLES - 1 {
            LONG_IDLE
        } else {
            SHORT_IDLE
        };
        std::thread::sleep(idle);
        let st = c.ctl_status();
        c.check(
            st["state"] == "hibernated"
                && st["swap_faults"] == 0
                && st["hibernations"] == u64::from(cycle) + 1,
            &format!("cycle {cycle}: not hibernated after {idle:?} with no request: {st}"),
        );
        let k = key(REQUESTS + cycle);
        keys.push(k);
        let t1 = Instant::now();
        let answer = c.get(&format!("/r/{k}"));
        let woke = t1.elapsed();
        let want = (200, format!("hello {k} #{}\n", keys.len()));
        c.check(
            answer == want,
            &format!("cycle {cycle}: the request that woke it: {answer:?}, not {want:?}"),
        );
        let st = c.ctl_status();
        c.check(st["state"] == "running", &format!("cycle {cycle}: {st}"));
        eprintln!(
            "{lang:?} cycle {cycle}: hibernated in {hib:?} ({} bytes out), woken and answered in {woke:?} ({} swap faults)",
            st["swapped_out_bytes"], st["swap_faults"]
        );
    }
    eprintln!("{lang:?}: {CYCLES} cycles in {:?}", t.elapsed());
    assert_eq!(
        c.get("/sum"),
        (200, expected_sum(keys)),
        "{lang:?}: the state after {CYCLES} hibernation cycles"
    );
    c.quit();
}

#[test]
fn python_server_container() {
    serve(Lang::Python);
}

#[test]
fn node_server_container() {
    serve(Lang::Node);
}

#[test]
fn go_server_container() {
    serve(Lang::Go);
}

#[test]
fn java_server_container() {
    serve(Lang::Java);
}

/// CPU time of an idle server over `IDLE_WINDOW`, under runc and qrun.
const IDLE_WINDOW: Duration = Duration::from_secs(10);

/// CPU time (ns) used by an idle `lang` server under `rt` over
/// [`IDLE_WINDOW`], after a first request and a second to settle.
fn idle_ns(rt: Rt, lang: Lang, image: &Path, srv: &Path) -> u64 {
    let mut c = match rt {
        Rt::Runc => Container::start_reference(lang, image, srv),
        Rt::Qrun => Container::start(rt, lang, image, srv),
    };
    assert_eq!(c.get("/r/1"), (200, "hello 1 #1\n".to_owned()));
    std::thread::sleep(Duration::from_secs(1));
    let before = c.cpu_by_thread();
    std::thread::sleep(IDLE_WINDOW);
    let after = c.cpu_by_thread();
    c.quit();
    // Per thread, the busiest first (threads that ended are not counted).
    let mut used: Vec<(u64, &str)> = after
        .iter()
        .map(|(tid, (name, ns))| {
            let was = before.get(tid).map_or(0, |b| b.1);
            (ns.saturating_sub(was), name.as_str())
        })
        .filter(|(ns, _)| *ns > 0)
        .collect();
    used.sort_unstable_by(|a, b| b.cmp(a));
    let top: Vec<String> = used
        .iter()
        .take(6)
        .map(|(ns, name)| format!("{name} {:.1}", *ns as f64 / 1e6))
        .collect();
    eprintln!("{lang:?} under {rt:?}, ms per thread: {}", top.join(", "));
    used.iter().map(|(ns, _)| ns).sum()
}

fn idle_cpu(lang: Lang) {
    let Some((image, srv)) = prerequisites(lang) else {
        return;
    };
    let native = idle_ns(Rt::Runc, lang, &image, &srv);
    let qrun = idle_ns(Rt::Qrun, lang, &image, &srv);
    eprintln!(
        "{lang:?} idle over {IDLE_WINDOW:?}: runc {:.1} ms CPU, qrun {:.1} ms CPU",
        native as f64 / 1e6,
        qrun as f64 / 1e6
    );
}

#[test]
fn go_idle_cpu() {
    idle_cpu(Lang::Go);
}

#[test]
fn java_idle_cpu() {
    idle_cpu(Lang::Java);
}

/// Everything a connection to 127.0.0.1:`port` receives before the
/// server closes it (at most 10 s).
fn read_answer(port: u16) -> Result<String, String> {
    let mut c = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
    c.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    let mut s = String::new();
    c.read_to_string(&mut s).map_err(|e| format!("read: {e}"))?;
    Ok(s)
}

/// A server hibernated while another of its threads computes (the program
/// never waits, so it is hibernated from the kick interrupt) is woken by
/// a connection to its listening socket (`test-apps/c/spin_accept.c`): as
/// a JVM whose compiler threads were still busy, with the main thread
/// parked in `accept`; and, with `poll`, as Node.js or Go busy after a
/// request, with no thread waiting on the socket at all (it polls it
/// without blocking between computations). Before, such a sandbox waited
/// for the control socket or SIGCONT only, and the connection timed out.
#[test]
fn a_connection_wakes_a_server_hibernated_while_it_computes() {
    if !common::require_kvm() {
        return;
    }
    for mode in ["accept", "poll"] {
        hibernate_while_computing(mode);
    }
}

fn hibernate_while_computing(mode: &str) {
    let dir = TempDir::new("spin-accept");
    let socket = dir.join("ctl.sock");
    let mut cmd = common::qrun_do_controlled(&socket, &dir.join("state"));
    cmd.arg(test_apps::path("spin_accept")).arg(mode);
    let mut server = Server::spawn(cmd);
    let port = server.wait_line("listening on ", Duration::from_secs(30));
    let port: u16 = port.trim().parse().expect("a port number");
    assert_eq!(read_answer(port), Ok("hello 1\n".to_owned()));
    for round in 0..3 {
        let st = common::ctl(&socket, "hibernate").expect("hibernate");
        assert_eq!(st["state"], "hibernated", "{mode} round {round}: {st}");
        std::thread::sleep(Duration::from_millis(300));
        let st = common::ctl(&socket, "status").expect("status");
        assert_eq!(
            (st["state"].as_str(), st["swap_faults"].as_u64()),
            (Some("hibernated"), Some(0)),
            "{mode} round {round}: {st}"
        );
        let t = Instant::now();
        assert_eq!(
            read_answer(port),
            Ok(format!("hello {}\n", round + 2)),
            "{mode} round {round}: the connection that should wake it"
        );
        eprintln!(
            "{mode} round {round}: woken and answered in {:?}",
            t.elapsed()
        );
        let st = common::ctl(&socket, "status").expect("status");
        assert_eq!(st["state"], "running", "{mode} round {round}: {st}");
    }
}
