//! `capget` and `capset`: the capability sets of a process of the guest
//! (`Process::caps`, from the config's `process.capabilities` for an OCI
//! process, runc's default set for root under `qrun do`). Go programs
//! (runtime-tools' runtimetest through gocapability) and libcap call
//! `capget` first and give up when it fails.

use crate::creds::{CAP_SETPCAP, Caps};
use crate::errno::{Errno, SysResult};
use crate::mm::uaccess;
use crate::process::Process;
use crate::task;

/// `_LINUX_CAPABILITY_VERSION_1`: one 32-bit set of each kind.
const VERSION_1: u32 = 0x1998_0330;
/// `_LINUX_CAPABILITY_VERSION_2` (deprecated) and `_3`: two of each.
const VERSION_2: u32 = 0x2007_1026;
const VERSION_3: u32 = 0x2008_0522;

/// Reads a `capget`/`capset` header: the number of 32-bit words of each
/// set, or the error (an unknown version gets `_3` written back and
/// EINVAL, 0 when `data` is NULL: how callers probe the version). Only
/// the caller's own process (pid 0 or its pid) can be named.
fn header(p: &mut Process, header: u64, data: u64) -> Result<Option<usize>, Errno> {
    let version: u32 = uaccess::read(&mut p.mm, header)?;
    let pid: i32 = uaccess::read(&mut p.mm, header + 4)?;
    let words = match version {
        VERSION_1 => 1,
        VERSION_2 | VERSION_3 => 2,
        _ => {
            uaccess::write(&mut p.mm, header, &VERSION_3)?;
            return if data == 0 {
                Ok(None)
            } else {
                Err(Errno::EINVAL)
            };
        }
    };
    if pid < 0 {
        return Err(Errno::EINVAL);
    }
    if pid != 0 && pid as u32 != task::current_tgid() {
        return Err(Errno::ESRCH);
    }
    Ok(Some(words))
}

/// `capget(header, data)`: `header` is `{u32 version; i32 pid}`, `data`
/// one `{effective, permitted, inheritable}` triple of u32 per 32 bits.
pub fn capget(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let (hdr, data) = (a[0], a[1]);
    let Some(words) = header(p, hdr, data)? else {
        return Ok(0);
    };
    if data == 0 {
        return Ok(0);
    }
    let c = p.caps;
    for i in 0..words {
        let word = |set: u64| ((set >> (32 * i)) as u32).to_le_bytes();
        let mut triple = [0u8; 12];
        triple[..4].copy_from_slice(&word(c.effective));
        triple[4..8].copy_from_slice(&word(c.permitted));
        triple[8..].copy_from_slice(&word(c.inheritable));
        uaccess::copy_out(&mut p.mm, data + 12 * i as u64, &triple)?;
    }
    Ok(0)
}

/// `capset(header, data)`: sets the caller's effective, permitted and
/// inheritable sets under Linux's rules: permitted may only shrink,
/// effective must be within the new permitted set, inheritable within
/// the old inheritable and permitted sets (the bounding set instead of
/// permitted with `CAP_SETPCAP`) and the bounding set. The ambient set
/// loses what is no longer both permitted and inheritable.
pub fn capset(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let (hdr, data) = (a[0], a[1]);
    let Some(words) = header(p, hdr, data)? else {
        return Err(Errno::EINVAL);
    };
    let (mut eff, mut prm, mut inh) = (0u64, 0u64, 0u64);
    for i in 0..words {
        let mut triple = [0u8; 12];
        uaccess::copy_in(&mut p.mm, data + 12 * i as u64, &mut triple)?;
        let word = |o: usize| {
            u64::from(u32::from_le_bytes([
                triple[o],
                triple[o + 1],
                triple[o + 2],
                triple[o + 3],
            ])) << (32 * i)
        };
        eff |= word(0);
        prm |= word(4);
        inh |= word(8);
    }
    let old = p.caps;
    let inh_room = old.inheritable
        | if old.has(CAP_SETPCAP) {
            old.bounding
        } else {
            old.permitted
        };
    if prm & !old.permitted != 0
        || eff & !prm != 0
        || inh & !inh_room != 0
        || inh & !(old.inheritable | old.bounding) != 0
    {
        return Err(Errno::EPERM);
    }
    p.caps = Caps {
        effective: eff,
        permitted: prm,
        inheritable: inh,
        ambient: old.ambient & prm & inh,
        ..old
    };
    Ok(0)
}
