//! `qrun resume <id>`: thaws a paused container.

use super::{CliError, Globals};
use crate::cli;
use crate::container::{self, Container};

pub fn run(g: &Globals, args: &[String]) -> Result<i32, CliError> {
    let p = cli::parse(args, &[])?;
    let c = Container::load(&g.root, cli::one_positional(&p, "container id")?)?;
    container::resume(&c)?;
    Ok(0)
}
