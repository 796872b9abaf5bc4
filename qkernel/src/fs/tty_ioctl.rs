//! Opening guest ptys (`/dev/ptmx`, `/dev/pts/N`, `/dev/tty`) and their
//! ioctls: termios (`TCGETS*`/`TCSETS*`, also the `termios2` forms),
//! `TCFLSH`, `TCSBRK`, window size (`TIOCGWINSZ`/`TIOCSWINSZ`, SIGWINCH to
//! the foreground group), `FIONREAD`, `TIOCOUTQ`, the master's
//! `TIOCGPTN`/`TIOCSPTLCK`/`TIOCGPTPEER`, and the controlling terminal:
//! `TIOCSCTTY`, `TIOCNOTTY`, `TIOCGPGRP`/`TIOCSPGRP`, `TIOCGSID`. A
//! session's controlling terminal is the pty whose `session` is its id
//! (`tty::of_session`): `setsid` starts a session without one, and a
//! session leader opening a slave without `O_NOCTTY` acquires it.

use alloc::format;
use alloc::sync::Arc;

use super::tty::{self, Pty, TtyEnd};
use super::{Backing, File};
use crate::errno::{Errno, SysResult};
use crate::mm::uaccess;
use crate::process::Process;
use crate::signal::SIGTTOU;
use crate::task::pgrp;

/// `O_NOCTTY`.
pub const O_NOCTTY: u32 = 0o400;

const TCGETS: u64 = 0x5401;
const TCSETS: u64 = 0x5402;
const TCSETSW: u64 = 0x5403;
const TCSETSF: u64 = 0x5404;
const TCSBRK: u64 = 0x5409;
const TCXONC: u64 = 0x540A;
const TCFLSH: u64 = 0x540B;
const TIOCEXCL: u64 = 0x540C;
const TIOCNXCL: u64 = 0x540D;
const TIOCSCTTY: u64 = 0x540E;
const TIOCGPGRP: u64 = 0x540F;
const TIOCSPGRP: u64 = 0x5410;
const TIOCOUTQ: u64 = 0x5411;
const TIOCGWINSZ: u64 = 0x5413;
const TIOCSWINSZ: u64 = 0x5414;
const FIONREAD: u64 = 0x541B;
const TIOCNOTTY: u64 = 0x5422;
const TIOCSETD: u64 = 0x5423;
const TIOCGETD: u64 = 0x5424;
const TCSBRKP: u64 = 0x5425;
const TIOCGSID: u64 = 0x5429;
const TCGETS2: u64 = 0x802C_542A;
const TCSETS2: u64 = 0x402C_542B;
const TCSETSW2: u64 = 0x402C_542C;
const TCSETSF2: u64 = 0x402C_542D;
const TIOCGPTN: u64 = 0x8004_5430;
const TIOCSPTLCK: u64 = 0x4004_5431;
const TIOCGPTPEER: u64 = 0x5441;

const SIGHUP: u32 = 1;
const SIGWINCH: u32 = 28;
const SIGCONT: u32 = 18;

/// A file for a pty end; a slave opened without `O_NOCTTY` by a session
/// leader with no controlling terminal becomes its controlling terminal.
fn end_file(end: TtyEnd, flags: u32, path: alloc::string::String) -> Arc<File> {
    if !end.master && flags & O_NOCTTY == 0 {
        acquire(&end.pty, false);
    }
    File::new(Backing::Tty(end), flags & !O_NOCTTY, path)
}

/// `open("/dev/ptmx")`: a new pair's master.
pub fn open_ptmx(flags: u32) -> Result<Arc<File>, Errno> {
    Ok(end_file(tty::open_master()?, flags, "/dev/ptmx".into()))
}

/// `open("/dev/pts/N")`.
pub fn open_pts(n: u32, flags: u32) -> Result<Arc<File>, Errno> {
    let pty = tty::get(n).ok_or(Errno::ENOENT)?;
    Ok(end_file(pty.open_slave()?, flags, format!("/dev/pts/{n}")))
}

/// `open("/dev/tty")`: the caller's controlling terminal, `ENXIO` without one.
pub fn open_tty(flags: u32) -> Result<Arc<File>, Errno> {
    let (sid, _) = pgrp::ids();
    let pty = tty::of_session(sid).ok_or(Errno::ENXIO)?;
    Ok(File::new(
        Backing::Tty(pty.open_slave()?),
        flags & !O_NOCTTY,
        "/dev/tty".into(),
    ))
}

/// Makes `pty` the caller's controlling terminal if it is a session
/// leader without one and the pty has no session (`steal`: even from
/// another session, `TIOCSCTTY` with 1 by root). Returns whether it is
/// the caller's now.
fn acquire(pty: &Pty, steal: bool) -> bool {
    let (sid, pgid) = pgrp::ids();
    if sid != crate::task::current_tgid() {
        return false;
    }
    let mine = tty::of_session(sid);
    if let Some(m) = &mine {
        return core::ptr::eq(Arc::as_ptr(m), pty);
    }
    let mut i = pty.inner.lock();
    if i.session != 0 && !steal {
        return false;
    }
    i.session = sid;
    i.pgrp = pgid;
    true
}

/// Whether `pty` is the caller's controlling terminal.
fn is_ctty(pty: &Pty) -> bool {
    let (sid, _) = pgrp::ids();
    sid != 0 && pty.inner.lock().session == sid
}

fn put<T: uaccess::Pod>(p: &mut Process, addr: u64, v: &T) -> SysResult {
    uaccess::write(&mut p.mm, addr, v)?;
    Ok(0)
}

/// `ioctl` on a pty end.
pub fn ioctl(p: &mut Process, end: &TtyEnd, req: u64, arg: u64) -> SysResult {
    // The request is a C `unsigned int` (musl passes it sign-extended).
    let req = req & 0xffff_ffff;
    let pty = &end.pty;
    match req {
        TCGETS | TCGETS2 => {
            let b = pty.inner.lock().ld.termios.to_bytes();
            let n = if req == TCGETS { 36 } else { 44 };
            uaccess::copy_out(&mut p.mm, arg, &b[..n])?;
            Ok(0)
        }
        TCSETS | TCSETSW | TCSETSF | TCSETS2 | TCSETSW2 | TCSETSF2 => {
            tty::job_check(pty, end.master, SIGTTOU)?;
            let mut b = [0u8; 44];
            let n = if req < 0x4000_0000 { 36 } else { 44 };
            uaccess::copy_in(&mut p.mm, arg, &mut b[..n])?;
            let mut i = pty.inner.lock();
            let t = i.ld.termios.updated(&b[..n]);
            i.ld.set_termios(t, req == TCSETSF || req == TCSETSF2);
            drop(i);
            pty.wake(false);
            pty.wake(true);
            Ok(0)
        }
        TCFLSH => {
            tty::job_check(pty, end.master, SIGTTOU)?;
            let mut i = pty.inner.lock();
            // The master's input queue is the slave's output.
            let (input, output) = match (arg, end.master) {
                (0, false) | (1, true) => (true, false),
                (1, false) | (0, true) => (false, true),
                (2, _) => (true, true),
                _ => return Err(Errno::EINVAL),
            };
            if input {
                i.ld.flush_input();
            }
            if output {
                i.ld.output.clear();
            }
            drop(i);
            pty.wake(false);
            pty.wake(true);
            Ok(0)
        }
        TCSBRK | TCSBRKP | TCXONC | TIOCEXCL | TIOCNXCL => Ok(0),
        TIOCGETD => put(p, arg, &0u32),
        TIOCSETD => {
            let d: u32 = uaccess::read(&mut p.mm, arg)?;
            if d == 0 { Ok(0) } else { Err(Errno::EINVAL) }
        }
        TIOCGWINSZ => {
            super::console::refresh_winsize(pty);
            let ws = pty.inner.lock().winsize;
            let mut b = [0u8; 8];
            for (k, v) in ws.iter().enumerate() {
                b[k * 2..k * 2 + 2].copy_from_slice(&v.to_le_bytes());
            }
            uaccess::copy_out(&mut p.mm, arg, &b)?;
            Ok(0)
        }
        TIOCSWINSZ => {
            let mut b = [0u8; 8];
            uaccess::copy_in(&mut p.mm, arg, &mut b)?;
            let ws: [u16; 4] =
                core::array::from_fn(|k| u16::from_le_bytes([b[k * 2], b[k * 2 + 1]]));
            let mut i = pty.inner.lock();
            let changed = i.winsize != ws;
            i.winsize = ws;
            let pgrp = i.pgrp;
            drop(i);
            if changed && pgrp != 0 {
                pgrp::signal_group(pgrp, SIGWINCH);
            }
            Ok(0)
        }
        FIONREAD => {
            let i = pty.inner.lock();
            let n = if end.master {
                i.ld.output.len()
            } else {
                i.ld.readable_bytes()
            } as u32;
            drop(i);
            put(p, arg, &n)
        }
        TIOCOUTQ => {
            let n = if end.master {
                0
            } else {
                pty.inner.lock().ld.output.len() as u32
            };
            put(p, arg, &n)
        }
        TIOCGPTN if end.master => put(p, arg, &pty.index()),
        TIOCSPTLCK if end.master => {
            let v: i32 = uaccess::read(&mut p.mm, arg)?;
            pty.inner.lock().locked = v != 0;
            Ok(0)
        }
        TIOCGPTPEER if end.master => {
            let flags = arg as u32;
            let path = format!("/dev/pts/{}", pty.index());
            let file = end_file(pty.open_slave()?, flags, path);
            let fd = p.files.insert(file, flags & super::O_CLOEXEC != 0)?;
            Ok(fd)
        }
        TIOCSCTTY => {
            let (sid, _) = pgrp::ids();
            if sid != crate::task::current_tgid() {
                return Err(Errno::EPERM);
            }
            let steal = arg == 1 && p.ids[1] == 0;
            if acquire(pty, steal) {
                Ok(0)
            } else {
                Err(Errno::EPERM)
            }
        }
        TIOCNOTTY => {
            if end.master || !is_ctty(pty) {
                return Err(Errno::ENOTTY);
            }
            let (sid, _) = pgrp::ids();
            if sid == crate::task::current_tgid() {
                let mut i = pty.inner.lock();
                let fg = i.pgrp;
                i.session = 0;
                i.pgrp = 0;
                drop(i);
                if fg != 0 {
                    pgrp::signal_group(fg, SIGHUP);
                    pgrp::signal_group(fg, SIGCONT);
                }
            }
            Ok(0)
        }
        TIOCGPGRP | TIOCGSID => {
            // The master may ask; a slave only of its own terminal.
            if !end.master && !is_ctty(pty) {
                return Err(Errno::ENOTTY);
            }
            let i = pty.inner.lock();
            let v = if req == TIOCGPGRP { i.pgrp } else { i.session };
            drop(i);
            if req == TIOCGSID && v == 0 {
                return Err(Errno::ENOTTY);
            }
            put(p, arg, &v)
        }
        TIOCSPGRP => {
            if !is_ctty(pty) {
                return Err(Errno::ENOTTY);
            }
            match tty::job_check(pty, end.master, SIGTTOU) {
                Err(Errno::EIO) => return Err(Errno::ENOTTY),
                r => r?,
            }
            let g: i32 = uaccess::read(&mut p.mm, arg)?;
            if g < 0 {
                return Err(Errno::EINVAL);
            }
            let g = g as u32;
            if !pgrp::group_exists(g) {
                return Err(Errno::ESRCH);
            }
            let (sid, _) = pgrp::ids();
            if !pgrp::group_in_session(g, sid) {
                return Err(Errno::EPERM);
            }
            pty.inner.lock().pgrp = g;
            Ok(0)
        }
        _ => Err(Errno::ENOTTY),
    }
}
