//! `qrun sandbox-init DIR --sync-fd N`: internal; the sandbox process
//! `create` starts (see `isolation`). Not for people.

use std::path::Path;

use super::{CliError, Globals};
use crate::cli::{self, Flag};
use crate::isolation;

const FLAGS: &[Flag] = &[Flag::value("sync-fd", &[]), Flag::value("resume-fd", &[])];

pub fn run(g: &Globals, args: &[String]) -> Result<i32, CliError> {
    let p = cli::parse(args, FLAGS)?;
    let dir = cli::one_positional(&p, "state directory")?;
    let fd = p
        .value("sync-fd")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| CliError::Usage("--sync-fd N is required".into()))?;
    let resume = match p.value("resume-fd") {
        None => None,
        Some(v) => Some(
            v.parse()
                .map_err(|_| CliError::Usage("--resume-fd takes a number".into()))?,
        ),
    };
    Ok(isolation::init(Path::new(dir), fd, resume, g.debug))
}
