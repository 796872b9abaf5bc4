//! `prctl`: the name, parent-death signal, dumpable flag, no_new_privs,
//! seccomp mode, capability bounding set, child subreaper, keepcaps and
//! timer slack. Other options get `EINVAL`, as Linux answers an option
//! it does not know.

use super::attrs::ATTRS;
use crate::creds::{CAP_LAST_CAP, CAP_SETPCAP};
use crate::errno::{Errno, SysResult};
use crate::mm::uaccess;
use crate::process::Process;

const PR_SET_PDEATHSIG: u64 = 1;
const PR_GET_PDEATHSIG: u64 = 2;
const PR_GET_DUMPABLE: u64 = 3;
const PR_SET_DUMPABLE: u64 = 4;
const PR_GET_KEEPCAPS: u64 = 7;
const PR_SET_KEEPCAPS: u64 = 8;
const PR_SET_NAME: u64 = 15;
const PR_GET_NAME: u64 = 16;
const PR_GET_SECCOMP: u64 = 21;
const PR_CAPBSET_READ: u64 = 23;
const PR_CAPBSET_DROP: u64 = 24;
const PR_GET_SECUREBITS: u64 = 27;
const PR_CAP_AMBIENT: u64 = 47;
const PR_GET_TIMERSLACK: u64 = 30;
const PR_SET_TIMERSLACK: u64 = 29;
const PR_SET_CHILD_SUBREAPER: u64 = 36;
const PR_GET_CHILD_SUBREAPER: u64 = 37;
const PR_SET_NO_NEW_PRIVS: u64 = 38;
const PR_GET_NO_NEW_PRIVS: u64 = 39;

/// `prctl(option, arg2, arg3, arg4, arg5)`.
pub fn prctl(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let unused = |from: usize| a[from..5].iter().all(|&v| v == 0);
    match a[0] & 0xffff_ffff {
        PR_SET_PDEATHSIG => {
            if a[1] > 64 {
                return Err(Errno::EINVAL);
            }
            ATTRS.lock().pdeathsig = a[1] as u32;
        }
        PR_GET_PDEATHSIG => {
            let sig = ATTRS.lock().pdeathsig as i32;
            uaccess::write(&mut p.mm, a[1], &sig)?;
        }
        PR_GET_DUMPABLE => return Ok(ATTRS.lock().dumpable as usize),
        PR_SET_DUMPABLE => {
            if a[1] > 1 {
                return Err(Errno::EINVAL);
            }
            ATTRS.lock().dumpable = a[1] as u32;
        }
        PR_GET_KEEPCAPS => return Ok(usize::from(ATTRS.lock().keepcaps)),
        PR_SET_KEEPCAPS => {
            if a[1] > 1 {
                return Err(Errno::EINVAL);
            }
            ATTRS.lock().keepcaps = a[1] == 1;
        }
        PR_SET_NAME => {
            // Linux copies up to 16 bytes and ends the name at 15.
            let mut n = [0u8; 16];
            for (i, slot) in n.iter_mut().enumerate().take(15) {
                let mut b = [0u8; 1];
                uaccess::copy_in(&mut p.mm, a[1] + i as u64, &mut b)?;
                if b[0] == 0 {
                    break;
                }
                *slot = b[0];
            }
            // Per thread (`Process::name` is the running thread's); the
            // leader's is the process's `comm` too.
            crate::process::thread().name = Some(n);
            if crate::task::current_pid() == crate::task::current_tgid() {
                p.comm = n;
            }
        }
        PR_GET_NAME => {
            let n = crate::process::thread().name.unwrap_or(p.comm);
            uaccess::copy_out(&mut p.mm, a[1], &n)?;
        }
        PR_GET_SECCOMP => return Ok(if crate::seccomp::active() { 2 } else { 0 }),
        PR_CAPBSET_READ => {
            if a[1] > CAP_LAST_CAP {
                return Err(Errno::EINVAL);
            }
            return Ok((p.caps.bounding >> a[1] & 1) as usize);
        }
        PR_CAPBSET_DROP => {
            if a[1] > CAP_LAST_CAP {
                return Err(Errno::EINVAL);
            }
            if !p.caps.has(CAP_SETPCAP) {
                return Err(Errno::EPERM);
            }
            p.caps.bounding &= !(1 << a[1]);
        }
        PR_GET_SECUREBITS => return Ok(0),
        PR_CAP_AMBIENT => return ambient(p, a),
        PR_SET_TIMERSLACK => {
            ATTRS.lock().timerslack = if a[1] == 0 { 50_000 } else { a[1] };
        }
        PR_GET_TIMERSLACK => return Ok(ATTRS.lock().timerslack as usize),
        PR_SET_CHILD_SUBREAPER => ATTRS.lock().subreaper = a[1] != 0,
        PR_GET_CHILD_SUBREAPER => {
            let v = i32::from(ATTRS.lock().subreaper);
            uaccess::write(&mut p.mm, a[1], &v)?;
        }
        PR_SET_NO_NEW_PRIVS => {
            if a[1] != 1 || !unused(2) {
                return Err(Errno::EINVAL);
            }
            ATTRS.lock().no_new_privs = true;
        }
        PR_GET_NO_NEW_PRIVS => {
            if !unused(1) {
                return Err(Errno::EINVAL);
            }
            return Ok(usize::from(super::attrs::no_new_privs()));
        }
        _ => return Err(Errno::EINVAL),
    }
    Ok(0)
}

const PR_CAP_AMBIENT_IS_SET: u64 = 1;
const PR_CAP_AMBIENT_RAISE: u64 = 2;
const PR_CAP_AMBIENT_LOWER: u64 = 3;
const PR_CAP_AMBIENT_CLEAR_ALL: u64 = 4;

/// `prctl(PR_CAP_AMBIENT, op, cap, 0, 0)`: a capability can be raised
/// only while it is both permitted and inheritable.
fn ambient(p: &mut Process, a: &[u64; 6]) -> SysResult {
    if a[3] != 0 || a[4] != 0 {
        return Err(Errno::EINVAL);
    }
    if a[1] == PR_CAP_AMBIENT_CLEAR_ALL {
        if a[2] != 0 {
            return Err(Errno::EINVAL);
        }
        p.caps.ambient = 0;
        return Ok(0);
    }
    if a[2] > CAP_LAST_CAP {
        return Err(Errno::EINVAL);
    }
    let bit = 1u64 << a[2];
    match a[1] {
        PR_CAP_AMBIENT_IS_SET => Ok(usize::from(p.caps.ambient & bit != 0)),
        PR_CAP_AMBIENT_RAISE => {
            if p.caps.permitted & p.caps.inheritable & bit == 0 {
                return Err(Errno::EPERM);
            }
            p.caps.ambient |= bit;
            Ok(0)
        }
        PR_CAP_AMBIENT_LOWER => {
            p.caps.ambient &= !bit;
            Ok(0)
        }
        _ => Err(Errno::EINVAL),
    }
}
