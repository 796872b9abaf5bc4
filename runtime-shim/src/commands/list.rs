//! `qrun list [--format table|json] [--quiet]`.

use super::{CliError, Globals};
use crate::cli::{self, Flag};
use crate::container;

const FLAGS: &[Flag] = &[Flag::value("format", &["f"]), Flag::switch("quiet", &["q"])];

pub fn run(g: &Globals, args: &[String]) -> Result<i32, CliError> {
    let p = cli::parse(args, FLAGS)?;
    if !p.positionals.is_empty() {
        return Err(CliError::Usage("list takes no arguments".into()));
    }
    let all = container::list(&g.root);
    if p.has("quiet") {
        for c in &all {
            println!("{}", c.id());
        }
        return Ok(0);
    }
    match p.value("format").unwrap_or("table") {
        "json" => {
            let v: Vec<serde_json::Value> = all.iter().map(|c| c.oci_state()).collect();
            println!("{}", serde_json::Value::from(v));
        }
        "table" => {
            println!(
                "{:<24} {:<8} {:<10} {:<40} CREATED",
                "ID", "PID", "STATUS", "BUNDLE"
            );
            for c in &all {
                let s = c.oci_state();
                println!(
                    "{:<24} {:<8} {:<10} {:<40} {}",
                    c.id(),
                    s["pid"].to_string(),
                    s["status"].as_str().unwrap_or(""),
                    c.state.bundle.display(),
                    c.state.created
                );
            }
        }
        f => return Err(CliError::Usage(format!("unknown format '{f}'"))),
    }
    Ok(0)
}
