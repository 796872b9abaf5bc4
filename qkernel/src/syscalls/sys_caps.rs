//! `capget`: the capability sets a process of the guest has, as Linux
//! reports them. A container's root has runc's default set (effective and
//! permitted), any other user none; nothing is inheritable. Go programs
//! (runtime-tools' runtimetest through gocapability) and libcap call it
//! first and give up when it fails.

use super::attrs::container_root;
use crate::errno::{Errno, SysResult};
use crate::mm::uaccess;
use crate::process::Process;
use crate::task;

/// `_LINUX_CAPABILITY_VERSION_1`: one 32-bit set of each kind.
const VERSION_1: u32 = 0x1998_0330;
/// `_LINUX_CAPABILITY_VERSION_2` (deprecated) and `_3`: two of each.
const VERSION_2: u32 = 0x2007_1026;
const VERSION_3: u32 = 0x2008_0522;

/// `capget(header, data)`: `header` is `{u32 version; i32 pid}`, `data`
/// one `{effective, permitted, inheritable}` triple of u32 per 32 bits.
/// An unknown version gets `_3` written back and EINVAL (0 when `data`
/// is NULL: how callers probe the version). Only the caller's own
/// process (pid 0 or its pid) can be asked.
pub fn capget(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let (header, data) = (a[0], a[1]);
    let version: u32 = uaccess::read(&mut p.mm, header)?;
    let pid: i32 = uaccess::read(&mut p.mm, header + 4)?;
    let words = match version {
        VERSION_1 => 1,
        VERSION_2 | VERSION_3 => 2,
        _ => {
            uaccess::write(&mut p.mm, header, &VERSION_3)?;
            return if data == 0 { Ok(0) } else { Err(Errno::EINVAL) };
        }
    };
    if pid < 0 {
        return Err(Errno::EINVAL);
    }
    if pid != 0 && pid as u32 != task::current_tgid() {
        return Err(Errno::ESRCH);
    }
    if data == 0 {
        return Ok(0);
    }
    let caps = if container_root(&p.ids) {
        super::DEFAULT_CAPS
    } else {
        0
    };
    for i in 0..words {
        let word = (caps >> (32 * i)) as u32;
        let mut triple = [0u8; 12];
        triple[..4].copy_from_slice(&word.to_le_bytes());
        triple[4..8].copy_from_slice(&word.to_le_bytes());
        uaccess::copy_out(&mut p.mm, data + 12 * i, &triple)?;
    }
    Ok(0)
}
