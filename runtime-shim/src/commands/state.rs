//! `qrun state <id>`: the OCI state JSON.

use super::{CliError, Globals};
use crate::cli;
use crate::container::Container;

pub fn run(g: &Globals, args: &[String]) -> Result<i32, CliError> {
    let p = cli::parse(args, &[])?;
    let c = Container::load(&g.root, cli::one_positional(&p, "container id")?)?;
    let text = serde_json::to_string_pretty(&c.oci_state())
        .map_err(|e| CliError::Other(format!("encoding state: {e}")))?;
    println!("{text}");
    Ok(0)
}
