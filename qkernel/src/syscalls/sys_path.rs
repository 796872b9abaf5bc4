//! Path syscalls: mkdir, unlink, rmdir, rename, link, symlink, readlink,
//! chmod, truncate, utimensat, chdir/fchdir/getcwd and umask. The VMM acts
//! inside the rootfs; the kernel's own trees (`/dev`, `/proc`, `/sys`) are
//! read-only.

use alloc::string::String;

use qlib::io_abi::{fd as fdop, path as pathop};

use super::sys_stat::statx_abs;
use crate::errno::{Errno, SysResult};
use crate::fs::host;
use crate::fs::path::{self, AT_FDCWD};
use crate::fs::special::{self, Node};
use crate::fs::stat::{S_IFDIR, S_IFMT, statx_mode};
use crate::mm::uaccess;
use crate::process::Process;

const AT_REMOVEDIR: u64 = 0x200;
const AT_SYMLINK_NOFOLLOW: u64 = 0x100;
const AT_SYMLINK_FOLLOW: u64 = 0x400;
const AT_EMPTY_PATH: u64 = 0x1000;

/// A user path made absolute, refused with `on_kernel` when it names the
/// kernel's own trees.
fn host_path(p: &mut Process, dirfd: u64, va: u64, on_kernel: Errno) -> Result<String, Errno> {
    let abs = path::user_absolute(p, dirfd as i64, va)?;
    match special::lookup(&path::normalize(&abs)) {
        Node::Host => Ok(abs),
        Node::Missing => Err(Errno::ENOENT),
        _ => Err(on_kernel),
    }
}

/// `mkdirat(dirfd, path, mode)`.
pub fn mkdirat(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let abs = host_path(p, a[0], a[1], Errno::EEXIST)?;
    let mode = a[2] as u32 & !p.fs.umask() & 0o7777;
    host::path_op(pathop::MKDIR, &abs, u64::from(mode), 0, 0)
}

/// `mkdir(path, mode)`.
pub fn mkdir(p: &mut Process, a: &[u64; 6]) -> SysResult {
    mkdirat(p, &[AT_FDCWD as u64, a[0], a[1], 0, 0, 0])
}

/// `unlinkat(dirfd, path, flags)`.
pub fn unlinkat(p: &mut Process, a: &[u64; 6]) -> SysResult {
    if a[2] & !AT_REMOVEDIR != 0 {
        return Err(Errno::EINVAL);
    }
    let abs = host_path(p, a[0], a[1], Errno::EACCES)?;
    let op = if a[2] & AT_REMOVEDIR != 0 {
        pathop::RMDIR
    } else {
        pathop::UNLINK
    };
    host::path_op(op, &abs, 0, 0, 0)
}

/// `unlink(path)`.
pub fn unlink(p: &mut Process, a: &[u64; 6]) -> SysResult {
    unlinkat(p, &[AT_FDCWD as u64, a[0], 0, 0, 0, 0])
}

/// `rmdir(path)`.
pub fn rmdir(p: &mut Process, a: &[u64; 6]) -> SysResult {
    unlinkat(p, &[AT_FDCWD as u64, a[0], AT_REMOVEDIR, 0, 0, 0])
}

/// `renameat2(olddirfd, old, newdirfd, new, flags)`.
pub fn renameat2(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let old = host_path(p, a[0], a[1], Errno::EXDEV)?;
    let new = host_path(p, a[2], a[3], Errno::EXDEV)?;
    host::path_op2(pathop::RENAME, &old, &new, a[4])
}

/// `renameat(olddirfd, old, newdirfd, new)`.
pub fn renameat(p: &mut Process, a: &[u64; 6]) -> SysResult {
    renameat2(p, &[a[0], a[1], a[2], a[3], 0, 0])
}

/// `rename(old, new)`.
pub fn rename(p: &mut Process, a: &[u64; 6]) -> SysResult {
    renameat2(p, &[AT_FDCWD as u64, a[0], AT_FDCWD as u64, a[1], 0, 0])
}

/// `linkat(olddirfd, old, newdirfd, new, flags)`.
pub fn linkat(p: &mut Process, a: &[u64; 6]) -> SysResult {
    if a[4] & !(AT_SYMLINK_FOLLOW | AT_EMPTY_PATH) != 0 {
        return Err(Errno::EINVAL);
    }
    let old = host_path(p, a[0], a[1], Errno::EXDEV)?;
    let new = host_path(p, a[2], a[3], Errno::EXDEV)?;
    let follow = if a[4] & AT_SYMLINK_FOLLOW != 0 {
        pathop::LINK_FOLLOW
    } else {
        0
    };
    host::path_op2(pathop::LINK, &old, &new, follow)
}

/// `link(old, new)`.
pub fn link(p: &mut Process, a: &[u64; 6]) -> SysResult {
    linkat(p, &[AT_FDCWD as u64, a[0], AT_FDCWD as u64, a[1], 0, 0])
}

/// `symlinkat(target, dirfd, linkpath)`.
pub fn symlinkat(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let target = path::read_user_path(p, a[0])?;
    if target.is_empty() {
        return Err(Errno::ENOENT);
    }
    let link = host_path(p, a[1], a[2], Errno::EEXIST)?;
    host::path_op2(pathop::SYMLINK, &link, &target, 0)
}

/// `symlink(target, linkpath)`.
pub fn symlink(p: &mut Process, a: &[u64; 6]) -> SysResult {
    symlinkat(p, &[a[0], AT_FDCWD as u64, a[1], 0, 0, 0])
}

/// `readlinkat(dirfd, path, buf, size)`.
pub fn readlinkat(p: &mut Process, a: &[u64; 6]) -> SysResult {
    if (a[3] as i64) <= 0 {
        return Err(Errno::EINVAL);
    }
    let abs = path::user_absolute(p, a[0] as i64, a[1])?;
    let target: alloc::vec::Vec<u8> = match special::lookup(&path::normalize(&abs)) {
        Node::Host => host::readlink(&abs)?,
        Node::Missing => return Err(Errno::ENOENT),
        node if special::is_link(&node) => {
            path::to_bytes(&special::link_text(p, &node).ok_or(Errno::ENOENT)?).into_owned()
        }
        _ => return Err(Errno::EINVAL),
    };
    let n = target.len().min(a[3] as usize);
    uaccess::copy_out(&mut p.mm, a[2], &target[..n])?;
    Ok(n)
}

/// `readlink(path, buf, size)`.
pub fn readlink(p: &mut Process, a: &[u64; 6]) -> SysResult {
    readlinkat(p, &[AT_FDCWD as u64, a[0], a[1], a[2], 0, 0])
}

/// `fchmodat(dirfd, path, mode)`.
pub fn fchmodat(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let abs = host_path(p, a[0], a[1], Errno::EPERM)?;
    host::path_op(pathop::CHMOD, &abs, a[2] & 0o7777, 0, 0)
}

/// `chmod(path, mode)`.
pub fn chmod(p: &mut Process, a: &[u64; 6]) -> SysResult {
    fchmodat(p, &[AT_FDCWD as u64, a[0], a[1], 0, 0, 0])
}

/// `fchmod(fd, mode)`.
pub fn fchmod(p: &mut Process, a: &[u64; 6]) -> SysResult {
    match p.files.get(a[0])?.host_fd() {
        Some(fd) => host::fd_op(fdop::FCHMOD, fd, a[1] & 0o7777, 0, 0, 0),
        None => Err(Errno::EPERM),
    }
}

/// `fchownat(dirfd, path, uid, gid, flags)`.
pub fn fchownat(p: &mut Process, a: &[u64; 6]) -> SysResult {
    if a[4] & AT_EMPTY_PATH != 0 {
        return fchown(p, &[a[0], a[2], a[3], 0, 0, 0]);
    }
    let abs = host_path(p, a[0], a[1], Errno::EPERM)?;
    let nofollow = u64::from(a[4] & AT_SYMLINK_NOFOLLOW != 0);
    host::path_op(
        pathop::CHOWN,
        &abs,
        a[2] & 0xffff_ffff,
        a[3] & 0xffff_ffff,
        nofollow,
    )
}

/// `chown(path, uid, gid)`.
pub fn chown(p: &mut Process, a: &[u64; 6]) -> SysResult {
    fchownat(p, &[AT_FDCWD as u64, a[0], a[1], a[2], 0, 0])
}

/// `lchown(path, uid, gid)`.
pub fn lchown(p: &mut Process, a: &[u64; 6]) -> SysResult {
    fchownat(
        p,
        &[AT_FDCWD as u64, a[0], a[1], a[2], AT_SYMLINK_NOFOLLOW, 0],
    )
}

/// `fchown(fd, uid, gid)`.
pub fn fchown(p: &mut Process, a: &[u64; 6]) -> SysResult {
    match p.files.get(a[0])?.host_fd() {
        Some(fd) => host::fd_op(
            fdop::FCHOWN,
            fd,
            a[1] & 0xffff_ffff,
            a[2] & 0xffff_ffff,
            0,
            0,
        ),
        None => Err(Errno::EPERM),
    }
}

/// `truncate(path, len)`.
pub fn truncate(p: &mut Process, a: &[u64; 6]) -> SysResult {
    if (a[1] as i64) < 0 {
        return Err(Errno::EINVAL);
    }
    let abs = host_path(p, AT_FDCWD as u64, a[0], Errno::EACCES)?;
    host::path_op(pathop::TRUNCATE, &abs, a[1], 0, 0)
}

/// `utimensat(dirfd, path, times, flags)`.
pub fn utimensat(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let times = if a[2] != 0 {
        let mut t = [0u64; 4];
        for (i, v) in t.iter_mut().enumerate() {
            *v = uaccess::read(&mut p.mm, a[2] + i as u64 * 8)?;
        }
        Some(t)
    } else {
        None
    };
    utimens(p, a[0], a[1], times, a[3])
}

/// Sets the times of (`dirfd`, user path `va`) to `times` (two
/// `timespec`s: access, modification; `None` for now), with
/// `utimensat`'s flags. A null path (or `AT_EMPTY_PATH`) names `dirfd`'s
/// file, as `futimens`.
pub(super) fn utimens(
    p: &mut Process,
    dirfd: u64,
    va: u64,
    times: Option<[u64; 4]>,
    flags: u64,
) -> SysResult {
    let abs = if va == 0 || flags & AT_EMPTY_PATH != 0 {
        // futimens: the open file's path.
        p.files.get(dirfd)?.path.clone()
    } else {
        host_path(p, dirfd, va, Errno::EPERM)?
    };
    let gpa = times
        .as_ref()
        .map_or(0, |t| crate::mm::kva_to_gpa(t.as_ptr() as u64));
    host::path_op(
        pathop::UTIMENS,
        &abs,
        gpa,
        u64::from(flags & AT_SYMLINK_NOFOLLOW != 0),
        0,
    )
}

/// `chdir(path)`.
pub fn chdir(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let abs = path::user_absolute(p, AT_FDCWD, a[0])?;
    set_cwd(p, abs)
}

fn set_cwd(p: &mut Process, abs: String) -> SysResult {
    let sx = statx_abs(p, &abs, false)?;
    if statx_mode(&sx) & S_IFMT != S_IFDIR {
        return Err(Errno::ENOTDIR);
    }
    p.fs.set_cwd(path::normalize(&abs));
    Ok(0)
}

/// `fchdir(fd)`.
pub fn fchdir(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let path = p.files.get(a[0])?.path.clone();
    if !path.starts_with('/') {
        return Err(Errno::ENOTDIR);
    }
    set_cwd(p, path)
}

/// `getcwd(buf, size)`.
pub fn getcwd(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let mut bytes = path::to_bytes(&p.fs.cwd()).into_owned();
    bytes.push(0);
    if (a[1] as usize) < bytes.len() {
        return Err(Errno::ERANGE);
    }
    uaccess::copy_out(&mut p.mm, a[0], &bytes)?;
    Ok(bytes.len())
}

/// `umask(mask)`.
pub fn umask(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let old = p.fs.set_umask(a[0] as u32 & 0o777);
    Ok(old as usize)
}
