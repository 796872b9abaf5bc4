//! Extended attributes and file advice: what dynamically linked tools
//! (coreutils `ls` asking for ACLs, `cat` advising sequential reads) ask
//! of the files before using them.
//!
//! Extended attributes are not passed through to the host: every file
//! system looks like one without xattr support (`EOPNOTSUPP`), which
//! programs take as "no ACLs, no security labels".

use crate::errno::{Errno, SysResult};
use crate::process::Process;

/// `getxattr`, `lgetxattr`, `listxattr`, `llistxattr` (by path):
/// `EOPNOTSUPP`.
pub fn path_xattr(_p: &mut Process, _a: &[u64; 6]) -> SysResult {
    Err(Errno::EOPNOTSUPP)
}

/// `fgetxattr`, `flistxattr` (by fd): `EBADF` for a bad fd, else
/// `EOPNOTSUPP`.
pub fn fd_xattr(p: &mut Process, a: &[u64; 6]) -> SysResult {
    p.files.get(a[0])?;
    Err(Errno::EOPNOTSUPP)
}

/// Largest `POSIX_FADV_*` value (`POSIX_FADV_NOREUSE`).
const FADV_MAX: u64 = 5;

/// `fadvise64(fd, offset, len, advice)`: advice only, accepted for any
/// open fd.
pub fn fadvise64(p: &mut Process, a: &[u64; 6]) -> SysResult {
    p.files.get(a[0])?;
    if a[3] > FADV_MAX || (a[2] as i64) < 0 {
        return Err(Errno::EINVAL);
    }
    Ok(0)
}
