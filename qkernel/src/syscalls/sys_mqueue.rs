//! POSIX message queue calls over the guest's queues (`fs::mqueue`):
//! `mq_open`, `mq_unlink`, `mq_timedsend`, `mq_timedreceive`,
//! `mq_getsetattr`, `mq_notify` (`SIGEV_SIGNAL` and `SIGEV_NONE`;
//! `SIGEV_THREAD`, a netlink socket of the C library's, is `ENOSYS`).

use alloc::sync::Arc;
use alloc::vec;

use crate::errno::{Errno, SysResult};
use crate::fs::mqueue::{self, MQueue, OpenReq};
use crate::fs::{Backing, File, O_ACCMODE, O_CLOEXEC, O_NONBLOCK};
use crate::mm::uaccess;
use crate::process::Process;
use crate::task::park;

const O_CREAT: u64 = 0o100;
const O_EXCL: u64 = 0o200;

/// `N` user longs at `va`.
fn read_longs<const N: usize>(p: &mut Process, va: u64) -> Result<[i64; N], Errno> {
    let mut out = [0i64; N];
    for (i, w) in out.iter_mut().enumerate() {
        *w = uaccess::read::<u64>(&mut p.mm, va + 8 * i as u64)? as i64;
    }
    Ok(out)
}

/// An absolute `CLOCK_REALTIME` timeout at user address `ts` (0: none),
/// in ns; `EINVAL` if it is not a valid timespec.
fn timeout(p: &mut Process, ts: u64) -> Result<Option<u64>, Errno> {
    if ts == 0 {
        return Ok(None);
    }
    let [sec, nsec] = read_longs::<2>(p, ts)?;
    if sec < 0 || !(0..1_000_000_000).contains(&nsec) {
        return Err(Errno::EINVAL);
    }
    Ok(Some(
        (sec as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(nsec as u64),
    ))
}

/// The queue behind fd `fd` and its open file (`EBADF` if it is not one).
fn queue(p: &Process, fd: u64) -> Result<(Arc<File>, Arc<MQueue>), Errno> {
    let f = p.files.get(fd)?.clone();
    match &f.backing {
        Backing::MQueue(q) => {
            let q = q.clone();
            Ok((f, q))
        }
        _ => Err(Errno::EBADF),
    }
}

/// `mq_open(name, oflag, mode, attr)`: the C library has dropped the
/// name's leading `/`.
pub fn mq_open(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let name = crate::fs::path::read_user_path(p, a[0])?;
    let oflag = a[1];
    if oflag & u64::from(O_ACCMODE) == 3 {
        return Err(Errno::EINVAL);
    }
    let create = oflag & O_CREAT != 0;
    let attr = if create && a[3] != 0 {
        // struct mq_attr: flags, maxmsg, msgsize, curmsgs (longs).
        let w = read_longs::<4>(p, a[3])?;
        Some((w[1], w[2]))
    } else {
        None
    };
    let q = mqueue::open(&OpenReq {
        name: &name,
        create,
        excl: oflag & O_EXCL != 0,
        attr,
        mode: (a[2] as u32) & !p.fs.umask(),
        privileged: p.caps.has(crate::creds::CAP_SYS_RESOURCE),
    })?;
    let status = (oflag as u32) & (O_ACCMODE | O_NONBLOCK);
    let file = File::new(Backing::MQueue(q), status, alloc::format!("/{name}"));
    p.files.insert(file, oflag & u64::from(O_CLOEXEC) != 0)
}

/// `mq_unlink(name)`.
pub fn mq_unlink(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let name = crate::fs::path::read_user_path(p, a[0])?;
    mqueue::unlink(&name)?;
    Ok(0)
}

/// Whether a call that must wait may: `EAGAIN` for a non-blocking
/// descriptor, `ETIMEDOUT` once the absolute timeout `at` has passed;
/// otherwise the task parks on the queue (the call runs again when it
/// changes, or at the timeout).
fn wait(f: &File, q: &MQueue, at: Option<u64>) -> SysResult {
    if f.nonblocking() {
        return Err(Errno::EAGAIN);
    }
    let rel = match at {
        None => None,
        Some(at) => {
            let now = crate::time::realtime_ns();
            if now >= at {
                return Err(Errno::ETIMEDOUT);
            }
            Some(at - now)
        }
    };
    park::wait_on_queues(&[], &[q.queue()], park::deadline(rel), 0)
}

/// `mq_timedsend(mqdes, msg, len, prio, abs_timeout)`.
pub fn mq_timedsend(p: &mut Process, a: &[u64; 6]) -> SysResult {
    if a[3] >= u64::from(mqueue::PRIO_MAX) {
        return Err(Errno::EINVAL);
    }
    let at = timeout(p, a[4])?;
    let (f, q) = queue(p, a[0])?;
    if !f.writable() {
        return Err(Errno::EBADF);
    }
    let len = a[2] as usize;
    if len > q.msgsize {
        return Err(Errno::EMSGSIZE);
    }
    if q.count() >= q.maxmsg {
        return wait(&f, &q, at);
    }
    let mut msg = vec![0u8; len];
    uaccess::copy_in(&mut p.mm, a[1], &mut msg)?;
    match q.send(msg, a[3] as u32) {
        Ok(notify) => {
            if let Some(n) = notify {
                notify_process(p, n);
            }
            Ok(0)
        }
        Err(Errno::EAGAIN) => wait(&f, &q, at),
        Err(e) => Err(e),
    }
}

/// `mq_timedreceive(mqdes, msg, len, prio, abs_timeout)`: the message's
/// length.
pub fn mq_timedreceive(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let at = timeout(p, a[4])?;
    let (f, q) = queue(p, a[0])?;
    if !f.readable() {
        return Err(Errno::EBADF);
    }
    if (a[2] as usize) < q.msgsize {
        return Err(Errno::EMSGSIZE);
    }
    let (prio, msg) = match q.receive() {
        Ok(m) => m,
        Err(Errno::EAGAIN) => return wait(&f, &q, at),
        Err(e) => return Err(e),
    };
    // As Linux, the message is gone even if it cannot be copied out.
    uaccess::copy_out(&mut p.mm, a[1], &msg)?;
    if a[3] != 0 {
        uaccess::write(&mut p.mm, a[3], &prio)?;
    }
    Ok(msg.len())
}

/// `mq_getsetattr(mqdes, newattr, oldattr)`: only `O_NONBLOCK` of
/// `mq_flags` can change.
pub fn mq_getsetattr(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let (f, q) = queue(p, a[0])?;
    let new = if a[1] != 0 {
        let w = read_longs::<4>(p, a[1])?;
        if w[0] as u64 & !u64::from(O_NONBLOCK) != 0 {
            return Err(Errno::EINVAL);
        }
        Some(w[0] as u32)
    } else {
        None
    };
    let old = [
        i64::from(*f.flags.lock() & O_NONBLOCK),
        q.maxmsg as i64,
        q.msgsize as i64,
        q.count() as i64,
    ];
    if a[2] != 0 {
        for (i, w) in old.iter().enumerate() {
            uaccess::write(&mut p.mm, a[2] + 8 * i as u64, &(*w as u64))?;
        }
    }
    if let Some(nb) = new {
        let mut fl = f.flags.lock();
        *fl = (*fl & !O_NONBLOCK) | (nb & O_NONBLOCK);
    }
    Ok(0)
}

/// `si_code` of a message-queue notification.
const SI_MESGQ: i32 = -3;
const SIGEV_SIGNAL: i32 = 0;
const SIGEV_NONE: i32 = 1;
const SIGEV_THREAD: i32 = 2;

/// Sends a registered notification's signal (`si_code` `SI_MESGQ`, the
/// sender's pid and uid; `si_value` is not passed).
fn notify_process(p: &Process, n: mqueue::Notify) {
    let me = crate::task::current_tgid();
    let info = crate::signal::Info::user(SI_MESGQ, me, p.ids[0]);
    if n.pid == me {
        crate::signal::send(n.sig, info);
    } else {
        // The registered process may have gone: nothing to tell then.
        let _ = crate::task::wait::send_to_group(n.pid, n.sig, info);
    }
}

/// `mq_notify(mqdes, sevp)`: `NULL` removes the caller's registration.
pub fn mq_notify(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let (_, q) = queue(p, a[0])?;
    let me = crate::task::current_tgid();
    if a[1] == 0 {
        q.set_notify(me, None)?;
        return Ok(0);
    }
    let signo = uaccess::read::<u32>(&mut p.mm, a[1] + 8)? as i32;
    let how = uaccess::read::<u32>(&mut p.mm, a[1] + 12)? as i32;
    let n = match how {
        // Signal 0 is valid (nothing is sent), as on Linux.
        SIGEV_SIGNAL if (0..=64).contains(&signo) => mqueue::Notify {
            pid: me,
            sig: signo as u32,
        },
        SIGEV_NONE => mqueue::Notify { pid: me, sig: 0 },
        SIGEV_THREAD => return Err(Errno::ENOSYS),
        _ => return Err(Errno::EINVAL),
    };
    q.set_notify(me, Some(n))?;
    Ok(0)
}
