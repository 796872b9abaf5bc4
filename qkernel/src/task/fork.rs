//! `fork`, `vfork` and process-creating `clone`: a copy-on-write copy of
//! the address space (a vfork child borrows the parent's instead) and a
//! kernel stack that starts in `ret_from_fork`.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use spin::Mutex;

use qlib::pte::{Pte, WRITABLE};

use super::kstack::KStack;
use super::{KERNEL, KSTACK_SIZE, MAX_TASKS, State, Task, current_pid};
use crate::arch::entry::TrapFrame;
use crate::arch::switch::{self, FpuState, SWITCH_FRAME_WORDS};
use crate::arch::{self};
use crate::errno::Errno;
use crate::mm::addr_space::AddrSpace;
use crate::mm::vma::VmaKind;
use crate::mm::{frames, swap, uaccess};
use crate::process::Process;
use crate::signal::SigState;

pub const CLONE_VM: u64 = 0x100;
pub const CLONE_FS: u64 = 0x200;
pub const CLONE_FILES: u64 = 0x400;
pub const CLONE_SIGHAND: u64 = 0x800;
pub const CLONE_VFORK: u64 = 0x4000;
pub const CLONE_PARENT: u64 = 0x8000;
pub const CLONE_THREAD: u64 = 0x1_0000;
pub const CLONE_SETTLS: u64 = 0x8_0000;
pub const CLONE_PARENT_SETTID: u64 = 0x10_0000;
pub const CLONE_CHILD_CLEARTID: u64 = 0x20_0000;
pub const CLONE_CHILD_SETTID: u64 = 0x100_0000;

/// Largest pid (Linux's default `pid_max`).
const PID_MAX: u32 = 4 << 20;

/// What a new process is made of.
pub struct ForkArgs {
    pub flags: u64,
    /// New user stack pointer (0: the parent's).
    pub stack: u64,
    pub parent_tid: u64,
    pub child_tid: u64,
    pub tls: u64,
}

/// Copies `mm` for a child: every present page is shared read-only with a
/// reference for the child, and the first write to it by either side
/// copies it (`mm::fault`). Swapped pages are read back first.
/// `MAP_SHARED` anonymous VMAs are populated and their frames shared
/// writable, so writes on either side are seen by the other (as Linux).
fn cow_copy(mm: &mut AddrSpace) -> Result<AddrSpace, Errno> {
    let mut child = AddrSpace::new();
    child.brk_start = mm.brk_start;
    child.brk = mm.brk;
    let vmas: Vec<_> = mm.vmas.iter_range(0, u64::MAX).copied().collect();
    let r = (|| {
        for vma in &vmas {
            if vma.kind == VmaKind::Kernel {
                // The same kernel pages (return page, vDSO, vvar).
                for va in (vma.start..vma.end).step_by(4096) {
                    let pte = mm.pt.get(va);
                    if pte.present() {
                        child.map_kernel_page(va, pte.addr(), vma.prot)?;
                    }
                }
                continue;
            }
            child.vmas.insert(*vma);
            let shared_anon = matches!(vma.kind, VmaKind::SharedAnon { .. });
            if shared_anon {
                // Both sides must map the same frames, including pages not
                // touched yet: the parent gets them all now.
                mm.populate(vma.start, vma.end)?;
            }
            let mut va = vma.start;
            while va < vma.end {
                let Some(mut leaf) = mm.pt.leaf(va, false) else {
                    va = ((va | 0x1f_ffff) + 1).min(vma.end);
                    continue;
                };
                // SAFETY: `leaf` points into a live page-table page of `mm`.
                let mut pte = Pte(unsafe { *leaf });
                if pte.swapped() {
                    swap::swap_in(mm, vma, va).map_err(|_| Errno::ENOMEM)?;
                    leaf = mm.pt.leaf(va, false).ok_or(Errno::ENOMEM)?;
                    // SAFETY: as above.
                    pte = Pte(unsafe { *leaf });
                }
                if pte.present() {
                    // Shared memory keeps its PTE (writable as the VMA
                    // allows) on both sides; the rest is copy-on-write.
                    let shared = if vma.kind.is_shared() {
                        pte.0
                    } else {
                        pte.0 & !WRITABLE
                    };
                    let cleaf = child.pt.leaf(va, true).ok_or(Errno::ENOMEM)?;
                    frames::get(pte.addr());
                    // SAFETY: `leaf` and `cleaf` point into live page-table
                    // pages of `mm` and `child`; W is dropped in both (the
                    // TLB is flushed below).
                    unsafe {
                        *leaf = shared;
                        *cleaf = shared;
                    }
                }
                va += 4096;
            }
        }
        Ok(())
    })();
    arch::flush_tlb();
    match r {
        Ok(()) => Ok(child),
        Err(e) => {
            // SAFETY: CR3 names the parent's PGD, not the child's.
            unsafe { child.free() };
            Err(e)
        }
    }
}

/// A kernel stack whose first switch lands in `ret_from_fork` and returns
/// to user mode with `frame`: (stack, top, saved rsp).
pub(super) fn new_kstack(frame: &TrapFrame) -> Result<(KStack, u64, u64), Errno> {
    let mut stack = KStack::new()?;
    let base = stack.base();
    let top = (base + KSTACK_SIZE as u64) & !15;
    let frame_words = size_of::<TrapFrame>() / 8;
    let top_idx = ((top - base) / 8) as usize;
    let frame_idx = top_idx - frame_words;
    // SAFETY: TrapFrame is repr(C), all u64: viewing it as words is sound.
    let words: &[u64] = unsafe {
        core::slice::from_raw_parts((frame as *const TrapFrame).cast::<u64>(), frame_words)
    };
    let stack_words = stack.words_mut();
    stack_words[frame_idx..top_idx].copy_from_slice(words);
    stack_words[frame_idx - 1] = switch::ret_from_fork as *const () as u64;
    let rsp_idx = frame_idx - 1 - SWITCH_FRAME_WORDS;
    let rsp = base + (rsp_idx as u64) * 8;
    Ok((stack, top, rsp))
}

/// Creates a child of the running process `p`; returns its pid. The child
/// is queued first, and the caller yields (`task::Action::Yield`) so it
/// runs first; with `CLONE_VFORK` the caller waits for its exec or exit.
pub fn fork(p: &mut Process, a: &ForkArgs) -> Result<u32, Errno> {
    if a.flags & CLONE_SETTLS != 0 && !arch::user_base_ok(a.tls) {
        return Err(Errno::EPERM);
    }
    if a.flags & CLONE_THREAD != 0 {
        return new_thread(p, a);
    }
    if a.flags & CLONE_SIGHAND != 0 && a.flags & CLONE_VM == 0 {
        return Err(Errno::EINVAL);
    }
    let me = super::current_tgid();
    // A vfork child runs on its parent's space only until it execs or
    // exits (`lend_back`): it cannot share it with a third process.
    if a.flags & CLONE_VM != 0 && lent(me) {
        log::warn!(
            "clone flags {:#x}: CLONE_VM from a vfork child is not supported",
            a.flags
        );
        return Err(Errno::ENOSYS);
    }
    if KERNEL.lock().tasks.len() >= MAX_TASKS {
        return Err(Errno::EAGAIN);
    }
    let exit_signal = (a.flags & 0xff) as u32;
    if exit_signal > 64 {
        return Err(Errno::EINVAL);
    }
    let (kstack, kstack_top, rsp) = new_kstack(&child_frame(a.stack))?;
    // A vfork child (CLONE_VM | CLONE_VFORK) runs on the parent's own
    // address space, lent to it until it execs or exits; the parent,
    // which waits meanwhile, holds an empty one. Otherwise (CLONE_VM
    // alone, or a vfork from a parent whose other threads or sharing
    // processes run on) the two share the space (`mmshare`): the child
    // starts with a stand-in and takes the space when it first runs.
    let vfork = a.flags & (CLONE_VM | CLONE_VFORK) == CLONE_VM | CLONE_VFORK;
    let lend = vfork && !has_threads() && !super::mmshare::member(me);
    let share = a.flags & CLONE_VM != 0 && !lend;
    let mm = if lend {
        core::mem::replace(&mut p.mm, AddrSpace::new())
    } else if share {
        AddrSpace::new()
    } else {
        cow_copy(&mut p.mm)?
    };
    let mut child = Process {
        mm,
        signals: if a.flags & CLONE_SIGHAND != 0 {
            p.signals.clone()
        } else {
            crate::process::copy_handlers(&p.signals)
        },
        files: if a.flags & CLONE_FILES != 0 {
            p.files.clone()
        } else {
            p.files.copy()
        },
        fs: if a.flags & CLONE_FS != 0 {
            p.fs.clone()
        } else {
            p.fs.copy()
        },
        exe: p.exe.clone(),
        cmdline: p.cmdline.clone(),
        environ: p.environ.clone(),
        comm: p.comm,
        ids: p.ids,
        shared_sig: crate::signal::GroupSig::new(),
        caps: p.caps,
        groups: p.groups.clone(),
    };
    // The child's thread: the parent's alternate stack and name (as
    // Linux's fork), no robust list.
    let thread = {
        let me = crate::process::thread();
        crate::process::ThreadFields {
            clear_child_tid: if a.flags & CLONE_CHILD_CLEARTID != 0 {
                a.child_tid
            } else {
                0
            },
            robust_list: 0,
            altstack: me.altstack,
            name: me.name,
        }
    };
    let fpu = FpuState::current();
    let mut k = KERNEL.lock();
    let pid = alloc_pid(&mut k);
    if lend {
        set_tids(a, None, &mut child.mm, pid);
        LENT.lock().insert(pid, me);
    } else if share {
        set_tids(a, None, &mut p.mm, pid);
        super::mmshare::join(me, pid);
    } else {
        set_tids(a, Some(&mut child.mm), &mut p.mm, pid);
    }
    let (ppid, pgid, sid) = match k.tasks.get(&me) {
        Some(t) if a.flags & CLONE_PARENT != 0 => (t.ppid, t.pgid, t.sid),
        Some(t) => (me, t.pgid, t.sid),
        None => (me, me, 1),
    };
    let t = Task {
        pid,
        tgid: pid,
        ppid,
        pgid,
        sid,
        state: State::Runnable,
        kstack_base: kstack.base(),
        kstack: Some(kstack.owned_by(pid)),
        kstack_top,
        rsp,
        fs_base: if a.flags & CLONE_SETTLS != 0 {
            a.tls
        } else {
            arch::fs_base()
        },
        gs_base: arch::gs_base(),
        fpu,
        proc: Some(child),
        thread,
        sig: SigState::inherit(),
        exit_signal,
        vfork_parent: (a.flags & CLONE_VFORK != 0).then_some(current_pid()),
        comm: [0; 16],
        job: super::jobctl::Job::default(),
        habit: qlib::stint::Habit::new(),
        last_cpu: 0,
    };
    k.tasks.insert(pid, Box::new(t));
    k.runq.push_front(pid);
    Ok(pid)
}

/// Vfork children running on their parent's address space: child pid ->
/// parent (thread group id).
static LENT: Mutex<BTreeMap<u32, u32>> = Mutex::new(BTreeMap::new());

/// Whether the running thread group has other threads.
pub fn has_threads() -> bool {
    let (me, g) = (current_pid(), super::current_tgid());
    KERNEL
        .lock()
        .tasks
        .values()
        .any(|t| t.tgid == g && t.pid != me)
}

/// Task `pid` lets go of its address space `mm` (it execs, exits or is
/// killed): if it is a vfork child running on its parent's space, that
/// space goes back to the parent and `mm` becomes the parent's empty
/// stand-in, which the caller frees instead. The parent waits for this
/// child, so its `Process` is in its leader's task; if the parent is gone
/// the caller frees `mm` itself.
pub fn lend_back(k: &mut super::Kernel, pid: u32, mm: &mut AddrSpace) {
    let Some(parent) = LENT.lock().remove(&pid) else {
        return;
    };
    if let Some(p) = k.tasks.get_mut(&parent).and_then(|t| t.proc.as_mut()) {
        core::mem::swap(&mut p.mm, mm);
    }
}

/// Whether vfork child `child` still holds its parent's address space.
pub fn lent(child: u32) -> bool {
    LENT.lock().contains_key(&child)
}

/// `CLONE_CHILD_SETTID` (into the child's memory, `None`: it shares the
/// parent's) and `CLONE_PARENT_SETTID`: writes the new task's id. As
/// Linux, a bad address is ignored.
fn set_tids(a: &ForkArgs, child: Option<&mut AddrSpace>, parent: &mut AddrSpace, id: u32) {
    if a.flags & CLONE_CHILD_SETTID != 0 {
        let mm = match child {
            Some(mm) => mm,
            None => &mut *parent,
        };
        let _ = uaccess::write(mm, a.child_tid, &id);
    }
    if a.flags & CLONE_PARENT_SETTID != 0 {
        let _ = uaccess::write(parent, a.parent_tid, &id);
    }
}

/// A free pid: pids count up to PID_MAX and wrap, skipping the ones in use
/// (there are fewer than MAX_TASKS, so the loop ends).
pub(super) fn alloc_pid(k: &mut super::Kernel) -> u32 {
    let mut pid = k.next_pid;
    while k.tasks.contains_key(&pid) {
        pid = if pid >= PID_MAX { 2 } else { pid + 1 };
    }
    k.next_pid = if pid >= PID_MAX { 2 } else { pid + 1 };
    pid
}

/// The parent's syscall frame (at the top of its kernel stack) as the new
/// task returns with it: RAX = 0, RSP = `stack` unless 0.
fn child_frame(stack: u64) -> TrapFrame {
    let top = switch::kernel_stack_top();
    // SAFETY: this runs inside a syscall from user mode: the entry built a
    // TrapFrame right below the kernel stack top.
    let mut frame = unsafe { *((top - size_of::<TrapFrame>() as u64) as *const TrapFrame) };
    frame.rax = 0;
    if stack != 0 {
        frame.rsp = stack;
    }
    frame
}

/// `clone` with `CLONE_THREAD`: a new thread of the running group, sharing
/// its `Process` (memory, files, fs, handlers), with its own kernel stack,
/// registers, TLS, FPU state, signal mask and per-thread fields. Queued
/// first; the caller yields so it runs first, as a forked child does.
fn new_thread(p: &mut Process, a: &ForkArgs) -> Result<u32, Errno> {
    const NEEDED: u64 = CLONE_VM | CLONE_SIGHAND | CLONE_FS | CLONE_FILES;
    if a.flags & (CLONE_VM | CLONE_SIGHAND) != CLONE_VM | CLONE_SIGHAND {
        return Err(Errno::EINVAL);
    }
    if a.flags & NEEDED != NEEDED || a.flags & CLONE_VFORK != 0 {
        log::warn!(
            "clone flags {:#x}: a thread without shared fs or files",
            a.flags
        );
        return Err(Errno::ENOSYS);
    }
    if KERNEL.lock().tasks.len() >= MAX_TASKS {
        return Err(Errno::EAGAIN);
    }
    let (kstack, kstack_top, rsp) = new_kstack(&child_frame(a.stack))?;
    let fpu = FpuState::current();
    let g = super::current_tgid();
    let mut k = KERNEL.lock();
    let tid = alloc_pid(&mut k);
    set_tids(a, None, &mut p.mm, tid);
    let (ppid, pgid, sid) = match k.tasks.get(&g) {
        Some(l) => (l.ppid, l.pgid, l.sid),
        None => (0, g, 1),
    };
    let clear = if a.flags & CLONE_CHILD_CLEARTID != 0 {
        a.child_tid
    } else {
        0
    };
    let t = Task {
        pid: tid,
        tgid: g,
        ppid,
        pgid,
        sid,
        state: State::Runnable,
        kstack_base: kstack.base(),
        kstack: Some(kstack.owned_by(tid)),
        kstack_top,
        rsp,
        fs_base: if a.flags & CLONE_SETTLS != 0 {
            a.tls
        } else {
            arch::fs_base()
        },
        gs_base: arch::gs_base(),
        fpu,
        proc: None,
        thread: crate::process::ThreadFields::new_thread(clear, crate::process::thread().name),
        sig: SigState::inherit(),
        exit_signal: 0,
        vfork_parent: None,
        comm: [0; 16],
        job: super::jobctl::Job::default(),
        habit: qlib::stint::Habit::new(),
        last_cpu: 0,
    };
    k.tasks.insert(tid, Box::new(t));
    k.runq.push_front(tid);
    Ok(tid)
}

/// Whether the vfork child `child` has neither exec'd nor exited yet.
pub fn vfork_pending(child: u32) -> bool {
    KERNEL
        .lock()
        .tasks
        .get(&child)
        .is_some_and(|t| t.vfork_parent.is_some())
}

/// The vfork child `child` exec'd or exited: its parent goes on.
pub fn release_vfork_parent(child: u32) {
    let mut k = KERNEL.lock();
    let parent = k.tasks.get_mut(&child).and_then(|t| t.vfork_parent.take());
    if let Some(pp) = parent {
        super::sched::wake(&mut k, pp);
    }
}
