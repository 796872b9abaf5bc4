//! `qrun create <id> [--bundle DIR] [--pid-file F] [--console-socket S]`.

use std::path::Path;

use super::{CliError, Globals};
use crate::cli::{self, Flag};
use crate::container::{self, CreateOptions};

pub const FLAGS: &[Flag] = &[
    Flag::value("bundle", &["b"]),
    Flag::value("pid-file", &[]),
    Flag::value("console-socket", &[]),
    Flag::value("preserve-fds", &[]),
    Flag::switch("no-pivot", &[]),
    Flag::switch("no-new-keyring", &[]),
];

/// The create options from parsed flags (shared with `run`).
pub fn options<'a>(
    g: &'a Globals,
    p: &'a cli::Parsed,
    id: &'a str,
) -> Result<CreateOptions<'a>, CliError> {
    if p.value("preserve-fds").is_some_and(|n| n != "0") {
        return Err(CliError::Usage("--preserve-fds is not supported".into()));
    }
    Ok(CreateOptions {
        root: &g.root,
        id,
        bundle: Path::new(p.value("bundle").unwrap_or(".")),
        pid_file: p.value("pid-file").map(Path::new),
        console_socket: p.value("console-socket").map(Path::new),
        debug: g.debug,
        log: &g.log,
    })
}

pub fn run(g: &Globals, args: &[String]) -> Result<i32, CliError> {
    let p = cli::parse(args, FLAGS)?;
    let id = cli::one_positional(&p, "container id")?;
    container::create(&options(g, &p, id)?)?;
    Ok(0)
}
