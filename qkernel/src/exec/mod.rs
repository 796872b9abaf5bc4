//! `execve` after its point of no return: the old address space goes, the
//! new program is loaded into a fresh one, and the per-process state
//! changes as on Linux (close-on-exec fds closed, handled signals back to
//! `SIG_DFL`, no alternate stack, no `clear_child_tid` or robust list).
//! Everything that can fail for a reason the caller could be told about
//! is checked before (`syscalls::sys_exec`); a failure here (out of
//! memory) ends the process with SIGSEGV, as on Linux.
//!
//! The syscall returns normally; [`take_fresh_entry`] then tells the
//! syscall exit path to replace the whole user context: RIP and RSP of the
//! new program, every other register zero, RFLAGS 0x202, a clean FPU.

pub mod image;

use alloc::string::String;
use alloc::vec::Vec;

use spin::Mutex;

use crate::arch::{self, entry::TrapFrame};
use crate::hostcall;
use crate::loader::{self, Entry, Exec};
use crate::mm::addr_space::AddrSpace;
use crate::process::{self, Process, SigAction};
use crate::{random, signal};

/// What the checks before the point of no return produced.
pub struct Program<'a> {
    /// The program's ELF image.
    pub image: &'a [u8],
    /// Its interpreter's image.
    pub interp: Option<&'a [u8]>,
    /// argv (after `#!` rewriting) and envp.
    pub argv: &'a [&'a [u8]],
    pub envp: &'a [&'a [u8]],
    /// `AT_EXECFN`: the path given to `execve`.
    pub execfn: &'a [u8],
    /// `/proc/self/exe`: the absolute path of the ELF file run.
    pub exe: String,
}

/// The entry of a program `execve` just loaded, for the syscall exit path.
static FRESH: Mutex<Option<Entry>> = Mutex::new(None);

/// The entry of the program `execve` loaded during this syscall, if any.
pub fn take_fresh_entry() -> Option<Entry> {
    FRESH.lock().take()
}

/// The user context a new program starts with.
pub fn fresh_frame(entry: &Entry) -> TrapFrame {
    TrapFrame {
        rip: entry.rip,
        rsp: entry.rsp,
        rflags: 0x202,
        cs: u64::from(arch::cpu::USER_CS),
        ss: u64::from(arch::cpu::USER_SS),
        vector: u64::MAX,
        ..TrapFrame::default()
    }
}

fn die(what: &str) -> ! {
    log::info!(
        "program killed by signal {}: execve failed after the point of no return: {what}",
        signal::SIGSEGV
    );
    hostcall::exit(128 + signal::SIGSEGV as i32)
}

/// Replaces the program of `p` with `prog`. Returns only on success.
pub fn commit(p: &mut Process, prog: Program<'_>) {
    // Switch to a fresh space first, so the old one can go before the new
    // program is mapped (the two need not fit at once).
    let fresh = AddrSpace::new();
    process::activate(&fresh);
    let mut old = core::mem::replace(&mut p.mm, fresh);
    // A vfork child gives its parent's space back (and frees the
    // stand-in); a process sharing its space (CLONE_VM) leaves it to the
    // others.
    {
        let mut k = crate::task::KERNEL.lock();
        crate::task::fork::lend_back(&mut k, crate::task::current_pid(), &mut old);
        crate::task::mmshare::leave(&mut k, crate::task::current_tgid(), &mut old);
    }
    // SAFETY: CR3 now names the fresh space's PGD.
    unsafe { old.free() };

    let mut rnd = [0u8; 16];
    random::fill(&mut rnd);
    let exec = Exec {
        image: prog.image,
        interp: prog.interp,
        argv: prog.argv,
        envp: prog.envp,
        execfn: prog.execfn,
        ids: p.ids,
        random: rnd,
    };
    let entry = match loader::load_fresh(&mut p.mm, &exec) {
        Ok(e) => e,
        Err(e) => die(&alloc::format!("{e}")),
    };

    // Linux's `unshare_files`: a table shared with another process
    // (`CLONE_FILES`) is copied first, so close-on-exec closes only this
    // process's fds; a shared handler table is copied too before the
    // handlers go back to `SIG_DFL` (the other sharers keep theirs).
    crate::fs::files::unshare(&mut p.files);
    p.files.close_on_exec();
    crate::process::unshare_handlers(&mut p.signals);
    // capabilities(7) for a file without file capabilities or set-id bits.
    p.caps = p.caps.after_exec(&p.ids, crate::syscalls::no_new_privs());
    for (i, act) in p.signals.lock().actions.iter_mut().enumerate() {
        let handler = if act.handler == 1 { 1 } else { 0 };
        if act.handler > 1 {
            signal::set_disposition(i as u32 + 1, 0);
        }
        *act = SigAction {
            handler,
            ..SigAction::default()
        };
    }
    signal::set_nocldstop(false);
    *crate::process::thread() = crate::process::ThreadFields::new_thread(0, None);
    p.exe = prog.exe;
    p.cmdline = prog.argv.iter().fold(Vec::new(), |mut v, a| {
        v.extend_from_slice(a);
        v.push(0);
        v
    });
    p.comm = crate::process::comm_of(prog.execfn);
    p.environ = prog.envp.iter().fold(Vec::new(), |mut v, a| {
        v.extend_from_slice(a);
        v.push(0);
        v
    });
    arch::set_fs_base(0);
    arch::set_gs_base(0);
    arch::reset_fpu();
    *FRESH.lock() = Some(entry);
}
