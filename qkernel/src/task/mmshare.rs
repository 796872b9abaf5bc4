//! Processes sharing one address space: `clone(CLONE_VM)` without
//! `CLONE_THREAD` or `CLONE_VFORK` (docs/processes.md, "Shared process
//! objects").
//!
//! Syscall handlers own their process's `AddrSpace` by value
//! (`Process::mm`), so a shared space cannot sit in two processes at
//! once. Instead the members of a sharing group take turns: exactly one
//! member, the *holder*, has the real space in its `Process`; every other
//! member holds an empty stand-in (`AddrSpace::new()`, as a vfork parent
//! does). When the scheduler switches to a member that is not the holder
//! ([`take`]), the two swap: the page tables do not move, so CR3, futex
//! keys (the kernel PGD) and TLB shootdowns (by CR3) are the same for
//! every member. Only one process runs kernel code at a time (vCPU 0),
//! and a member whose user mode runs on a secondary keeps running on the
//! same page tables whichever `Process` holds them.
//!
//! A member that execs, exits or is killed [`leave`]s: if it held the
//! space, another member (switched out, so its `Process` is in its
//! leader's task) gets it and the leaver's caller frees the stand-in; the
//! last member frees the space itself.
//!
//! Lock order: `KERNEL`, then [`GROUPS`] (a leaf).

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use spin::Mutex;

use super::Kernel;
use crate::mm::addr_space::AddrSpace;
use crate::process::Process;

/// A sharing group: its members (thread group ids) and the holder.
struct Group {
    members: Vec<u32>,
    holder: u32,
}

/// Every group, by an id of its own (pids are reused: a group may
/// outlive the process that made it).
struct Groups {
    next: u64,
    groups: BTreeMap<u64, Group>,
    /// Member -> group.
    of: BTreeMap<u32, u64>,
}

static GROUPS: Mutex<Groups> = Mutex::new(Groups {
    next: 1,
    groups: BTreeMap::new(),
    of: BTreeMap::new(),
});

/// Whether thread group `tgid` shares its address space with another
/// process.
pub fn member(tgid: u32) -> bool {
    GROUPS.lock().of.contains_key(&tgid)
}

/// `child` (which holds a stand-in) shares `parent`'s space; `parent`,
/// which runs, is (or stays) the holder.
pub fn join(parent: u32, child: u32) {
    let mut g = GROUPS.lock();
    let id = match g.of.get(&parent) {
        Some(&id) => id,
        None => {
            let id = g.next;
            g.next += 1;
            g.groups.insert(
                id,
                Group {
                    members: alloc::vec![parent],
                    holder: parent,
                },
            );
            g.of.insert(parent, id);
            id
        }
    };
    g.of.insert(child, id);
    if let Some(grp) = g.groups.get_mut(&id) {
        grp.members.push(child);
    }
}

/// The scheduler switches to thread group `tgid`, whose process `p` is in
/// the running slot: if `tgid` shares a space it does not hold, it takes
/// it from the holder (switched out: its process is in its leader's
/// task), which gets `p`'s stand-in.
pub fn take(k: &mut Kernel, tgid: u32, p: &mut Process) {
    let mut g = GROUPS.lock();
    let Some(&id) = g.of.get(&tgid) else {
        return;
    };
    let Some(grp) = g.groups.get_mut(&id) else {
        return;
    };
    if grp.holder == tgid {
        return;
    }
    match k.tasks.get_mut(&grp.holder).and_then(|t| t.proc.as_mut()) {
        Some(h) => {
            core::mem::swap(&mut h.mm, &mut p.mm);
            grp.holder = tgid;
        }
        None => log::error!(
            "mmshare: holder {} of group {id} has no process (switch to {tgid})",
            grp.holder
        ),
    }
}

/// The member of `tgid`'s group that holds the space, if `tgid` shares
/// one.
pub fn holder(tgid: u32) -> Option<u32> {
    let g = GROUPS.lock();
    let id = g.of.get(&tgid)?;
    g.groups.get(id).map(|grp| grp.holder)
}

/// Moves the space to switched-out member `tgid` from the switched-out
/// member holding it (to look at it: `/proc/PID/maps`). Nothing happens
/// when the holder is the running process (its process is in the running
/// slot, not in `k`): the caller lends it then.
pub fn hand_to(k: &mut Kernel, tgid: u32) {
    let mut g = GROUPS.lock();
    let Some(&id) = g.of.get(&tgid) else {
        return;
    };
    let Some(grp) = g.groups.get_mut(&id) else {
        return;
    };
    let h = grp.holder;
    if h == tgid {
        return;
    }
    let mut two = k
        .tasks
        .iter_mut()
        .filter(|(pid, _)| **pid == h || **pid == tgid)
        .filter_map(|(_, t)| t.proc.as_mut());
    if let (Some(a), Some(b)) = (two.next(), two.next()) {
        core::mem::swap(&mut a.mm, &mut b.mm);
        grp.holder = tgid;
    }
}

/// Thread group `tgid` lets go of its address space `mm` (it execs,
/// exits or is killed; its process is not in the running slot any more
/// or is about to get a fresh space). If it held the shared space,
/// another member gets it and `mm` becomes that member's stand-in, which
/// the caller frees instead; the last member keeps the space in `mm` (the
/// caller frees it).
pub fn leave(k: &mut Kernel, tgid: u32, mm: &mut AddrSpace) {
    let mut g = GROUPS.lock();
    let Some(id) = g.of.remove(&tgid) else {
        return;
    };
    let Some(grp) = g.groups.get_mut(&id) else {
        return;
    };
    grp.members.retain(|&m| m != tgid);
    if grp.holder == tgid {
        let heir = grp
            .members
            .iter()
            .copied()
            .find(|m| k.tasks.get(m).is_some_and(|t| t.proc.is_some()));
        match heir {
            Some(m) => {
                if let Some(h) = k.tasks.get_mut(&m).and_then(|t| t.proc.as_mut()) {
                    core::mem::swap(&mut h.mm, mm);
                }
                log::debug!("mmshare: {tgid} leaves, {m} holds the space");
                grp.holder = m;
            }
            None if !grp.members.is_empty() => log::error!(
                "mmshare: group {id} loses its space with {} member(s) left",
                grp.members.len()
            ),
            None => {}
        }
    }
    if grp.members.len() <= 1 {
        let left = grp.members.first().copied();
        g.groups.remove(&id);
        if let Some(m) = left {
            g.of.remove(&m);
        }
    }
}
