//! Tasks: processes and threads on the one vCPU (docs/processes.md,
//! docs/threads.md).
//!
//! A task is one thread; the tasks of a thread group share one `Process`.
//! The running group's `Process` lives in `process::PROCESS` (so syscall
//! handlers keep their `fn(&mut Process, ..)` shape) and the running
//! thread's signal state in the `signal` atomics; a group that is not
//! running keeps its `Process` in its leader's [`Task`], and a thread that
//! is not running keeps its signal state in its own. The
//! kernel is not preemptive: tasks switch where one blocks (`wait4`,
//! `vfork`, a park), yields (after `fork`, so the child runs first) or
//! exits, and on the way back to user mode when the VMM ended its time
//! slice ([`slice`]).
//!
//! Lock order: `process::PROCESS`, then [`KERNEL`]. No lock is held
//! across a switch.

pub mod cpu;
pub mod fork;
pub mod futex;
pub mod jobctl;
pub mod kstack;
pub mod mmshare;
pub mod offload;
pub mod park;
pub mod pgrp;
pub mod sched;
pub mod slice;
pub mod spawn;
pub mod stints;
pub mod timers;
pub mod wait;

use alloc::boxed::Box;
use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec::Vec;
use core::sync::atomic::Ordering;

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
    /// Its thread group is stopped (job control): not runnable until
    /// SIGCONT (`jobctl`).
    Stopped,
    /// A thread group leader whose thread ended while other threads of
    /// its group go on: it stays as the group's anchor (its pid is the
    /// group's) and never runs again.
    Dead(Status),
    /// Ended, not yet reaped.
    Zombie(Status),
}

/// One task (a thread; a single-threaded process is a group of one).
pub struct Task {
    /// Thread id (the process id for a group leader).
    pub pid: u32,
    /// Thread group id: the leader's pid.
    pub tgid: u32,
    pub ppid: u32,
    pub pgid: u32,
    /// Session id.
    pub sid: u32,
    pub state: State,
    /// The kernel stack (`None`: pid 1 runs on the boot stack).
    pub kstack: Option<kstack::KStack>,
    /// Its lowest word, the overflow canary (`arch::kstack`).
    pub kstack_base: u64,
    /// Top of the kernel stack (the syscall entry's RSP).
    pub kstack_top: u64,
    /// Saved kernel RSP while switched out.
    pub rsp: u64,
    pub fs_base: u64,
    pub gs_base: u64,
    pub fpu: Box<FpuState>,
    /// The group's process, in the leader's task while no thread of the
    /// group runs.
    pub proc: Option<Process>,
    /// This thread's per-thread process fields while it does not run.
    pub thread: crate::process::ThreadFields,
    /// The signal state, while the task does not run.
    pub sig: SigState,
    /// Signal sent to the parent at exit (SIGCHLD, or what `clone` said).
    pub exit_signal: u32,
    /// The parent blocked in `vfork` until this child execs or exits.
    pub vfork_parent: Option<u32>,
    /// A zombie leader's name (`comm`), kept from its process, which is
    /// gone (`/proc/<pid>/stat` and `status` still show it, as Linux).
    pub comm: [u8; 16],
    /// Job control of the thread group (a leader's; `jobctl`).
    pub job: jobctl::Job,
    /// How its recent stints in user mode went: whether it may run on a
    /// secondary vCPU (`stints`).
    pub habit: qlib::stint::Habit,
    /// The vCPU its user mode last ran on (`getcpu`; `offload`, `stints`).
    pub last_cpu: u8,
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

// The running task's pid and thread group id are per vCPU
// (`arch::percpu::PerCpu::current`, 1 before `init`).

/// Most tasks at once (a fork beyond this fails with `EAGAIN`).
pub const MAX_TASKS: usize = 128;

/// The running task's pid.
pub fn current_pid() -> u32 {
    crate::arch::percpu::this().current.load(Ordering::Relaxed)
}

/// The running task's thread group id (`getpid`).
pub fn current_tgid() -> u32 {
    crate::arch::percpu::this()
        .current_tgid
        .load(Ordering::Relaxed)
}

fn set_current(pid: u32, tgid: u32) {
    let cpu = crate::arch::percpu::this();
    cpu.current.store(pid, Ordering::Relaxed);
    cpu.current_tgid.store(tgid, Ordering::Relaxed);
}

/// Registers the first program as pid 1, running on the boot stack.
pub fn init() {
    let mut k = KERNEL.lock();
    let t = Task {
        pid: 1,
        tgid: 1,
        ppid: 0,
        pgid: 1,
        sid: 1,
        state: State::Running,
        kstack: None,
        kstack_base: crate::arch::percpu::this()
            .kstack_base
            .load(Ordering::Relaxed),
        kstack_top: crate::arch::switch::kernel_stack_top(),
        rsp: 0,
        fs_base: 0,
        gs_base: 0,
        fpu: FpuState::clean(),
        proc: None,
        thread: crate::process::ThreadFields::new_thread(0, None),
        sig: SigState::save(),
        exit_signal: crate::signal::SIGCHLD,
        vfork_parent: None,
        comm: [0; 16],
        job: jobctl::Job::default(),
        habit: qlib::stint::Habit::new(),
        last_cpu: 0,
    };
    k.tasks.insert(1, Box::new(t));
    set_current(1, 1);
}

/// The parent of the running thread group (0 for pid 1).
pub fn current_ppid() -> u32 {
    let k = KERNEL.lock();
    k.tasks.get(&current_tgid()).map_or(0, |t| t.ppid)
}

impl Task {
    /// Whether the thread still runs or can run (not ended).
    pub fn live(&self) -> bool {
        !matches!(self.state, State::Zombie(_) | State::Dead(_))
    }
}

/// The kernel PGDs of the processes that do not run (hibernation walks
/// them too). Empty if the table is locked (it never is while a control
/// request is served; the caller then sees the running process only).
pub fn other_pgds() -> Vec<u64> {
    let Some(k) = KERNEL.try_lock() else {
        log::warn!("task table busy: deflating the running process only");
        return Vec::new();
    };
    // Only group leaders hold a process: threads sharing an address
    // space are walked once.
    let mut v: Vec<u64> = k
        .tasks
        .values()
        .filter_map(|t| t.proc.as_ref())
        .map(|p| p.mm.pt.kernel_cr3())
        .collect();
    v.sort_unstable();
    v.dedup();
    v
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
    /// End the thread group.
    Exit(Status),
    /// End the running thread only (`exit`).
    ExitThread(u8),
    /// Sleep on a futex until woken, the deadline (monotonic ns,
    /// `u64::MAX`: none) or a signal (`task::futex`).
    Futex(u64),
    /// `rt_sigtimedwait`: sleep until a signal of the thread's wait set
    /// is pending (then run the handler again), the deadline (`EAGAIN`)
    /// or a handled signal (`EINTR`).
    SigWait(u64),
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
            Action::ExitThread(code) => wait::exit_thread(code),
            Action::Futex(deadline) => return futex::sleep(deadline),
            Action::SigWait(deadline) => {
                let woke = futex::block_until(deadline);
                if woke.is_err() {
                    // Nothing else can run: only the host can send it.
                    crate::hostcall::sleep_until(deadline);
                }
                let set = crate::signal::sigwait_set();
                if crate::signal::pending() & set != 0 {
                    r = rerun();
                } else if crate::signal::interrupts() {
                    crate::signal::set_sigwait_set(0);
                    return Err(Errno::EINTR);
                } else if deadline != u64::MAX && crate::time::monotonic_ns() >= deadline {
                    crate::signal::set_sigwait_set(0);
                    return Err(Errno::EAGAIN);
                } else {
                    request(Action::SigWait(deadline));
                }
            }
            Action::Block => {
                sched::block_current();
                // What woke it (a child's exit or stop) is reported even
                // if the SIGCHLD it sent is handled: as Linux's
                // `do_wait`, the wait looks before it gives way to a
                // signal.
                r = rerun();
                let again = *ACTION.lock() == Action::Block;
                if again && crate::signal::interrupts() {
                    *ACTION.lock() = Action::None;
                    return Err(Errno::ERESTARTSYS);
                }
            }
            Action::Park(fd, events) => {
                park::park(fd, events);
                sched::block_current();
                park::woke();
                if crate::signal::interrupts() {
                    return park::interrupted();
                }
                r = rerun();
                park::rerun_done();
            }
            Action::Vfork(child) => {
                while fork::vfork_pending(child) {
                    sched::block_current();
                }
                if fork::lent(child) {
                    // Nothing can run and the child still holds this
                    // process's memory: it cannot go on without it.
                    log::warn!("vfork parent {} deadlocked: killed", current_pid());
                    exit_current(Status::Killed(crate::signal::SIGKILL));
                }
                return r;
            }
        }
    }
}

/// Ends the running thread group with `st`: pid 1's group ends the
/// sandbox; any other becomes a zombie for its parent to reap (its other
/// threads end at once). Must be called without the process lock.
pub fn exit_current(st: Status) -> ! {
    if current_tgid() == 1 {
        crate::hostcall::exit(st.host_code());
    }
    wait::exit_group(st)
}

/// `execve` past its point of no return in a thread group of several
/// threads: the other threads end, and a caller that is not the leader
/// takes the leader's tid (and its place as the parent's child). Runs
/// under the process lock.
pub fn exec_single_thread() {
    let (me, g) = (current_pid(), current_tgid());
    let mut k = KERNEL.lock();
    wait::remove_threads(&mut k, g, me);
    if me == g {
        return;
    }
    let (Some(leader), Some(mut t)) = (k.tasks.remove(&g), k.tasks.remove(&me)) else {
        log::error!("exec: thread {me} of group {g} without a leader");
        return;
    };
    wait::detach(g);
    cpu::exec_takes_over(me, g);
    t.pid = g;
    t.ppid = leader.ppid;
    t.pgid = leader.pgid;
    t.sid = leader.sid;
    t.exit_signal = leader.exit_signal;
    t.vfork_parent = leader.vfork_parent;
    t.job = leader.job;
    k.tasks.insert(g, t);
    set_current(g, g);
    drop(k);
    drop(leader);
}

/// A successful `execve`: a vfork parent may go on.
pub fn exec_done() {
    fork::release_vfork_parent(current_pid());
}

/// A host signal while another group than pid 1's runs: it goes to pid 1.
pub fn signal_init_from_host(sig: u32) {
    let _ = wait::send_to_group(
        1,
        sig,
        crate::signal::Info::user(crate::signal::SI_USER, 0, 0),
    );
}

/// Makes the running task runnable if it is blocked: it waits in the
/// scheduler's idle loop (it blocked last, nothing runs) and a signal
/// came for it there (a timer went off). No-op if the table is busy.
pub fn wake_current() {
    if let Some(mut k) = KERNEL.try_lock() {
        sched::wake(&mut k, current_pid());
    }
}

/// A process-directed `sig` to the running group that the running thread
/// blocks: whether another live thread of the group does not block it;
/// with `wake`, the first such thread that is blocked in the kernel and
/// would run a handler is woken (its wait ends with EINTR or a restart).
pub fn sibling_takes(sig: u32, wake: bool) -> bool {
    let Some(mut k) = KERNEL.try_lock() else {
        return false;
    };
    let (me, g) = (current_pid(), current_tgid());
    let d = crate::signal::Disp::current();
    let b = crate::signal::bit(sig);
    let found = k
        .tasks
        .values()
        .find(|t| t.tgid == g && t.pid != me && t.live() && t.sig.blocked & b == 0)
        .map(|t| (t.pid, t.sig.takes(sig, d)));
    if let Some((pid, takes)) = found
        && wake
        && takes
    {
        sched::wake(&mut k, pid);
    }
    found.is_some()
}

/// Wakes a thread of the running group other than the caller that waits
/// for `sig` in `rt_sigtimedwait` (a process-directed signal the caller
/// blocks). Returns whether there was one.
pub fn wake_sigwaiter(sig: u32) -> bool {
    let Some(mut k) = KERNEL.try_lock() else {
        return false;
    };
    wait::wake_sigwaiter(&mut k, current_tgid(), sig)
}
