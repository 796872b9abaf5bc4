//! Processes started from outside the guest (`qrun exec`, docs/exec.md).
//!
//! The VMM posts `control::EXEC`; the guest takes each waiting order
//! (`Call::Exec` `TAKE`, `qlib::exec_order`) and either starts a process
//! or signals one it started. A started process is a task whose parent is
//! nobody in the guest (ppid 0, as a process `runc exec` enters the
//! container's pid namespace with): it leads a session and group of its
//! own, its fds 0-2 are host fds the VMM received from the `qrun exec`
//! caller, and its program is found and loaded as `execve` would
//! (`syscalls::sys_exec::prepare`, `$PATH` searched for a bare name). When
//! it ends it is reaped at once and its status goes to the VMM
//! (`EXITED`); its children go to pid 1.
//!
//! Orders are served wherever control requests are (after a host call,
//! at a syscall, from the idle poll while a task exits), so on whatever
//! task's kernel stack; loading a program is deep, so like every control
//! request [`serve_orders`] runs on the vCPU's control stack (`control`).
//!
//! The kernel is not preemptive: a new process runs once the running task
//! blocks, or returns from the syscall or interrupt it was served in
//! ([`yield_if_requested`]). A blocking host call that was cut short for
//! the order returns `-ERESTARTSYS` instead of being reissued
//! ([`break_requested`]): the syscall runs again later and, another task
//! now existing, parks (`task::park`) rather than holding the vCPU.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, Ordering};

use qlib::abi::Call;
use qlib::exec_order::{self, MAX_ORDER, Order, Spawn, op};
use spin::Mutex;

use super::{KERNEL, MAX_TASKS, State, Status, Task, fork};
use crate::arch::switch::FpuState;
use crate::errno::Errno;
use crate::fs::path::AT_FDCWD;
use crate::fs::stat::{S_IFDIR, S_IFMT, statx_mode};
use crate::fs::{Backing, FdTable, File, HostKind, O_RDONLY, O_WRONLY};
use crate::loader::{self, Exec};
use crate::mm::addr_space::AddrSpace;
use crate::process::Process;
use crate::signal::{self, SigState};
use crate::syscalls::sys_exec;
use crate::{hostcall, random};

/// Guest pid -> the VMM's id of the order that started it.
static STARTED: Mutex<BTreeMap<u32, u64>> = Mutex::new(BTreeMap::new());

/// Set when a process was started: the running task lets it run at its
/// next syscall or interrupt exit, and a blocking host call cut short for
/// the order returns.
static BREAK: AtomicBool = AtomicBool::new(false);
/// Set when a signal for the running task must end its blocking call
/// (delivered on the way out; no yield).
static INTERRUPT: AtomicBool = AtomicBool::new(false);

/// `$PATH` when the environment has none (runc's default).
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Whether a blocking host call cut short by a control request should
/// return (`-ERESTARTSYS`) rather than be reissued: a process was just
/// started (the syscall reruns later and parks), or a fatal signal is
/// pending for the running task.
pub fn break_requested() -> bool {
    BREAK.load(Ordering::Relaxed) || INTERRUPT.load(Ordering::Relaxed)
}

/// On the way out of a syscall or interrupt: if a process was started,
/// lets it (and the other runnable tasks) run first.
pub fn yield_if_requested() {
    INTERRUPT.store(false, Ordering::Relaxed);
    if BREAK.swap(false, Ordering::Relaxed) {
        super::sched::yield_now();
    }
}

/// Whether processes can be started: the first program runs (pid 1 is
/// registered), so the kernel is up.
pub fn ready() -> bool {
    KERNEL.try_lock().is_some_and(|k| k.tasks.contains_key(&1))
}

/// Serves every waiting order (`control::EXEC`). Like every control
/// request, on the control stack (`control`): loading a program is deep
/// (27 KiB measured), too deep for a task's kernel stack under an exit
/// and the idle poll, where an order once overflowed into the heap.
pub fn serve_orders() {
    let mut buf = Vec::new();
    if buf.try_reserve_exact(MAX_ORDER).is_err() {
        log::error!("exec: no kernel memory for an order");
        return;
    }
    buf.resize(MAX_ORDER, 0u8);
    loop {
        let (gpa, len) = hostcall::buf(&buf);
        let n = hostcall::call_once(Call::Exec, [op::TAKE, gpa, len, 0, 0, 0]);
        if n == 0 {
            return;
        }
        let Some(bytes) = usize::try_from(n).ok().and_then(|n| buf.get(..n)) else {
            log::warn!("exec: order refused by the VMM: {n}");
            continue;
        };
        match exec_order::decode(bytes) {
            Ok(Order::Spawn(s)) => {
                let r = spawn(&s);
                if let Err(e) = r {
                    log::info!("exec: cannot start {:?}: errno {}", s.argv, e.0);
                }
                let ret = r.map_or_else(|e| (-i64::from(e.0)) as u64, u64::from);
                hostcall::call_once(Call::Exec, [op::STARTED, s.id, ret, 0, 0, 0]);
            }
            Ok(Order::Signal { pid, signo }) => send(pid, signo),
            Err(e) => log::warn!("exec: {e}"),
        }
    }
}

/// Sends `signo` to `pid`, a process an order started.
fn send(pid: u32, signo: u32) {
    if !(1..=64).contains(&signo) || !STARTED.lock().contains_key(&pid) {
        return;
    }
    let info = signal::Info::user(signal::SI_USER, 0, 0);
    if pid == super::current_tgid() {
        signal::send(signo, info);
        // Out of a blocking call, so that delivery happens.
        INTERRUPT.store(true, Ordering::Relaxed);
    } else {
        let _ = super::wait::send_to_group(pid, signo, info);
    }
}

/// A process an order started ended with `st` (called with the task
/// table locked, so no control request is served here). Returns whether
/// it was one.
pub fn exited(pid: u32, st: Status) -> bool {
    let Some(id) = STARTED.lock().remove(&pid) else {
        return false;
    };
    hostcall::call_once(Call::Exec, [op::EXITED, id, st.host_code() as u64, 0, 0, 0]);
    true
}

fn utf8(b: &[u8]) -> Result<&str, Errno> {
    core::str::from_utf8(b).map_err(|_| Errno::EINVAL)
}

/// The fd table of a started process: host fds 0-2 (pipes, sockets or
/// terminals of the caller's; tried without blocking the vCPU).
fn stdio(fds: [i32; 3]) -> FdTable {
    let mut t = FdTable::default();
    for (i, fd) in fds.into_iter().enumerate() {
        if fd < 0 {
            continue;
        }
        let flags = if i == 0 { O_RDONLY } else { O_WRONLY };
        let backing = Backing::Host {
            fd,
            kind: HostKind::Pipe,
        };
        let name = ["/dev/stdin", "/dev/stdout", "/dev/stderr"][i];
        let _ = t.insert_at(i as u64, File::new(backing, flags, name.into()), false);
    }
    t
}

/// Opens the program `name`: a path, or a bare name searched in `$PATH`
/// (the first candidate that exists; `EACCES` if only unrunnable ones do).
fn find_program(
    p: &mut Process,
    name: &str,
    env: &[Vec<u8>],
) -> Result<(Arc<File>, String), Errno> {
    if name.contains('/') {
        return Ok((sys_exec::open_program(p, name)?, String::from(name)));
    }
    if name.is_empty() {
        return Err(Errno::ENOENT);
    }
    let path = env
        .iter()
        .find_map(|e| e.strip_prefix(b"PATH="))
        .and_then(|v| core::str::from_utf8(v).ok())
        .unwrap_or(DEFAULT_PATH);
    let mut denied = false;
    for dir in path.split(':') {
        let dir = if dir.is_empty() { "." } else { dir };
        let cand = alloc::format!("{dir}/{name}");
        match sys_exec::open_program(p, &cand) {
            Ok(f) => {
                // A directory of that name is not the program.
                let is_dir = f
                    .host_fd()
                    .and_then(|fd| crate::fs::host::statx_fd(fd).ok())
                    .is_some_and(|sx| statx_mode(&sx) & S_IFMT == S_IFDIR);
                if !is_dir {
                    return Ok((f, cand));
                }
                denied = true;
            }
            Err(Errno::EACCES) => denied = true,
            Err(_) => {}
        }
    }
    Err(if denied { Errno::EACCES } else { Errno::ENOENT })
}

/// Starts the process `s` asks for; returns its pid. `ENOENT` (no such
/// program), `EACCES`, `ENOEXEC`, `ENOTDIR` (cwd), `E2BIG`, `EAGAIN` (no
/// task slot) are `execve`'s meanings.
pub fn spawn(s: &Spawn<'_>) -> Result<u32, Errno> {
    // The fds are ours from here: an error closes them with `p`.
    let mut files = stdio(s.stdio);
    let console = if s.terminal {
        crate::fs::console::attach(&mut files, [0; 4])
    } else {
        None
    };
    let ids = [s.uid, s.uid, s.gid, s.gid];
    let cwd = crate::fs::path::normalize(utf8(s.cwd)?);
    let argv: Vec<Vec<u8>> = s.argv.iter().map(<[u8]>::to_vec).collect();
    let env: Vec<Vec<u8>> = s.env.iter().map(<[u8]>::to_vec).collect();
    let mut p = Process::new(AddrSpace::new(), ids, files, cwd, String::new(), Vec::new());
    // The exec's own `additionalGids` (runc's exec takes its process's).
    p.groups = s.groups.iter().collect();
    p.groups.sort_unstable();
    let r = load(&mut p, argv, env);
    match r {
        Ok(entry) => {
            let pid = insert(p, s.id, &entry)?;
            // The process leads its own session: the terminal is its
            // controlling terminal.
            if let Some(pty) = console {
                crate::fs::console::set_session(&pty, pid);
            }
            Ok(pid)
        }
        Err(e) => {
            super::wait::free_process(p);
            Err(e)
        }
    }
}

/// Finds and loads the program into `p`'s (fresh, inactive) address space.
fn load(p: &mut Process, argv: Vec<Vec<u8>>, env: Vec<Vec<u8>>) -> Result<loader::Entry, Errno> {
    if KERNEL.lock().tasks.len() >= MAX_TASKS {
        return Err(Errno::EAGAIN);
    }
    let name = utf8(argv.first().ok_or(Errno::EINVAL)?)?;
    let cwd_failed = |e: Errno| Errno(op::CWD_FAILED + e.0);
    let sx = crate::fs::host::statx_path(&p.fs.cwd(), false).map_err(cwd_failed)?;
    if statx_mode(&sx) & S_IFMT != S_IFDIR {
        return Err(cwd_failed(Errno::ENOTDIR));
    }
    let budget = sys_exec::arg_budget(&argv, &env)?;
    let (file, path) = find_program(p, name, &env)?;
    let prog = sys_exec::prepare(p, file, AT_FDCWD, &path, argv, env, budget)?;
    let argv: Vec<&[u8]> = prog.argv.iter().map(Vec::as_slice).collect();
    let envp: Vec<&[u8]> = prog.envp.iter().map(Vec::as_slice).collect();
    let mut rnd = [0u8; 16];
    random::fill(&mut rnd);
    let exec = Exec {
        image: &prog.image,
        interp: prog.interp.as_deref(),
        argv: &argv,
        envp: &envp,
        execfn: &prog.filename,
        ids: p.ids,
        random: rnd,
    };
    let entry = loader::load_fresh(&mut p.mm, &exec).map_err(|e| {
        log::info!("exec: loading {path}: {e}");
        Errno::ENOMEM
    })?;
    p.exe = prog.exe;
    p.cmdline = argv.iter().fold(Vec::new(), |mut v, a| {
        v.extend_from_slice(a);
        v.push(0);
        v
    });
    Ok(entry)
}

/// Queues `p` as a new task that enters its program at `entry`.
fn insert(p: Process, id: u64, entry: &loader::Entry) -> Result<u32, Errno> {
    let frame = crate::exec::fresh_frame(entry);
    let (kstack, kstack_top, rsp) = match fork::new_kstack(&frame) {
        Ok(k) => k,
        Err(e) => {
            super::wait::free_process(p);
            return Err(e);
        }
    };
    let mut k = KERNEL.lock();
    let pid = fork::alloc_pid(&mut k);
    let t = Task {
        pid,
        tgid: pid,
        ppid: 0,
        pgid: pid,
        sid: pid,
        state: State::Runnable,
        kstack_base: kstack.base(),
        kstack: Some(kstack.owned_by(pid)),
        kstack_top,
        rsp,
        fs_base: 0,
        gs_base: 0,
        fpu: FpuState::clean(),
        proc: Some(p),
        thread: crate::process::ThreadFields::new_thread(0, None),
        sig: SigState {
            blocked: 0,
            ..SigState::inherit()
        },
        exit_signal: 0,
        vfork_parent: None,
        comm: [0; 16],
        job: super::jobctl::Job::default(),
        habit: qlib::stint::Habit::new(),
        last_cpu: 0,
    };
    k.tasks.insert(pid, Box::new(t));
    k.runq.push_back(pid);
    STARTED.lock().insert(pid, id);
    drop(k);
    BREAK.store(true, Ordering::Relaxed);
    Ok(pid)
}
