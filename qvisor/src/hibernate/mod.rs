//! Hibernation, VMM side (DESIGN.md "Hibernation"): the controller's
//! state machine ([`controller`]), the swap file ([`swap`]) and the REAP
//! file ([`reap`]), both in the format of `qlib::swapfile`, and the private
//! state directory that holds them.
//!
//! The guest deflates itself (qkernel `mm::swap`) through the host calls
//! 64..=70 served by [`serve`]. Every other host call that returns to the
//! guest goes through [`Hibernation::on_guest_resume`] (from
//! `HostCalls::serve`), which wakes a hibernated sandbox — reads the REAP
//! file back — before the guest can touch its memory: that is how a
//! connection or data arriving on what the guest waits on wakes it.
//!
//! Lock order: the controller's lock is the only one; the guest's
//! memory is reached through `GuestRam`, which takes none.

mod controller;
mod file;
mod reap;
mod swap;
mod warm;

use std::path::{Path, PathBuf};

use qlib::abi::Call;
use thiserror::Error;

pub use controller::Hibernation;

use crate::guest_mem::GuestRam;

/// Why a hibernation step failed.
#[derive(Debug, Error)]
pub enum SwapError {
    /// Creating, writing or reading a file failed.
    #[error("{what} {path}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A file failed its checks.
    #[error("{0}: {1}")]
    Format(String, #[source] qlib::swapfile::FormatError),
    /// The guest named a page outside guest RAM or unaligned.
    #[error("guest page {0:#x} is invalid")]
    BadPage(u64),
    /// The guest named a swap slot that holds nothing.
    #[error("swap slot {0} holds no page")]
    BadSlot(u64),
    /// The request does not fit the current state.
    #[error("sandbox is {0}: cannot {1}")]
    State(&'static str, String),
    /// The program did not wait in a blocking call in time.
    #[error("hibernate request cancelled: the program did not wait for anything (busy) in time")]
    NoAnswer,
    /// The guest rolled the hibernation back.
    #[error("hibernation aborted, sandbox still running: {0}")]
    Aborted(String),
    /// The sandbox failed earlier.
    #[error("sandbox failed: {0}")]
    Failed(String),
}

/// `e` and its sources, for the control socket and logs.
pub fn report(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        s.push_str(": ");
        s.push_str(&cause.to_string());
        source = cause.source();
    }
    s
}

impl SwapError {
    /// The errno the guest sees for this error.
    pub fn errno(&self) -> i32 {
        match self {
            Self::Io { source, .. } => source.raw_os_error().unwrap_or(libc::EIO),
            Self::BadPage(_) => libc::EFAULT,
            Self::BadSlot(_) | Self::State(..) => libc::EINVAL,
            _ => libc::EIO,
        }
    }
}

/// Whether returning from `call` leaves a hibernated guest hibernated
/// (the guest touches no user memory after it): the hibernation calls
/// that deflate, logging, reclaim and the final calls
/// ([`Call::keeps_hibernated`]). Every other call, including any new
/// blocking wait, wakes the sandbox before the guest runs again; a swap
/// fault wakes it before it is served ([`Hibernation::swap_in`]).
pub fn keeps_hibernated(call: Option<Call>) -> bool {
    call.is_some_and(Call::keeps_hibernated)
}

/// What serving a hibernation call gives the vCPU loop.
pub enum Served {
    /// The call's result.
    Ret(i64),
    /// The sandbox must stop.
    Fatal(SwapError),
}

/// Serves the hibernation host calls (64..=70); `None` for other calls.
pub fn serve(hib: &Hibernation, ram: &GuestRam, call: Call, a: [u64; 6]) -> Option<Served> {
    const EFAULT: i64 = -(libc::EFAULT as i64);
    let ret = match call {
        Call::HibernateBegin => hib.begin(a[0] != 0),
        Call::SwapOut => match ram.swap_pages(a[0], a[1]) {
            Ok(p) => hib.swap_out(ram, &p),
            Err(_) => EFAULT,
        },
        Call::ReapOut => match ram.ranges(a[0], a[1]) {
            Ok(r) => hib.reap_out(ram, &r),
            Err(_) => EFAULT,
        },
        Call::HibernatePrepare => hib.prepare(),
        Call::HibernateCommit => hib.commit(ram, a[0], a[1]),
        Call::HibernateAbort => hib.abort(a[0] as i64),
        Call::SwapIn => match ram.swap_pages(a[0], a[1]) {
            Ok(p) => match hib.swap_in(ram, &p) {
                Ok(n) => n,
                Err(e) => return Some(Served::Fatal(e)),
            },
            Err(_) => EFAULT,
        },
        _ => return None,
    };
    Some(Served::Ret(ret))
}

/// The sandbox's state directory: the one given, or a private temporary
/// one removed (with everything in it) on drop.
pub struct StateDir {
    path: PathBuf,
    temporary: bool,
}

impl StateDir {
    /// Uses `dir`, or creates a private directory under the system's
    /// temporary directory.
    pub fn new(dir: Option<&Path>) -> std::io::Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        if let Some(d) = dir {
            // An existing directory is used as it is (under qrun's seccomp
            // filter `mkdir` is not allowed, and the OCI runtime made it).
            if d.is_dir() {
                return Ok(Self {
                    path: d.to_path_buf(),
                    temporary: false,
                });
            }
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(d)?;
            return Ok(Self {
                path: d.to_path_buf(),
                temporary: false,
            });
        }
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path = std::env::temp_dir().join(format!("qrun-{}-{nanos:x}", std::process::id()));
        std::fs::DirBuilder::new().mode(0o700).create(&path)?;
        Ok(Self {
            path,
            temporary: true,
        })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for StateDir {
    fn drop(&mut self) {
        if self.temporary {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}
