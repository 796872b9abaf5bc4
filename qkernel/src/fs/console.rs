//! The container's terminal (OCI `process.terminal`, `BOOT_CONSOLE`):
//! the host's fds 0-2 are the slave of a host pty whose master went to
//! the console socket, put in raw mode by the VMM. Pid 1 gets a guest pty
//! instead ([`setup`]): its fds 0-2 are that pty's slave and it is its
//! controlling terminal, with the guest line discipline (echo, canonical
//! editing, ^C as SIGINT to the foreground group, job control). The
//! master side is the host: what the guest writes goes out to host fd 1
//! after output processing ([`flush`]), and what arrives on host fd 0 goes
//! through the line discipline ([`input_ready`]) whenever the vCPU polls
//! its parked fds (the console's fd 0 is always among them, so that ^C
//! reaches a program that is not reading). End of file on host fd 0 hangs
//! the guest terminal up.

use alloc::sync::Arc;
use alloc::vec::Vec;

use qlib::abi::{Call, IoVec, PollFd};
use qlib::io_abi::io;
use spin::Mutex;

use super::tty::{self, Pty};
use super::{Backing, FdTable, File, O_RDWR};
use crate::hostcall;

/// The host fd input comes from, output goes to.
const HOST_IN: i32 = 0;
const HOST_OUT: i32 = 1;

/// The console pty, while it is not hung up.
static CONSOLE: Mutex<Option<Arc<Pty>>> = Mutex::new(None);
/// The host stdio files the console's fds replaced: kept open, since
/// closing them would close the host fds the console uses.
static HOST_STDIO: Mutex<Vec<Arc<File>>> = Mutex::new(Vec::new());

/// Makes the console pty and installs its slave as fds 0-2 of `table`
/// (pid 1, session 1, process group 1: its controlling terminal), with
/// the host terminal's window size.
pub fn setup(table: &mut FdTable, winsize: [u16; 4]) {
    let Ok(pty) = tty::new_console() else {
        return;
    };
    {
        let mut i = pty.inner.lock();
        i.winsize = winsize;
        i.session = 1;
        i.pgrp = 1;
    }
    let Ok(end) = pty.open_slave() else {
        return;
    };
    let path = alloc::format!("/dev/pts/{}", pty.index());
    let file = File::new(Backing::Tty(end), O_RDWR, path);
    let mut kept = HOST_STDIO.lock();
    for fd in 0..3 {
        if let Ok(old) = table.remove(fd) {
            kept.push(old);
        }
        let _ = table.insert_at(fd, file.clone(), false);
    }
    drop(kept);
    *CONSOLE.lock() = Some(pty);
    crate::task::park::set_console(HOST_IN);
}

/// Writes what the console pty's slave side output (and echo) to the host.
pub fn flush(pty: &Pty) {
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
            match super::host::io(HOST_OUT, &iov, None, io::WRITE | io::BLOCK) {
                Ok(n) if n > 0 => at += n,
                // The host side is gone: the output is lost, as on a
                // hung-up terminal.
                _ => return,
            }
        }
    }
}

/// Whether host fd 0 has input (or an end of file) now: one `Poll` that
/// does not wait.
fn host_ready() -> bool {
    let mut fds = [PollFd {
        fd: HOST_IN,
        events: 0x1,
        revents: 0,
    }];
    let gpa = crate::mm::kva_to_gpa(fds.as_mut_ptr() as u64);
    let rc = hostcall::call_once(Call::Poll, [gpa, 1, 0, 0, 0, 0]);
    // SAFETY: the VMM wrote `revents` in place.
    let revents = unsafe { core::ptr::read_volatile(&fds[0]) }.revents;
    rc > 0 && revents != 0
}

/// Takes host input into the console pty if there is some (a reader of
/// the slave calls it before it waits).
pub fn pump() {
    if CONSOLE.lock().is_some() && host_ready() {
        input_ready();
    }
}

/// Host fd 0 is readable: reads what is there into the line discipline
/// (signals go to the foreground group, echo to the host); an end of file
/// or an error hangs the terminal up.
pub fn input_ready() {
    let Some(pty) = CONSOLE.lock().clone() else {
        return;
    };
    let mut buf = alloc::vec![0u8; 4096];
    let iov = [IoVec {
        gpa: crate::mm::kva_to_gpa(buf.as_mut_ptr() as u64),
        len: buf.len() as u64,
    }];
    let n = match super::host::io(HOST_IN, &iov, None, io::BLOCK) {
        Ok(n) if n > 0 => n,
        _ => {
            hang_up(&pty);
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
    if pgrp != 0 {
        for sig in signals {
            crate::task::pgrp::signal_group(pgrp, sig);
        }
    }
}

/// The host side closed: the terminal is hung up and no longer polled.
fn hang_up(pty: &Pty) {
    *CONSOLE.lock() = None;
    crate::task::park::set_console(-1);
    pty.host_closed();
}
