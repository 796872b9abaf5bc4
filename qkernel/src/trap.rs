//! Traps from user mode: syscalls and exceptions. A fault the kernel cannot
//! resolve becomes a signal (`signal::force_fault`): the program's handler
//! runs, or the program ends with the status a shell reports (128 + N).
//! Pending signals are delivered on every way back to user mode.

use core::sync::atomic::{AtomicU64, Ordering};

use qlib::abi::KICK_VECTOR;

use qlib::layout::USER_END;

use crate::arch::entry::TrapFrame;
use crate::arch::platform::Platform;
use crate::arch::user_return;
use crate::mm::fault::{self, FaultError};
use crate::{process, signal, syscalls};

/// RFLAGS trap flag.
const TF: u64 = 0x100;

/// Kick interrupts that arrived while the kernel ran (for the log).
pub static KICKS_IN_KERNEL: AtomicU64 = AtomicU64::new(0);

static PLATFORM: spin::Once<Platform> = spin::Once::new();

/// Records the platform (for CR2).
pub fn set_platform(p: Platform) {
    PLATFORM.call_once(|| p);
}

const SIGKILL: i32 = 9;
const SYS_RT_SIGRETURN: u64 = 15;
const SYS_EXECVE: u64 = 59;
const SYS_EXECVEAT: u64 = 322;

fn kill(sig: i32, frame: &TrapFrame, what: &str, addr: u64) -> ! {
    log::info!(
        "program killed by signal {sig}: {what} at rip {:#x} (address {addr:#x}, error {:#x})",
        frame.rip,
        frame.error
    );
    crate::task::exit_current(crate::task::Status::Killed(sig as u32))
}

/// Called by the syscall entry, which leaves with `sysretq` after it.
/// Pending signals are delivered on the way out. `rt_sigreturn` restores
/// every register, RCX and R11 included (as does a successful `execve`,
/// which starts a new program with a clean context), so it leaves through
/// the return stub (`user_return`), never with a plain `sysretq`.
#[unsafe(no_mangle)]
extern "C" fn syscall_handler(frame: &mut TrapFrame) {
    if crate::arch::percpu::this().id() != 0 {
        // A task's user mode on a secondary vCPU: vCPU 0 serves it.
        crate::task::offload::secondary_entry(frame, 0);
        return;
    }
    crate::task::stints::entered(false);
    syscall_body(frame);
    after_return(frame);
}

/// On vCPU 0, with the running task's return to user mode prepared in
/// `frame`: it may run on a secondary vCPU meanwhile (`task::offload`);
/// the entries it comes back with are served here, as if they had come
/// on vCPU 0.
pub fn after_return(frame: &mut TrapFrame) {
    while crate::task::offload::away(frame) {
        if frame.vector == u64::MAX {
            syscall_body(frame);
        } else {
            let cr2 = crate::task::offload::take_fault(crate::task::current_pid());
            exception_body(frame, cr2);
        }
    }
    crate::task::stints::returning();
}

fn syscall_body(frame: &mut TrapFrame) {
    let nr = frame.rax;
    let full_restore = if nr == SYS_RT_SIGRETURN {
        crate::control::serve_pending();
        signal::sigreturn(frame);
        crate::task::slice::at_user_return();
        signal::deliver(frame, None);
        true
    } else {
        let args = [
            frame.rdi, frame.rsi, frame.rdx, frame.r10, frame.r8, frame.r9,
        ];
        frame.rax = syscalls::dispatch(nr, &args);
        crate::mm::uaccess::oom_kill_if_pending();
        crate::task::spawn::yield_if_requested();
        // Only an exec can have replaced the program (no lock taken on
        // other syscalls' way out).
        let fresh = if nr == SYS_EXECVE || nr == SYS_EXECVEAT {
            crate::exec::take_fresh_entry()
        } else {
            None
        };
        match fresh {
            // `execve` replaced the program: a clean context at its entry.
            Some(entry) => {
                crate::task::exec_done();
                *frame = crate::exec::fresh_frame(&entry);
                crate::task::slice::at_user_return();
                signal::deliver(frame, None);
                true
            }
            None => {
                crate::task::slice::at_user_return();
                signal::deliver(frame, Some(nr));
                false
            }
        }
    };
    prepare_return(frame, full_restore);
    crate::arch::kstack::check_current();
}

/// Makes `frame` ready for the one way back to user mode, `sysretq`
/// (`arch::entry`): with `full_restore`, RCX and R11 are restored by the
/// return stub (`user_return`). A RIP outside the lower half (a forged
/// `rt_sigreturn` context) cannot be returned to: as on Linux, whose
/// `iretq` faults there, the program gets SIGSEGV; if its handler cannot
/// be returned to either, it dies of it.
pub fn prepare_return(frame: &mut TrapFrame, full_restore: bool) {
    let mut full_restore = full_restore;
    for attempt in 0..2 {
        if frame.rip >= USER_END {
            if attempt == 1 {
                kill(
                    signal::SIGSEGV as i32,
                    frame,
                    "return to a bad RIP",
                    frame.rip,
                );
            }
            signal::force_fault(signal::SIGSEGV, signal::Info::user(signal::SI_KERNEL, 0, 0));
            signal::deliver(frame, None);
            full_restore = true;
            continue;
        }
        if !full_restore || process::with(|p| user_return::prepare(frame, &mut p.mm)) {
            return;
        }
        // Every address space maps the return page above USER_END, where
        // no system call reaches it: it cannot be missing.
        kill(signal::SIGSEGV as i32, frame, "return page missing", 0);
    }
}

/// The signal for an exception vector, its `si_code` and whether
/// `si_addr` is the faulting instruction.
fn fault_signal(vector: u64) -> (u32, i32, bool) {
    match vector {
        0 => (signal::SIGFPE, 1, true),       // FPE_INTDIV
        16 | 19 => (signal::SIGFPE, 0, true), // x87 / SIMD
        1 => (signal::SIGTRAP, 2, false),     // TRAP_TRACE
        3 => (signal::SIGTRAP, signal::SI_KERNEL, false),
        6 => (signal::SIGILL, 2, true),   // ILL_ILLOPN
        17 => (signal::SIGBUS, 1, false), // BUS_ADRALN
        _ => (signal::SIGSEGV, signal::SI_KERNEL, false),
    }
}

/// Called by the exception stubs; `from_user` comes from the stack the
/// exception arrived on. Back to user mode, the stub leaves with `sysretq`
/// through the return stub (`arch::user_return`); a kernel exception
/// returns with `iretq` to the kernel (or panics).
#[unsafe(no_mangle)]
extern "C" fn exception_handler(frame: &mut TrapFrame, from_user: u64) {
    let from_user = from_user != 0;
    let platform = *PLATFORM.get().expect("set at boot");
    if from_user && crate::arch::percpu::this().id() != 0 {
        // A task's user mode on a secondary vCPU: vCPU 0 serves it.
        let cr2 = if frame.vector == 14 {
            platform.fault_address()
        } else {
            0
        };
        crate::task::offload::secondary_entry(frame, cr2);
        return;
    }
    if !from_user {
        // A program may enter a syscall with TF set (the hypervisor does
        // not apply SFMASK): the single-step trap lands in the kernel.
        // Drop TF here; the program's own RFLAGS (R11) keep it, so it is
        // trapped after its next instruction, as on Linux.
        if frame.vector == 1 {
            frame.rflags &= !TF;
            return;
        }
        // A kick that lands in the kernel: the kernel looks at the control
        // page before it returns to user mode anyway (`kick_in_kernel`).
        if frame.vector == u64::from(KICK_VECTOR) {
            KICKS_IN_KERNEL.fetch_add(1, Ordering::Relaxed);
            return;
        }
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
    crate::task::stints::entered(frame.vector == u64::from(KICK_VECTOR));
    exception_body(frame, None);
    after_return(frame);
}

/// An exception from the running task's user mode; `fault_addr`: the CR2
/// of a page fault taken on a secondary vCPU (else this vCPU's).
fn exception_body(frame: &mut TrapFrame, fault_addr: Option<u64>) {
    let platform = *PLATFORM.get().expect("set at boot");
    let mut info = signal::Info {
        trapno: frame.vector,
        error: frame.error,
        ..signal::Info::user(0, 0, 0)
    };
    if frame.vector == u64::from(KICK_VECTOR) {
        // The VMM kicked us out of the program to serve a control request.
        user_return::finish_stub(frame);
        crate::control::serve_from_interrupt();
        crate::task::spawn::yield_if_requested();
    } else if frame.vector == 14 {
        let addr = fault_addr.unwrap_or_else(|| platform.fault_address());
        let t0 = crate::stats::start();
        let r = process::with(|p| {
            fault::handle(&mut p.mm, addr, frame.error)
                .map_err(|e| (e, p.mm.vmas.find(addr).is_some()))
        });
        crate::stats::fault(frame.error & 1 != 0, t0);
        match r {
            Ok(()) => {}
            Err((FaultError::Segv, mapped)) => {
                // SEGV_ACCERR inside a mapping, else SEGV_MAPERR.
                info.code = if mapped { 2 } else { 1 };
                info.addr = addr;
                signal::force_fault(signal::SIGSEGV, info);
            }
            Err((FaultError::Oom, _)) => kill(SIGKILL, frame, "out of memory", addr),
            Err((FaultError::Bus, _)) => {
                // BUS_ADRERR: a file mapping's page past the file's end.
                info.code = 2;
                info.addr = addr;
                signal::force_fault(signal::SIGBUS, info);
            }
        }
    } else {
        let (sig, code, at_rip) = fault_signal(frame.vector);
        info.code = code;
        info.addr = if at_rip { frame.rip } else { 0 };
        signal::force_fault(sig, info);
    }
    crate::task::slice::at_user_return();
    signal::deliver(frame, None);
    prepare_return(frame, true);
}
