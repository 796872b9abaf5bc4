//! The container's terminal (OCI `process.terminal`, `BOOT_CONSOLE`, and
//! `qrun exec --tty`): the host fds given as stdio are the slave of a
//! host pty whose master went to the console socket, in raw mode. The
//! process gets a guest pty instead ([`attach`]): its fds 0-2 are that
//! pty's slave and it is its controlling terminal, with the guest line discipline (echo, canonical
//! editing, ^C as SIGINT to the foreground group, job control). The
//! master side is the host: what the guest writes goes out to the host
//! output fd after output processing ([`flush`]), and what arrives on the
//! host input fd goes through the line discipline ([`input_ready`])
//! whenever the vCPU polls its parked fds (every console's input fd is
//! among them, so that ^C reaches a program that is not reading). End of
//! file on the input hangs the guest terminal up; when no guest fd holds
//! the terminal any more, its host fds close ([`release`]).

use alloc::sync::Arc;
use alloc::vec::Vec;

use qlib::abi::{Call, IoVec, PollFd};
use qlib::io_abi::io;
use spin::Mutex;

use super::tty::{self, Pty};
use super::{Backing, FdTable, File, O_RDWR};
use crate::hostcall;

/// A live console: its pty, and the host stdio files its fds replaced
/// (kept open: closing them would close the host fds it uses).
struct Console {
    pty: Arc<Pty>,
    _host_files: Vec<Arc<File>>,
}

/// The live consoles.
static CONSOLES: Mutex<Vec<Console>> = Mutex::new(Vec::new());

/// Makes a console pty on the host fds behind fds 0 (input) and 1
/// (output) of `table` and installs its slave as fds 0-2, with window
/// size `winsize`; the caller makes it the controlling terminal of the
/// process's session ([`set_session`]). `None` (the table unchanged)
/// when fds 0 and 1 are not host fds.
pub fn attach(table: &mut FdTable, winsize: [u16; 4]) -> Option<Arc<Pty>> {
    let host_in = table.get(0).ok()?.host_fd()?;
    let host_out = table.get(1).ok()?.host_fd()?;
    let pty = tty::new_console(host_in, host_out).ok()?;
    pty.inner.lock().winsize = winsize;
    let end = pty.open_slave().ok()?;
    let path = alloc::format!("/dev/pts/{}", pty.index());
    let file = File::new(Backing::Tty(end), O_RDWR, path);
    let mut host_files = Vec::new();
    for fd in 0..3 {
        if let Ok(old) = table.remove(fd) {
            host_files.push(old);
        }
        let _ = table.insert_at(fd, file.clone(), false);
    }
    CONSOLES.lock().push(Console {
        pty: pty.clone(),
        _host_files: host_files,
    });
    crate::task::park::add_console(host_in);
    Some(pty)
}

/// Makes `pty` the controlling terminal of session `sid` (its leader's
/// group in the foreground).
pub fn set_session(pty: &Pty, sid: u32) {
    let mut i = pty.inner.lock();
    i.session = sid;
    i.pgrp = sid;
}

/// Writes what the console pty's slave side output (and echo) to the host.
pub fn flush(pty: &Pty) {
    let Some((_, out)) = pty.host else {
        return;
    };
    loop {
        let data: Vec<u8> = {
            let mut i = pty.inner.lock();
            let n = i.ld.output.len().min(4096);
            i.ld.output.drain(..n).collect()
        };
        if data.is_empty() {
            return;
        }
        let mut at = 0;
        while at < data.len() {
            let iov = [IoVec {
                gpa: crate::mm::kva_to_gpa(data[at..].as_ptr() as u64),
                len: (data.len() - at) as u64,
            }];
            match super::host::io(out, &iov, None, io::WRITE | io::BLOCK) {
                Ok(n) if n > 0 => at += n,
                // The host side is gone: the output is lost, as on a
                // hung-up terminal.
                _ => return,
            }
        }
    }
}

/// Whether host fd `fd` has input (or an end of file) now: one `Poll`
/// that does not wait.
fn host_ready(fd: i32) -> bool {
    let mut fds = [PollFd {
        fd,
        events: 0x1,
        revents: 0,
    }];
    let gpa = crate::mm::kva_to_gpa(fds.as_mut_ptr() as u64);
    let rc = hostcall::call_once(Call::Poll, [gpa, 1, 0, 0, 0, 0]);
    // SAFETY: the VMM wrote `revents` in place.
    let revents = unsafe { core::ptr::read_volatile(&fds[0]) }.revents;
    rc > 0 && revents != 0
}

/// Takes host input into console `pty` if there is some (a reader or
/// poller of the slave calls it before it looks).
pub fn pump(pty: &Pty) {
    if let Some((input, _)) = pty.host
        && !pty.hung_up()
        && host_ready(input)
    {
        input_ready(input);
    }
}

/// The console reading host fd `fd`, if it is live.
fn console_of(fd: i32) -> Option<Arc<Pty>> {
    CONSOLES
        .lock()
        .iter()
        .find(|c| c.pty.host.is_some_and(|h| h.0 == fd))
        .map(|c| c.pty.clone())
}

/// Host fd `fd`, a console's input, is readable: reads what is there
/// into the line discipline (signals go to the foreground group, echo to
/// the host); an end of file or an error hangs the terminal up.
pub fn input_ready(fd: i32) {
    let Some(pty) = console_of(fd) else {
        return;
    };
    let mut buf = alloc::vec![0u8; 4096];
    let iov = [IoVec {
        gpa: crate::mm::kva_to_gpa(buf.as_mut_ptr() as u64),
        len: buf.len() as u64,
    }];
    let n = match super::host::io(fd, &iov, None, io::BLOCK) {
        Ok(n) if n > 0 => n,
        _ => {
            crate::task::park::remove_console(fd);
            pty.host_closed();
            return;
        }
    };
    let mut signals = Vec::new();
    let pgrp = {
        let mut i = pty.inner.lock();
        // What does not fit is dropped, as a full tty's input is.
        i.ld.receive(&buf[..n], &mut signals);
        i.bump();
        i.pgrp
    };
    pty.wake(false);
    flush(&pty);
    refresh_winsize(&pty);
    if pgrp != 0 {
        for sig in signals {
            crate::task::pgrp::signal_group(pgrp, sig);
        }
    }
}

/// Takes the host terminal's window size if it changed (the console
/// socket's owner resized it): a `TIOCGWINSZ` of the guest pty and each
/// input read look, and a change sends SIGWINCH to the foreground group.
/// (The host does not tell the guest when it happens.)
pub fn refresh_winsize(pty: &Pty) {
    let Some((input, _)) = pty.host else {
        return;
    };
    let Ok(v) = super::host::fd_op(qlib::io_abi::fd::WINSIZE, input, 0, 0, 0, 0) else {
        return;
    };
    let (rows, cols) = ((v & 0xffff) as u16, ((v >> 16) & 0xffff) as u16);
    if (rows, cols) == (0, 0) {
        return;
    }
    let mut i = pty.inner.lock();
    if i.winsize[..2] == [rows, cols] {
        return;
    }
    i.winsize = [rows, cols, 0, 0];
    let pgrp = i.pgrp;
    drop(i);
    if pgrp != 0 {
        crate::task::pgrp::signal_group(pgrp, 28 /* SIGWINCH */);
    }
}

/// No guest fd holds console `pty` any more: it stops being polled and
/// its host fds close.
pub fn release(pty: &Pty) {
    if let Some((input, _)) = pty.host {
        crate::task::park::remove_console(input);
    }
    let gone: Vec<Console> = {
        let mut all = CONSOLES.lock();
        let (gone, keep) = core::mem::take(&mut *all)
            .into_iter()
            .partition(|c| core::ptr::eq(Arc::as_ptr(&c.pty), pty));
        *all = keep;
        gone
    };
    // The host files close here, with no lock held.
    drop(gone);
}
