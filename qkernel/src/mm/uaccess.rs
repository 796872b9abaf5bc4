//! Access to user memory from the kernel. Addresses are translated in
//! software (a page-table walk, faulting pages in as the program would), so
//! a bad user pointer is an `EFAULT`, never a kernel fault; the bytes are
//! then reached through the direct map, and host calls get guest-physical
//! iovecs of user buffers without copying.

use alloc::vec::Vec;
use core::sync::atomic::{AtomicU32, Ordering};

use qlib::abi::IoVec;
use qlib::layout::USER_END;
use qlib::pte::{Pte, WRITABLE};

use super::addr_space::AddrSpace;
use super::fault;
use super::gpa_to_kva;
use crate::errno::Errno;

const PF_WRITE: u64 = 2;

/// Guest-physical address of user address `va`, faulting it in.
pub fn translate(mm: &mut AddrSpace, va: u64, write: bool) -> Result<u64, Errno> {
    if va >= USER_END {
        return Err(Errno::EFAULT);
    }
    let page = va & !0xfff;
    for _ in 0..2 {
        let pte: Pte = mm.pt.get(page);
        if pte.present() && (!write || pte.0 & WRITABLE != 0) {
            return Ok(pte.addr() + (va & 0xfff));
        }
        let error = if write { PF_WRITE } else { 0 } | u64::from(pte.present());
        fault::handle(mm, va, error).map_err(|e| {
            if e == fault::FaultError::Oom {
                // As Linux's OOM killer when a copy to or from user memory
                // finds no page: the process dies of SIGKILL (sent on the
                // syscall's way out, where no lock is held).
                OOM_VICTIM.store(crate::task::current_tgid(), Ordering::Release);
            }
            Errno::EFAULT
        })?;
    }
    Err(Errno::EFAULT)
}

/// The thread group whose system call found no memory for a user page
/// (0: none): it is killed before it returns to user mode.
static OOM_VICTIM: AtomicU32 = AtomicU32::new(0);

/// Called on every system call's way out, without the process lock:
/// kills the running thread group with SIGKILL if its call ran out of
/// memory ([`translate`]).
pub fn oom_kill_if_pending() {
    let tgid = crate::task::current_tgid();
    if OOM_VICTIM.load(Ordering::Acquire) == tgid
        && OOM_VICTIM
            .compare_exchange(tgid, 0, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    {
        // As a user fault that finds no memory (`trap`): the group ends
        // of SIGKILL, pid 1 too (the OOM killer spares no init).
        log::info!("out of memory in a system call: pid {tgid} killed by signal 9");
        crate::task::exit_current(crate::task::Status::Killed(crate::signal::SIGKILL));
    }
}

/// Splits the user range `[va, va + len)` into guest-physical pieces,
/// merging physically contiguous pages.
pub fn user_iovecs(
    mm: &mut AddrSpace,
    va: u64,
    len: u64,
    write: bool,
    out: &mut Vec<IoVec>,
) -> Result<(), Errno> {
    let end = va.checked_add(len).ok_or(Errno::EFAULT)?;
    let mut at = va;
    while at < end {
        let n = (4096 - (at & 0xfff)).min(end - at);
        let gpa = translate(mm, at, write)?;
        match out.last_mut() {
            Some(last) if last.gpa + last.len == gpa => last.len += n,
            _ => out.push(IoVec { gpa, len: n }),
        }
        at += n;
    }
    Ok(())
}

/// Copies from user memory.
pub fn copy_in(mm: &mut AddrSpace, va: u64, buf: &mut [u8]) -> Result<(), Errno> {
    let mut done = 0;
    while done < buf.len() {
        let at = va.checked_add(done as u64).ok_or(Errno::EFAULT)?;
        let n = ((4096 - (at & 0xfff)) as usize).min(buf.len() - done);
        let gpa = translate(mm, at, false)?;
        // SAFETY: `gpa..gpa+n` lies in one present user page, reached via
        // the direct map; `buf` is a distinct kernel buffer.
        unsafe {
            core::ptr::copy_nonoverlapping(
                gpa_to_kva(gpa) as *const u8,
                buf[done..].as_mut_ptr(),
                n,
            );
        }
        done += n;
    }
    Ok(())
}

/// Copies to user memory.
pub fn copy_out(mm: &mut AddrSpace, va: u64, buf: &[u8]) -> Result<(), Errno> {
    let mut done = 0;
    while done < buf.len() {
        let at = va.checked_add(done as u64).ok_or(Errno::EFAULT)?;
        let n = ((4096 - (at & 0xfff)) as usize).min(buf.len() - done);
        let gpa = translate(mm, at, true)?;
        // SAFETY: `gpa..gpa+n` lies in one present, writable user page,
        // reached via the direct map; `buf` is a distinct kernel buffer.
        unsafe {
            core::ptr::copy_nonoverlapping(buf[done..].as_ptr(), gpa_to_kva(gpa) as *mut u8, n);
        }
        done += n;
    }
    Ok(())
}

/// Plain-old-data types that may be copied to and from user memory.
///
/// # Safety
/// Every bit pattern must be a valid value and the type must have no
/// padding.
pub unsafe trait Pod: Copy + Default {}
// SAFETY: integers have no padding and no invalid bit patterns.
unsafe impl Pod for u64 {}
// SAFETY: as above.
unsafe impl Pod for u32 {}
// SAFETY: as above.
unsafe impl Pod for i32 {}

/// Reads a value from user memory.
pub fn read<T: Pod>(mm: &mut AddrSpace, va: u64) -> Result<T, Errno> {
    let mut v = T::default();
    // SAFETY: T is Pod: viewing it as bytes and filling them is sound.
    let bytes =
        unsafe { core::slice::from_raw_parts_mut(&mut v as *mut T as *mut u8, size_of::<T>()) };
    copy_in(mm, va, bytes)?;
    Ok(v)
}

/// Writes a value to user memory.
pub fn write<T: Pod>(mm: &mut AddrSpace, va: u64, v: &T) -> Result<(), Errno> {
    // SAFETY: T is Pod: its bytes are all initialised.
    let bytes = unsafe { core::slice::from_raw_parts(v as *const T as *const u8, size_of::<T>()) };
    copy_out(mm, va, bytes)
}
