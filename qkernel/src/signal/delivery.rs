//! Delivery on the way back to user mode, syscall restarts, and
//! `rt_sigreturn`.
//!
//! A blocking host call cut short by a control request that made a handled
//! signal pending returns `-ERESTARTSYS` (`RET_RESTART`, `hostcall::call`);
//! a syscall entered with such a signal already pending is not run and
//! returns `-ERESTARTNOINTR` (`syscalls::dispatch`). On the way out, as on
//! Linux: with a handler, `ERESTARTSYS` becomes `EINTR` unless the handler
//! has `SA_RESTART` and the syscall is restartable (waits with a timeout
//! never are); without one, or for `ERESTARTNOINTR`, the syscall is
//! restarted: RIP goes back over the 2-byte `syscall` and RAX gets the
//! syscall number again. Hibernation never gets here: it does not make a
//! signal pending, so `hostcall::call` reissues the call itself.

use core::sync::atomic::Ordering;

use crate::arch::entry::TrapFrame;
use crate::errno::Errno;
use crate::process::{self, SigAction};
use crate::syscalls;

use super::frame::{self, FRAME_SIZE, SIGINFO_OFFSET, Saved, UC_OFFSET};
use super::{DEFAULT_IGNORE, Info, SIGSEGV, bit, blocked, set_blocked, set_disposition, take_next};

const SA_ONSTACK: u64 = 0x0800_0000;
const SA_RESTART: u64 = 0x1000_0000;
const SA_NODEFER: u64 = 0x4000_0000;
const SA_RESETHAND: u64 = 0x8000_0000;
const SA_RESTORER: u64 = 0x0400_0000;

const SS_ONSTACK: i32 = 1;
const SS_DISABLE: i32 = 2;

/// Internal restart codes (never seen by the program).
pub const ERESTARTSYS: u64 = -512i64 as u64;
pub const ERESTARTNOINTR: u64 = -513i64 as u64;
pub const ERESTARTNOHAND: u64 = -514i64 as u64;

/// RFLAGS bits cleared at handler entry: TF, DF, RF.
const ENTRY_CLEAR_FLAGS: u64 = 0x100 | 0x400 | 0x1_0000;

/// No saved mask. The mask `rt_sigsuspend` replaced is put back once a
/// handler is set up (it goes into the frame) or when the call restarts;
/// it is per vCPU (`SigCpu::suspend_mask`).
pub(super) const NO_MASK: u64 = u64::MAX;

/// Records the mask to restore after `rt_sigsuspend` and installs `mask`.
pub fn suspend_with(mask: u64) {
    super::cpu()
        .suspend_mask
        .store(blocked(), Ordering::Relaxed);
    set_blocked(mask);
}

fn take_suspend_mask() -> Option<u64> {
    let m = super::cpu().suspend_mask.swap(NO_MASK, Ordering::Relaxed);
    (m != NO_MASK).then_some(m)
}

fn canonical(a: u64) -> bool {
    !(0x0000_8000_0000_0000..0xffff_8000_0000_0000).contains(&a)
}

fn bad_frame(what: &str, at: u64) -> ! {
    log::info!("program killed by signal {SIGSEGV}: {what} (frame at {at:#x})");
    crate::task::exit_current(crate::task::Status::Killed(SIGSEGV))
}

/// Delivers the next deliverable pending signal, if any, to `regs` on its
/// way back to user mode; `syscall` is the number of the syscall whose
/// result `regs.rax` holds (`None` after an exception or `rt_sigreturn`).
/// Default actions end the program here. One handler frame per return: the
/// next signal goes at the return from the handler's `rt_sigreturn`.
pub fn deliver(regs: &mut TrapFrame, syscall: Option<u64>) {
    crate::task::jobctl::run_deferred();
    stop_point();
    while let Some((sig, info)) = take_next() {
        let act = process::with(|p| p.signals.lock().actions[(sig - 1) as usize]);
        match act.handler {
            1 => continue,
            0 if DEFAULT_IGNORE & bit(sig) != 0 => continue,
            // Queued while blocked, still without a handler: pid 1 with
            // init semantics drops it (Linux's `get_signal`).
            0 if super::init_spares(crate::task::current_tgid()) => continue,
            // A stop signal queued while blocked (or while the task
            // table was busy): the group stops now.
            0 if super::STOP_SIGNALS & bit(sig) != 0 => {
                crate::task::jobctl::stop_taken(sig);
                stop_point();
            }
            0 => {
                log::info!("program killed by signal {sig}");
                crate::task::exit_current(crate::task::Status::Killed(sig))
            }
            _ => {
                fix_restart(regs, syscall, Some(act.flags));
                setup(regs, sig, &info, &act);
                return;
            }
        }
    }
    if let Some(m) = take_suspend_mask() {
        set_blocked(m);
    }
    fix_restart(regs, syscall, None);
}

/// Ends the running group if a fatal signal was sent to it, and waits
/// (not runnable) while it is stopped (job control).
fn stop_point() {
    loop {
        if let Some(sig) = super::group_kill() {
            log::info!("program killed by signal {sig}");
            crate::task::exit_current(crate::task::Status::Killed(sig));
        }
        if super::group_stop() == 0 {
            return;
        }
        crate::task::jobctl::stop_current();
    }
}

/// Turns an internal restart code in `regs.rax` into `-EINTR` or a
/// restart of the syscall; `handler_flags` is `None` when no handler runs.
fn fix_restart(regs: &mut TrapFrame, syscall: Option<u64>, handler_flags: Option<u64>) {
    let Some(nr) = syscall else { return };
    let restart = match (regs.rax, handler_flags) {
        (ERESTARTNOINTR, _) => true,
        (ERESTARTSYS | ERESTARTNOHAND, None) => true,
        (ERESTARTSYS, Some(f)) => f & SA_RESTART != 0 && syscalls::restartable(nr),
        (ERESTARTNOHAND, Some(_)) => false,
        _ => return,
    };
    if restart {
        regs.rax = nr;
        regs.rip = regs.rip.wrapping_sub(2);
    } else {
        regs.rax = (-i64::from(Errno::EINTR.0)) as u64;
    }
}

/// Builds the frame for `sig` and points `regs` at the handler. A frame
/// that cannot be written (bad stack) or no `sa_restorer` ends the program
/// with SIGSEGV.
fn setup(regs: &mut TrapFrame, sig: u32, info: &Info, act: &SigAction) {
    let oldmask = take_suspend_mask().unwrap_or_else(blocked);
    let r = process::with(|p| -> Result<u64, Errno> {
        let (ss_sp, ss_flags, ss_size) = process::thread().altstack;
        let alt_on = ss_flags & SS_DISABLE == 0;
        let on_alt = alt_on && regs.rsp > ss_sp && regs.rsp - ss_sp <= ss_size;
        let top = if act.flags & SA_ONSTACK != 0 && alt_on && !on_alt {
            ss_sp.wrapping_add(ss_size)
        } else {
            regs.rsp.wrapping_sub(128) // the red zone
        };
        let fpstate = top.wrapping_sub(frame::fpstate_size()) & !63;
        let at = (fpstate.wrapping_sub(FRAME_SIZE) & !15).wrapping_sub(8);
        if act.flags & SA_RESTORER == 0 {
            return Err(Errno::EFAULT);
        }
        let stack_flags = if !alt_on {
            SS_DISABLE
        } else if on_alt {
            SS_ONSTACK
        } else {
            0
        };
        let saved = Saved {
            regs,
            info,
            signo: sig,
            oldmask,
            stack: (ss_sp, stack_flags, ss_size),
        };
        frame::write(&mut p.mm, at, fpstate, act.restorer, &saved)?;
        if act.flags & SA_RESETHAND != 0 {
            p.signals.lock().actions[(sig - 1) as usize] = SigAction::default();
            set_disposition(sig, 0);
        }
        Ok(at)
    });
    let at = match r {
        Ok(at) if canonical(act.handler) => at,
        _ => bad_frame("cannot set up a signal frame", regs.rsp),
    };
    let mut mask = oldmask | act.mask;
    if act.flags & SA_NODEFER == 0 {
        mask |= bit(sig);
    }
    set_blocked(mask);
    regs.rsp = at;
    regs.rip = act.handler;
    regs.rdi = u64::from(sig);
    regs.rsi = at + SIGINFO_OFFSET;
    regs.rdx = at + UC_OFFSET;
    regs.rax = 0;
    regs.rflags &= !ENTRY_CLEAR_FLAGS;
}

/// `rt_sigreturn`: restores the context saved in the frame the handler
/// returned from (its `ret` popped `pretcode`, so the frame starts 8 bytes
/// below RSP). Nothing in the frame is trusted: RFLAGS is masked, CS and
/// SS forced, MXCSR clamped; an unreadable frame or a non-canonical RIP or
/// RSP ends the program with SIGSEGV. The caller returns with every
/// register restored (RCX and R11 included).
pub fn sigreturn(regs: &mut TrapFrame) {
    let at = regs.rsp.wrapping_sub(8);
    let mut ctx = *regs;
    let r = process::with(|p| {
        let restored = frame::read(&mut p.mm, at.wrapping_add(UC_OFFSET), &mut ctx)?;
        frame::restore_fpu(&mut p.mm, restored.fpstate)?;
        Ok::<u64, Errno>(restored.mask)
    });
    match r {
        Ok(mask) if canonical(ctx.rip) && canonical(ctx.rsp) => {
            *regs = ctx;
            set_blocked(mask);
        }
        _ => bad_frame("bad rt_sigreturn frame", at),
    }
}
