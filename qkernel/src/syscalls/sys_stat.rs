//! stat family: `stat`, `lstat`, `fstat`, `newfstatat`, `statx`, and
//! `access`/`faccessat`/`faccessat2`.

use qlib::io_abi::path as pathop;

use crate::errno::{Errno, SysResult};
use crate::fs::path::{self, AT_FDCWD};
use crate::fs::special::{self, Node};
use crate::fs::stat::{STATX_SIZE, stat_from_statx};
use crate::fs::{Backing, host};
use crate::mm::uaccess;
use crate::process::Process;

const AT_SYMLINK_NOFOLLOW: u64 = 0x100;
const AT_EMPTY_PATH: u64 = 0x1000;

/// statx of the open file `fd`.
fn statx_fd(p: &mut Process, fd: u64) -> Result<[u8; STATX_SIZE], Errno> {
    let f = p.files.get(fd)?;
    statx_file(p, &f)
}

/// statx of an open file.
fn statx_file(p: &mut Process, f: &crate::fs::File) -> Result<[u8; STATX_SIZE], Errno> {
    match &f.backing {
        Backing::Host { fd, .. } => match &f.frozen {
            Some(z) => Ok(z.statx()),
            None => host::statx_fd(*fd),
        },
        Backing::Special(s) => Ok(special::statx_open(p, s)),
        Backing::Pipe(end) => Ok(crate::fs::stat::synthetic_statx(
            crate::fs::stat::S_IFIFO | 0o600,
            0,
            (0, 0),
            end.pipe.ino(),
            p.ids,
        )),
        Backing::Tty(end) => Ok(special::statx_tty(p, end, &f.path)),
        Backing::Netlink(n) => Ok(crate::fs::stat::synthetic_statx(
            0o140777, // S_IFSOCK
            0,
            (0, 0),
            n.ino(),
            p.ids,
        )),
        Backing::MQueue(q) => Ok(crate::fs::stat::synthetic_statx(
            0o100000 | q.mode, // S_IFREG
            0,
            (0, 0),
            q.ino(),
            p.ids,
        )),
    }
}

/// statx of the absolute path `abs`.
pub fn statx_abs(p: &mut Process, abs: &str, nofollow: bool) -> Result<[u8; STATX_SIZE], Errno> {
    let node = special::lookup(&path::normalize(abs));
    // A trailing slash follows a final link, as on Linux.
    let nofollow = nofollow && !abs.ends_with('/');
    match node {
        Node::Host => host::statx_path(abs, nofollow),
        node if special::is_link(&node) && !nofollow => match special::follow(p, &node) {
            Some(special::Target::File(f)) => statx_file(p, &f),
            Some(special::Target::Path(to)) => statx_abs(p, &to, false),
            None => Err(Errno::ENOENT),
        },
        node => special::statx(p, &node),
    }
}

/// statx of (`dirfd`, user path) with `AT_*` flags.
fn statx_at(
    p: &mut Process,
    dirfd: u64,
    path_va: u64,
    flags: u64,
) -> Result<[u8; STATX_SIZE], Errno> {
    let path = path::read_user_path(p, path_va)?;
    if path.is_empty() {
        if flags & AT_EMPTY_PATH == 0 {
            return Err(Errno::ENOENT);
        }
        if i64::from(dirfd as i32) == AT_FDCWD {
            let cwd = p.fs.cwd();
            return statx_abs(p, &cwd, false);
        }
        return statx_fd(p, dirfd);
    }
    let abs = path::absolute(p, dirfd as i64, &path)?;
    statx_abs(p, &abs, flags & AT_SYMLINK_NOFOLLOW != 0)
}

fn put_stat(p: &mut Process, buf: u64, sx: &[u8; STATX_SIZE]) -> SysResult {
    uaccess::copy_out(&mut p.mm, buf, &stat_from_statx(sx))?;
    Ok(0)
}

/// `stat(path, buf)`.
pub fn stat(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let sx = statx_at(p, AT_FDCWD as u64, a[0], 0)?;
    put_stat(p, a[1], &sx)
}

/// `lstat(path, buf)`.
pub fn lstat(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let sx = statx_at(p, AT_FDCWD as u64, a[0], AT_SYMLINK_NOFOLLOW)?;
    put_stat(p, a[1], &sx)
}

/// `fstat(fd, buf)`.
pub fn fstat(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let sx = statx_fd(p, a[0])?;
    put_stat(p, a[1], &sx)
}

/// `newfstatat(dirfd, path, buf, flags)`.
pub fn newfstatat(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let sx = statx_at(p, a[0], a[1], a[3])?;
    put_stat(p, a[2], &sx)
}

/// `statx(dirfd, path, flags, mask, buf)`.
pub fn statx(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let sx = statx_at(p, a[0], a[1], a[2])?;
    uaccess::copy_out(&mut p.mm, a[4], &sx)?;
    Ok(0)
}

/// `faccessat2(dirfd, path, mode, flags)`.
pub fn faccessat2(p: &mut Process, a: &[u64; 6]) -> SysResult {
    if a[2] & !7 != 0 {
        return Err(Errno::EINVAL);
    }
    let path = path::read_user_path(p, a[1])?;
    if path.is_empty() {
        return Err(Errno::ENOENT);
    }
    let abs = path::absolute(p, a[0] as i64, &path)?;
    match special::lookup(&path::normalize(&abs)) {
        Node::Host => host::path_op(pathop::ACCESS, &abs, a[2], 0, 0),
        Node::Missing => Err(Errno::ENOENT),
        _ => Ok(0),
    }
}

/// `faccessat(dirfd, path, mode)`.
pub fn faccessat(p: &mut Process, a: &[u64; 6]) -> SysResult {
    faccessat2(p, &[a[0], a[1], a[2], 0, 0, 0])
}

/// `access(path, mode)`.
pub fn access(p: &mut Process, a: &[u64; 6]) -> SysResult {
    faccessat2(p, &[AT_FDCWD as u64, a[0], a[1], 0, 0, 0])
}
