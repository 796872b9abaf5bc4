//! `mount`, for bind mounts only, and `umount2`: with `CAP_SYS_ADMIN` the
//! VMM binds one path of the rootfs onto another in the sandbox's mount
//! namespace (both resolved inside the rootfs), where the guest's file
//! accesses see it at once. How the mount propagates is the container's
//! mount's: under a volume the host shares with the container (runc's
//! `rshared`) the host sees it too, elsewhere only the sandbox. Other
//! file systems (the guest kernel has its own /proc, /sys and /dev, and
//! no block devices) are `ENODEV`; remounts and propagation changes are
//! `EINVAL`.

use alloc::string::String;

use qlib::io_abi::path as pathop;

use crate::errno::{Errno, SysResult};
use crate::fs::host;
use crate::fs::path::{self, AT_FDCWD};
use crate::fs::special::{self, Node};
use crate::process::Process;

const MS_REMOUNT: u64 = 0x20;
const MS_BIND: u64 = 0x1000;
const MS_REC: u64 = 0x4000;
/// `MS_UNBINDABLE | MS_PRIVATE | MS_SLAVE | MS_SHARED`.
const MS_PROPAGATION: u64 = 0x2_0000 | 0x4_0000 | 0x8_0000 | 0x10_0000;
/// Linux's "magic" in the top 16 bits of old callers' flags.
const MS_MGC_MSK: u64 = 0xffff_0000;
const MS_MGC_VAL: u64 = 0xc0ed_0000;

/// A path of the rootfs (not one of the kernel's own trees).
fn rootfs_path(p: &mut Process, va: u64) -> Result<String, Errno> {
    let abs = path::user_absolute(p, AT_FDCWD, va)?;
    match special::lookup(&path::normalize(&abs)) {
        Node::Host => Ok(abs),
        Node::Missing => Err(Errno::ENOENT),
        _ => Err(Errno::EINVAL),
    }
}

/// `mount(source, target, fstype, flags, data)`.
pub fn mount(p: &mut Process, a: &[u64; 6]) -> SysResult {
    // Linux's order: the target is looked up, then the capability is
    // checked, then the source.
    let target = rootfs_path(p, a[1])?;
    super::sys_stat::statx_abs(p, &target, false)?;
    if !p.caps.has(crate::creds::CAP_SYS_ADMIN) {
        return Err(Errno::EPERM);
    }
    let mut flags = a[3];
    if flags & MS_MGC_MSK == MS_MGC_VAL {
        flags &= !MS_MGC_MSK;
    }
    if flags & (MS_REMOUNT | MS_PROPAGATION) != 0 {
        log::warn!("mount: remounts and propagation changes are not supported: EINVAL");
        return Err(Errno::EINVAL);
    }
    if flags & MS_BIND == 0 {
        return Err(Errno::ENODEV);
    }
    let source = rootfs_path(p, a[0])?;
    host::path_op2(pathop::BIND, &source, &target, flags & MS_REC)
}

/// `MNT_FORCE | MNT_DETACH | MNT_EXPIRE`.
const UMOUNT_FLAGS: u64 = 0x7;
const UMOUNT_NOFOLLOW: u64 = 0x8;

/// `umount2(target, flags)`: the VMM unmounts the mount on `target` in
/// the sandbox's mount namespace (a program that bound a directory must
/// be able to undo it before it removes the directory: runtime-tools'
/// `runtimetest` binds `/` and then removes the mount point). The last
/// component is never followed on the host, so a symlink there is
/// `EINVAL` ("not a mount point") rather than followed.
pub fn umount2(p: &mut Process, a: &[u64; 6]) -> SysResult {
    if a[1] & !(UMOUNT_FLAGS | UMOUNT_NOFOLLOW) != 0 {
        return Err(Errno::EINVAL);
    }
    let target = rootfs_path(p, a[0])?;
    super::sys_stat::statx_abs(p, &target, a[1] & UMOUNT_NOFOLLOW != 0)?;
    if !p.caps.has(crate::creds::CAP_SYS_ADMIN) {
        return Err(Errno::EPERM);
    }
    host::path_op(pathop::UNMOUNT, &target, a[1] & UMOUNT_FLAGS, 0, 0)
}
