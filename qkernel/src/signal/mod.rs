//! Signals: the pending set, the blocked mask, and delivery to the
//! program's handlers (Linux x86-64 `rt_sigframe`, `rt_sigreturn`).
//!
//! Sources: the host (the VMM forwards `kill`; served from the control
//! page), `kill`/`tkill`/`tgkill` to self, `SIGPIPE` on `EPIPE`, and
//! synchronous faults (`trap.rs`). A signal is made pending by [`send`];
//! it is delivered on the next return to user mode (`delivery`), after a
//! syscall or an exception.
//!
//! The pending set, the blocked mask and the "has a handler" / "ignored"
//! sets live in atomics so that [`send`] and [`interrupts`] need no process
//! lock: control requests are served from inside host calls, which may run
//! under it. They are the running task's, so there is one set per vCPU
//! ([`SigCpu`], [`cpu`]). The dispositions themselves (`SigAction`) stay in the process.
//! Lock order: the process, then [`INFO`].
//!
//! One instance of each signal is queued (rt signals are not counted), and
//! default actions are "ignore", "end the program with 128 + N" (core
//! dumps are reported as a plain kill) or "stop the thread group" (job
//! control: `task::jobctl`, docs/processes.md).

mod delivery;
mod frame;

pub use delivery::{deliver, sigreturn, suspend_with};

use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use spin::Mutex;

use crate::arch::percpu::MAX_CPUS;
use crate::hostcall;

pub const SIGTRAP: u32 = 5;
pub const SIGILL: u32 = 4;
pub const SIGBUS: u32 = 7;
pub const SIGFPE: u32 = 8;
pub const SIGKILL: u32 = 9;
pub const SIGSEGV: u32 = 11;
pub const SIGPIPE: u32 = 13;
pub const SIGHUP: u32 = 1;
pub const SIGSTOP: u32 = 19;
pub const SIGCHLD: u32 = 17;
pub const SIGCONT: u32 = 18;
pub const SIGTSTP: u32 = 20;
pub const SIGTTIN: u32 = 21;
pub const SIGTTOU: u32 = 22;

/// The stop signals: their default action stops the thread group.
pub const STOP_SIGNALS: u64 = bit(SIGSTOP) | bit(SIGTSTP) | bit(SIGTTIN) | bit(SIGTTOU);

/// `sa_flags`: no SIGCHLD when a child stops or continues.
pub const SA_NOCLDSTOP: u64 = 1;

/// `si_code` values.
pub const SI_USER: i32 = 0;
pub const SI_KERNEL: i32 = 0x80;
pub const SI_TKILL: i32 = -6;

/// Signals that can be neither caught, blocked nor ignored.
pub const UNBLOCKABLE: u64 = bit(SIGKILL) | bit(SIGSTOP);

/// Synchronous (fault) signals: delivered before the others.
const SYNCHRONOUS: u64 = bit(SIGILL) | bit(SIGTRAP) | bit(SIGBUS) | bit(SIGFPE) | bit(SIGSEGV);

/// Signals whose default action is to do nothing: SIGCHLD, SIGCONT,
/// SIGURG, SIGWINCH.
const DEFAULT_IGNORE: u64 = bit(17) | bit(18) | bit(23) | bit(28);

/// The running thread's and thread group's signal state on one vCPU:
/// each vCPU runs its own task, so these are per vCPU ([`cpu`]), saved
/// into the task (`SigState`, `GroupSig`) and restored on a switch.
pub(crate) struct SigCpu {
    /// Bit `n - 1` set: signal `n` is `SIG_IGN` (the running thread
    /// group's dispositions, recomputed from its `SigAction`s when it is
    /// switched in).
    ignored: AtomicU64,
    /// Bit `n - 1` set: a handler is installed for signal `n`.
    handled: AtomicU64,
    /// Bit `n - 1` set: signal `n` is pending for the running thread.
    pending: AtomicU64,
    /// Bit `n - 1` set: signal `n` is blocked by the running thread.
    blocked: AtomicU64,
    /// What each pending signal carries (index `n - 1`).
    info: Mutex<[Info; 64]>,
    /// Process-directed signals pending for the running thread group: the
    /// first thread that does not block one takes it.
    shared: AtomicU64,
    /// What each shared pending signal carries.
    shared_info: Mutex<[Info; 64]>,
    /// The set the running thread waits for in `rt_sigtimedwait` (0: it
    /// does not): a signal of it sent to the thread or its group wakes it.
    sigwait: AtomicU64,
    /// A fatal signal for the whole running thread group (0: none): every
    /// thread of it ends at its next return to user mode (`deliver`).
    group_kill: AtomicU32,
    /// The signal that stopped the running thread group (0: it is not
    /// stopped): its threads stop at their next return to user mode.
    group_stop: AtomicU32,
    /// The running group's SIGCHLD action has `SA_NOCLDSTOP`.
    nocldstop: AtomicBool,
    /// The mask `rt_sigsuspend` replaced (`delivery`).
    pub(super) suspend_mask: AtomicU64,
}

impl SigCpu {
    const fn new() -> SigCpu {
        SigCpu {
            ignored: AtomicU64::new(0),
            handled: AtomicU64::new(0),
            pending: AtomicU64::new(0),
            blocked: AtomicU64::new(0),
            info: Mutex::new([Info::EMPTY; 64]),
            shared: AtomicU64::new(0),
            shared_info: Mutex::new([Info::EMPTY; 64]),
            sigwait: AtomicU64::new(0),
            group_kill: AtomicU32::new(0),
            group_stop: AtomicU32::new(0),
            nocldstop: AtomicBool::new(false),
            suspend_mask: AtomicU64::new(delivery::NO_MASK),
        }
    }
}

static SIGCPU: [SigCpu; MAX_CPUS] = [const { SigCpu::new() }; MAX_CPUS];

/// This vCPU's signal state (that of the task it runs).
#[inline]
pub(crate) fn cpu() -> &'static SigCpu {
    &SIGCPU[crate::arch::percpu::this().id()]
}

/// Pid 1 has Linux's pid-namespace init semantics (`BOOT_INIT`): a
/// signal whose action is the default never ends it, except SIGKILL from
/// the host ([`deliver_from_host`]) and faults ([`force_fault`]).
static INIT: AtomicBool = AtomicBool::new(false);

/// Gives pid 1 init semantics (an OCI container's program), or not
/// (`qrun do`); set once at boot.
pub fn set_init(on: bool) {
    INIT.store(on, Ordering::Relaxed);
}

/// Whether a sent signal whose default action would end thread group `g`
/// is dropped instead: `g` is pid 1 with init semantics. As Linux's
/// `SIGNAL_UNKILLABLE`: this holds for signals from any process of the
/// sandbox, pid 1 itself included (`raise`, `kill(1, SIGKILL)`), and for
/// kernel-sent ones (`SIGPIPE`, `SIGALRM`), not for faults.
pub fn init_spares(g: u32) -> bool {
    g == 1 && INIT.load(Ordering::Relaxed)
}

/// The dispositions of a thread group as bit sets.
#[derive(Debug, Clone, Copy, Default)]
pub struct Disp {
    /// Bit `n - 1`: `SIG_IGN`.
    pub ignored: u64,
    /// Bit `n - 1`: a handler.
    pub handled: u64,
    /// SIGCHLD's action has `SA_NOCLDSTOP`.
    pub nocldstop: bool,
}

impl Disp {
    /// From the recorded `SigAction`s.
    pub fn of(actions: &[crate::process::SigAction; 64]) -> Disp {
        let mut d = Disp::default();
        for (i, a) in actions.iter().enumerate() {
            match a.handler {
                0 => {}
                1 => d.ignored |= 1 << i,
                _ => d.handled |= 1 << i,
            }
        }
        d.nocldstop = actions[(SIGCHLD - 1) as usize].flags & SA_NOCLDSTOP != 0;
        d
    }

    /// The running thread group's.
    pub fn current() -> Disp {
        Disp {
            ignored: cpu().ignored.load(Ordering::Relaxed),
            handled: cpu().handled.load(Ordering::Relaxed),
            nocldstop: cpu().nocldstop.load(Ordering::Relaxed),
        }
    }

    /// Whether `sig` is dropped at once (ignored, explicitly or by default).
    pub fn ignores(&self, sig: u32) -> bool {
        let ign = self.ignored | (DEFAULT_IGNORE & !self.handled);
        sig != SIGKILL && ign & bit(sig) != 0
    }

    /// Whether `sig` runs a handler.
    pub fn handles(&self, sig: u32) -> bool {
        self.handled & bit(sig) != 0
    }

    /// Whether `sig`'s action ends the thread group when not blocked.
    pub fn kills(&self, sig: u32) -> bool {
        sig == SIGKILL || (!self.ignores(sig) && !self.handles(sig) && !self.stops(sig))
    }

    /// Whether `sig`'s action stops the thread group when not blocked
    /// (a stop signal with the default action).
    pub fn stops(&self, sig: u32) -> bool {
        STOP_SIGNALS & bit(sig) != 0 && !self.ignores(sig) && !self.handles(sig)
    }
}

/// The process-directed pending signals of a thread group that does not
/// run (kept in its `Process`).
#[derive(Debug, Clone, Copy)]
pub struct GroupSig {
    pub pending: u64,
    pub info: [Info; 64],
}

impl GroupSig {
    /// Nothing pending.
    pub const fn new() -> GroupSig {
        GroupSig {
            pending: 0,
            info: [Info::EMPTY; 64],
        }
    }

    /// Makes `sig` pending for the group.
    pub fn post(&mut self, sig: u32, info: Info) {
        self.info[(sig - 1) as usize] = info;
        self.pending |= bit(sig);
    }
}

impl Default for GroupSig {
    fn default() -> Self {
        GroupSig::new()
    }
}

/// Saves the running group's shared state into `g` (it is switched out).
pub fn save_group(g: &mut GroupSig) {
    g.pending = cpu().shared.swap(0, Ordering::AcqRel);
    // In place: no 2.5 KiB temporary on the switching task's stack.
    g.info.copy_from_slice(&*cpu().shared_info.lock());
}

/// Makes a thread group the running one: its dispositions (from
/// `actions`) and its shared pending set.
pub fn load_group(actions: &[crate::process::SigAction; 64], g: &GroupSig) {
    let d = Disp::of(actions);
    cpu().ignored.store(d.ignored, Ordering::Relaxed);
    cpu().handled.store(d.handled, Ordering::Relaxed);
    cpu().nocldstop.store(d.nocldstop, Ordering::Relaxed);
    cpu().shared.store(g.pending, Ordering::Release);
    cpu().shared_info.lock().copy_from_slice(&g.info);
    // A group killed by a signal never runs again: the mark was its own.
    cpu().group_kill.store(0, Ordering::Relaxed);
}

/// The per-thread signal state of a task that is not running: the
/// atomics above are the running thread's, saved here and restored on a
/// context switch (`task::sched`).
#[derive(Debug, Clone)]
pub struct SigState {
    pub pending: u64,
    pub blocked: u64,
    pub suspend_mask: u64,
    pub info: [Info; 64],
    /// The set it waits for in `rt_sigtimedwait` (0: none).
    pub sigwait: u64,
}

impl SigState {
    /// A new task's state: the blocked mask of the running thread,
    /// nothing pending (fork, clone).
    pub fn inherit() -> SigState {
        SigState {
            pending: 0,
            suspend_mask: u64::MAX,
            info: [Info::EMPTY; 64],
            sigwait: 0,
            ..SigState::save()
        }
    }

    /// The running thread's state.
    pub fn save() -> SigState {
        SigState {
            pending: cpu().pending.load(Ordering::Relaxed),
            blocked: cpu().blocked.load(Ordering::Relaxed),
            suspend_mask: cpu().suspend_mask.load(Ordering::Relaxed),
            info: *cpu().info.lock(),
            sigwait: cpu().sigwait.load(Ordering::Relaxed),
        }
    }

    /// Saves the running thread's state into `self`, in place (a
    /// context switch: no 2.5 KiB temporary on the kernel stack).
    pub fn save_into(&mut self) {
        self.pending = cpu().pending.load(Ordering::Relaxed);
        self.blocked = cpu().blocked.load(Ordering::Relaxed);
        self.suspend_mask = cpu().suspend_mask.load(Ordering::Relaxed);
        self.info.copy_from_slice(&*cpu().info.lock());
        self.sigwait = cpu().sigwait.load(Ordering::Relaxed);
    }

    /// Makes this the running thread's state.
    pub fn restore(&self) {
        cpu().pending.store(self.pending, Ordering::Relaxed);
        cpu().blocked.store(self.blocked, Ordering::Relaxed);
        cpu()
            .suspend_mask
            .store(self.suspend_mask, Ordering::Relaxed);
        cpu().info.lock().copy_from_slice(&self.info);
        cpu().sigwait.store(self.sigwait, Ordering::Relaxed);
    }

    /// Posts `sig` to this (not running) thread of a group with
    /// dispositions `d`. Returns `Fatal` when its default action ends the
    /// group, `Wake` when it interrupts a wait.
    pub fn post(&mut self, sig: u32, info: Info, d: Disp) -> Posted {
        let b = bit(sig);
        // As Linux's `sig_ignored`: a blocked signal is queued even if
        // ignored (its action may change before it is unblocked).
        if d.ignores(sig) && self.blocked & b == 0 {
            return Posted::Dropped;
        }
        if sig == SIGKILL || (d.kills(sig) && self.blocked & b == 0) {
            return Posted::Fatal;
        }
        if d.stops(sig) && self.blocked & b == 0 {
            return Posted::Stop;
        }
        self.info[(sig - 1) as usize] = info;
        self.pending |= b;
        if self.takes(sig, d) {
            Posted::Wake
        } else {
            Posted::Queued
        }
    }

    /// Whether `sig` would run a handler in this thread now, or end its
    /// `rt_sigtimedwait`.
    pub fn takes(&self, sig: u32, d: Disp) -> bool {
        (d.handles(sig) && self.blocked & bit(sig) == 0) || self.sigwait & bit(sig) != 0
    }
}

/// What [`SigState::post`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Posted {
    /// Ignored.
    Dropped,
    /// Pending, blocked or without effect on a wait.
    Queued,
    /// Pending and handled: a blocked task must wake.
    Wake,
    /// The default action ends the thread group.
    Fatal,
    /// The default action stops the thread group (not queued).
    Stop,
}

/// The part of `siginfo_t` the kernel fills in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Info {
    /// `si_code`.
    pub code: i32,
    /// `si_pid` and `si_uid` (kill, tkill), or 0.
    pub pid: u32,
    pub uid: u32,
    /// `si_addr` (faults), or 0.
    pub addr: u64,
    /// `si_status` of a `SIGCHLD` (exit code or signal), or 0.
    pub status: i32,
    /// Trap number and error code of a fault, for the `sigcontext`.
    pub trapno: u64,
    pub error: u64,
}

impl Info {
    const EMPTY: Info = Info {
        code: SI_USER,
        pid: 0,
        uid: 0,
        addr: 0,
        status: 0,
        trapno: 0,
        error: 0,
    };

    /// Sent by a process (`kill`, or the host, with pid 0).
    pub fn user(code: i32, pid: u32, uid: u32) -> Info {
        Info {
            code,
            pid,
            uid,
            ..Info::EMPTY
        }
    }
}

/// Bit for signal `sig` (1..=64).
pub const fn bit(sig: u32) -> u64 {
    1 << (sig - 1)
}

/// Whether `sig` is a valid signal number.
pub fn valid(sig: u64) -> bool {
    (1..=64).contains(&sig)
}

/// Records the disposition `handler` (`SIG_DFL` 0, `SIG_IGN` 1, or an
/// address) of signal `sig` (1..=64). Setting "ignore" (explicitly or a
/// default that ignores) discards a pending instance, as on Linux.
pub fn set_disposition(sig: u32, handler: u64) {
    let b = bit(sig);
    let (ign, hnd) = match handler {
        0 => (false, false),
        1 => (true, false),
        _ => (false, true),
    };
    for (set, on) in [(&cpu().ignored, ign), (&cpu().handled, hnd)] {
        if on {
            set.fetch_or(b, Ordering::Relaxed);
        } else {
            set.fetch_and(!b, Ordering::Relaxed);
        }
    }
    if ign || (handler == 0 && DEFAULT_IGNORE & b != 0) {
        cpu().pending.fetch_and(!b, Ordering::AcqRel);
        cpu().shared.fetch_and(!b, Ordering::AcqRel);
    }
}

/// The blocked mask.
pub fn blocked() -> u64 {
    cpu().blocked.load(Ordering::Relaxed)
}

/// Sets the blocked mask (SIGKILL and SIGSTOP stay unblocked).
pub fn set_blocked(mask: u64) {
    cpu().blocked.store(mask & !UNBLOCKABLE, Ordering::Relaxed);
}

/// Whether the running thread group explicitly ignores `sig`.
pub fn explicitly_ignored(sig: u32) -> bool {
    cpu().ignored.load(Ordering::Relaxed) & bit(sig) != 0
}

/// The pending set: the running thread's and its group's.
pub fn pending() -> u64 {
    cpu().pending.load(Ordering::Acquire) | cpu().shared.load(Ordering::Acquire)
}

/// The fatal signal that ends the running group (`send`): pid 1's group
/// ends the sandbox at once (unless it is spared: [`init_spares`]), any
/// other at the next return to user mode.
pub fn kill_group(sig: u32) {
    if init_spares(crate::task::current_tgid()) {
        log::debug!("pid 1 has no handler for signal {sig}: dropped");
        return;
    }
    if crate::task::current_tgid() == 1 {
        log::info!("program killed by signal {sig}");
        hostcall::exit(128 + sig as i32);
    }
    cpu().group_kill.store(sig, Ordering::Release);
    // A stopped running task must go on to end (a fatal signal ends a
    // stopped process, as on Linux).
    crate::task::jobctl::resume_to_die();
}

/// The signal that stopped the running group (0: not stopped).
pub fn group_stop() -> u32 {
    cpu().group_stop.load(Ordering::Acquire)
}

/// Records that the running group is stopped by `sig` (0: it goes on).
pub fn set_group_stop(sig: u32) {
    cpu().group_stop.store(sig, Ordering::Release);
}

/// Records whether the running group's SIGCHLD action has `SA_NOCLDSTOP`.
pub fn set_nocldstop(on: bool) {
    cpu().nocldstop.store(on, Ordering::Relaxed);
}

/// Discards the running thread's and group's pending signals of `mask`.
pub fn discard_pending(mask: u64) {
    cpu().pending.fetch_and(!mask, Ordering::AcqRel);
    cpu().shared.fetch_and(!mask, Ordering::AcqRel);
}

/// The group-wide fatal signal, if one was sent.
pub fn group_kill() -> Option<u32> {
    let s = cpu().group_kill.load(Ordering::Acquire);
    (s != 0).then_some(s)
}

/// Sends process-directed `sig` with `info` to the running thread group.
/// An ignored signal is dropped. A fatal one (neither handled nor
/// ignored, and not blocked by every thread) ends the group (`kill_group`).
/// Otherwise it goes into the group's pending set; if the running thread
/// blocks it, a thread waiting in the kernel that takes it is woken.
pub fn send(sig: u32, info: Info) {
    crate::task::jobctl::prepare_current(sig);
    let d = Disp::current();
    let b = bit(sig);
    let mine = blocked() & b == 0;
    // A blocked signal is queued even if ignored (Linux's `sig_ignored`,
    // which looks at the running thread's mask here).
    if d.ignores(sig) && mine {
        return;
    }
    if d.kills(sig)
        && (sig == SIGKILL || mine || crate::task::sibling_takes(sig, false))
        && !crate::task::jobctl::defer_kill_current(sig)
    {
        kill_group(sig);
        return;
    }
    if d.stops(sig)
        && (sig == SIGSTOP || mine || crate::task::sibling_takes(sig, false))
        && crate::task::jobctl::stop_current_group(sig)
    {
        return;
    }
    cpu().shared_info.lock()[(sig - 1) as usize] = info;
    cpu().shared.fetch_or(b, Ordering::AcqRel);
    if (mine && d.handles(sig)) || cpu().sigwait.load(Ordering::Relaxed) & b != 0 {
        // The running task may be waiting in the scheduler's idle loop
        // (a timer fired there): its wait must end.
        crate::task::wake_current();
    }
    if !mine && d.handles(sig) {
        crate::task::sibling_takes(sig, true);
    }
    if !mine && cpu().sigwait.load(Ordering::Relaxed) & b == 0 {
        crate::task::wake_sigwaiter(sig);
    }
}

/// Sends thread-directed `sig` with `info` to the running thread
/// (`tkill`/`tgkill` to itself, `SIGPIPE`). A fatal one that the thread
/// does not block ends the whole group.
pub fn send_thread(sig: u32, info: Info) {
    crate::task::jobctl::prepare_current(sig);
    let d = Disp::current();
    let b = bit(sig);
    if d.ignores(sig) && blocked() & b == 0 {
        return;
    }
    if d.kills(sig)
        && (sig == SIGKILL || blocked() & b == 0)
        && !crate::task::jobctl::defer_kill_current(sig)
    {
        kill_group(sig);
        return;
    }
    if d.stops(sig) && blocked() & b == 0 && crate::task::jobctl::stop_current_group(sig) {
        return;
    }
    cpu().info.lock()[(sig - 1) as usize] = info;
    cpu().pending.fetch_or(b, Ordering::AcqRel);
}

/// Whether a signal is pending that would run a handler now (or the
/// group is being killed): a blocking host call cut short by a control
/// request then returns instead of being reissued (`hostcall::call`), and
/// a syscall is not started.
pub fn interrupts() -> bool {
    pending() & !blocked() & cpu().handled.load(Ordering::Relaxed) != 0
        || cpu().group_kill.load(Ordering::Relaxed) != 0
}

/// Takes the next deliverable signal (synchronous ones first, the
/// thread's own before the group's) and what it carries, clearing it from
/// its pending set.
fn take_next() -> Option<(u32, Info)> {
    let own = cpu().pending.load(Ordering::Acquire) & !blocked();
    let shared = cpu().shared.load(Ordering::Acquire) & !blocked();
    let ready = own | shared;
    if ready == 0 {
        return None;
    }
    let pick = if ready & SYNCHRONOUS != 0 {
        ready & SYNCHRONOUS
    } else {
        ready
    };
    let pick = if pick & own != 0 { pick & own } else { pick };
    let sig = pick.trailing_zeros() + 1;
    if own & bit(sig) != 0 {
        cpu().pending.fetch_and(!bit(sig), Ordering::AcqRel);
        Some((sig, cpu().info.lock()[(sig - 1) as usize]))
    } else {
        cpu().shared.fetch_and(!bit(sig), Ordering::AcqRel);
        Some((sig, cpu().shared_info.lock()[(sig - 1) as usize]))
    }
}

/// Takes the lowest pending signal of `set` (the thread's own before the
/// group's) and what it carries, blocked or not (`rt_sigtimedwait`).
pub fn take_from(set: u64) -> Option<(u32, Info)> {
    let own = cpu().pending.load(Ordering::Acquire) & set;
    if own != 0 {
        let sig = own.trailing_zeros() + 1;
        cpu().pending.fetch_and(!bit(sig), Ordering::AcqRel);
        return Some((sig, cpu().info.lock()[(sig - 1) as usize]));
    }
    let shared = cpu().shared.load(Ordering::Acquire) & set;
    if shared != 0 {
        let sig = shared.trailing_zeros() + 1;
        cpu().shared.fetch_and(!bit(sig), Ordering::AcqRel);
        return Some((sig, cpu().shared_info.lock()[(sig - 1) as usize]));
    }
    None
}

/// The set the running thread waits for in `rt_sigtimedwait` (0: none).
pub fn sigwait_set() -> u64 {
    cpu().sigwait.load(Ordering::Relaxed)
}

/// Starts (`set`) or ends (0) the running thread's `rt_sigtimedwait`.
pub fn set_sigwait_set(set: u64) {
    cpu().sigwait.store(set, Ordering::Relaxed);
}

/// `siginfo_t` (128 bytes) for `sig` carrying `i`.
pub fn siginfo_words(sig: u32, i: Info) -> [u64; 16] {
    let mut w = [0u64; 16];
    w[0] = u64::from(sig); // si_signo, si_errno = 0
    w[1] = u64::from(i.code as u32); // si_code
    w[2] = if i.addr != 0 {
        i.addr
    } else {
        u64::from(i.pid) | (u64::from(i.uid) << 32)
    };
    // SIGCHLD: si_status (si_utime and si_stime stay 0).
    w[3] = u64::from(i.status as u32);
    w
}

/// Acts on the signals in `mask` (bit `n - 1` = signal `n`) sent from the
/// host: each becomes pending, or ends the program (`send`). They go to
/// pid 1, whichever task runs. SIGKILL from the host always ends it, even
/// with init semantics (Linux forces SIGKILL from an ancestor namespace).
pub fn deliver_from_host(mask: u64) {
    let mut m = mask;
    while m != 0 {
        let sig = m.trailing_zeros() + 1;
        m &= m - 1;
        if sig == SIGKILL {
            log::info!("program killed by signal {sig} from the host");
            hostcall::exit(128 + sig as i32);
        }
        if crate::task::current_tgid() == 1 {
            send(sig, Info::user(SI_USER, 0, 0));
        } else {
            crate::task::signal_init_from_host(sig);
        }
    }
}

/// `SIGPIPE` for a write to a pipe or socket whose reader is gone; the
/// write itself fails with `EPIPE`.
pub fn raise_sigpipe() {
    send_thread(SIGPIPE, Info::user(SI_USER, 1, 0));
}

/// A synchronous fault: delivered to the handler if there is one and the
/// signal is not blocked, otherwise (as Linux's `force_sig`) the program
/// ends with 128 + `sig`.
pub fn force_fault(sig: u32, info: Info) {
    let b = bit(sig);
    if cpu().handled.load(Ordering::Relaxed) & b == 0 || blocked() & b != 0 {
        log::info!(
            "program killed by signal {sig}: fault at address {:#x} (trap {}, error {:#x})",
            info.addr,
            info.trapno,
            info.error
        );
        crate::task::exit_current(crate::task::Status::Killed(sig));
    }
    cpu().info.lock()[(sig - 1) as usize] = info;
    cpu().pending.fetch_or(b, Ordering::AcqRel);
}
