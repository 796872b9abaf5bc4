//! `qrun spec [--bundle DIR]`: writes a default `config.json` (as
//! `runc spec` does), refusing to overwrite one.

use std::path::Path;

use oci_spec::runtime::Spec;

use super::CliError;
use crate::cli::{self, Flag};

const FLAGS: &[Flag] = &[Flag::value("bundle", &["b"]), Flag::switch("rootless", &[])];

pub fn run(args: &[String]) -> Result<i32, CliError> {
    let p = cli::parse(args, FLAGS)?;
    if p.has("rootless") {
        return Err(CliError::Usage(
            "rootless containers are not supported".into(),
        ));
    }
    if !p.positionals.is_empty() {
        return Err(CliError::Usage("spec takes no arguments".into()));
    }
    let path = Path::new(p.value("bundle").unwrap_or(".")).join("config.json");
    if path.exists() {
        return Err(CliError::Other(format!(
            "{} already exists",
            path.display()
        )));
    }
    // A Spec takes more stack than a small `ulimit -s` gives.
    let text = crate::stack::with_stack(|| {
        let mut spec = Spec::default();
        spec.set_hostname(Some("qrun".into()));
        spec.set_version(crate::container::OCI_VERSION.into());
        serde_json::to_string_pretty(&spec)
    })
    .map_err(|e| CliError::Other(format!("encoding the spec: {e}")))?;
    std::fs::write(&path, text + "\n")
        .map_err(|e| CliError::Other(format!("writing {}: {e}", path.display())))?;
    Ok(0)
}
