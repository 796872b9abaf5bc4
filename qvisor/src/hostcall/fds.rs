//! The host fds a sandbox owns. The guest names host fds in I/O calls; the
//! VMM acts only on fds it opened for this guest (and on stdio 0-2 until
//! the guest closes them), so a guest can never reach the VMM's own fds
//! (`/dev/kvm`, the VM, eventfds, swap files).
//!
//! The guest's fds stay below a ceiling [`RESERVED`] under the process's
//! `RLIMIT_NOFILE`, so a guest holding all it may open still leaves the VMM
//! the fds its control path needs (a control-socket connection, the swap
//! and REAP files): the kernel hands out the lowest free number, and no
//! guest fd is ever numbered at or above the ceiling.

use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd};

/// `-EBADF`.
pub const EBADF: i64 = -(libc::EBADF as i64);

/// Owned host fds of one sandbox.
#[derive(Debug)]
pub struct HostFds {
    owned: HashMap<i32, OwnedFd>,
    /// Fds that came from outside (`qrun exec`'s stdio): blocking, and
    /// shared with their sender, so their flags stay as they are.
    foreign: std::collections::HashSet<i32>,
    /// Host stdio the guest has not closed.
    stdio_closed: [bool; 3],
    /// The guest's fds are numbered below this.
    ceiling: i32,
}

/// Most host fds one sandbox may hold.
pub const MAX_FDS: usize = 65536;

/// Fd numbers under the `RLIMIT_NOFILE` soft limit kept for the VMM.
pub const RESERVED: u64 = 64;

/// The ceiling for a soft `RLIMIT_NOFILE` of `soft`: [`RESERVED`] below it,
/// or half of it when it is tiny.
fn ceiling_for(soft: u64) -> i32 {
    let c = if soft >= 2 * RESERVED {
        soft - RESERVED
    } else {
        soft / 2
    };
    i32::try_from(c).unwrap_or(i32::MAX)
}

impl Default for HostFds {
    fn default() -> Self {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes one rlimit into a valid pointer.
        let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
            lim.rlim_cur
        } else {
            1024
        };
        Self {
            owned: HashMap::new(),
            foreign: std::collections::HashSet::new(),
            stdio_closed: [false; 3],
            ceiling: ceiling_for(soft),
        }
    }
}

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
    /// `-EMFILE`, `fd` closed, when the sandbox holds too many or `fd` lies
    /// in the VMM's reserve).
    pub fn adopt(&mut self, fd: OwnedFd) -> i64 {
        if self.owned.len() >= MAX_FDS || fd.as_raw_fd() >= self.ceiling {
            return -(libc::EMFILE as i64);
        }
        let n = fd.as_raw_fd();
        self.owned.insert(n, fd);
        i64::from(n)
    }

    /// As [`Self::adopt`], for an fd from outside ([`Self::is_foreign`]).
    pub fn adopt_foreign(&mut self, fd: OwnedFd) -> i64 {
        let n = self.adopt(fd);
        if n >= 0 {
            self.foreign.insert(n as i32);
        }
        n
    }

    /// Whether `fd` came from outside: an I/O that must not block is
    /// polled first (its `O_NONBLOCK` is its sender's business).
    pub fn is_foreign(&self, fd: i32) -> bool {
        self.foreign.contains(&fd)
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
                self.foreign.remove(&n);
                0
            }
            Err(e) => e,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reserve_stays_free() {
        assert_eq!(ceiling_for(1024), 1024 - RESERVED as i32);
        assert_eq!(ceiling_for(100), 50);
        assert_eq!(ceiling_for(u64::MAX), i32::MAX);
        let mut fds = HostFds {
            ceiling: 0,
            ..HostFds::default()
        };
        let f = std::fs::File::open("/").expect("open /");
        assert_eq!(fds.adopt(f.into()), -(libc::EMFILE as i64));
        assert!(fds.owned.is_empty());
    }
}
