//! The process (a thread group): its address space, signal dispositions
//! and the bits of per-process state syscalls record. The running thread
//! group's process lives in [`PROCESS`], the others in their leader's
//! `task::Task` (docs/threads.md). The per-thread fields ([`ThreadFields`])
//! are not in the process: the running thread's are this vCPU's
//! ([`thread`]), the others' in their task, swapped at a switch.

use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;

use spin::Mutex;

use crate::fs::{FdTable, Files, Fs};

use crate::mm::addr_space::AddrSpace;

/// A recorded `struct sigaction` (kernel layout: handler, flags, restorer,
/// mask), as `rt_sigaction` takes it; `signal` delivers with it.
#[derive(Debug, Clone, Copy, Default)]
pub struct SigAction {
    /// Handler, `SIG_DFL` (0) or `SIG_IGN` (1).
    pub handler: u64,
    /// `SA_*` flags.
    pub flags: u64,
    /// `sa_restorer`.
    pub restorer: u64,
    /// Blocked during the handler.
    pub mask: u64,
}

/// Signal state (the pending set and the blocked mask are atomics in
/// `signal`, reachable without the process lock; the alternate stack is
/// per thread, [`ThreadFields`]).
#[derive(Debug, Clone, Copy)]
pub struct Signals {
    /// Dispositions, index = signal - 1.
    pub actions: [SigAction; 64],
}

/// The signal-handler table, shared between processes by
/// `clone(CLONE_SIGHAND)` (docs/processes.md, "Shared process objects").
/// A leaf lock.
pub type Handlers = Arc<Mutex<Signals>>;

/// A handler table of its own, every signal at `SIG_DFL`.
pub fn new_handlers() -> Handlers {
    Arc::new(Mutex::new(Signals {
        actions: [SigAction::default(); 64],
    }))
}

/// A private copy of `h` (`fork` without `CLONE_SIGHAND`).
pub fn copy_handlers(h: &Handlers) -> Handlers {
    let copy = Arc::new(Mutex::new(Signals {
        actions: [SigAction::default(); 64],
    }));
    copy.lock().actions = h.lock().actions;
    copy
}

/// Makes `h` private: a copy when another process shares it (`execve`,
/// `unshare(CLONE_SIGHAND)` of a process alone on its table is a no-op).
pub fn unshare_handlers(h: &mut Handlers) {
    if Arc::strong_count(h) > 1 {
        *h = copy_handlers(h);
    }
}

/// The process.
pub struct Process {
    /// Address space.
    pub mm: AddrSpace,
    /// Signal dispositions (shared with `CLONE_SIGHAND`).
    pub signals: Handlers,
    /// Open files (shared with `CLONE_FILES`).
    pub files: Arc<Files>,
    /// Working directory and umask (shared with `CLONE_FS`).
    pub fs: Arc<Fs>,
    /// `/proc/self/exe`: the program's absolute path.
    pub exe: String,
    /// `/proc/self/cmdline`: NUL-terminated argv strings.
    pub cmdline: Vec<u8>,
    /// `comm`: the name (`PR_SET_NAME`, else the executed file's name),
    /// NUL-padded, at most 15 bytes.
    pub comm: [u8; 16],
    /// `/proc/self/environ`: NUL-terminated envp strings at exec.
    pub environ: Vec<u8>,
    /// uid, euid, gid, egid.
    pub ids: [u32; 4],
    /// Process-directed signals pending while the group does not run.
    pub shared_sig: crate::signal::GroupSig,
    /// Capability sets.
    pub caps: crate::creds::Caps,
    /// Supplementary group ids, sorted.
    pub groups: Vec<u32>,
}

/// The per-thread state syscalls record (the running thread's is this
/// vCPU's, [`thread`]; a switched-out thread keeps its own in its task).
#[derive(Debug, Clone, Copy)]
pub struct ThreadFields {
    /// `set_tid_address` (or `CLONE_CHILD_CLEARTID`).
    pub clear_child_tid: u64,
    /// `set_robust_list` head.
    pub robust_list: u64,
    /// `sigaltstack`: (sp, flags, size).
    pub altstack: (u64, i32, u64),
    /// `PR_SET_NAME` (None: the program's name, `Process::comm`).
    pub name: Option<[u8; 16]>,
}

impl ThreadFields {
    /// A new thread's: no alternate stack (as Linux for `CLONE_VM`), no
    /// robust list, the name of its creator.
    pub const fn new_thread(clear_child_tid: u64, name: Option<[u8; 16]>) -> Self {
        ThreadFields {
            clear_child_tid,
            robust_list: 0,
            altstack: (0, 2, 0), // SS_DISABLE
            name,
        }
    }
}

/// The running thread's [`ThreadFields`] (this vCPU's). A leaf lock:
/// nothing is taken under it.
pub fn thread() -> spin::MutexGuard<'static, ThreadFields> {
    crate::arch::percpu::this().thread.lock()
}

/// The running process (`task::sched` swaps it on a context switch): the
/// slot of the vCPU the caller runs on (`arch::percpu::PerCpu::process`).
pub static PROCESS: ProcessSlot = ProcessSlot;

/// [`PROCESS`]: names this vCPU's process slot.
pub struct ProcessSlot;

impl ProcessSlot {
    /// Locks this vCPU's slot.
    pub fn lock(&self) -> spin::MutexGuard<'static, Option<Process>> {
        crate::arch::percpu::this().process.lock()
    }

    /// This vCPU's slot, if not locked.
    #[allow(dead_code)]
    pub fn try_lock(&self) -> Option<spin::MutexGuard<'static, Option<Process>>> {
        crate::arch::percpu::this().process.try_lock()
    }
}

/// Runs `f` on the current process.
pub fn with<R>(f: impl FnOnce(&mut Process) -> R) -> R {
    let mut guard = PROCESS.lock();
    let p = guard
        .as_mut()
        .expect("a process runs whenever user code does");
    f(p)
}

impl Process {
    /// A process over a loaded address space.
    pub fn new(
        mm: AddrSpace,
        ids: [u32; 4],
        files: FdTable,
        cwd: String,
        exe: String,
        cmdline: Vec<u8>,
    ) -> Self {
        Self {
            comm: comm_of(exe.as_bytes()),
            mm,
            signals: new_handlers(),
            files: Files::new(files),
            fs: Fs::new(cwd, 0o022),
            exe,
            cmdline,
            environ: Vec::new(),
            caps: crate::creds::initial_caps(&ids),
            groups: crate::creds::initial_groups(),
            ids,
            shared_sig: crate::signal::GroupSig::new(),
        }
    }
}

/// Linux's `comm` for an executed path: its last component, cut at 15
/// bytes.
pub fn comm_of(path: &[u8]) -> [u8; 16] {
    let base = path.rsplit(|&b| b == b'/').next().unwrap_or_default();
    let mut n = [0u8; 16];
    let len = base.len().min(15);
    n[..len].copy_from_slice(&base[..len]);
    n
}

/// Makes `mm` the current address space: the kernel switches to its
/// kernel PGD (same kernel half as every other) and returns to user mode
/// through its user PGD.
pub fn activate(mm: &AddrSpace) {
    let kernel_cr3 = mm.pt.kernel_cr3();
    // SAFETY: every kernel PGD maps the kernel half exactly as the boot
    // PGD (`PageTables::new` copies it), so the code, stack and data in
    // use stay mapped.
    unsafe { core::arch::asm!("mov cr3, {0}", in(reg) kernel_cr3, options(nostack)) };
}

/// Flags a user context may hold: CF PF AF ZF SF TF DF OF AC ID; IF is
/// always set.
pub const USER_RFLAGS: u64 = 0x0025_4dd5;
