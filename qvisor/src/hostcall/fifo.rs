//! Opening a FIFO for the guest without wedging the vCPU thread.
//!
//! Linux's blocking `open` of a FIFO waits for the other end: a reader for
//! a writer, a writer for a reader. The host never opens a guest path in
//! a way that waits (`files::open` adds `O_NONBLOCK`); when the guest asked
//! for a blocking open, [`HostCalls::wait_fifo_peer`] does the waiting on a
//! helper thread while the vCPU thread waits in [`HostCalls::wait`], which
//! a control request (signal, hibernation, reclaim) cuts short with
//! `RET_RESTART`. The helper's blocked `open` is then released by opening
//! the FIFO ourselves for the other end, and the guest reissues the call
//! (or sees `EINTR`) as for any other interrupted wait.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex};

use super::HostCalls;
use super::sys::{err, owned};
use crate::control::drain;

/// What the helper thread hands back: its fd or an errno.
struct Pending {
    result: Mutex<Option<Result<OwnedFd, i32>>>,
    done: OwnedFd,
}

/// Opens `path` with `flags` (plus `O_CLOEXEC | O_NOCTTY`).
fn open(path: &CString, flags: i32) -> Result<OwnedFd, i32> {
    // SAFETY: a NUL-terminated path; no pointer is kept.
    let fd = unsafe { libc::open(path.as_ptr(), flags | libc::O_CLOEXEC | libc::O_NOCTTY) };
    owned(i64::from(fd)).map_err(|e| -e as i32)
}

/// Ends a helper's wait in `open(path, accmode)` by opening the other end
/// for a moment (`O_RDWR` counts as both; the single end needs only the
/// one permission). When neither can be opened the helper stays blocked
/// until a real peer comes; its fd is closed then.
fn release(path: &CString, accmode: i32) {
    let other = if accmode == libc::O_RDONLY {
        libc::O_WRONLY
    } else {
        libc::O_RDONLY
    };
    for how in [libc::O_RDWR, other] {
        if open(path, how | libc::O_NONBLOCK).is_ok() {
            return;
        }
    }
    log::warn!("cannot release a FIFO open waiting on a helper thread");
}

/// Whether `fd` is a FIFO.
pub(super) fn is_fifo(fd: &OwnedFd) -> bool {
    // SAFETY: an all-zero `stat` is a valid value for fstat to fill.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid fd and a `stat` buffer.
    let rc = unsafe { libc::fstat(fd.as_raw_fd(), &mut st) };
    rc == 0 && st.st_mode & libc::S_IFMT == libc::S_IFIFO
}

impl HostCalls<'_> {
    /// Waits, as a blocking `open` of the FIFO that `obj` names does, for
    /// its other end to be opened; `accmode` is `O_RDONLY` or `O_WRONLY`.
    /// `early`: the guest's own nonblocking read end, whose readiness
    /// (data, or a writer that came and went) ends the wait too.
    ///
    /// `Ok(Some(fd))`: the end the helper opened (blocking: the caller sets
    /// `O_NONBLOCK`); `Ok(None)`: `early` became ready; `Err`: `-errno` or
    /// `RET_RESTART`.
    pub(super) fn wait_fifo_peer(
        &self,
        obj: &OwnedFd,
        accmode: i32,
        early: Option<&OwnedFd>,
    ) -> Result<Option<OwnedFd>, i64> {
        let path = crate::rootfs::proc_fd_path(obj);
        // SAFETY: eventfd has no memory-safety preconditions.
        let done = owned(i64::from(unsafe {
            libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK)
        }))?;
        let pending = Arc::new(Pending {
            result: Mutex::new(None),
            done,
        });
        let helper = Arc::clone(&pending);
        let helper_path = path.clone();
        std::thread::Builder::new()
            .name("fifo-open".into())
            .spawn(move || {
                let r = loop {
                    match open(&helper_path, accmode) {
                        Err(libc::EINTR) => continue,
                        r => break r,
                    }
                };
                *helper.result.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
                let one = 1u64;
                // SAFETY: writes 8 bytes from a valid buffer to our eventfd.
                unsafe { libc::write(helper.done.as_raw_fd(), (&raw const one).cast(), 8) };
            })
            .map_err(|_| err(libc::EAGAIN))?;
        let mut fds = vec![libc::pollfd {
            fd: pending.done.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        if let Some(e) = early {
            fds.push(libc::pollfd {
                fd: e.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            });
        }
        loop {
            let w = self.wait(&mut fds, u64::MAX);
            if w < 0 {
                release(&path, accmode);
                return Err(w);
            }
            if fds[0].revents != 0 && drain(&pending.done) {
                let r = pending
                    .result
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take();
                return match r {
                    Some(Ok(fd)) => Ok(Some(fd)),
                    Some(Err(e)) => Err(err(e)),
                    None => Err(err(libc::EIO)),
                };
            }
            if fds.get(1).is_some_and(|p| p.revents != 0) {
                release(&path, accmode);
                return Ok(None);
            }
        }
    }
}
