//! Guest files in an epoll set. An epoll instance is a host epoll, which
//! cannot watch a guest pipe or pty; the guest keeps those interests here, keyed
//! by the host epoll fd, and `epoll_wait` checks them before and alongside
//! the host wait (sys_poll.rs). Level-triggered, `EPOLLET` (reported
//! again only after the pipe moved) and `EPOLLONESHOT`. An interest goes
//! when its open file is closed everywhere (as Linux's).

use alloc::collections::BTreeMap;
use alloc::sync::{Arc, Weak};
use alloc::vec::Vec;

use spin::Mutex;

use crate::errno::{Errno, SysResult};
use crate::fs::File;

const EPOLL_CTL_ADD: u64 = 1;
const EPOLL_CTL_DEL: u64 = 2;
const EPOLL_CTL_MOD: u64 = 3;
const EPOLLERR: u32 = 0x8;
const EPOLLHUP: u32 = 0x10;
const EPOLLONESHOT: u32 = 1 << 30;
const EPOLLET: u32 = 1 << 31;

struct Interest {
    fd: i32,
    file: Weak<File>,
    events: u32,
    data: u64,
    /// The pipe generation last reported (edge-triggered).
    reported: Option<u64>,
    /// A one-shot interest that fired (until `EPOLL_CTL_MOD`).
    disabled: bool,
}

/// Host epoll fd -> its guest interests.
static SETS: Mutex<BTreeMap<i32, Vec<Interest>>> = Mutex::new(BTreeMap::new());

/// The epoll instance with host fd `ep` was closed.
pub fn epoll_closed(ep: i32) {
    SETS.lock().remove(&ep);
}

/// `epoll_ctl` for a guest file (`file` at `fd`) in epoll `ep`.
pub fn ctl(ep: i32, op: u64, fd: i32, file: &Arc<File>, events: u32, data: u64) -> SysResult {
    if file.guest_poll().is_none() {
        return Err(Errno::EPERM);
    }
    let mut sets = SETS.lock();
    let set = sets.entry(ep).or_default();
    set.retain(|i| i.file.strong_count() > 0);
    let pos = set
        .iter()
        .position(|i| i.fd == fd && i.file.upgrade().is_some_and(|f| Arc::ptr_eq(&f, file)));
    match (op, pos) {
        (EPOLL_CTL_ADD, Some(_)) => Err(Errno::EEXIST),
        (EPOLL_CTL_ADD, None) => {
            set.push(Interest {
                fd,
                file: Arc::downgrade(file),
                events,
                data,
                reported: None,
                disabled: false,
            });
            Ok(0)
        }
        (EPOLL_CTL_MOD, Some(k)) => {
            let i = &mut set[k];
            i.events = events;
            i.data = data;
            i.reported = None;
            i.disabled = false;
            Ok(0)
        }
        (EPOLL_CTL_DEL, Some(k)) => {
            set.remove(k);
            Ok(0)
        }
        (EPOLL_CTL_MOD | EPOLL_CTL_DEL, None) => Err(Errno::ENOENT),
        _ => Err(Errno::EINVAL),
    }
}

/// What a wait on epoll `ep` finds among its guest interests: up to `max`
/// ready (events, data), and the wait queues to park on if the caller
/// must wait (empty: the set has no guest interest).
pub fn ready(ep: i32, max: usize) -> (Vec<(u32, u64)>, Vec<u64>) {
    let mut out = Vec::new();
    let mut queues = Vec::new();
    let mut sets = SETS.lock();
    let Some(set) = sets.get_mut(&ep) else {
        return (out, queues);
    };
    set.retain(|i| i.file.strong_count() > 0);
    for i in set.iter_mut() {
        let Some(file) = i.file.upgrade() else {
            continue;
        };
        let Some((revents, queue, generation)) = file.guest_poll() else {
            continue;
        };
        if i.disabled {
            continue;
        }
        queues.push(queue);
        if out.len() >= max {
            continue;
        }
        let rev = revents as u16 as u32 & (i.events | EPOLLERR | EPOLLHUP);
        if rev == 0 {
            continue;
        }
        if i.events & EPOLLET != 0 {
            if i.reported == Some(generation) {
                continue;
            }
            i.reported = Some(generation);
        }
        if i.events & EPOLLONESHOT != 0 {
            i.disabled = true;
        }
        out.push((rev, i.data));
    }
    (out, queues)
}
