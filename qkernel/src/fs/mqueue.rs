//! POSIX message queues kept in the guest kernel (`mq_open` and friends:
//! `syscalls::sys_mqueue`; docs/terminal.md, "/dev/mqueue"). A queue is a
//! name in one guest-wide table (the sandbox's IPC namespace) and the
//! messages it holds, highest priority first, FIFO within a priority.
//! Open descriptors hold the queue (`Backing::MQueue`), so it outlives
//! `mq_unlink` until the last one closes. Senders and receivers that must
//! wait park on the queue's wait queue (`task::park`), as guest pipes do.
//!
//! Limits are Linux's defaults: 10 messages of 8192 bytes unless the
//! creator asks for others, at most `msg_max` 10 / `msgsize_max` 8192 for
//! an unprivileged creator and 65536 / 16 MiB for one with
//! `CAP_SYS_RESOURCE`, priorities below 32768, 256 queues, and (as
//! `RLIMIT_MSGQUEUE`) at most 819200 bytes of message space reserved by
//! all queues together (`EMFILE` beyond), which also bounds what the
//! queues can take of the kernel heap.

use alloc::collections::{BTreeMap, VecDeque};
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use spin::Mutex;

use super::pipe::{POLLIN, POLLOUT, POLLRDNORM, POLLWRNORM};
use crate::errno::Errno;
use crate::task::park;

/// Defaults and limits (`/proc/sys/fs/mqueue/*`).
pub const MSG_DEFAULT: usize = 10;
pub const MSGSIZE_DEFAULT: usize = 8192;
const MSG_MAX: usize = 10;
const MSGSIZE_MAX: usize = 8192;
const HARD_MSG_MAX: usize = 65536;
const HARD_MSGSIZE_MAX: usize = 16 << 20;
const QUEUES_MAX: usize = 256;
/// Priorities are below this (`MQ_PRIO_MAX`).
pub const PRIO_MAX: u32 = 32768;
/// `RLIMIT_MSGQUEUE`'s default: message bytes all queues may reserve.
const BYTES_MAX: usize = 819_200;

/// Message bytes reserved by live queues.
static RESERVED: AtomicUsize = AtomicUsize::new(0);
static NEXT_INO: AtomicU64 = AtomicU64::new(1);

/// Queues by name (without the leading `/`).
static QUEUES: Mutex<BTreeMap<String, Arc<MQueue>>> = Mutex::new(BTreeMap::new());

/// One message queue.
#[derive(Debug)]
pub struct MQueue {
    ino: u64,
    pub maxmsg: usize,
    pub msgsize: usize,
    /// Permission bits and owner given at creation.
    pub mode: u32,
    /// The wait queue senders, receivers and pollers park on.
    queue: u64,
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// (priority, message), highest priority first, FIFO within one.
    msgs: VecDeque<(u32, Vec<u8>)>,
    /// Counts state changes (edge-triggered epoll).
    generation: u64,
    /// The `mq_notify` registration, if any.
    notify: Option<Notify>,
}

/// An `mq_notify` registration: process `pid` gets signal `sig` (0:
/// `SIGEV_NONE`, registered but silent) when a message arrives in the
/// empty queue; it is then unregistered.
#[derive(Debug, Clone, Copy)]
pub struct Notify {
    pub pid: u32,
    pub sig: u32,
}

impl Drop for MQueue {
    fn drop(&mut self) {
        RESERVED.fetch_sub(self.maxmsg * self.msgsize, Ordering::AcqRel);
    }
}

/// What `mq_open` asks for.
pub struct OpenReq<'a> {
    pub name: &'a str,
    pub create: bool,
    pub excl: bool,
    /// `mq_maxmsg` and `mq_msgsize` (`None`: the defaults).
    pub attr: Option<(i64, i64)>,
    pub mode: u32,
    /// `CAP_SYS_RESOURCE`: the hard limits apply.
    pub privileged: bool,
}

/// Checks a queue name as the syscall gets it (no leading `/`).
fn check_name(name: &str) -> Result<(), Errno> {
    if name.is_empty() || name == "." || name == ".." {
        return Err(Errno::ENOENT);
    }
    if name.contains('/') {
        return Err(Errno::EACCES);
    }
    if name.len() > 255 {
        return Err(Errno::ENAMETOOLONG);
    }
    Ok(())
}

/// Opens (or creates) queue `r.name`.
pub fn open(r: &OpenReq<'_>) -> Result<Arc<MQueue>, Errno> {
    check_name(r.name)?;
    let mut t = QUEUES.lock();
    if let Some(q) = t.get(r.name) {
        if r.create && r.excl {
            return Err(Errno::EEXIST);
        }
        return Ok(q.clone());
    }
    if !r.create {
        return Err(Errno::ENOENT);
    }
    let (maxmsg, msgsize) = match r.attr {
        None => (MSG_DEFAULT, MSGSIZE_DEFAULT),
        Some((m, s)) => {
            let (lim_m, lim_s) = if r.privileged {
                (HARD_MSG_MAX, HARD_MSGSIZE_MAX)
            } else {
                (MSG_MAX, MSGSIZE_MAX)
            };
            if m <= 0 || s <= 0 || m as usize > lim_m || s as usize > lim_s {
                return Err(Errno::EINVAL);
            }
            (m as usize, s as usize)
        }
    };
    if t.len() >= QUEUES_MAX {
        return Err(Errno::ENOSPC);
    }
    let bytes = maxmsg * msgsize;
    let before = RESERVED.fetch_add(bytes, Ordering::AcqRel);
    if before + bytes > BYTES_MAX {
        RESERVED.fetch_sub(bytes, Ordering::AcqRel);
        return Err(Errno::EMFILE);
    }
    let q = Arc::new(MQueue {
        ino: NEXT_INO.fetch_add(1, Ordering::Relaxed),
        maxmsg,
        msgsize,
        mode: r.mode & 0o7777,
        queue: park::new_queues(1),
        inner: Mutex::new(Inner {
            msgs: VecDeque::new(),
            generation: 0,
            notify: None,
        }),
    });
    t.insert(r.name.into(), q.clone());
    Ok(q)
}

/// `mq_unlink`: the name goes; open descriptors keep the queue.
pub fn unlink(name: &str) -> Result<(), Errno> {
    check_name(name)?;
    QUEUES.lock().remove(name).map(drop).ok_or(Errno::ENOENT)
}

/// The queue names (`/dev/mqueue`).
pub fn names() -> Vec<String> {
    QUEUES.lock().keys().cloned().collect()
}

impl MQueue {
    /// The inode number (`fstat`).
    pub fn ino(&self) -> u64 {
        self.ino
    }

    /// The wait queue a poll or a blocked call parks on.
    pub fn queue(&self) -> u64 {
        self.queue
    }

    /// The state-change counter (edge-triggered epoll).
    pub fn generation(&self) -> u64 {
        self.inner.lock().generation
    }

    /// Messages held (`mq_curmsgs`).
    pub fn count(&self) -> usize {
        self.inner.lock().msgs.len()
    }

    /// `poll` readiness.
    pub fn poll(&self) -> i16 {
        let i = self.inner.lock();
        let mut r = 0;
        if !i.msgs.is_empty() {
            r |= POLLIN | POLLRDNORM;
        }
        if i.msgs.len() < self.maxmsg {
            r |= POLLOUT | POLLWRNORM;
        }
        r
    }

    /// Adds `msg` with `prio`; `EAGAIN` if the queue is full. Returns the
    /// notification to send, if this message made the empty queue
    /// non-empty for a registered process (Linux also holds it back while
    /// a task waits in a receive: not done here).
    pub fn send(&self, msg: Vec<u8>, prio: u32) -> Result<Option<Notify>, Errno> {
        let mut i = self.inner.lock();
        if i.msgs.len() >= self.maxmsg {
            return Err(Errno::EAGAIN);
        }
        let notify = if i.msgs.is_empty() {
            i.notify.take()
        } else {
            None
        };
        let at = i
            .msgs
            .iter()
            .position(|(p, _)| *p < prio)
            .unwrap_or(i.msgs.len());
        i.msgs.insert(at, (prio, msg));
        i.generation += 1;
        drop(i);
        park::wake_queue(self.queue);
        Ok(notify.filter(|n| n.sig != 0))
    }

    /// `mq_notify`: registers `n` for `pid` (`None`: removes the caller's
    /// registration). `EBUSY` when another process holds it.
    pub fn set_notify(&self, pid: u32, n: Option<Notify>) -> Result<(), Errno> {
        let mut i = self.inner.lock();
        match i.notify {
            Some(cur) if cur.pid != pid && n.is_some() => Err(Errno::EBUSY),
            Some(cur) if cur.pid != pid => Ok(()),
            _ => {
                i.notify = n;
                Ok(())
            }
        }
    }

    /// Takes the oldest message of the highest priority; `EAGAIN` if
    /// there is none.
    pub fn receive(&self) -> Result<(u32, Vec<u8>), Errno> {
        let mut i = self.inner.lock();
        let (prio, msg) = i.msgs.pop_front().ok_or(Errno::EAGAIN)?;
        i.generation += 1;
        drop(i);
        park::wake_queue(self.queue);
        Ok((prio, msg))
    }
}
