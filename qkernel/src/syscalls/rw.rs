//! Moving bytes between user buffers and open files: the common core of
//! read/write, the vector and positional variants, and send/recv. User
//! buffers go to the VMM in place as guest-physical iovecs, in pieces of
//! at most [`MAX_CHUNK`] bytes per host call.

use alloc::sync::Arc;
use alloc::vec::Vec;

use qlib::abi::{IoVec, MAX_IOVECS};
use qlib::io_abi::io;

use crate::errno::{Errno, SysResult};
use crate::fs::special::Special;
use crate::fs::{Backing, File, HostKind, host};
use crate::mm::uaccess;
use crate::process::Process;
use crate::task::park;

/// Largest piece moved per host call.
const MAX_CHUNK: u64 = 1 << 20;

/// A user buffer: (address, length).
pub type UserBuf = (u64, u64);

/// Reads `count` user iovecs (`struct iovec`) at `iov`.
pub fn user_iovec_array(p: &mut Process, iov: u64, count: u64) -> Result<Vec<UserBuf>, Errno> {
    if count > 1024 {
        return Err(Errno::EINVAL);
    }
    let mut out = Vec::with_capacity(count as usize);
    let mut total = 0u64;
    for i in 0..count {
        let base: u64 = uaccess::read(&mut p.mm, iov + i * 16)?;
        let len: u64 = uaccess::read(&mut p.mm, iov + i * 16 + 8)?;
        total = total.checked_add(len).ok_or(Errno::EINVAL)?;
        if total > isize::MAX as u64 {
            return Err(Errno::EINVAL);
        }
        out.push((base, len));
    }
    Ok(out)
}

/// Collects guest-physical iovecs for the first piece of `bufs` (at most
/// `MAX_CHUNK` bytes); returns them and the bytes they cover. A fault
/// after some bytes ends the piece there.
fn first_piece(
    p: &mut Process,
    bufs: &[UserBuf],
    write_to_user: bool,
) -> Result<(Vec<IoVec>, u64), Errno> {
    let mut iov = Vec::new();
    let mut covered = 0u64;
    for &(addr, len) in bufs {
        let n = len.min(MAX_CHUNK - covered);
        if n == 0 {
            continue;
        }
        let before = iov.len();
        if let Err(e) = uaccess::user_iovecs(&mut p.mm, addr, n, write_to_user, &mut iov) {
            iov.truncate(before);
            if covered == 0 {
                return Err(e);
            }
            break;
        }
        covered += n;
        if covered >= MAX_CHUNK || iov.len() as u64 >= MAX_IOVECS - 2 {
            break;
        }
    }
    Ok((iov, covered))
}

/// Drops the first `n` bytes of `bufs`.
fn advance(bufs: &mut Vec<UserBuf>, mut n: u64) {
    while n > 0 && !bufs.is_empty() {
        let (a, l) = bufs[0];
        if l <= n {
            n -= l;
            bufs.remove(0);
        } else {
            bufs[0] = (a + n, l - n);
            n = 0;
        }
    }
}

/// Reads from or writes to `file` with `bufs`; `offset` for the positional
/// variants. Writes continue piece by piece until a short write; a read
/// returns what one host read gave.
pub fn transfer(
    p: &mut Process,
    file: &Arc<File>,
    bufs: &[UserBuf],
    write: bool,
    offset: Option<u64>,
) -> SysResult {
    if (write && !file.writable()) || (!write && !file.readable()) {
        return Err(Errno::EBADF);
    }
    match &file.backing {
        Backing::Special(s) => special(p, s, bufs, write),
        Backing::Pipe(end) => crate::fs::pipe::transfer(p, end, bufs, write, file.nonblocking()),
        Backing::Tty(end) => crate::fs::tty::transfer(p, end, bufs, write, file.nonblocking()),
        Backing::Netlink(n) => super::sys_socket::netlink_rw(p, n, bufs, write),
        // Linux reads a status line (`QSIZE:` ...); not kept here.
        Backing::MQueue(_) => Err(Errno::EINVAL),
        Backing::Host { fd, kind } => {
            let mut flags = if write { io::WRITE } else { 0 };
            // With other processes around, a pipe or socket that would
            // block parks this one instead of blocking the vCPU.
            let pollable = matches!(kind, HostKind::Pipe | HostKind::Socket);
            let stdin_like = *kind == HostKind::Stdio && !write;
            let park = !file.nonblocking() && (pollable || stdin_like) && park::worthwhile();
            if stdin_like && park && !park::rerun() {
                // The host's stdio may be a blocking fd: wait for it to be
                // readable first, then read it blocking.
                return park::wait_on(&[(*fd, park::POLLIN)], park::deadline(None));
            }
            if !file.nonblocking() && (!park || stdin_like) {
                flags |= io::BLOCK;
            }
            // A file with shared writable mappings: they are written back
            // first, and see what a write wrote (`mm::sharedfile`).
            let object = if *kind == HostKind::File {
                crate::mm::sharedfile::before_io(file)
            } else {
                None
            };
            // A frozen regular file read at its offset: the guest follows
            // the offset and knows where the file ends.
            let frozen = file.frozen.as_ref().filter(|_| offset.is_none());
            if !write && frozen.is_some_and(|z| z.at_eof()) {
                return Ok(0);
            }
            let r = host_transfer(p, bufs, write, |iov, done| {
                host::io(*fd, iov, offset.map(|o| o + done), flags)
            });
            if let Some(z) = frozen {
                match r {
                    Ok(n) if !write => z.advanced(n as u64),
                    Ok(_) => z.set(None),
                    Err(_) => {}
                }
            }
            if write {
                crate::mm::sharedfile::after_write(object);
            }
            if park && r == Err(Errno::EAGAIN) {
                let events = if write { park::POLLOUT } else { park::POLLIN };
                crate::task::request(crate::task::Action::Park(*fd, events));
                return Ok(0);
            }
            if write && pollable && r.is_ok_and(|n| n > 0) {
                park::wake_readers_of_peer(*fd);
                if *kind == HostKind::Socket {
                    super::sys_ucred::sent(*fd, super::sys_ucred::real(p), None);
                }
            }
            if r == Err(Errno::EPIPE) && *kind != HostKind::File {
                crate::signal::raise_sigpipe();
            }
            r
        }
    }
}

/// [`host_transfer`] of a socket send: a send of no bytes still makes
/// its one host call (on a datagram socket it is a datagram, with its
/// control data), where a write of nothing to a file makes none.
pub fn host_send(
    p: &mut Process,
    bufs: &[UserBuf],
    mut op: impl FnMut(&[IoVec], u64) -> SysResult,
) -> SysResult {
    if bufs.iter().all(|b| b.1 == 0) {
        return op(&[IoVec { gpa: 0, len: 0 }], 0);
    }
    host_transfer(p, bufs, true, op)
}

/// The piece loop of [`transfer`], with `op(iovecs, bytes done so far)`
/// doing one host call.
pub fn host_transfer(
    p: &mut Process,
    bufs: &[UserBuf],
    write: bool,
    mut op: impl FnMut(&[IoVec], u64) -> SysResult,
) -> SysResult {
    let mut rest: Vec<UserBuf> = bufs.iter().copied().filter(|b| b.1 > 0).collect();
    let mut done = 0u64;
    loop {
        if rest.is_empty() && (done > 0 || write) {
            return Ok(done as usize);
        }
        let (iov, covered) = first_piece(p, &rest, !write)?;
        let n = match op(&iov, done) {
            Ok(n) => n as u64,
            Err(e) if done == 0 => return Err(e),
            Err(_) => return Ok(done as usize),
        };
        done += n;
        if !write || n < covered {
            return Ok(done as usize);
        }
        advance(&mut rest, n);
    }
}

fn special(p: &mut Process, s: &Special, bufs: &[UserBuf], write: bool) -> SysResult {
    let total: u64 = bufs.iter().map(|b| b.1).sum();
    if write {
        return match s {
            Special::Full => Err(Errno::ENOSPC),
            Special::Text(..) | Special::Dir(..) => Err(Errno::EBADF),
            _ => Ok(total as usize),
        };
    }
    let mut chunk = [0u8; 4096];
    let mut done = 0usize;
    for &(addr, len) in bufs {
        let mut off = 0u64;
        while off < len {
            let n = ((len - off) as usize).min(chunk.len());
            let got = match s {
                Special::Null => return Ok(done),
                Special::Zero | Special::Full => {
                    chunk[..n].fill(0);
                    n
                }
                Special::Random => {
                    crate::random::fill(&mut chunk[..n]);
                    n
                }
                Special::Text(data, pos) => {
                    let mut pos = pos.lock();
                    let k = n.min(data.len().saturating_sub(*pos));
                    chunk[..k].copy_from_slice(&data[*pos..*pos + k]);
                    *pos += k;
                    k
                }
                Special::Dir(..) => return Err(Errno::EISDIR),
            };
            if got == 0 {
                return Ok(done);
            }
            uaccess::copy_out(&mut p.mm, addr + off, &chunk[..got])?;
            done += got;
            off += got as u64;
            if got < n {
                return Ok(done);
            }
        }
    }
    Ok(done)
}
