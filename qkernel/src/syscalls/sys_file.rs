//! File syscalls on fds: open, close, the read/write family, lseek, fcntl,
//! dup, ioctl, getdents64, ftruncate, fsync, sendfile.

use alloc::string::String;
use alloc::sync::Arc;

use qlib::io_abi::{fd as fdop, io};

use super::rw::{transfer, user_iovec_array};
use crate::errno::{Errno, SysResult};
use crate::fs::path::{self, AT_FDCWD};
use crate::fs::special::{self, Node, Special};
use crate::fs::{self as vfs, Backing, File, HostKind, O_CLOEXEC, O_PATH, SETFL_MASK, host};
use crate::mm::uaccess;
use crate::process::Process;

const O_CREAT: u32 = 0o100;
const O_NOFOLLOW: u32 = 0o400000;
const O_DIRECTORY: u32 = 0o200000;
const O_TMPFILE: u32 = 0o20000000;

/// Opens the absolute path `abs` for the process.
pub fn open_path(p: &mut Process, abs: String, flags: u32, mode: u32) -> Result<Arc<File>, Errno> {
    let norm = path::normalize(&abs);
    match special::lookup(&norm) {
        Node::Host => {
            let mode = if flags & (O_CREAT | O_TMPFILE) != 0 {
                mode & !p.fs.umask() & 0o7777
            } else {
                0
            };
            if flags & O_CREAT == 0 && vfs::frozen::missing(&abs, flags & O_NOFOLLOW != 0) {
                return Err(Errno::ENOENT);
            }
            let (fd, frozen) = host::open_stat(&abs, flags, mode)?;
            let backing = Backing::Host {
                fd,
                kind: HostKind::File,
            };
            Ok(File::with_frozen(backing, flags, norm, frozen))
        }
        Node::Missing => Err(if flags & O_CREAT != 0 {
            Errno::EACCES
        } else {
            Errno::ENOENT
        }),
        node if special::is_link(&node) => {
            if flags & O_NOFOLLOW != 0 && flags & O_PATH == 0 {
                return Err(Errno::ELOOP);
            }
            match special::follow(p, &node) {
                Some(special::Target::File(f)) => Ok(f),
                Some(special::Target::Path(to)) => open_path(p, to, flags, mode),
                None => Err(Errno::ENOENT),
            }
        }
        node => {
            if flags & O_DIRECTORY != 0 && !matches!(node, Node::Dir(_) | Node::PidDir(..)) {
                return Err(Errno::ENOTDIR);
            }
            special::open(p, &node, flags, &norm)
        }
    }
}

/// `openat(dirfd, path, flags, mode)`.
pub fn openat(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let abs = path::user_absolute(p, a[0] as i64, a[1])?;
    let flags = a[2] as u32;
    let file = open_path(p, abs, flags, a[3] as u32)?;
    p.files.insert(file, flags & O_CLOEXEC != 0)
}

/// `open(path, flags, mode)`.
pub fn open(p: &mut Process, a: &[u64; 6]) -> SysResult {
    openat(p, &[AT_FDCWD as u64, a[0], a[1], a[2], 0, 0])
}

/// `creat(path, mode)`.
pub fn creat(p: &mut Process, a: &[u64; 6]) -> SysResult {
    openat(p, &[AT_FDCWD as u64, a[0], 0o1101, a[1], 0, 0]) // O_WRONLY|O_CREAT|O_TRUNC
}

/// `close(fd)`.
pub fn close(p: &mut Process, a: &[u64; 6]) -> SysResult {
    p.files.remove(a[0]).map(|_| 0)
}

fn file(p: &Process, fd: u64) -> Result<Arc<File>, Errno> {
    p.files.get(fd)
}

/// `read(fd, buf, count)`.
pub fn read(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let f = file(p, a[0])?;
    transfer(p, &f, &[(a[1], a[2])], false, None)
}

/// `write(fd, buf, count)`.
pub fn write(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let f = file(p, a[0])?;
    transfer(p, &f, &[(a[1], a[2])], true, None)
}

fn positional(p: &mut Process, fd: u64, bufs: &[(u64, u64)], write: bool, off: u64) -> SysResult {
    let f = file(p, fd)?;
    if (off as i64) < 0 {
        return Err(Errno::EINVAL);
    }
    match f.host_kind() {
        Some(HostKind::File) => transfer(p, &f, bufs, write, Some(off)),
        Some(_) => Err(Errno::ESPIPE),
        None if f.pipe().is_some() => Err(Errno::ESPIPE),
        None => transfer(p, &f, bufs, write, None),
    }
}

/// `pread64(fd, buf, count, off)`.
pub fn pread64(p: &mut Process, a: &[u64; 6]) -> SysResult {
    positional(p, a[0], &[(a[1], a[2])], false, a[3])
}

/// `pwrite64(fd, buf, count, off)`.
pub fn pwrite64(p: &mut Process, a: &[u64; 6]) -> SysResult {
    positional(p, a[0], &[(a[1], a[2])], true, a[3])
}

/// `readv(fd, iov, iovcnt)`.
pub fn readv(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let f = file(p, a[0])?;
    let bufs = user_iovec_array(p, a[1], a[2])?;
    transfer(p, &f, &bufs, false, None)
}

/// `writev(fd, iov, iovcnt)`.
pub fn writev(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let f = file(p, a[0])?;
    let bufs = user_iovec_array(p, a[1], a[2])?;
    transfer(p, &f, &bufs, true, None)
}

/// `preadv(fd, iov, iovcnt, off)`.
pub fn preadv(p: &mut Process, a: &[u64; 6]) -> SysResult {
    file(p, a[0])?;
    let bufs = user_iovec_array(p, a[1], a[2])?;
    positional(p, a[0], &bufs, false, a[3])
}

/// `pwritev(fd, iov, iovcnt, off)`.
pub fn pwritev(p: &mut Process, a: &[u64; 6]) -> SysResult {
    file(p, a[0])?;
    let bufs = user_iovec_array(p, a[1], a[2])?;
    positional(p, a[0], &bufs, true, a[3])
}

/// `lseek(fd, off, whence)`.
pub fn lseek(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let f = file(p, a[0])?;
    if a[2] > 4 {
        return Err(Errno::EINVAL);
    }
    match &f.backing {
        Backing::Host {
            fd,
            kind: HostKind::File,
        } => {
            let frozen = f.frozen.as_ref();
            // SEEK_CUR by 0: `tell`.
            if a[1] == 0
                && a[2] == 1
                && let Some(pos) = frozen.and_then(|z| z.tell())
            {
                return Ok(pos as usize);
            }
            let r = host::fd_op(fdop::LSEEK, *fd, a[1], a[2], 0, 0);
            if let Some(z) = frozen {
                z.set(r.ok().map(|p| p as u64));
            }
            r
        }
        Backing::Host { .. }
        | Backing::Pipe(_)
        | Backing::Netlink(_)
        | Backing::Tty(_)
        | Backing::MQueue(_) => Err(Errno::ESPIPE),
        Backing::Special(s) => match s.seekable() {
            Some((len, pos)) if a[2] <= 2 => {
                let mut pos = pos.lock();
                let base = [0, *pos as i64, len as i64][a[2] as usize];
                let new = base
                    .checked_add(a[1] as i64)
                    .filter(|v| *v >= 0)
                    .ok_or(Errno::EINVAL)?;
                *pos = new as usize;
                Ok(new as usize)
            }
            Some(_) => Err(Errno::EINVAL),
            None => Ok(0),
        },
    }
}

const F_DUPFD: u64 = 0;
const F_GETFD: u64 = 1;
const F_SETFD: u64 = 2;
const F_GETFL: u64 = 3;
const F_SETFL: u64 = 4;
const F_GETLK: u64 = 5;
const F_SETLK: u64 = 6;
const F_SETLKW: u64 = 7;
const F_NOTIFY: u64 = 1026;
/// `F_NOTIFY`'s "keep the watch after an event" bit.
const DN_MULTISHOT: u32 = 0x8000_0000;
const F_DUPFD_CLOEXEC: u64 = 1030;
const F_SETPIPE_SZ: u64 = 1031;
const F_GETPIPE_SZ: u64 = 1032;

/// `fcntl(fd, cmd, arg)`.
pub fn fcntl(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let f = file(p, a[0])?;
    match a[1] {
        F_DUPFD | F_DUPFD_CLOEXEC => {
            let min = usize::try_from(a[2])
                .ok()
                .filter(|m| *m < crate::syscalls::nofile().min(vfs::MAX_FDS))
                .ok_or(Errno::EINVAL)?;
            p.files.insert_from(min, f, a[1] == F_DUPFD_CLOEXEC)
        }
        F_GETFD => Ok(usize::from(p.files.cloexec(a[0])?)),
        F_SETFD => {
            p.files.set_cloexec(a[0], a[2] & 1 != 0)?;
            Ok(0)
        }
        F_GETFL => Ok(*f.flags.lock() as usize),
        F_SETFL => {
            let mut flags = f.flags.lock();
            *flags = (*flags & !SETFL_MASK) | (a[2] as u32 & SETFL_MASK);
            Ok(0)
        }
        // A guest pipe's own size; a host pipe's is the VMM's.
        F_GETPIPE_SZ | F_SETPIPE_SZ if f.pipe().is_some() => {
            let pipe = &f.pipe().ok_or(Errno::EBADF)?.pipe;
            if a[1] == F_GETPIPE_SZ {
                Ok(pipe.capacity())
            } else {
                pipe.set_capacity(a[2] & 0xffff_ffff)
            }
        }
        super::sys_surface::F_GETPIPE_SZ | super::sys_surface::F_SETPIPE_SZ => {
            super::sys_surface::pipe_size(&f, a[1], a[2])
        }
        // One process: every record lock is granted.
        F_SETLK | F_SETLKW => Ok(0),
        F_GETLK => {
            // l_type = F_UNLCK (2): nothing would conflict.
            uaccess::write(&mut p.mm, a[2], &2u32)?;
            Ok(0)
        }
        // dnotify: no events are ever delivered, so removing the watches
        // (no event bits) succeeds as on Linux, and asking for events is
        // EINVAL, Linux's answer with dnotify disabled
        // (`fs.dir-notify-enable` 0). CPython's test_fcntl sets
        // `DN_MULTISHOT` alone.
        F_NOTIFY if a[2] as u32 & !DN_MULTISHOT == 0 => Ok(0),
        _ => Err(Errno::EINVAL),
    }
}

/// `dup(fd)`.
pub fn dup(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let f = file(p, a[0])?;
    p.files.insert(f, false)
}

/// `dup2(old, new)`.
pub fn dup2(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let f = file(p, a[0])?;
    if a[0] == a[1] {
        return Ok(a[1] as u32 as usize);
    }
    p.files.insert_at(a[1], f, false)?;
    Ok(a[1] as u32 as usize)
}

/// `dup3(old, new, flags)`.
pub fn dup3(p: &mut Process, a: &[u64; 6]) -> SysResult {
    if a[0] == a[1] || a[2] as u32 & !O_CLOEXEC != 0 {
        return Err(Errno::EINVAL);
    }
    let f = file(p, a[0])?;
    p.files.insert_at(a[1], f, a[2] as u32 & O_CLOEXEC != 0)?;
    Ok(a[1] as u32 as usize)
}

const TCGETS: u64 = 0x5401;
const TIOCGWINSZ: u64 = 0x5413;
const FIONREAD: u64 = 0x541b;
const FIONBIO: u64 = 0x5421;
const FIONCLEX: u64 = 0x5450;
const FIOCLEX: u64 = 0x5451;

/// `ioctl(fd, request, arg)`.
pub fn ioctl(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let f = file(p, a[0])?;
    match a[1] {
        FIONBIO => {
            let on: u32 = uaccess::read(&mut p.mm, a[2])?;
            let mut flags = f.flags.lock();
            if on != 0 {
                *flags |= vfs::O_NONBLOCK;
            } else {
                *flags &= !vfs::O_NONBLOCK;
            }
            return Ok(0);
        }
        FIOCLEX | FIONCLEX => {
            p.files.set_cloexec(a[0], a[1] == FIOCLEX)?;
            return Ok(0);
        }
        _ => {}
    }
    match (&f.backing, a[1]) {
        (
            Backing::Host {
                kind: HostKind::Stdio,
                fd,
            },
            TCGETS | TIOCGWINSZ,
        ) => terminal(p, *fd as usize, a),
        (
            Backing::Host {
                fd,
                kind: HostKind::Socket | HostKind::Pipe,
            },
            FIONREAD,
        ) => {
            let n = host::fd_op(fdop::FIONREAD, *fd, 0, 0, 0, 0)? as u32;
            uaccess::write(&mut p.mm, a[2], &n)?;
            Ok(0)
        }
        (
            Backing::Host {
                kind: HostKind::Socket,
                fd,
            },
            req,
        ) if super::sys_bridge::is_bridge(req) => super::sys_bridge::ioctl(p, *fd, req, a[2]),
        (
            Backing::Host {
                kind: HostKind::Socket,
                ..
            }
            | Backing::Netlink(_),
            req,
        ) if super::sys_ifreq::is_ifreq(req) => super::sys_ifreq::ioctl(p, req, a[2]),
        (Backing::Tty(end), req) => crate::fs::tty_ioctl::ioctl(p, end, req, a[2]),
        (Backing::Pipe(end), FIONREAD) => {
            let n = end.pipe.buffered() as u32;
            uaccess::write(&mut p.mm, a[2], &n)?;
            Ok(0)
        }
        _ => Err(Errno::ENOTTY),
    }
}

fn terminal(p: &mut Process, fd: usize, a: &[u64; 6]) -> SysResult {
    let info = crate::boot_info();
    if info.tty_mask & (1 << fd) == 0 {
        return Err(Errno::ENOTTY);
    }
    if a[1] == TCGETS {
        uaccess::copy_out(&mut p.mm, a[2], &info.termios[..36])?;
    } else {
        let mut ws = [0u8; 8];
        for (i, v) in info.winsize.iter().enumerate() {
            ws[i * 2..i * 2 + 2].copy_from_slice(&v.to_le_bytes());
        }
        uaccess::copy_out(&mut p.mm, a[2], &ws)?;
    }
    Ok(0)
}

/// `getdents64(fd, dirp, count)`.
pub fn getdents64(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let f = file(p, a[0])?;
    match &f.backing {
        Backing::Host {
            fd,
            kind: HostKind::File,
        } => {
            let mut iov = alloc::vec::Vec::new();
            uaccess::user_iovecs(&mut p.mm, a[1], a[2].min(1 << 20), true, &mut iov)?;
            let (gpa, n) = crate::hostcall::iovecs(&iov);
            host::fd_op(fdop::GETDENTS, *fd, gpa, n, 0, 0)
        }
        Backing::Special(Special::Dir(entries, pos)) => {
            let mut pos = pos.lock();
            let mut out = alloc::vec::Vec::new();
            while let Some((name, ty)) = entries.get(*pos) {
                let reclen = (19 + name.len() + 1).next_multiple_of(8);
                if out.len() + reclen > a[2] as usize {
                    break;
                }
                let start = out.len();
                out.resize(start + reclen, 0);
                let rec = &mut out[start..];
                rec[0..8].copy_from_slice(&(*pos as u64 + 1).to_le_bytes()); // d_ino
                rec[8..16].copy_from_slice(&(*pos as u64 + 1).to_le_bytes()); // d_off
                rec[16..18].copy_from_slice(&(reclen as u16).to_le_bytes());
                rec[18] = *ty;
                rec[19..19 + name.len()].copy_from_slice(name.as_bytes());
                *pos += 1;
            }
            if out.is_empty() && entries.get(*pos).is_some() {
                return Err(Errno::EINVAL);
            }
            uaccess::copy_out(&mut p.mm, a[1], &out)?;
            Ok(out.len())
        }
        _ => Err(Errno::ENOTDIR),
    }
}

fn host_file(p: &Process, fd: u64) -> Result<i32, Errno> {
    match file(p, fd)?.backing {
        Backing::Host {
            fd,
            kind: HostKind::File,
        } => Ok(fd),
        _ => Err(Errno::EINVAL),
    }
}

/// `ftruncate(fd, len)`.
pub fn ftruncate(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let fd = host_file(p, a[0])?;
    let object = crate::mm::sharedfile::before_io(&*p.files.get(a[0])?);
    let r = host::fd_op(fdop::FTRUNCATE, fd, a[1], 0, 0, 0);
    crate::mm::sharedfile::after_write(object);
    r
}

/// `sendfile(out, in, offset, count)`: host to host, in the VMM.
pub fn sendfile(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let out = file(p, a[0])?;
    let input = file(p, a[1])?;
    if !out.writable() || !input.readable() {
        return Err(Errno::EBADF);
    }
    let (Some(ofd), Some(ifd)) = (out.host_fd(), input.host_fd()) else {
        return Err(Errno::EINVAL);
    };
    crate::mm::sharedfile::before_io(&input);
    if let Some(z) = &input.frozen {
        // The VMM moves the host offset.
        z.set(None);
    }
    // To a socket or pipe that would block, with other tasks around, the
    // task parks (its reader may be one of them) instead of blocking the
    // vCPU in the host.
    let pollable = matches!(out.host_kind(), Some(HostKind::Socket | HostKind::Pipe));
    let park = !out.nonblocking() && pollable && crate::task::park::worthwhile();
    let flags = if out.nonblocking() || park {
        0
    } else {
        io::BLOCK
    };
    let count = a[3].min(0x7fff_f000);
    let r = if a[2] == 0 {
        host::fd_op(fdop::SENDFILE, ofd, ifd as u64, count, 0, flags)
    } else {
        let off: u64 = uaccess::read(&mut p.mm, a[2])?;
        let cell = [off];
        let gpa = crate::mm::kva_to_gpa(cell.as_ptr() as u64);
        let n = host::fd_op(fdop::SENDFILE, ofd, ifd as u64, count, gpa, flags);
        // SAFETY: the VMM wrote the new offset in place.
        let off = unsafe { core::ptr::read_volatile(&cell[0]) };
        uaccess::write(&mut p.mm, a[2], &off)?;
        n
    };
    if park && r == Err(Errno::EAGAIN) {
        let deadline = crate::task::park::deadline(None);
        return crate::task::park::wait_on(&[(ofd, crate::task::park::POLLOUT)], deadline);
    }
    if pollable && r.is_ok_and(|n| n > 0) {
        crate::task::park::wake_readers_of_peer(ofd);
        super::sys_ucred::sent(ofd, super::sys_ucred::real(p), None);
    }
    r
}
