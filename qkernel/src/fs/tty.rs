//! Pseudo-terminals kept in the guest kernel (docs/terminal.md): opening
//! `/dev/ptmx` makes a pair, the master end in that file and the slave at
//! `/dev/pts/N`. Both ends share one [`Pty`]: its termios, window size,
//! the input the slave reads (after the line discipline of
//! [`ldisc`](super::ldisc)) and the output the master reads (after output
//! processing), and the session and foreground process group of the
//! terminal when it is a controlling terminal (`super::tty_ioctl`).
//!
//! Blocking reads and writes park the task on the pty's wait queues like
//! guest pipes (`task::park`): queue `q` is the slave side's (its readers
//! and writers), `q + 1` the master side's; each change wakes the side it
//! concerns.
//!
//! Linux's close semantics: when the master closes, the slave is hung up
//! (reads return 0, writes `EIO`, poll reports `POLLHUP`), and the pts
//! number goes when every end closed; when every slave closed, the master
//! reads what was left and then `EIO`.

use alloc::collections::BTreeMap;
use alloc::sync::{Arc, Weak};
use alloc::vec::Vec;

use spin::Mutex;

use super::ldisc::{self, Termios};
use super::pipe::{POLLERR, POLLHUP, POLLIN, POLLOUT, POLLRDNORM, POLLWRNORM};
use crate::errno::{Errno, SysResult};
use crate::mm::uaccess;
use crate::process::Process;
use crate::task::park;

/// Bytes buffered each way before a writer waits (and input is dropped).
pub const CAPACITY: usize = 65536;
/// Most pts numbers (`/proc/sys/kernel/pty/max` is larger; a sandbox
/// needs few).
const MAX_PTYS: u32 = 4096;

/// The state both ends share.
pub struct Inner {
    /// The line discipline's settings and buffers.
    pub ld: ldisc::Ldisc,
    /// `TIOCGWINSZ`: rows, columns, x and y pixels.
    pub winsize: [u16; 4],
    /// `TIOCSPTLCK`: the slave cannot be opened while locked.
    pub locked: bool,
    /// Open master and slave file descriptions.
    masters: u32,
    slaves: u32,
    /// The session whose controlling terminal this is (0: none).
    pub session: u32,
    /// The foreground process group (0: none).
    pub pgrp: u32,
    /// Counts state changes (edge-triggered epoll).
    generation: u64,
}

impl Inner {
    /// Records a state change (edge-triggered epoll).
    pub fn bump(&mut self) {
        self.generation += 1;
    }
}

/// A pseudo-terminal pair.
pub struct Pty {
    index: u32,
    queue: u64,
    /// The container's terminal, whose master side is the host
    /// (`fs::console`): (host input fd, host output fd).
    pub host: Option<(i32, i32)>,
    pub inner: Mutex<Inner>,
}

impl core::fmt::Debug for Pty {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Pty({})", self.index)
    }
}

/// One end of a pty, held by its open file description.
#[derive(Debug)]
pub struct TtyEnd {
    pub pty: Arc<Pty>,
    /// The master end (else a slave).
    pub master: bool,
}

/// Live ptys by number (`/dev/pts`).
static PTYS: Mutex<BTreeMap<u32, Weak<Pty>>> = Mutex::new(BTreeMap::new());

impl Drop for TtyEnd {
    fn drop(&mut self) {
        let mut i = self.pty.inner.lock();
        let mut hung_up = None;
        if self.master {
            i.masters = i.masters.saturating_sub(1);
            if i.masters == 0 {
                // Hung up: no controlling terminal any more.
                hung_up = Some((i.session, i.pgrp));
                i.session = 0;
                i.pgrp = 0;
            }
        } else {
            i.slaves = i.slaves.saturating_sub(1);
        }
        let unused = i.slaves == 0;
        i.generation += 1;
        drop(i);
        if let Some((session, pgrp)) = hung_up {
            hangup(session, pgrp);
        }
        self.pty.wake(true);
        self.pty.wake(false);
        if unused && self.pty.host.is_some() {
            // A console nobody holds: its host side goes.
            super::console::release(&self.pty);
        }
    }
}

impl Pty {
    /// The pts number.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// The queue a wait on the `master` or slave side parks on.
    pub fn queue(&self, master: bool) -> u64 {
        self.queue + u64::from(master)
    }

    /// Wakes the tasks waiting on the `master` or slave side.
    pub fn wake(&self, master: bool) {
        park::wake_queue(self.queue(master));
    }

    /// The state-change counter (edge-triggered epoll).
    pub fn generation(&self) -> u64 {
        self.inner.lock().generation
    }

    /// Whether the master has closed (the slave is hung up).
    pub fn hung_up(&self) -> bool {
        self.inner.lock().masters == 0
    }

    /// A new end of this pty (`/dev/pts/N`, `/dev/tty`, `TIOCGPTPEER`).
    pub fn open_slave(self: &Arc<Pty>) -> Result<TtyEnd, Errno> {
        let mut i = self.inner.lock();
        if i.masters == 0 || i.locked {
            return Err(Errno::EIO);
        }
        i.slaves += 1;
        i.generation += 1;
        Ok(TtyEnd {
            pty: self.clone(),
            master: false,
        })
    }

    /// The host side of the console closed: the slave is hung up.
    pub fn host_closed(&self) {
        let mut i = self.inner.lock();
        let (session, pgrp) = (i.session, i.pgrp);
        i.masters = 0;
        i.session = 0;
        i.pgrp = 0;
        i.generation += 1;
        drop(i);
        hangup(session, pgrp);
        self.wake(false);
        self.wake(true);
    }

    /// `poll` readiness of one end.
    pub fn poll(&self, master: bool) -> i16 {
        if self.host.is_some() {
            super::console::pump(self);
        }
        let i = self.inner.lock();
        let mut r = 0;
        if master {
            if !i.ld.output.is_empty() {
                r |= POLLIN | POLLRDNORM;
            }
            if i.ld.input_room() > 0 {
                r |= POLLOUT | POLLWRNORM;
            }
            if i.slaves == 0 {
                r |= POLLHUP;
            }
        } else if i.masters == 0 {
            r |= POLLIN | POLLRDNORM | POLLOUT | POLLWRNORM | POLLERR | POLLHUP;
        } else {
            if i.ld.readable() {
                r |= POLLIN | POLLRDNORM;
            }
            if i.ld.output.len() < CAPACITY {
                r |= POLLOUT | POLLWRNORM;
            }
        }
        r
    }
}

/// A new pair: the master end (`/dev/ptmx`), locked as Linux makes it.
pub fn open_master() -> Result<TtyEnd, Errno> {
    let pty = new_pty(None)?;
    Ok(TtyEnd { pty, master: true })
}

/// The console's pty (`fs::console`): its master side is the host's, so
/// it counts one master for good and is unlocked.
pub fn new_console(host_in: i32, host_out: i32) -> Result<Arc<Pty>, Errno> {
    let pty = new_pty(Some((host_in, host_out)))?;
    pty.inner.lock().locked = false;
    Ok(pty)
}

/// A new pty with one master, registered under the lowest free number.
fn new_pty(host: Option<(i32, i32)>) -> Result<Arc<Pty>, Errno> {
    let mut t = PTYS.lock();
    t.retain(|_, w| w.strong_count() > 0);
    let index = (0..MAX_PTYS)
        .find(|n| !t.contains_key(n))
        .ok_or(Errno::ENOSPC)?;
    let pty = Arc::new(Pty {
        index,
        queue: park::new_queues(2),
        host,
        inner: Mutex::new(Inner {
            ld: ldisc::Ldisc::new(Termios::default()),
            winsize: [0; 4],
            locked: true,
            masters: 1,
            slaves: 0,
            session: 0,
            pgrp: 0,
            generation: 0,
        }),
    });
    t.insert(index, Arc::downgrade(&pty));
    Ok(pty)
}

/// The live pty number `n`, if any.
pub fn get(n: u32) -> Option<Arc<Pty>> {
    PTYS.lock().get(&n).and_then(Weak::upgrade)
}

/// The open pts numbers, ascending (`/dev/pts`).
pub fn numbers() -> Vec<u32> {
    PTYS.lock()
        .iter()
        .filter(|(_, w)| w.upgrade().is_some_and(|p| !p.hung_up()))
        .map(|(&n, _)| n)
        .collect()
}

/// The controlling terminal of session `sid`, if it has one.
pub fn of_session(sid: u32) -> Option<Arc<Pty>> {
    if sid == 0 {
        return None;
    }
    PTYS.lock()
        .values()
        .filter_map(Weak::upgrade)
        .find(|p| p.inner.lock().session == sid)
}

/// The foreground group a hang-up took from each session's terminal
/// (Linux's `tty_old_pgrp`): it gets SIGHUP and SIGCONT when the
/// session's leader ends.
static OLD_PGRP: Mutex<BTreeMap<u32, u32>> = Mutex::new(BTreeMap::new());

/// The terminal of `session` (0: none) with foreground group `pgrp` hung
/// up (its master closed): as Linux's `tty_signal_session_leader`, the
/// session leader gets SIGHUP and SIGCONT, and the foreground group is
/// remembered for the leader's exit ([`session_ended`]).
fn hangup(session: u32, pgrp: u32) {
    if session == 0 {
        return;
    }
    if pgrp != 0 {
        OLD_PGRP.lock().insert(session, pgrp);
    }
    crate::task::jobctl::signal_soon(session, true, crate::signal::SIGHUP);
    crate::task::jobctl::signal_soon(session, true, crate::signal::SIGCONT);
}

/// Session `sid`'s leader ended (Linux's `disassociate_ctty` at exit): its
/// controlling terminal (a pty) is free again and the foreground group
/// gets SIGHUP; without a terminal, the group a hang-up took from it gets
/// SIGHUP and SIGCONT. The task table may be held: the signals are sent
/// at the next return to user mode or idle wait.
pub fn session_ended(sid: u32) {
    use crate::signal::{SIGCONT, SIGHUP};
    use crate::task::jobctl::signal_soon;
    let old = OLD_PGRP.lock().remove(&sid);
    if let Some(pty) = of_session(sid) {
        let mut i = pty.inner.lock();
        let fg = i.pgrp;
        i.session = 0;
        i.pgrp = 0;
        drop(i);
        if fg != 0 {
            signal_soon(fg, false, SIGHUP);
        }
    } else if let Some(fg) = old {
        signal_soon(fg, false, SIGHUP);
        signal_soon(fg, false, SIGCONT);
    }
}

/// Reads from or writes to a pty end: `read`/`write`/`readv`/`writev`.
/// A call that must wait parks the task (the handler runs again when the
/// other side moves) and returns `Ok(0)`, which the dispatcher ignores.
pub fn transfer(
    p: &mut Process,
    end: &TtyEnd,
    bufs: &[(u64, u64)],
    write: bool,
    nonblock: bool,
) -> SysResult {
    let total: usize = bufs.iter().map(|b| b.1 as usize).sum();
    match (end.master, write) {
        (true, false) => read_master(p, &end.pty, bufs, total, nonblock),
        (true, true) => write_master(p, &end.pty, bufs, total, nonblock),
        (false, false) => read_slave(p, &end.pty, bufs, total, nonblock),
        (false, true) => write_slave(p, &end.pty, bufs, total, nonblock),
    }
}

/// Copies `data` out to the user buffers; returns how many bytes went.
fn copy_out(p: &mut Process, bufs: &[(u64, u64)], data: &[u8]) -> SysResult {
    let mut done = 0usize;
    for &(addr, len) in bufs {
        let k = (len as usize).min(data.len() - done);
        if k == 0 {
            break;
        }
        if let Err(e) = uaccess::copy_out(&mut p.mm, addr, &data[done..done + k]) {
            if done == 0 {
                return Err(e);
            }
            break;
        }
        done += k;
    }
    Ok(done)
}

/// Copies up to `max` bytes in from the user buffers, after the first
/// `skip` bytes.
fn copy_in(
    p: &mut Process,
    bufs: &[(u64, u64)],
    skip: usize,
    max: usize,
) -> Result<Vec<u8>, Errno> {
    let mut out = Vec::new();
    out.try_reserve_exact(max).map_err(|_| Errno::ENOMEM)?;
    let mut skip = skip as u64;
    for &(addr, len) in bufs {
        if out.len() >= max {
            break;
        }
        if skip >= len {
            skip -= len;
            continue;
        }
        let k = ((len - skip) as usize).min(max - out.len());
        let at = out.len();
        out.resize(at + k, 0);
        if let Err(e) = uaccess::copy_in(&mut p.mm, addr + skip, &mut out[at..]) {
            out.truncate(at);
            if at == 0 {
                return Err(e);
            }
            break;
        }
        skip = 0;
    }
    Ok(out)
}

fn read_master(
    p: &mut Process,
    pty: &Pty,
    bufs: &[(u64, u64)],
    total: usize,
    nonblock: bool,
) -> SysResult {
    if total == 0 {
        return Ok(0);
    }
    let mut i = pty.inner.lock();
    if i.ld.output.is_empty() {
        if i.slaves == 0 {
            return Err(Errno::EIO);
        }
        if nonblock {
            return Err(Errno::EAGAIN);
        }
        drop(i);
        park::wait_on_queues(&[], &[pty.queue(true)], park::deadline(None), 0)?;
        return Ok(0);
    }
    let n = total.min(i.ld.output.len());
    let data: Vec<u8> = i.ld.output.iter().take(n).copied().collect();
    let done = copy_out(p, bufs, &data)?;
    i.ld.output.drain(..done);
    i.generation += 1;
    drop(i);
    pty.wake(false);
    Ok(done)
}

fn write_master(
    p: &mut Process,
    pty: &Pty,
    bufs: &[(u64, u64)],
    total: usize,
    nonblock: bool,
) -> SysResult {
    let done = park::done().min(total);
    if total == 0 {
        return Ok(0);
    }
    let room = pty.inner.lock().ld.input_room();
    let mut moved = 0;
    if room > 0 {
        let data = copy_in(p, bufs, done, room.min(total - done))?;
        let mut i = pty.inner.lock();
        let pgrp = i.pgrp;
        let mut signals = Vec::new();
        moved = i.ld.receive(&data, &mut signals);
        i.generation += 1;
        drop(i);
        pty.wake(false);
        pty.wake(true);
        for sig in signals {
            if pgrp != 0 {
                crate::task::pgrp::signal_group(pgrp, sig);
            }
        }
        if done + moved >= total || moved < data.len() {
            return Ok(done + moved);
        }
    }
    wait_for_room(pty, true, nonblock, done + moved)
}

/// Job control of a terminal access by the caller (Linux's
/// `__tty_check_change`): on the slave that is its controlling terminal,
/// from a background process group, a read (`SIGTTIN`) or a write with
/// `TOSTOP` or a change of the terminal (`SIGTTOU`) sends the signal to
/// its group and restarts after it (the group stops, or a handler runs);
/// if the signal is ignored or blocked, a read fails with `EIO` and the
/// rest goes on; in an orphaned group both fail with `EIO`.
pub fn job_check(pty: &Pty, master: bool, sig: u32) -> Result<(), Errno> {
    if master {
        return Ok(());
    }
    let (session, pgrp) = {
        let i = pty.inner.lock();
        (i.session, i.pgrp)
    };
    if session == 0 {
        return Ok(());
    }
    let (sid, mine) = crate::task::pgrp::ids();
    if sid != session || pgrp == 0 || pgrp == mine {
        return Ok(());
    }
    let b = crate::signal::bit(sig);
    if crate::signal::blocked() & b != 0 || crate::signal::explicitly_ignored(sig) {
        return if sig == crate::signal::SIGTTIN {
            Err(Errno::EIO)
        } else {
            Ok(())
        };
    }
    if crate::task::pgrp::orphaned(mine) {
        return Err(Errno::EIO);
    }
    crate::task::pgrp::signal_group(mine, sig);
    Err(Errno::ERESTARTSYS)
}

fn read_slave(
    p: &mut Process,
    pty: &Pty,
    bufs: &[(u64, u64)],
    total: usize,
    nonblock: bool,
) -> SysResult {
    job_check(pty, false, crate::signal::SIGTTIN)?;
    if pty.host.is_some() {
        super::console::pump(pty);
    }
    let mut i = pty.inner.lock();
    if i.masters == 0 || total == 0 {
        return Ok(0);
    }
    if let Some(data) = i.ld.peek(total) {
        let done = copy_out(p, bufs, &data)?;
        i.ld.consume(done);
        i.generation += 1;
        drop(i);
        pty.wake(true);
        return Ok(done);
    }
    // VMIN = 0 with VTIME: wait up to VTIME tenths of a second for a byte.
    let (min, time) = i.ld.min_time();
    let rel = (!i.ld.canonical() && min == 0 && time > 0).then(|| u64::from(time) * 100_000_000);
    if nonblock {
        return Err(Errno::EAGAIN);
    }
    drop(i);
    let deadline = park::deadline(rel);
    if rel.is_some() && park::expired(deadline) {
        return Ok(0);
    }
    park::wait_on_queues(&[], &[pty.queue(false)], deadline, 0)?;
    Ok(0)
}

fn write_slave(
    p: &mut Process,
    pty: &Pty,
    bufs: &[(u64, u64)],
    total: usize,
    nonblock: bool,
) -> SysResult {
    let done = park::done().min(total);
    if pty.hung_up() {
        return if done > 0 { Ok(done) } else { Err(Errno::EIO) };
    }
    if done == 0 && pty.inner.lock().ld.tostop() {
        job_check(pty, false, crate::signal::SIGTTOU)?;
    }
    if total == 0 {
        return Ok(0);
    }
    let room = CAPACITY.saturating_sub(pty.inner.lock().ld.output.len());
    let mut moved = 0;
    if room > 0 {
        // Each byte may become two (ONLCR): take no more than fits.
        let data = copy_in(p, bufs, done, (room / 2).max(1).min(total - done))?;
        let mut i = pty.inner.lock();
        for &c in &data {
            i.ld.output_byte(c);
        }
        moved = data.len();
        i.generation += 1;
        drop(i);
        pty.wake(true);
        if pty.host.is_some() {
            super::console::flush(pty);
        }
        if done + moved >= total {
            return Ok(done + moved);
        }
    }
    wait_for_room(pty, false, nonblock, done + moved)
}

/// The end of a write that found no room after writing `written` bytes:
/// with `nonblock`, those bytes or EAGAIN; else the task parks on queue
/// `master` of `pty` until there is room (the write is retried, 0 here).
fn wait_for_room(pty: &Pty, master: bool, nonblock: bool, written: usize) -> Result<usize, Errno> {
    if nonblock {
        return if written > 0 {
            Ok(written)
        } else {
            Err(Errno::EAGAIN)
        };
    }
    park::wait_on_queues(&[], &[pty.queue(master)], park::deadline(None), written)?;
    Ok(0)
}
