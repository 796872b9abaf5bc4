//! `qrun`: the OCI runtime CLI over qvisor sandboxes.
#![forbid(unsafe_code)]

mod commands;

use std::process::ExitCode;

const USAGE: &str = "usage: qrun [--debug] <command> [args]

commands:
  do [--memory SIZE] [--env K=V]... [--stats] -- PROGRAM [ARGS...]
      run a program from the host filesystem in a fresh sandbox";

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
        other => {
            eprintln!("qrun: unknown command '{other}'\n{USAGE}");
            2
        }
    };
    ExitCode::from(status.clamp(0, 255) as u8)
}
