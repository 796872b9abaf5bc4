//! What can go wrong with a container operation.

use std::path::PathBuf;

use thiserror::Error;

use super::MAX_ID;
use super::lifecycle::IllegalMove;
use super::signal::UnknownSignal;
use crate::bundle::BundleError;
use crate::cgroup::CgroupError;

#[derive(Debug, Error)]
pub enum ContainerError {
    #[error(
        "invalid container id {0:?}: use 1-{MAX_ID} characters of [A-Za-z0-9_.+-], not starting with '.'"
    )]
    InvalidId(String),
    #[error(
        "invalid container id: {0} characters is too long (at most {MAX_ID}: the id names a directory)"
    )]
    IdTooLong(usize),
    #[error("container {0} does not exist")]
    NotFound(String),
    #[error("container id {0} is already in use")]
    Exists(String),
    #[error("{what}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}: corrupt state file: {1}")]
    CorruptState(PathBuf, String),
    #[error(transparent)]
    Illegal(#[from] IllegalMove),
    #[error(transparent)]
    Bundle(#[from] BundleError),
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
    #[error(transparent)]
    Hook(#[from] crate::hooks::HookError),
    #[error(transparent)]
    Signal(#[from] UnknownSignal),
    #[error("container {id}: {source}")]
    Control {
        id: String,
        #[source]
        source: qvisor::ctl::CtlError,
    },
    #[error("{0}")]
    Sandbox(String),
    #[error("{what}: {source}")]
    Sys {
        what: String,
        #[source]
        source: nix::Error,
    },
}

impl ContainerError {
    /// An I/O error with what was being done.
    pub fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let what = what.into();
        move |source| Self::Io { what, source }
    }

    /// A failed system call with what was being done.
    pub fn sys(what: impl Into<String>) -> impl FnOnce(nix::Error) -> Self {
        let what = what.into();
        move |source| Self::Sys { what, source }
    }
}
