//! `qrun`: the OCI runtime CLI over qvisor sandboxes.
#![forbid(unsafe_code)]

mod commands;

use std::process::ExitCode;

const USAGE: &str = "usage: qrun [--debug] <command> [args]

commands:
  do [--memory SIZE] [--env K=V]... [--stats] [--rootfs DIR] [--cwd PATH]
     [--control-socket PATH] [--state-dir DIR] -- PROGRAM [ARGS...]
      run a program in a fresh sandbox; paths resolve inside DIR (default /)
  ctl SOCKET status|hibernate|wake|signal N
      send one request to a sandbox's control socket";

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut debug = false;
    while let Some(first) = args.first() {
        match first.as_str() {
            "--debug" => debug = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            _ => break,
        }
        args.remove(0);
    }
    let Some(command) = args.first().cloned() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let status = match command.as_str() {
        "do" => commands::do_cmd::run(&args[1..], debug),
        "ctl" => commands::ctl::run(&args[1..]),
        other => {
            eprintln!("qrun: unknown command '{other}'\n{USAGE}");
            2
        }
    };
    ExitCode::from(status.clamp(0, 255) as u8)
}
