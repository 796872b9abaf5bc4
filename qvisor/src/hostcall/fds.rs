//! The host fds a sandbox owns. The guest names host fds in I/O calls; the
//! VMM acts only on fds it opened for this guest (and on stdio 0-2 until
//! the guest closes them), so a guest can never reach the VMM's own fds
//! (`/dev/kvm`, the VM, eventfds, swap files).

use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd};

/// `-EBADF`.
pub const EBADF: i64 = -(libc::EBADF as i64);

/// Owned host fds of one sandbox.
#[derive(Debug, Default)]
pub struct HostFds {
    owned: HashMap<i32, OwnedFd>,
    /// Host stdio the guest has not closed.
    stdio_closed: [bool; 3],
}

/// Most host fds one sandbox may hold.
pub const MAX_FDS: usize = 65536;

impl HostFds {
    /// `fd` if the guest may use it, else `EBADF`.
    pub fn check(&self, fd: u64) -> Result<i32, i64> {
        let Ok(fd) = i32::try_from(fd) else {
            return Err(EBADF);
        };
        match fd {
            0..=2 if !self.stdio_closed[fd as usize] => Ok(fd),
            _ if self.owned.contains_key(&fd) => Ok(fd),
            _ => Err(EBADF),
        }
    }

    /// Takes ownership of `fd` for the guest; returns its number (or
    /// `-EMFILE` when the sandbox holds too many).
    pub fn adopt(&mut self, fd: OwnedFd) -> i64 {
        if self.owned.len() >= MAX_FDS {
            return -(libc::EMFILE as i64);
        }
        let n = fd.as_raw_fd();
        self.owned.insert(n, fd);
        i64::from(n)
    }

    /// Closes a guest fd (stdio is only forgotten: the VMM still logs to
    /// its stderr).
    pub fn close(&mut self, fd: u64) -> i64 {
        match self.check(fd) {
            Ok(n @ 0..=2) => {
                self.stdio_closed[n as usize] = true;
                0
            }
            Ok(n) => {
                self.owned.remove(&n);
                0
            }
            Err(e) => e,
        }
    }
}
