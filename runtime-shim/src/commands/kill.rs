//! `qrun kill [--all] <id> [SIGNAL]`: SIGSTOP hibernates, SIGCONT wakes,
//! other signals reach the program (default SIGTERM). As runc, `kill` of
//! a stopped container fails ("container not running") and `kill --all`
//! of one succeeds.

use super::{CliError, Globals};
use crate::cli::{self, Flag};
use crate::container::{self, Container, signal};

const FLAGS: &[Flag] = &[Flag::switch("all", &["a"])];

pub fn run(g: &Globals, args: &[String]) -> Result<i32, CliError> {
    let p = cli::parse(args, FLAGS)?;
    // One sandbox process per container: --all reaches the same one, and
    // only changes what a stopped container answers.
    let (id, sig) = match p.positionals.as_slice() {
        [id] => (id, "SIGTERM"),
        [id, sig] => (id, sig.as_str()),
        [] => return Err(CliError::Usage("missing container id".into())),
        _ => return Err(CliError::Usage("usage: kill [--all] <id> [SIGNAL]".into())),
    };
    // The signal is checked before the container is even looked at.
    let sig = signal::parse(sig).map_err(container::ContainerError::from)?;
    let mut c = Container::load(&g.root, id)?;
    container::kill(&mut c, sig, p.has("all"))?;
    Ok(0)
}
