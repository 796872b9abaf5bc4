//! Pipes kept in the guest kernel: `pipe`/`pipe2` make a ring buffer in
//! the kernel heap (64 KiB by default, `F_SETPIPE_SZ` up to
//! `pipe-max-size`), with no host fd. A read or write that would block
//! parks its task on the pipe's wait queue (`task::park`) and the other
//! end wakes it, so a round trip between two processes costs syscalls and
//! switches, never a host call. FIFOs of the rootfs stay host FIFOs.
//!
//! Each end is one open file description ([`PipeEnd`] inside a `File`):
//! `dup`, `fork` and exec share it; when the last fd of an end closes, the
//! end drops and the other side sees EOF (no writers) or `EPIPE` (no
//! readers).

use alloc::collections::VecDeque;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};

use spin::Mutex;

use crate::errno::{Errno, SysResult};
use crate::mm::uaccess;
use crate::process::Process;
use crate::task::park;

/// Writes of at most this many bytes are atomic.
pub const PIPE_BUF: usize = 4096;
/// A new pipe's capacity.
pub const DEFAULT_CAPACITY: usize = 65536;
/// `/proc/sys/fs/pipe-max-size`.
pub const MAX_CAPACITY: usize = 1 << 20;
/// `poll` events.
pub const POLLIN: i16 = 0x1;
pub const POLLOUT: i16 = 0x4;
pub const POLLERR: i16 = 0x8;
pub const POLLHUP: i16 = 0x10;
pub const POLLRDNORM: i16 = 0x40;
pub const POLLWRNORM: i16 = 0x100;

/// Inode numbers of pipes (`pipe:[N]`, `st_ino`).
static NEXT_INO: AtomicU64 = AtomicU64::new(0x1000);

struct Inner {
    buf: VecDeque<u8>,
    cap: usize,
    readers: u32,
    writers: u32,
    /// Counts state changes (data in or out, an end closed): edge-triggered
    /// epoll reports an end again only after it moved.
    generation: u64,
}

/// A pipe: its buffer and its two wait queues (readers wait on `queue`,
/// writers on `queue + 1`).
pub struct Pipe {
    ino: u64,
    queue: u64,
    inner: Mutex<Inner>,
}

impl core::fmt::Debug for Pipe {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Pipe({})", self.ino)
    }
}

/// One end of a pipe, held by its open file description.
#[derive(Debug)]
pub struct PipeEnd {
    pub pipe: Arc<Pipe>,
    /// The write end (else the read end).
    pub write: bool,
}

/// A new pipe's (read end, write end).
pub fn new_pair() -> (PipeEnd, PipeEnd) {
    let pipe = Arc::new(Pipe {
        ino: NEXT_INO.fetch_add(1, Ordering::Relaxed),
        queue: park::new_queues(2),
        inner: Mutex::new(Inner {
            buf: VecDeque::new(),
            cap: DEFAULT_CAPACITY,
            readers: 1,
            writers: 1,
            generation: 0,
        }),
    });
    let r = PipeEnd {
        pipe: pipe.clone(),
        write: false,
    };
    (r, PipeEnd { pipe, write: true })
}

impl Drop for PipeEnd {
    fn drop(&mut self) {
        let mut i = self.pipe.inner.lock();
        if self.write {
            i.writers = i.writers.saturating_sub(1);
        } else {
            i.readers = i.readers.saturating_sub(1);
        }
        i.generation += 1;
        drop(i);
        // Readers see EOF or writers EPIPE; pollers of both ends see it.
        self.pipe.wake_all();
    }
}

impl Pipe {
    /// The inode number.
    pub fn ino(&self) -> u64 {
        self.ino
    }

    fn wake_all(&self) {
        park::wake_queue(self.queue);
        park::wake_queue(self.queue + 1);
    }

    /// The queue a poll of the `write` end waits on.
    pub fn queue(&self, write: bool) -> u64 {
        self.queue + u64::from(write)
    }

    /// Bytes buffered (`FIONREAD`).
    pub fn buffered(&self) -> usize {
        self.inner.lock().buf.len()
    }

    /// The state-change counter (edge-triggered epoll).
    pub fn generation(&self) -> u64 {
        self.inner.lock().generation
    }

    /// `F_GETPIPE_SZ`.
    pub fn capacity(&self) -> usize {
        self.inner.lock().cap
    }

    /// `F_SETPIPE_SZ`: as Linux, rounded up to a power of two of pages;
    /// `EBUSY` if more is buffered than fits, `EPERM` above the maximum.
    pub fn set_capacity(&self, arg: u64) -> SysResult {
        if arg > 1 << 31 {
            return Err(Errno::EINVAL);
        }
        let pages = (arg as usize).div_ceil(4096).max(1).next_power_of_two();
        let size = pages * 4096;
        if size > MAX_CAPACITY {
            return Err(Errno::EPERM);
        }
        let mut i = self.inner.lock();
        if i.buf.len() > size {
            return Err(Errno::EBUSY);
        }
        i.cap = size;
        if i.buf.capacity() > size {
            i.buf.shrink_to(size);
        }
        i.generation += 1;
        drop(i);
        self.wake_all();
        Ok(size)
    }

    /// `poll` readiness of one end (Linux's `pipe_poll`): the read end is
    /// readable with data, hung up with no writers; the write end is
    /// writable with room for `PIPE_BUF` bytes (or an empty pipe), in
    /// error with no readers.
    pub fn poll(&self, write: bool) -> i16 {
        let i = self.inner.lock();
        if write {
            let free = i.cap - i.buf.len();
            let mut r = 0;
            if free >= PIPE_BUF.min(i.cap) {
                r |= POLLOUT | POLLWRNORM;
            }
            if i.readers == 0 {
                r |= POLLERR;
            }
            r
        } else {
            let mut r = 0;
            if !i.buf.is_empty() {
                r |= POLLIN | POLLRDNORM;
            }
            if i.writers == 0 {
                r |= POLLHUP;
            }
            r
        }
    }
}

/// Skips the first `n` bytes of `bufs`.
fn skip(bufs: &[(u64, u64)], mut n: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::with_capacity(bufs.len());
    for &(a, l) in bufs {
        if n >= l {
            n -= l;
        } else {
            out.push((a + n, l - n));
            n = 0;
        }
    }
    out
}

/// Copies bytes `at..at + k` of the ring (its two slices `a`, `b`) to
/// user address `addr`.
fn copy_ring_out(
    p: &mut Process,
    addr: u64,
    a: &[u8],
    b: &[u8],
    at: usize,
    k: usize,
) -> Result<(), Errno> {
    let end = at + k;
    if at < a.len() {
        let first = &a[at..end.min(a.len())];
        uaccess::copy_out(&mut p.mm, addr, first)?;
        if end > a.len() {
            uaccess::copy_out(&mut p.mm, addr + first.len() as u64, &b[..end - a.len()])?;
        }
    } else {
        uaccess::copy_out(&mut p.mm, addr, &b[at - a.len()..end - a.len()])?;
    }
    Ok(())
}

/// Reads from or writes to a pipe end: `read`/`write`/`readv`/`writev`.
/// A call that must wait parks the task (the handler runs again when the
/// other end moves) and returns `Ok(0)`, which the dispatcher ignores.
pub fn transfer(
    p: &mut Process,
    end: &PipeEnd,
    bufs: &[(u64, u64)],
    write: bool,
    nonblock: bool,
) -> SysResult {
    let total: u64 = bufs.iter().map(|b| b.1).sum();
    if write {
        write_pipe(p, &end.pipe, bufs, total as usize, nonblock)
    } else {
        read_pipe(p, &end.pipe, bufs, total as usize, nonblock)
    }
}

fn read_pipe(
    p: &mut Process,
    pipe: &Pipe,
    bufs: &[(u64, u64)],
    total: usize,
    nonblock: bool,
) -> SysResult {
    if total == 0 {
        return Ok(0);
    }
    let mut i = pipe.inner.lock();
    if i.buf.is_empty() {
        if i.writers == 0 {
            return Ok(0);
        }
        if nonblock {
            return Err(Errno::EAGAIN);
        }
        drop(i);
        park::wait_on_queues(&[], &[pipe.queue], park::deadline(None), 0)?;
        return Ok(0);
    }
    let n = total.min(i.buf.len());
    // Copy out before consuming, so a fault loses nothing.
    let mut copied = 0usize;
    let (a, b) = i.buf.as_slices();
    for &(addr, len) in bufs {
        let k = (len as usize).min(n - copied);
        if k == 0 {
            break;
        }
        if let Err(e) = copy_ring_out(p, addr, a, b, copied, k) {
            if copied == 0 {
                return Err(e);
            }
            break;
        }
        copied += k;
    }
    i.buf.drain(..copied);
    i.generation += 1;
    drop(i);
    park::wake_queue(pipe.queue + 1);
    Ok(copied)
}

fn write_pipe(
    p: &mut Process,
    pipe: &Pipe,
    bufs: &[(u64, u64)],
    total: usize,
    nonblock: bool,
) -> SysResult {
    let mut done = park::done().min(total);
    let mut i = pipe.inner.lock();
    if i.readers == 0 {
        drop(i);
        crate::signal::raise_sigpipe();
        return if done > 0 {
            Ok(done)
        } else {
            Err(Errno::EPIPE)
        };
    }
    if total == 0 {
        return Ok(0);
    }
    let free = i.cap - i.buf.len();
    let want = total - done;
    // A write of at most PIPE_BUF bytes goes in whole or waits.
    let fits = if total <= PIPE_BUF {
        free >= want
    } else {
        free > 0
    };
    if fits {
        let n = want.min(free);
        let mut tmp = Vec::new();
        tmp.try_reserve_exact(n).map_err(|_| Errno::ENOMEM)?;
        tmp.resize(n, 0);
        let mut got = 0usize;
        for (addr, len) in skip(bufs, done as u64) {
            if got >= n {
                break;
            }
            let k = (len as usize).min(n - got);
            if let Err(e) = uaccess::copy_in(&mut p.mm, addr, &mut tmp[got..got + k]) {
                if done + got == 0 {
                    return Err(e);
                }
                break;
            }
            got += k;
        }
        let len = i.buf.len();
        if len + got > i.buf.capacity() {
            // Grow geometrically, but never past the pipe's capacity.
            let target = (len + got).max(i.buf.capacity() * 2).max(4096).min(i.cap);
            i.buf
                .try_reserve_exact(target - len)
                .map_err(|_| Errno::ENOMEM)?;
        }
        i.buf.extend(&tmp[..got]);
        i.generation += 1;
        drop(i);
        park::wake_queue(pipe.queue);
        done += got;
        if got < n || done >= total {
            return Ok(done);
        }
    } else {
        drop(i);
    }
    if nonblock {
        return if done > 0 {
            Ok(done)
        } else {
            Err(Errno::EAGAIN)
        };
    }
    park::wait_on_queues(&[], &[pipe.queue + 1], park::deadline(None), done)?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skip_drops_leading_bytes() {
        let b = [(100, 10), (200, 5)];
        assert_eq!(skip(&b, 0), alloc::vec![(100, 10), (200, 5)]);
        assert_eq!(skip(&b, 12), alloc::vec![(202, 3)]);
        assert!(skip(&b, 15).is_empty());
    }
}
