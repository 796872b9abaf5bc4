//! `qrun delete [--force] <id>`: removes a container and all its files
//! (swap and REAP files included) and cgroups.

use super::{CliError, Globals};
use crate::cli::{self, Flag};
use crate::container::{self, Container, ContainerError};

const FLAGS: &[Flag] = &[Flag::switch("force", &["f"])];

pub fn run(g: &Globals, args: &[String]) -> Result<i32, CliError> {
    let p = cli::parse(args, FLAGS)?;
    let id = cli::one_positional(&p, "container id")?;
    let force = p.has("force");
    match Container::load(&g.root, id) {
        Ok(c) => container::delete(&c, force)?,
        // A create that died half-way may leave a directory without a
        // state file: --force clears it, as runc does.
        Err(ContainerError::NotFound(_)) if force => {
            let _ = std::fs::remove_dir_all(g.root.join(id));
        }
        Err(e) => return Err(e.into()),
    }
    Ok(0)
}
