//! Traps from user mode: syscalls and exceptions. A fault the kernel cannot
//! resolve ends the program with the status a shell reports (128 + signal)
//! until signal delivery exists.

use core::sync::atomic::{AtomicU64, Ordering};

use crate::arch::entry::TrapFrame;
use crate::arch::platform::Platform;
use crate::arch::user_return;
use crate::mm::fault::{self, FaultError};
use crate::{hostcall, process, syscalls};

static USER_CR3: AtomicU64 = AtomicU64::new(0);

/// Records the user PGD to return to.
pub fn set_user_cr3(cr3: u64) {
    USER_CR3.store(cr3, Ordering::Relaxed);
}

static PLATFORM: spin::Once<Platform> = spin::Once::new();

/// Records the platform (for CR2).
pub fn set_platform(p: Platform) {
    PLATFORM.call_once(|| p);
}

const SIGTRAP: i32 = 5;
const SIGILL: i32 = 4;
const SIGBUS: i32 = 7;
const SIGFPE: i32 = 8;
const SIGKILL: i32 = 9;
const SIGSEGV: i32 = 11;

fn kill(sig: i32, frame: &TrapFrame, what: &str, addr: u64) -> ! {
    log::info!(
        "program killed by signal {sig}: {what} at rip {:#x} (address {addr:#x}, error {:#x})",
        frame.rip,
        frame.error
    );
    hostcall::exit(128 + sig)
}

/// Called by the syscall entry. Returns 0 to leave with `sysretq`, 1 to
/// leave through the trampoline (`iretq`, prepared here).
#[unsafe(no_mangle)]
extern "C" fn syscall_handler(frame: &mut TrapFrame) -> u64 {
    let args = [
        frame.rdi, frame.rsi, frame.rdx, frame.r10, frame.r8, frame.r9,
    ];
    frame.rax = syscalls::dispatch(frame.rax, &args);
    // sysretq to a RIP outside the lower half would fault in kernel mode.
    if frame.rip < 0x0000_8000_0000_0000 {
        0
    } else {
        process::prepare_iret(frame, USER_CR3.load(Ordering::Relaxed));
        1
    }
}

/// Called by the exception stubs; `from_user` comes from the stack the
/// exception arrived on. Back to user mode, returns 0 to leave with
/// `sysretq` through the return stub (`arch::user_return`), 1 to leave
/// through the trampoline (`iretq`, prepared here); ignored for a kernel
/// exception (which panics).
#[unsafe(no_mangle)]
extern "C" fn exception_handler(frame: &mut TrapFrame, from_user: u64) -> u64 {
    let from_user = from_user != 0;
    let platform = *PLATFORM.get().expect("set at boot");
    if !from_user {
        let cr2 = if frame.vector == 14 {
            platform.fault_address()
        } else {
            0
        };
        panic!(
            "kernel exception {} at rip {:#x}, error {:#x}, cr2 {:#x}, rsp {:#x}",
            frame.vector, frame.rip, frame.error, cr2, frame.rsp
        );
    }
    match frame.vector {
        14 => {
            let addr = platform.fault_address();
            let r = process::with(|p| fault::handle(&mut p.mm, addr, frame.error));
            match r {
                Ok(()) => {}
                Err(FaultError::Segv) => kill(SIGSEGV, frame, "page fault", addr),
                Err(FaultError::Oom) => kill(SIGKILL, frame, "out of memory", addr),
            }
        }
        0 | 16 | 19 => kill(SIGFPE, frame, "arithmetic exception", 0),
        1 | 3 => kill(SIGTRAP, frame, "trap", 0),
        6 => kill(SIGILL, frame, "invalid opcode", 0),
        17 => kill(SIGBUS, frame, "alignment check", 0),
        v => kill(
            SIGSEGV,
            frame,
            if v == 13 {
                "general protection"
            } else {
                "exception"
            },
            0,
        ),
    }
    if process::with(|p| user_return::prepare(frame, &mut p.mm)) {
        return 0;
    }
    process::prepare_iret(frame, USER_CR3.load(Ordering::Relaxed));
    1
}
