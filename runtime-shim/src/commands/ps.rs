//! `qrun ps [--format table|json] <id>`: the host processes of the
//! container (the sandbox process).

use super::{CliError, Globals};
use crate::cli::{self, Flag};
use crate::container::{Container, Status};

const FLAGS: &[Flag] = &[Flag::value("format", &["f"])];

pub fn run(g: &Globals, args: &[String]) -> Result<i32, CliError> {
    let p = cli::parse(args, FLAGS)?;
    let c = Container::load(&g.root, cli::one_positional(&p, "container id")?)?;
    let mut pids = c.cgroups().pids();
    if pids.is_empty() && c.status() != Status::Stopped {
        pids.push(c.state.pid);
    }
    match p.value("format").unwrap_or("table") {
        "json" => println!("{}", serde_json::Value::from(pids)),
        "table" => {
            println!("PID");
            for pid in pids {
                println!("{pid}");
            }
        }
        f => return Err(CliError::Usage(format!("unknown format '{f}'"))),
    }
    Ok(0)
}
