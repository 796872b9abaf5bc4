//! `qrun do`: run a program from the host filesystem in a fresh sandbox,
//! like `runsc do`.

use qvisor::{DEFAULT_MEMORY, Sandbox, SandboxConfig};

use super::do_state::DoState;
use super::size::parse_size;
use crate::report;

/// Runs `qrun do ARGS`; returns the exit status.
pub fn run(args: &[String], debug: bool) -> i32 {
    let mut config = match parse(args, debug) {
        Ok(c) => c,
        Err(msg) => {
            eprintln!("qrun do: {msg}");
            return 2;
        }
    };
    if let Some(sock) = &config.control_socket
        && let Some(why) = report::socket_path_problem(sock)
    {
        eprintln!("qrun: control socket {}: {why}", sock.display());
        return 1;
    }
    let state = match &config.state_dir {
        Some(dir) => DoState::given(dir),
        None => DoState::temporary(),
    };
    let state = match state {
        Ok(s) => s,
        Err(e) => {
            eprintln!("qrun: {}", report::chain(&e));
            return 1;
        }
    };
    config.state_dir = Some(state.path().to_owned());
    let stats = config.stats;
    let start = std::time::Instant::now();
    match Sandbox::run(&config) {
        Ok(done) => {
            if stats {
                eprintln!(
                    "qrun: status {} in {:.3} ms, {} host calls, {} preemptions",
                    done.status,
                    start.elapsed().as_secs_f64() * 1e3,
                    done.host_calls,
                    done.preemptions
                );
                eprintln!(
                    "qrun: returned {} bytes while running in {} host calls",
                    done.returned.bytes, done.returned.calls
                );
            }
            done.status
        }
        Err(e) => {
            eprintln!("qrun: {}", report::chain(&e));
            e.exit_status()
        }
    }
}

fn parse(args: &[String], debug: bool) -> Result<SandboxConfig, String> {
    let mut memory = DEFAULT_MEMORY;
    let mut cpus = crate::plan::host_vcpus();
    let mut stats = false;
    let mut env = Vec::new();
    let mut paths: [Option<String>; 4] = Default::default();
    let mut it = args.iter();
    let mut rest = Vec::new();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--memory" => {
                let v = it.next().ok_or("--memory needs a size")?;
                memory = parse_size(v)?;
            }
            "--cpus" => {
                let v = it.next().ok_or("--cpus needs a count")?;
                cpus = v
                    .parse()
                    .ok()
                    .filter(|n| (1..=qvisor::MAX_CPUS).contains(n))
                    .ok_or(format!("--cpus '{v}': expected 1..={}", qvisor::MAX_CPUS))?;
            }
            "--env" => {
                let v = it.next().ok_or("--env needs K=V")?;
                if !v.contains('=') {
                    return Err(format!("--env '{v}': expected K=V"));
                }
                env.push(v.clone());
            }
            "--stats" => stats = true,
            "--rootfs" | "--cwd" | "--control-socket" | "--state-dir" => {
                let i = ["--rootfs", "--cwd", "--control-socket", "--state-dir"]
                    .iter()
                    .position(|o| o == a)
                    .expect("matched above");
                paths[i] = Some(it.next().ok_or(format!("{a} needs a path"))?.clone());
            }
            "--" => {
                rest.extend(it.by_ref().cloned());
            }
            s if s.starts_with('-') => return Err(format!("unknown option '{s}'")),
            _ => {
                rest.push(a.clone());
                rest.extend(it.by_ref().cloned());
            }
        }
    }
    let program = rest.first().cloned().ok_or("no program given")?;
    let mut config = SandboxConfig::new(rest);
    config.program = program;
    config.memory = memory;
    config.cpus = cpus;
    config.env = env;
    config.log_level = if debug { 4 } else { 0 };
    config.stats = stats;
    let [rootfs, cwd, control_socket, state_dir] = paths;
    // Without --rootfs the sandbox sees the host's files from where qrun
    // runs, as `runsc do` does; inside a rootfs the default cwd is its root.
    let default_cwd = match &rootfs {
        None => std::env::current_dir()
            .ok()
            .and_then(|d| d.to_str().map(String::from))
            .unwrap_or_else(|| "/".into()),
        Some(_) => "/".into(),
    };
    if let Some(r) = rootfs {
        config.rootfs = r.into();
    }
    config.cwd = cwd.unwrap_or(default_cwd);
    config.control_socket = control_socket.map(Into::into);
    config.state_dir = state_dir.map(Into::into);
    Ok(config)
}
