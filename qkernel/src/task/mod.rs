//! Tasks: several processes on the one vCPU (docs/processes.md).
//!
//! A task is one single-threaded process. The running task's `Process`
//! lives in `process::PROCESS` (so syscall handlers keep their
//! `fn(&mut Process, ..)` shape) and its signal state in the `signal`
//! atomics; a task that is not running keeps both in its [`Task`]. The
//! kernel is not preemptive: tasks switch only where one blocks (`wait4`,
//! `vfork`), yields (after `fork`, so the child runs first) or exits.
//!
//! Lock order: `process::PROCESS`, then [`KERNEL`]. No lock is held
//! across a switch.

pub mod fork;
pub mod park;
pub mod pgrp;
pub mod sched;
pub mod spawn;
pub mod wait;

use alloc::boxed::Box;
use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU32, Ordering};

use spin::Mutex;

use crate::arch::switch::FpuState;
use crate::errno::Errno;
use crate::process::Process;
use crate::signal::SigState;

/// Size of a task's kernel stack.
pub const KSTACK_SIZE: usize = 32 << 10;

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// `exit(code)`.
    Exited(u8),
    /// Killed by a signal.
    Killed(u32),
}

impl Status {
    /// The `wait4` status word.
    pub fn wait_status(self) -> i32 {
        match self {
            Status::Exited(c) => i32::from(c) << 8,
            Status::Killed(s) => (s & 0x7f) as i32,
        }
    }

    /// The sandbox's exit code when pid 1 ends this way.
    pub fn host_code(self) -> i32 {
        match self {
            Status::Exited(c) => i32::from(c),
            Status::Killed(s) => 128 + s as i32,
        }
    }
}

/// Scheduling state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// On the vCPU.
    Running,
    /// In the run queue.
    Runnable,
    /// Waiting for a wake-up (a child's exit, a vfork child's exec).
    Blocked,
    /// Ended, not yet reaped.
    Zombie(Status),
}

/// One task (a single-threaded process).
pub struct Task {
    pub pid: u32,
    pub ppid: u32,
    pub pgid: u32,
    /// Session id.
    pub sid: u32,
    pub state: State,
    /// The kernel stack (`None`: pid 1 runs on the boot stack).
    pub kstack: Option<Vec<u64>>,
    /// Top of the kernel stack (the syscall entry's RSP).
    pub kstack_top: u64,
    /// Saved kernel RSP while switched out.
    pub rsp: u64,
    pub fs_base: u64,
    pub gs_base: u64,
    pub fpu: Box<FpuState>,
    /// The process, while the task does not run.
    pub proc: Option<Process>,
    /// The signal state, while the task does not run.
    pub sig: SigState,
    /// Signal sent to the parent at exit (SIGCHLD, or what `clone` said).
    pub exit_signal: u32,
    /// The parent blocked in `vfork` until this child execs or exits.
    pub vfork_parent: Option<u32>,
}

/// Every task, the run queue and the pid allocator.
pub struct Kernel {
    pub tasks: BTreeMap<u32, Box<Task>>,
    pub runq: VecDeque<u32>,
    pub next_pid: u32,
}

/// The task table.
pub static KERNEL: Mutex<Kernel> = Mutex::new(Kernel {
    tasks: BTreeMap::new(),
    runq: VecDeque::new(),
    next_pid: 2,
});

/// The running task's pid (1 before `init`).
static CURRENT: AtomicU32 = AtomicU32::new(1);

/// Most tasks at once (a fork beyond this fails with `EAGAIN`).
pub const MAX_TASKS: usize = 128;

/// The running task's pid.
pub fn current_pid() -> u32 {
    CURRENT.load(Ordering::Relaxed)
}

fn set_current(pid: u32) {
    CURRENT.store(pid, Ordering::Relaxed);
}

/// Registers the first program as pid 1, running on the boot stack.
pub fn init() {
    let mut k = KERNEL.lock();
    let t = Task {
        pid: 1,
        ppid: 0,
        pgid: 1,
        sid: 1,
        state: State::Running,
        kstack: None,
        kstack_top: crate::arch::switch::kernel_stack_top(),
        rsp: 0,
        fs_base: 0,
        gs_base: 0,
        fpu: Box::new(FpuState([0; 512])),
        proc: None,
        sig: SigState::save(),
        exit_signal: crate::signal::SIGCHLD,
        vfork_parent: None,
    };
    k.tasks.insert(1, Box::new(t));
    set_current(1);
}

/// The parent of the running task (0 for pid 1).
pub fn current_ppid() -> u32 {
    let k = KERNEL.lock();
    k.tasks.get(&current_pid()).map_or(0, |t| t.ppid)
}

/// The kernel PGDs of the processes that do not run (hibernation walks
/// them too). Empty if the table is locked (it never is while a control
/// request is served; the caller then sees the running process only).
pub fn other_pgds() -> Vec<u64> {
    let Some(k) = KERNEL.try_lock() else {
        log::warn!("task table busy: deflating the running process only");
        return Vec::new();
    };
    k.tasks
        .values()
        .filter_map(|t| t.proc.as_ref())
        .map(|p| p.mm.pt.kernel_cr3())
        .collect()
}

/// What the running syscall asks for once the process lock is released.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    None,
    /// Let the run queue go first (after `fork`: the child runs first).
    Yield,
    /// Sleep until woken, then run the syscall again (`wait4`).
    Block,
    /// Park on a host fd (`task::park`), then run the syscall again.
    Park(i32, i16),
    /// Sleep until the vfork child with this pid has exec'd or exited.
    Vfork(u32),
    /// End the process.
    Exit(Status),
}

static ACTION: Mutex<Action> = Mutex::new(Action::None);

/// Asks for `a` once the syscall handler returns (`finish_syscall`).
pub fn request(a: Action) {
    *ACTION.lock() = a;
}

/// Called by the syscall dispatcher after a handler returned `r`, with
/// the process lock released: performs the requested [`Action`].
/// `rerun` runs the handler again (after a wake-up).
pub fn finish_syscall(
    mut r: Result<usize, Errno>,
    rerun: impl Fn() -> Result<usize, Errno>,
) -> Result<usize, Errno> {
    loop {
        let action = core::mem::replace(&mut *ACTION.lock(), Action::None);
        match action {
            Action::None => return r,
            Action::Yield => {
                sched::yield_now();
                return r;
            }
            Action::Exit(st) => exit_current(st),
            Action::Block => {
                sched::block_current()?;
                if crate::signal::interrupts() {
                    return Err(Errno::ERESTARTSYS);
                }
                r = rerun();
            }
            Action::Park(fd, events) => {
                park::park(fd, events);
                let blocked = sched::block_current();
                park::unpark(current_pid());
                blocked?;
                if crate::signal::interrupts() {
                    return Err(Errno::ERESTARTSYS);
                }
                r = rerun();
            }
            Action::Vfork(child) => {
                while fork::vfork_pending(child) {
                    if sched::block_current().is_err() {
                        break;
                    }
                }
                return r;
            }
        }
    }
}

/// Ends the running process with `st`: pid 1 ends the sandbox; any other
/// becomes a zombie for its parent to reap. Must be called without the
/// process lock.
pub fn exit_current(st: Status) -> ! {
    let pid = current_pid();
    if pid == 1 {
        crate::hostcall::exit(st.host_code());
    }
    wait::exit_current(pid, st)
}

/// A successful `execve`: a vfork parent may go on.
pub fn exec_done() {
    fork::release_vfork_parent(current_pid());
}

/// A host signal while another task than pid 1 runs: it goes to pid 1.
pub fn signal_init_from_host(sig: u32) {
    let _ = wait::send_to_other(
        1,
        sig,
        crate::signal::Info::user(crate::signal::SI_USER, 0, 0),
    );
}
