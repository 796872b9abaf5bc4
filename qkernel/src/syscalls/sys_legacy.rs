//! The older forms of calls the kernel has in their modern shape, as old
//! static programs still make them (the busybox of runtime-tools' test
//! rootfs lists directories with `getdents` and touches files with
//! `utimes`): `getdents`, `utime`, `utimes` and `futimesat`.

use super::sys_file::getdents64;
use super::sys_path::utimens;
use crate::errno::{Errno, SysResult};
use crate::fs::path::AT_FDCWD;
use crate::mm::uaccess;
use crate::process::Process;

/// `getdents(fd, dirp, count)`: `struct linux_dirent` records (name
/// first, the type in the record's last byte). A record is exactly as
/// long as its `getdents64` form (8 + 8 + 2 + name + NUL + type, rounded
/// to 8), so the same entries fit and each is rewritten in place.
pub fn getdents(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let n = getdents64(p, a)?;
    let mut buf = alloc::vec![0u8; n];
    uaccess::copy_in(&mut p.mm, a[1], &mut buf)?;
    convert_dirents(&mut buf).ok_or(Errno::EIO)?;
    uaccess::copy_out(&mut p.mm, a[1], &buf)?;
    Ok(n)
}

/// Rewrites `linux_dirent64` records as `linux_dirent` ones in place;
/// `None` on a malformed record.
fn convert_dirents(buf: &mut [u8]) -> Option<()> {
    let mut at = 0;
    while at < buf.len() {
        let rec = buf.get_mut(at..)?;
        let reclen = usize::from(u16::from_le_bytes([*rec.get(16)?, *rec.get(17)?]));
        let rec = rec.get_mut(..reclen)?;
        let ty = *rec.get(18)?;
        let name_len = rec.get(19..)?.iter().position(|&b| b == 0)?;
        if 18 + name_len + 2 > reclen {
            return None;
        }
        rec.copy_within(19..19 + name_len, 18);
        rec[18 + name_len..].fill(0);
        rec[reclen - 1] = ty;
        at += reclen;
    }
    Some(())
}

/// Two `timeval`s (access, modification) at `va` as `timespec`s, or
/// `None` (now) for a null pointer.
fn timevals(p: &mut Process, va: u64) -> Result<Option<[u64; 4]>, Errno> {
    if va == 0 {
        return Ok(None);
    }
    let mut t = [0u64; 4];
    for i in 0..2 {
        let sec: u64 = uaccess::read(&mut p.mm, va + i * 16)?;
        let usec = uaccess::read::<u64>(&mut p.mm, va + i * 16 + 8)? as i64;
        if !(0..1_000_000).contains(&usec) {
            return Err(Errno::EINVAL);
        }
        t[i as usize * 2] = sec;
        t[i as usize * 2 + 1] = usec as u64 * 1000;
    }
    Ok(Some(t))
}

/// `utimes(path, times)`.
pub fn utimes(p: &mut Process, a: &[u64; 6]) -> SysResult {
    if a[0] == 0 {
        return Err(Errno::EFAULT);
    }
    let t = timevals(p, a[1])?;
    utimens(p, AT_FDCWD as u64, a[0], t, 0)
}

/// `futimesat(dirfd, path, times)`.
pub fn futimesat(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let t = timevals(p, a[2])?;
    utimens(p, a[0], a[1], t, 0)
}

/// `utime(path, times)`: a `struct utimbuf` (two `time_t` seconds).
pub fn utime(p: &mut Process, a: &[u64; 6]) -> SysResult {
    if a[0] == 0 {
        return Err(Errno::EFAULT);
    }
    let t = if a[1] == 0 {
        None
    } else {
        let atime: u64 = uaccess::read(&mut p.mm, a[1])?;
        let mtime: u64 = uaccess::read(&mut p.mm, a[1] + 8)?;
        Some([atime, 0, mtime, 0])
    };
    utimens(p, AT_FDCWD as u64, a[0], t, 0)
}
