//! One module per `qrun` command; each parses its own flags and calls the
//! container library.

pub mod create;
pub mod ctl;
pub mod delete;
pub mod do_cmd;
mod do_state;
pub mod exec;
pub mod features;
pub mod kill;
pub mod list;
pub mod pause;
pub mod ps;
pub mod resume;
pub mod run;
pub mod sandbox_init;
mod size;
pub mod spec;
pub mod start;
pub mod state;

use std::path::PathBuf;

use thiserror::Error;

use crate::container::ContainerError;
use crate::oci_log::Log;

/// The global flags, as containerd's runc shim passes them.
#[derive(Debug, Clone)]
pub struct Globals {
    pub root: PathBuf,
    pub debug: bool,
    pub log: Log,
}

#[derive(Debug, Error)]
pub enum CliError {
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Container(#[from] ContainerError),
    #[error("{0}")]
    Other(String),
}

impl From<String> for CliError {
    fn from(s: String) -> Self {
        Self::Usage(s)
    }
}
