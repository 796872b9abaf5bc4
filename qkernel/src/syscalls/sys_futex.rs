//! `futex`: WAIT, WAKE, WAIT_BITSET, WAKE_BITSET, REQUEUE, CMP_REQUEUE and
//! WAKE_OP over the wait queues of `task::futex`. The PI operations
//! return `ENOSYS` (logged once per call site by the table's note).

use crate::errno::{Errno, SysResult};
use crate::mm::uaccess;
use crate::mm::vma::VmaKind;
use crate::process::Process;
use crate::task::futex::{self, Key};
use crate::task::{self, Action};

const FUTEX_WAIT: u64 = 0;
const FUTEX_WAKE: u64 = 1;
const FUTEX_REQUEUE: u64 = 3;
const FUTEX_CMP_REQUEUE: u64 = 4;
const FUTEX_WAKE_OP: u64 = 5;
const FUTEX_LOCK_PI: u64 = 6;
const FUTEX_UNLOCK_PI: u64 = 7;
const FUTEX_TRYLOCK_PI: u64 = 8;
const FUTEX_WAIT_BITSET: u64 = 9;
const FUTEX_WAKE_BITSET: u64 = 10;
const FUTEX_WAIT_REQUEUE_PI: u64 = 11;
const FUTEX_CMP_REQUEUE_PI: u64 = 12;
const FUTEX_LOCK_PI2: u64 = 13;
const FUTEX_PRIVATE_FLAG: u64 = 128;
const FUTEX_CLOCK_REALTIME: u64 = 256;
const FUTEX_CMD_MASK: u64 = !(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME);

/// The first half of a key for a word of a shared file mapping: above
/// every address space id (a PGD's physical address).
const SHARED_FILE_SPACE: u64 = 1 << 63;
/// Keys of `MAP_SHARED | MAP_ANONYMOUS` regions (apart from the others).
const SHARED_ANON_SPACE: u64 = 1 << 62;

/// The wait queue key of `uaddr`: shared and private futexes on one
/// word are apart, as on Linux (bit 0, free in an aligned address, marks
/// a shared one). A shared futex in a `MAP_SHARED` file mapping (POSIX
/// semaphores and shm in /dev/shm) is keyed by the file's object and
/// offset, so processes that map it at different addresses, or are not
/// related at all, meet on it (Linux's inode-based key).
pub fn key(p: &Process, uaddr: u64, op: u64) -> Result<Key, Errno> {
    if !uaddr.is_multiple_of(4) {
        return Err(Errno::EINVAL);
    }
    let shared = op & FUTEX_PRIVATE_FLAG == 0;
    if shared && let Some(v) = p.mm.vmas.find(uaddr) {
        match v.kind {
            VmaKind::SharedFile { id, delta } => {
                return Ok((
                    SHARED_FILE_SPACE | u64::from(id),
                    uaddr.wrapping_add(delta) | 1,
                ));
            }
            VmaKind::SharedAnon { id, delta } => {
                return Ok((
                    SHARED_ANON_SPACE | u64::from(id),
                    uaddr.wrapping_add(delta) | 1,
                ));
            }
            _ => {}
        }
    }
    Ok((p.mm.pt.kernel_cr3(), uaddr | u64::from(shared)))
}

/// `futex(uaddr, op, val, timeout | val2, uaddr2, val3)`.
pub fn futex(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let op = a[1];
    let cmd = op & FUTEX_CMD_MASK;
    if op & FUTEX_CLOCK_REALTIME != 0 && !matches!(cmd, FUTEX_WAIT_BITSET | FUTEX_LOCK_PI2) {
        return Err(Errno::ENOSYS);
    }
    let val = a[2] as u32;
    let val2 = a[3] as u32;
    let val3 = a[5] as u32;
    match cmd {
        FUTEX_WAIT => wait(p, a[0], op, val, a[3], false, false, u32::MAX),
        FUTEX_WAIT_BITSET => {
            let realtime = op & FUTEX_CLOCK_REALTIME != 0;
            wait(p, a[0], op, val, a[3], true, realtime, val3)
        }
        FUTEX_WAKE => Ok(futex::wake(key(p, a[0], op)?, val.max(1), u32::MAX)),
        FUTEX_WAKE_BITSET => {
            if val3 == 0 {
                return Err(Errno::EINVAL);
            }
            Ok(futex::wake(key(p, a[0], op)?, val.max(1), val3))
        }
        FUTEX_REQUEUE | FUTEX_CMP_REQUEUE => {
            let (from, to) = (key(p, a[0], op)?, key(p, a[4], op)?);
            if (val as i32) < 0 || (val2 as i32) < 0 {
                return Err(Errno::EINVAL);
            }
            if cmd == FUTEX_CMP_REQUEUE {
                let cur: u32 = uaccess::read(&mut p.mm, a[0])?;
                if cur != val3 {
                    return Err(Errno::EAGAIN);
                }
            }
            Ok(futex::requeue(from, to, val, val2))
        }
        FUTEX_WAKE_OP => wake_op(p, op, a[0], val, a[4], val2, val3),
        FUTEX_LOCK_PI
        | FUTEX_UNLOCK_PI
        | FUTEX_TRYLOCK_PI
        | FUTEX_WAIT_REQUEUE_PI
        | FUTEX_CMP_REQUEUE_PI
        | FUTEX_LOCK_PI2 => {
            log::warn!("futex: priority-inheritance op {cmd} is not supported (ENOSYS)");
            Err(Errno::ENOSYS)
        }
        _ => Err(Errno::ENOSYS),
    }
}

/// WAIT and WAIT_BITSET: `EAGAIN` unless `*uaddr == val`, then sleep
/// (`task::futex::sleep`) until a wake, the timeout or a signal. WAIT's
/// timeout is relative; WAIT_BITSET's is absolute on `CLOCK_MONOTONIC`,
/// or `CLOCK_REALTIME` with the flag.
#[allow(clippy::too_many_arguments)]
fn wait(
    p: &mut Process,
    uaddr: u64,
    op: u64,
    val: u32,
    timeout: u64,
    absolute: bool,
    realtime: bool,
    bitset: u32,
) -> SysResult {
    if bitset == 0 {
        return Err(Errno::EINVAL);
    }
    let k = key(p, uaddr, op)?;
    let deadline = if timeout == 0 {
        u64::MAX
    } else {
        let ns = super::sys_time::get_timespec(p, timeout)?;
        let now = crate::time::monotonic_ns();
        if !absolute {
            now.saturating_add(ns)
        } else if realtime {
            now.saturating_add(ns.saturating_sub(crate::time::realtime_ns()))
        } else {
            ns
        }
    };
    let cur: u32 = uaccess::read(&mut p.mm, uaddr)?;
    if cur != val {
        return Err(Errno::EAGAIN);
    }
    futex::enqueue(k, bitset, deadline);
    task::request(Action::Futex(deadline));
    Ok(0)
}

/// Decodes WAKE_OP's `val3`: (op, oparg, cmp, cmparg).
fn decode_op(v: u32) -> (u32, u32, u32, i32) {
    let sext12 = |x: u32| ((x << 20) as i32) >> 20;
    let mut op = (v >> 28) & 0xf;
    let mut oparg = sext12((v >> 12) & 0xfff) as u32;
    if op & 8 != 0 {
        // FUTEX_OP_OPARG_SHIFT: the argument is a shift count.
        op &= 7;
        oparg = 1u32 << (oparg & 31);
    }
    (op, oparg, (v >> 24) & 0xf, sext12(v & 0xfff))
}

/// Applies WAKE_OP's operation to `old`; `None` for an unknown one.
fn apply_op(op: u32, oparg: u32, old: u32) -> Option<u32> {
    Some(match op {
        0 => oparg,                   // SET
        1 => old.wrapping_add(oparg), // ADD
        2 => old | oparg,             // OR
        3 => old & !oparg,            // ANDN
        4 => old ^ oparg,             // XOR
        _ => return None,
    })
}

/// Compares WAKE_OP's old value with `cmparg`; `None` for an unknown test.
fn compare(cmp: u32, old: u32, cmparg: i32) -> Option<bool> {
    let o = old as i32;
    Some(match cmp {
        0 => o == cmparg,
        1 => o != cmparg,
        2 => o < cmparg,
        3 => o <= cmparg,
        4 => o > cmparg,
        5 => o >= cmparg,
        _ => return None,
    })
}

/// WAKE_OP: `old = *uaddr2; *uaddr2 = old OP oparg`; wake `n` on `uaddr`
/// and, if `old CMP cmparg`, `n2` on `uaddr2`.
fn wake_op(
    p: &mut Process,
    op: u64,
    uaddr: u64,
    n: u32,
    uaddr2: u64,
    n2: u32,
    val3: u32,
) -> SysResult {
    let (k1, k2) = (key(p, uaddr, op)?, key(p, uaddr2, op)?);
    let (wop, oparg, cmp, cmparg) = decode_op(val3);
    let old: u32 = uaccess::read(&mut p.mm, uaddr2)?;
    let new = apply_op(wop, oparg, old).ok_or(Errno::ENOSYS)?;
    let hit = compare(cmp, old, cmparg).ok_or(Errno::ENOSYS)?;
    uaccess::write(&mut p.mm, uaddr2, &new)?;
    let mut woken = futex::wake(k1, n.max(1), u32::MAX);
    if hit {
        woken += futex::wake(k2, n2.max(1), u32::MAX);
    }
    Ok(woken)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wake_op_decoding_matches_the_uapi_macro() {
        // FUTEX_OP(FUTEX_OP_SET, 0, FUTEX_OP_CMP_GT, 1), glibc's
        // pthread_cond_signal of old.
        let v = (0 << 28) | (4 << 24) | (0 << 12) | 1;
        assert_eq!(decode_op(v), (0, 0, 4, 1));
        // ADD with a negative argument, shift variant.
        let v = (1 << 28) | (0 << 24) | (0xfff << 12) | 0xffe;
        assert_eq!(decode_op(v), (1, u32::MAX, 0, -2));
        let v = ((8 | 2) << 28) | (1 << 24) | (3 << 12);
        assert_eq!(decode_op(v), (2, 8, 1, 0));
        assert_eq!(apply_op(1, u32::MAX, 5), Some(4));
        assert_eq!(apply_op(3, 4, 7), Some(3));
        assert_eq!(compare(4, 2, 1), Some(true));
        assert_eq!(compare(2, u32::MAX, 0), Some(true));
        assert_eq!(compare(9, 0, 0), None);
    }
}
