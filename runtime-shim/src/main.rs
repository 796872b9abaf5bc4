//! `qrun`: the OCI runtime CLI over qvisor sandboxes, runc-compatible.

#![forbid(unsafe_code)]

mod bundle;
mod cgroup;
mod cli;
mod commands;
mod container;
mod hooks;
mod isolation;
mod oci_log;
mod plan;
mod report;
mod stack;
mod timefmt;
mod vmm_log;

use std::path::PathBuf;
use std::process::ExitCode;

use commands::{CliError, Globals};
use oci_log::Log;

const USAGE: &str =
    "usage: qrun [--root DIR] [--log FILE] [--log-format text|json] [--debug] <command> [args]

OCI commands (as runc):
  create <id> [--bundle DIR] [--pid-file F] [--console-socket S]
  start <id>
  state <id>
  kill [--all] <id> [SIGNAL]      SIGSTOP hibernates, SIGCONT wakes
  delete [--force] <id>
  exec [--process F] [--detach] [--pid-file F] [--env K=V]... [--cwd D]
       [--user UID[:GID]] <id> [CMD ARGS...]
  run <id> [--bundle DIR] [--pid-file F] [--detach]
  list [--format table|json] [--quiet]
  ps [--format table|json] <id>
  pause <id> | resume <id>
  features
  spec [--bundle DIR]

other commands:
  do [--memory SIZE] [--cpus N] [--env K=V]... [--stats] [--rootfs DIR] [--cwd PATH]
     [--control-socket PATH] [--state-dir DIR] -- PROGRAM [ARGS...]
      run a program in a fresh sandbox; paths resolve inside DIR (default /)
  ctl SOCKET status|hibernate|wake|signal N
      send one request to a sandbox's control socket";

/// Parses the global flags in front of the command.
fn globals(args: &mut Vec<String>) -> Result<Option<Globals>, String> {
    let mut g = Globals {
        root: PathBuf::from(container::DEFAULT_ROOT),
        debug: false,
        log: Log::default(),
    };
    while let Some(first) = args.first().cloned() {
        let Some(body) = first.strip_prefix("--").or_else(|| first.strip_prefix('-')) else {
            break;
        };
        let (name, inline) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v.to_owned())),
            None => (body, None),
        };
        args.remove(0);
        let mut value = || -> Result<String, String> {
            match &inline {
                Some(v) => Ok(v.clone()),
                None if !args.is_empty() => Ok(args.remove(0)),
                None => Err(format!("flag '{first}' needs a value")),
            }
        };
        match name {
            "root" => g.root = value()?.into(),
            "log" => g.log.path = Some(value()?.into()),
            "log-format" => {
                g.log.json = match value()?.as_str() {
                    "json" => true,
                    "text" => false,
                    f => return Err(format!("unknown log format '{f}'")),
                }
            }
            "debug" => g.debug = true,
            // Accepted for runc compatibility; cgroups are made by path.
            "systemd-cgroup" => {}
            "rootless" => {
                let v = value()?;
                if v == "true" {
                    return Err("rootless mode is not supported".into());
                }
            }
            "h" | "help" => return Ok(None),
            "v" | "version" => {
                println!(
                    "qrun version {}\nspec: {}",
                    env!("CARGO_PKG_VERSION"),
                    container::OCI_VERSION
                );
                std::process::exit(0);
            }
            _ => return Err(format!("unknown global flag '{first}'")),
        }
    }
    Ok(Some(g))
}

fn dispatch(g: &Globals, command: &str, args: &[String]) -> Result<i32, CliError> {
    use commands::*;
    match command {
        "create" => create::run(g, args),
        "start" => start::run(g, args),
        "state" => state::run(g, args),
        "kill" => kill::run(g, args),
        "delete" => delete::run(g, args),
        "exec" => exec::run(g, args),
        "exec-wait" => Ok(exec::run_waiter()),
        "run" => run::run(g, args),
        "list" => list::run(g, args),
        "ps" => ps::run(g, args),
        "pause" => pause::run(g, args),
        "resume" => resume::run(g, args),
        "features" => features::run(args),
        "spec" => spec::run(args),
        "sandbox-init" => sandbox_init::run(g, args),
        "do" => Ok(do_cmd::run(args, g.debug)),
        "ctl" => Ok(ctl::run(args)),
        other => Err(CliError::Usage(format!(
            "unknown command '{other}'\n{USAGE}"
        ))),
    }
}

fn main() -> ExitCode {
    if let Err(msg) = stack::ensure() {
        eprintln!("qrun: {msg}");
        return ExitCode::from(1);
    }
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let g = match globals(&mut args) {
        Ok(Some(g)) => g,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(msg) => {
            eprintln!("qrun: {msg}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    vmm_log::install(&g.log, g.debug);
    let Some(command) = args.first().cloned() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    match dispatch(&g, &command, &args[1..]) {
        Ok(status) => ExitCode::from(status.clamp(0, 255) as u8),
        Err(e) => {
            let msg = report::chain(&e);
            eprintln!("qrun {command}: {msg}");
            g.log.write("error", &format!("{command}: {msg}"));
            ExitCode::from(if matches!(e, CliError::Usage(_)) {
                2
            } else {
                1
            })
        }
    }
}
