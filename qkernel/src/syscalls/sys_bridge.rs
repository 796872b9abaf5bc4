//! The bridge ioctls of sockets, `SIOCBRADDBR` and `SIOCBRDELBR` (`brctl
//! addbr`/`delbr`, `ip link add type bridge`'s ioctl fallback): refused
//! with `EPERM` without `CAP_NET_ADMIN`, as Linux checks it before it
//! reads the name; with it, the VMM makes or removes the bridge in the
//! sandbox's network namespace (it holds `CAP_NET_ADMIN` only when the
//! config grants it to the container, so the host says `EPERM` otherwise
//! too).

use qlib::io_abi::fd as fdop;

use crate::errno::{Errno, SysResult};
use crate::fs::host;
use crate::mm::uaccess;
use crate::process::Process;

const SIOCBRADDBR: u64 = 0x89a0;
const SIOCBRDELBR: u64 = 0x89a1;
/// Linux's `IFNAMSIZ`.
const IFNAMSIZ: usize = 16;

/// Whether `req` is one of the ioctls served here.
pub fn is_bridge(req: u64) -> bool {
    matches!(req, SIOCBRADDBR | SIOCBRDELBR)
}

/// `ioctl(fd, req, name)` on host socket `fd`.
pub fn ioctl(p: &mut Process, fd: i32, req: u64, name_va: u64) -> SysResult {
    if !p.caps.has(crate::creds::CAP_NET_ADMIN) {
        return Err(Errno::EPERM);
    }
    // As Linux: IFNAMSIZ bytes are copied, the last one forced to NUL.
    let mut name = [0u8; IFNAMSIZ];
    uaccess::copy_in(&mut p.mm, name_va, &mut name)?;
    name[IFNAMSIZ - 1] = 0;
    let del = u64::from(req == SIOCBRDELBR);
    host::fd_op_buf(fdop::BRIDGE, fd, del, 0, &mut name)
}
