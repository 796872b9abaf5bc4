//! Smaller calls of the Linux surface: `mknod`/`mknodat` (FIFOs and
//! regular files; devices need a capability a container lacks),
//! `fallocate`, `memfd_create` (a host memory file), `msync`,
//! `sethostname`/`setdomainname` and `chroot` (a container's root has
//! neither `CAP_SYS_ADMIN` nor a root to change to here),
//! `sched_setaffinity`, and the pipe-size `fcntl`s.

use alloc::format;

use qlib::io_abi::{fd as fdop, new, path as pathop};

use crate::errno::{Errno, SysResult};
use crate::fs::path::{self, AT_FDCWD};
use crate::fs::special::{self, Node};
use crate::fs::stat::{S_IFDIR, S_IFMT};
use crate::fs::{Backing, File, HostKind, O_RDWR, host};
use crate::mm::uaccess;
use crate::process::Process;

const S_IFIFO: u32 = 0o010000;
const S_IFCHR: u32 = 0o020000;
const S_IFBLK: u32 = 0o060000;
const S_IFREG: u32 = 0o100000;
const S_IFSOCK: u32 = 0o140000;

/// `mknodat(dirfd, path, mode, dev)`.
pub fn mknodat(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let mode = a[2] as u32;
    let abs = path::user_absolute(p, a[0] as i64, a[1])?;
    match special::lookup(&path::normalize(&abs)) {
        Node::Host => {}
        Node::Missing => return Err(Errno::EACCES),
        _ => return Err(Errno::EEXIST),
    }
    let perm = mode & 0o7777 & !p.fs.umask();
    match mode & S_IFMT {
        S_IFIFO => host::path_op(pathop::MKFIFO, &abs, u64::from(perm), 0, 0),
        0 | S_IFREG => {
            // O_WRONLY | O_CREAT | O_EXCL, closed at once.
            let fd = host::open(&abs, 0o301, perm)?;
            host::close(fd);
            Ok(0)
        }
        // Devices need CAP_MKNOD and a rootfs that allows them (the
        // sandbox's is nodev); sockets are made by bind.
        S_IFCHR | S_IFBLK | S_IFSOCK => Err(Errno::EPERM),
        _ => Err(Errno::EINVAL),
    }
}

/// `mknod(path, mode, dev)`.
pub fn mknod(p: &mut Process, a: &[u64; 6]) -> SysResult {
    mknodat(p, &[AT_FDCWD as u64, a[0], a[1], a[2], 0, 0])
}

/// `fallocate(fd, mode, offset, len)`.
pub fn fallocate(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let f = p.files.get(a[0])?;
    if (a[2] as i64) < 0 || (a[3] as i64) <= 0 {
        return Err(Errno::EINVAL);
    }
    if !f.writable() {
        return Err(Errno::EBADF);
    }
    match f.backing {
        Backing::Host {
            fd,
            kind: HostKind::File,
        } => {
            let object = crate::mm::sharedfile::before_io(&f);
            let r = host::fd_op(fdop::FALLOCATE, fd, a[1] & 0xffff_ffff, a[2], a[3], 0);
            crate::mm::sharedfile::after_write(object);
            r
        }
        Backing::Host {
            kind: HostKind::Pipe,
            ..
        }
        | Backing::Pipe(_) => Err(Errno::ESPIPE),
        _ => Err(Errno::ENODEV),
    }
}

const MFD_CLOEXEC: u64 = 1;
const MFD_ALLOW_SEALING: u64 = 2;
const MFD_NOEXEC_SEAL: u64 = 8;
const MFD_EXEC: u64 = 0x10;
/// Longest `memfd_create` name (Linux: 249 bytes plus the NUL).
const MFD_NAME_MAX: usize = 249;

/// `memfd_create(name, flags)`: a host memory file, read, written,
/// truncated and mapped like a regular file (shared writable mappings
/// are refused as for every file); `/proc/self/fd` names it
/// `/memfd:NAME (deleted)` as Linux does.
pub fn memfd_create(p: &mut Process, a: &[u64; 6]) -> SysResult {
    if a[1] & !(MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_NOEXEC_SEAL | MFD_EXEC) != 0 {
        return Err(Errno::EINVAL);
    }
    let name = path::read_user_path(p, a[0]).map_err(|e| match e {
        Errno::ENAMETOOLONG => Errno::EINVAL,
        e => e,
    })?;
    if name.len() > MFD_NAME_MAX {
        return Err(Errno::EINVAL);
    }
    let fd = host::new_fd(new::MEMFD, 0, 0, 0)?;
    let backing = Backing::Host {
        fd,
        kind: HostKind::File,
    };
    let file = File::new(backing, O_RDWR, format!("/memfd:{name} (deleted)"));
    p.files.insert(file, a[1] & MFD_CLOEXEC != 0)
}

const MS_ASYNC: u64 = 1;
const MS_INVALIDATE: u64 = 2;
const MS_SYNC: u64 = 4;

/// `msync(addr, len, flags)`: shared file mappings in the range are
/// written back to their files (`mm::sharedfile`); the arguments are
/// checked as Linux checks them.
pub fn msync(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let (addr, flags) = (a[0], a[2]);
    if addr & 0xfff != 0
        || flags & !(MS_ASYNC | MS_INVALIDATE | MS_SYNC) != 0
        || flags & (MS_ASYNC | MS_SYNC) == (MS_ASYNC | MS_SYNC)
    {
        return Err(Errno::EINVAL);
    }
    let len = a[1].checked_add(0xfff).ok_or(Errno::ENOMEM)? & !0xfff;
    let end = addr.checked_add(len).ok_or(Errno::ENOMEM)?;
    if len != 0 && !p.mm.vmas.covers(addr, end) {
        return Err(Errno::ENOMEM);
    }
    // Shared file mappings in the range are written back (synchronously,
    // whatever the flags: the host's page cache has them then).
    let mut ids: alloc::vec::Vec<u32> = alloc::vec::Vec::new();
    for v in p.mm.vmas.iter_range(addr, end) {
        if let crate::mm::vma::VmaKind::SharedFile { id, .. } = v.kind
            && !ids.contains(&id)
        {
            ids.push(id);
        }
    }
    ids.into_iter().for_each(crate::mm::sharedfile::flush);
    Ok(0)
}

/// `sethostname(name, len)`: in the sandbox's own UTS namespace
/// (`crate::uts`), with `CAP_SYS_ADMIN` (runc's default set lacks it:
/// `EPERM` first, as Linux checks), a name of at most 64 bytes (`EINVAL`).
pub fn sethostname(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let name = uts_name(p, a)?;
    crate::uts::set_hostname(&name);
    Ok(0)
}

/// `setdomainname(name, len)`: as [`sethostname`].
pub fn setdomainname(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let name = uts_name(p, a)?;
    crate::uts::set_domainname(&name);
    Ok(0)
}

/// The name a `sethostname`/`setdomainname` caller may set.
fn uts_name(p: &mut Process, a: &[u64; 6]) -> Result<alloc::vec::Vec<u8>, Errno> {
    if !p.caps.has(crate::creds::CAP_SYS_ADMIN) {
        return Err(Errno::EPERM);
    }
    let len = a[1] as usize;
    if len > crate::uts::MAX_LEN {
        return Err(Errno::EINVAL);
    }
    let mut name = alloc::vec![0u8; len];
    uaccess::copy_in(&mut p.mm, a[0], &mut name)?;
    Ok(name)
}

/// `chroot(path)`: the directory is looked up as Linux does; without
/// `CAP_SYS_CHROOT` (not root) the answer is `EPERM`. Root may "change"
/// to the root it already has; any other root is refused with `EPERM`
/// (paths are resolved by the VMM inside the one rootfs, which has no
/// per-process root).
pub fn chroot(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let abs = path::user_absolute(p, AT_FDCWD, a[0])?;
    let sx = super::sys_stat::statx_abs(p, &abs, false)?;
    if crate::fs::stat::statx_mode(&sx) & S_IFMT != S_IFDIR {
        return Err(Errno::ENOTDIR);
    }
    if !p.caps.has(crate::creds::CAP_SYS_CHROOT) {
        return Err(Errno::EPERM);
    }
    let root = super::sys_stat::statx_abs(p, "/", false)?;
    // Same device (offsets 136..144) and inode (32..40) as "/".
    fn id(s: &[u8; 256]) -> (&[u8], &[u8]) {
        (&s[32..40], &s[136..144])
    }
    if id(&sx) == id(&root) {
        return Ok(0);
    }
    log::warn!("chroot to another directory than / is not supported: EPERM");
    Err(Errno::EPERM)
}

/// `F_SETPIPE_SZ`.
pub const F_SETPIPE_SZ: u64 = 1031;
/// `F_GETPIPE_SZ`.
pub const F_GETPIPE_SZ: u64 = 1032;

/// `fcntl(fd, F_GETPIPE_SZ | F_SETPIPE_SZ, size)` on the host pipe
/// behind `f` (`EBADF` for anything else, as Linux).
pub fn pipe_size(f: &File, cmd: u64, size: u64) -> SysResult {
    let Backing::Host {
        fd,
        kind: HostKind::Pipe,
    } = f.backing
    else {
        return Err(Errno::EBADF);
    };
    if cmd == F_GETPIPE_SZ {
        return host::fd_op(fdop::PIPE_SZ, fd, 0, 0, 0, 0);
    }
    let size = size & 0xffff_ffff;
    if size > crate::fs::procfs::PIPE_MAX_SIZE {
        return Err(Errno::EPERM);
    }
    host::fd_op(fdop::PIPE_SZ, fd, size.max(1), 0, 0, 0)
}
