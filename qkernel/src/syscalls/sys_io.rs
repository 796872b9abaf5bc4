//! I/O syscalls on fds 0-2, which are the host's stdio (forwarded with
//! in-place iovecs: the VMM reads and writes the user's pages directly).
//! Files, pipes and sockets come with the I/O work.

use alloc::vec::Vec;

use qlib::abi::{Call, IoVec, MAX_IOVECS, PollFd};

use crate::boot_info;
use crate::errno::{Errno, SysResult};
use crate::hostcall;
use crate::mm::uaccess;
use crate::process::Process;

/// Largest piece moved per host call.
const MAX_CHUNK: u64 = 1 << 20;

fn check_fd(p: &Process, fd: u64, write: bool) -> Result<(), Errno> {
    let ok = match fd {
        0 => !write,
        1 | 2 => write,
        _ => return Err(Errno::EBADF),
    };
    if !p.stdio_open[fd as usize] || !ok {
        return Err(Errno::EBADF);
    }
    Ok(())
}

/// Moves user buffers `bufs` ((addr, len) pairs) to or from host fd `fd`;
/// stops at the first short transfer as Linux does.
fn transfer(p: &mut Process, fd: u64, bufs: &[(u64, u64)], write: bool) -> SysResult {
    let call = if write { Call::Writev } else { Call::Readv };
    let mut total = 0u64;
    let mut iov: Vec<IoVec> = Vec::new();
    let mut pending = 0u64;
    let flush = |iov: &mut Vec<IoVec>, pending: &mut u64, total: &mut u64| -> Result<bool, Errno> {
        if iov.is_empty() {
            return Ok(true);
        }
        let (gpa, n) = hostcall::iovecs(iov);
        let rc = hostcall::call(call, [fd, gpa, n, 0, 0, 0]);
        if rc < 0 {
            return if *total > 0 {
                Ok(false)
            } else {
                Err(errno_from(rc))
            };
        }
        let full = rc as u64 == *pending;
        *total += rc as u64;
        iov.clear();
        *pending = 0;
        Ok(full)
    };
    for &(addr, len) in bufs {
        let mut off = 0;
        while off < len {
            let n = (len - off).min(MAX_CHUNK - pending);
            // An unmapped buffer after some bytes moved ends the transfer.
            if let Err(e) = uaccess::user_iovecs(&mut p.mm, addr + off, n, !write, &mut iov) {
                flush(&mut iov, &mut pending, &mut total)?;
                return if total > 0 {
                    Ok(total as usize)
                } else {
                    Err(e)
                };
            }
            pending += n;
            off += n;
            if pending >= MAX_CHUNK || iov.len() as u64 >= MAX_IOVECS - 2 {
                if !flush(&mut iov, &mut pending, &mut total)? {
                    return Ok(total as usize);
                }
                if !write {
                    // A read returns what one host read gave.
                    return Ok(total as usize);
                }
            }
        }
    }
    flush(&mut iov, &mut pending, &mut total)?;
    Ok(total as usize)
}

fn errno_from(rc: i64) -> Errno {
    match -rc {
        4 => Errno::EINTR,
        9 => Errno::EBADF,
        11 => Errno::EAGAIN,
        14 => Errno::EFAULT,
        32 => Errno::EPIPE,
        _ => Errno::EIO,
    }
}

/// `read(fd, buf, count)`.
pub fn read(p: &mut Process, a: &[u64; 6]) -> SysResult {
    check_fd(p, a[0], false)?;
    transfer(p, a[0], &[(a[1], a[2])], false)
}

/// `write(fd, buf, count)`.
pub fn write(p: &mut Process, a: &[u64; 6]) -> SysResult {
    check_fd(p, a[0], true)?;
    transfer(p, a[0], &[(a[1], a[2])], true)
}

fn user_iovec_array(p: &mut Process, iov: u64, count: u64) -> Result<Vec<(u64, u64)>, Errno> {
    if count > 1024 {
        return Err(Errno::EINVAL);
    }
    let mut out = Vec::with_capacity(count as usize);
    for i in 0..count {
        let base: u64 = uaccess::read(&mut p.mm, iov + i * 16)?;
        let len: u64 = uaccess::read(&mut p.mm, iov + i * 16 + 8)?;
        if len > isize::MAX as u64 {
            return Err(Errno::EINVAL);
        }
        out.push((base, len));
    }
    Ok(out)
}

/// `readv(fd, iov, iovcnt)`.
pub fn readv(p: &mut Process, a: &[u64; 6]) -> SysResult {
    check_fd(p, a[0], false)?;
    let bufs = user_iovec_array(p, a[1], a[2])?;
    transfer(p, a[0], &bufs, false)
}

/// `writev(fd, iov, iovcnt)`.
pub fn writev(p: &mut Process, a: &[u64; 6]) -> SysResult {
    check_fd(p, a[0], true)?;
    let bufs = user_iovec_array(p, a[1], a[2])?;
    transfer(p, a[0], &bufs, true)
}

/// `close(fd)`.
pub fn close(p: &mut Process, a: &[u64; 6]) -> SysResult {
    match a[0] {
        fd @ 0..=2 if p.stdio_open[fd as usize] => {
            p.stdio_open[fd as usize] = false;
            Ok(0)
        }
        _ => Err(Errno::EBADF),
    }
}

fn stdio_open(p: &Process, fd: u64) -> Result<usize, Errno> {
    match fd {
        0..=2 if p.stdio_open[fd as usize] => Ok(fd as usize),
        _ => Err(Errno::EBADF),
    }
}

/// `lseek(fd, off, whence)`: stdio is a pipe or terminal here.
pub fn lseek(p: &mut Process, a: &[u64; 6]) -> SysResult {
    stdio_open(p, a[0])?;
    Err(Errno::ESPIPE)
}

const TCGETS: u64 = 0x5401;
const TIOCGWINSZ: u64 = 0x5413;

/// `ioctl(fd, request, arg)`: terminal queries on stdio.
pub fn ioctl(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let fd = stdio_open(p, a[0])?;
    let info = boot_info();
    if info.tty_mask & (1 << fd) == 0 {
        return Err(Errno::ENOTTY);
    }
    match a[1] {
        TCGETS => uaccess::copy_out(&mut p.mm, a[2], &info.termios[..36])?,
        TIOCGWINSZ => {
            let mut ws = [0u8; 8];
            for (i, v) in info.winsize.iter().enumerate() {
                ws[i * 2..i * 2 + 2].copy_from_slice(&v.to_le_bytes());
            }
            uaccess::copy_out(&mut p.mm, a[2], &ws)?;
        }
        _ => return Err(Errno::ENOTTY),
    }
    Ok(0)
}

fn stat_stdio(p: &mut Process, fd: usize, buf: u64) -> SysResult {
    let info = boot_info();
    let mut st = [0u8; 144];
    let mut put =
        |off: usize, v: u64, n: usize| st[off..off + n].copy_from_slice(&v.to_le_bytes()[..n]);
    put(16, 1, 8); // st_nlink
    put(24, u64::from(info.stdio_mode[fd]), 4);
    put(28, u64::from(p.ids[1]), 4);
    put(32, u64::from(p.ids[3]), 4);
    put(56, 4096, 8); // st_blksize
    uaccess::copy_out(&mut p.mm, buf, &st)?;
    Ok(0)
}

/// `fstat(fd, statbuf)`.
pub fn fstat(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let fd = stdio_open(p, a[0])?;
    stat_stdio(p, fd, a[1])
}

const AT_EMPTY_PATH: u64 = 0x1000;

/// `newfstatat(dirfd, path, statbuf, flags)`: `AT_EMPTY_PATH` on stdio.
pub fn newfstatat(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let first: [u8; 1] = {
        let mut b = [0u8; 1];
        uaccess::copy_in(&mut p.mm, a[1], &mut b)?;
        b
    };
    if a[3] & AT_EMPTY_PATH != 0 && first[0] == 0 {
        let fd = stdio_open(p, a[0])?;
        return stat_stdio(p, fd, a[2]);
    }
    // No filesystem yet.
    Err(Errno::ENOENT)
}

const POLLNVAL: i16 = 0x20;

/// `poll(fds, nfds, timeout)` over stdio, forwarded to the host.
pub fn poll(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let (ufds, nfds, timeout) = (a[0], a[1], a[2] as i32);
    if nfds > 64 {
        return Err(Errno::EINVAL);
    }
    let mut entries: Vec<(i32, i16, i16)> = Vec::with_capacity(nfds as usize);
    for i in 0..nfds {
        let fd: i32 = uaccess::read(&mut p.mm, ufds + i * 8)?;
        let ev: u32 = uaccess::read(&mut p.mm, ufds + i * 8 + 4)?;
        entries.push((fd, ev as i16, 0));
    }
    let mut host: Vec<PollFd> = Vec::new();
    let mut ready = 0usize;
    for e in entries.iter_mut() {
        match e.0 {
            fd if fd < 0 => {}
            fd @ 0..=2 if p.stdio_open[fd as usize] && host.len() < 3 => host.push(PollFd {
                fd,
                events: e.1,
                revents: 0,
            }),
            _ => e.2 = POLLNVAL,
        }
    }
    ready += entries.iter().filter(|e| e.2 != 0).count();
    if !host.is_empty() {
        let t = if ready > 0 { 0 } else { timeout };
        let (gpa, _) = hostcall::buf(as_bytes(&host));
        let rc = hostcall::call(
            Call::Poll,
            [gpa, host.len() as u64, t as i64 as u64, 0, 0, 0],
        );
        if rc < 0 {
            return Err(errno_from(rc));
        }
        // SAFETY: the VMM wrote `revents` in place.
        let host: Vec<PollFd> = host
            .iter()
            .map(|h| unsafe { core::ptr::read_volatile(h) })
            .collect();
        for e in entries
            .iter_mut()
            .filter(|e| (0..=2).contains(&e.0) && e.2 == 0)
        {
            if let Some(h) = host.iter().find(|h| h.fd == e.0) {
                e.2 = h.revents;
                if h.revents != 0 {
                    ready += 1;
                }
            }
        }
    } else if ready == 0 && timeout != 0 {
        // Nothing to wait for: sleep out the timeout (a negative one would
        // block forever; an exit would come from a signal, which we lack).
        let ns = if timeout < 0 {
            u64::MAX
        } else {
            timeout as u64 * 1_000_000
        };
        hostcall::call(Call::Sleep, [ns.min(1 << 62), 0, 0, 0, 0, 0]);
    }
    for (i, e) in entries.iter().enumerate() {
        uaccess::write(
            &mut p.mm,
            ufds + i as u64 * 8 + 4,
            &(((e.2 as u16) as u32) << 16 | (e.1 as u16) as u32),
        )?;
    }
    Ok(ready)
}

fn as_bytes(v: &[PollFd]) -> &[u8] {
    // SAFETY: PollFd is repr(C) plain data without padding.
    unsafe { core::slice::from_raw_parts(v.as_ptr() as *const u8, core::mem::size_of_val(v)) }
}
