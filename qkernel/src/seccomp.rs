//! The container's seccomp filter (OCI `linux.seccomp`), applied to every
//! system call of the program before it is dispatched. The filter comes
//! from the boot data in `qlib::seccomp`'s format, compiled by the runtime
//! and checked by the VMM; the kernel checks it again at boot.

use qlib::seccomp::{self, Filter};

use crate::errno::{Errno, SysResult};
use crate::{hostcall, signal};

/// `SIGSYS`.
const SIGSYS: u32 = 31;
/// `si_code` of a seccomp SIGSYS.
const SYS_SECCOMP: i32 = 1;
/// Largest errno a filter may return (Linux's `MAX_ERRNO`).
const MAX_ERRNO: u32 = 4095;

/// The filter, over a copy of its bytes kept for the sandbox's life.
static FILTER: spin::Once<Filter<'static>> = spin::Once::new();

/// Installs the filter in `bytes` (none when empty).
pub fn init(bytes: &[u8]) {
    if bytes.is_empty() {
        return;
    }
    // The boot data is reused as user memory: keep a copy, for good.
    let kept: &'static [u8] = alloc::vec::Vec::leak(bytes.to_vec());
    match Filter::parse(kept) {
        Ok(f) => {
            FILTER.call_once(|| f);
        }
        Err(_) => hostcall::boot_error("malformed seccomp filter"),
    }
}

/// Whether a filter is installed (`prctl(PR_GET_SECCOMP)` says mode 2).
pub fn active() -> bool {
    FILTER.get().is_some()
}

/// The verdict on syscall `nr`: `None` to run it, else its result
/// (errno, or the syscall skipped after SIGSYS). A kill action ends the
/// program here.
pub fn check(nr: u64, args: &[u64; 6]) -> Option<SysResult> {
    let action = FILTER.get()?.evaluate(nr, args);
    let data = action & 0xffff;
    match seccomp::action_kind(action) {
        seccomp::ALLOW => None,
        seccomp::LOG => {
            log::info!("seccomp: syscall {nr} allowed (logged)");
            None
        }
        seccomp::ERRNO if data == 0 => Some(Ok(0)),
        seccomp::ERRNO => Some(Err(Errno(data.min(MAX_ERRNO) as i32))),
        // No tracer can attach to the guest: as Linux without one.
        seccomp::TRACE => Some(Err(Errno::ENOSYS)),
        seccomp::TRAP => {
            signal::force_fault(SIGSYS, signal::Info::user(SYS_SECCOMP, 0, 0));
            Some(Ok(nr as usize))
        }
        _ => {
            log::info!("program killed by signal {SIGSYS}: seccomp denied syscall {nr}");
            hostcall::exit(128 + SIGSYS as i32)
        }
    }
}
