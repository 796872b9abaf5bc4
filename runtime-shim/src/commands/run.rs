//! `qrun run <id> [--bundle DIR] [--pid-file F] [--detach]`: create and
//! start in one go; without `--detach`, wait for the program, remove the
//! container and exit with the program's status.

use std::os::unix::process::ExitStatusExt;

use super::{CliError, Globals, create};
use crate::cli::{self, Flag};
use crate::container;

const FLAGS: &[Flag] = &[
    Flag::value("bundle", &["b"]),
    Flag::value("pid-file", &[]),
    Flag::value("console-socket", &[]),
    Flag::value("preserve-fds", &[]),
    Flag::switch("detach", &["d"]),
    Flag::switch("keep", &[]),
    Flag::switch("no-pivot", &[]),
    Flag::switch("no-new-keyring", &[]),
];

pub fn run(g: &Globals, args: &[String]) -> Result<i32, CliError> {
    let p = cli::parse(args, FLAGS)?;
    let id = cli::one_positional(&p, "container id")?;
    let (c, mut child) = container::create(&create::options(g, &p, id)?)?;
    if let Err(e) = container::start(&c) {
        let _ = container::delete(&c, true);
        return Err(e.into());
    }
    if p.has("detach") {
        return Ok(0);
    }
    let status = child
        .wait()
        .map_err(|e| CliError::Other(format!("waiting for the sandbox process: {e}")))?;
    let code = status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1);
    if !p.has("keep") {
        container::delete(&c, true)?;
    }
    Ok(code)
}
