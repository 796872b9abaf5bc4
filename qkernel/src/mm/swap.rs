//! Hibernation, guest side (DESIGN.md "Hibernation"): deflate on
//! [`qlib::abi::control::HIBERNATE`], swap-in on page faults, and the
//! working set that goes to the REAP file.
//!
//! Deflate ([`hibernate`]), with the program stopped (we are in the kernel,
//! one vCPU, one task):
//! 1. `HibernateBegin`; walk the user half of the page tables (raw, through
//!    the direct map: this may run inside a syscall that holds the process
//!    lock); every present page of the page allocator is either in the
//!    working set (goes to the REAP file, PTE untouched) or gets a swap slot
//!    (one per frame: a frame mapped by several PTEs is written once).
//!    Pages named by an interrupted blocking host call are pinned.
//! 2. `SwapOut`/`ReapOut` batches of up to 1024 pages; the VMM writes them
//!    (O_DIRECT from guest RAM) but drops nothing yet. `HibernatePrepare`
//!    writes the tables. Any failure (disk full): slots are given back,
//!    `HibernateAbort`, nothing changed.
//! 3. PTEs become swap entries (present clear, bit 9, slot), frames are
//!    freed without zeroing, one TLB flush; reclaim hands every free page
//!    (the swapped frames too) back to the host; `HibernateCommit` drops
//!    the REAP pages. Outside a blocking call the guest then parks
//!    (`HibernatePark`); inside one it goes back to waiting, so readiness
//!    of what it waits on wakes the sandbox (the VMM prefetches the REAP
//!    file before the guest runs).
//!
//! Swap-in ([`swap_in`]): a fault on a swapped PTE reads the faulting page
//! and every swapped page of its aligned [`SWAP_IN_PAGES`] window in one
//! `SwapIn` call, then maps them (not-present -> present: no flush).
//!
//! Working set: the pages swapped in since the last hibernation. After a
//! page-fault wake it becomes the REAP set; after a REAP wake the set is
//! kept, and widened by the pages swapped in when there were at least
//! [`RERECORD_FAULTS`] swap faults (the working set moved). Pages no longer
//! mapped drop out.
//!
//! Rule for kernel code: do not hold user guest-physical addresses across
//! a host call other than in that call's own arguments (those of a
//! restarted blocking call are pinned, see [`in_flight_pins`]).
//!
//! Lock order: `STATE`, then the page allocator; never the process lock.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::vec::Vec;

use qlib::abi::{Call, IoVec, MAX_IOVECS, SwapPage};
use qlib::pte::{ADDR_MASK, HUGE, MAX_SWAP_SLOT, Pte, swap_entry};
use spin::Mutex;

use super::addr_space::{AddrSpace, pte_flags};
use super::fault::FaultError;
use super::vma::Vma;
use super::{frames, gpa_to_kva};
use crate::{arch, hostcall};

/// Pages read per swap fault: the faulting page's aligned window.
pub const SWAP_IN_PAGES: u64 = 16;
/// Swap faults after a REAP wake that make the working set be re-recorded.
pub const RERECORD_FAULTS: u64 = 16;

struct SwapState {
    /// Reference count of each swap slot (PTEs naming it).
    slots: Vec<u16>,
    /// No free slot below this index.
    first_free: usize,
    /// The working set (user addresses) that goes to the REAP file.
    reap_set: BTreeSet<u64>,
    /// User pages swapped in since the last hibernation.
    recorded: BTreeSet<u64>,
    /// Swap faults since the last hibernation.
    faults: u64,
}

static STATE: Mutex<SwapState> = Mutex::new(SwapState {
    slots: Vec::new(),
    first_free: 0,
    reap_set: BTreeSet::new(),
    recorded: BTreeSet::new(),
    faults: 0,
});

/// The blocking host call a control request interrupted, if any.
static IN_FLIGHT: Mutex<Option<(Call, [u64; 6])>> = Mutex::new(None);

/// Records the blocking host call being restarted (`hostcall::call`), or
/// `None` once it is reissued.
pub fn set_in_flight(call: Option<(Call, [u64; 6])>) {
    *IN_FLIGHT.lock() = call;
}

impl SwapState {
    fn alloc_slot(&mut self) -> Option<u64> {
        while self.first_free < self.slots.len() && self.slots[self.first_free] != 0 {
            self.first_free += 1;
        }
        if self.first_free == self.slots.len() {
            if self.slots.len() as u64 > MAX_SWAP_SLOT {
                return None;
            }
            self.slots.push(0);
        }
        let slot = self.first_free;
        self.slots[slot] = 1;
        self.first_free += 1;
        Some(slot as u64)
    }

    /// Drops one PTE's reference to `slot`.
    fn put_slot(&mut self, slot: u64) {
        let Some(count) = self.slots.get_mut(slot as usize) else {
            log::error!("swap slot {slot} out of range");
            return;
        };
        *count = count.saturating_sub(1);
        if *count == 0 {
            self.first_free = self.first_free.min(slot as usize);
        }
    }
}

/// Drops the slot of a swapped PTE being unmapped.
pub fn release(pte: Pte) {
    if pte.swapped() {
        STATE.lock().put_slot(pte.swap_slot());
    }
}

/// A present user page found by the walk.
struct Mapped {
    va: u64,
    leaf: *mut u64,
    gpa: u64,
}

/// Calls `f` for every present 4 KiB user leaf of the address space whose
/// kernel PGD is at `pgd`.
fn walk_user(pgd: u64, f: &mut dyn FnMut(Mapped)) {
    let table = |gpa: u64| gpa_to_kva(gpa) as *mut u64;
    // Reads below: page-table pages of the current address space, reached
    // through the direct map; one vCPU, and nothing else walks or changes
    // them while the kernel runs this.
    for i4 in 0..256u64 {
        // SAFETY: see above; the PGD is a live page-table page.
        let e4 = Pte(unsafe { *table(pgd).add(i4 as usize) });
        if !e4.present() {
            continue;
        }
        for i3 in 0..512u64 {
            // SAFETY: as above.
            let e3 = Pte(unsafe { *table(e4.addr()).add(i3 as usize) });
            if !e3.present() || e3.0 & HUGE != 0 {
                continue;
            }
            for i2 in 0..512u64 {
                // SAFETY: as above.
                let e2 = Pte(unsafe { *table(e3.addr()).add(i2 as usize) });
                if !e2.present() || e2.0 & HUGE != 0 {
                    continue;
                }
                for i1 in 0..512u64 {
                    let leaf = table(e2.addr()).wrapping_add(i1 as usize);
                    // SAFETY: as above.
                    let e1 = Pte(unsafe { *leaf });
                    if e1.present() {
                        let va = (i4 << 39) | (i3 << 30) | (i2 << 21) | (i1 << 12);
                        f(Mapped {
                            va,
                            leaf,
                            gpa: e1.addr(),
                        });
                    }
                }
            }
        }
    }
}

/// Guest-physical pages named by the interrupted blocking call, which must
/// stay where they are: it is reissued with the same addresses. `Err` for a
/// call whose buffers this function does not know (hibernation is then
/// refused rather than risk moving a page under it).
fn in_flight_pins(in_flight: Option<(Call, [u64; 6])>) -> Result<BTreeSet<u64>, Call> {
    let mut pins = BTreeSet::new();
    let Some((call, args)) = in_flight else {
        return Ok(pins);
    };
    match call {
        // Kernel buffers only (the PollFd array is a kernel copy).
        Call::Sleep | Call::Poll | Call::HibernatePark => {}
        Call::Readv | Call::Writev => {
            let count = args[2].min(MAX_IOVECS);
            for i in 0..count {
                // SAFETY: the iovec list is a live kernel buffer of the
                // interrupted call (`hostcall::iovecs`), `count` long.
                let v = unsafe { *(gpa_to_kva(args[1]) as *const IoVec).add(i as usize) };
                let mut page = v.gpa & !0xfff;
                while page < v.gpa.saturating_add(v.len) {
                    pins.insert(page);
                    page += 4096;
                }
            }
        }
        other => return Err(other),
    }
    Ok(pins)
}

/// What one deflate does.
struct Plan {
    /// PTEs that become swap entries, with their slot.
    swap: Vec<(*mut u64, u64, u64)>,
    /// Distinct frames to write, with their slot.
    out: Vec<SwapPage>,
    /// Frames of the working set (REAP file), in address order.
    reap: Vec<IoVec>,
    reap_pages: u64,
    reap_set: BTreeSet<u64>,
}

fn plan(st: &mut SwapState, pins: &BTreeSet<u64>) -> Result<Plan, i64> {
    let wanted = &st.reap_set;
    let mut p = Plan {
        swap: Vec::new(),
        out: Vec::new(),
        reap: Vec::new(),
        reap_pages: 0,
        reap_set: BTreeSet::new(),
    };
    let mut slot_of: BTreeMap<u64, u64> = BTreeMap::new();
    let mut reap_frames: BTreeSet<u64> = BTreeSet::new();
    let mut mapped = Vec::new();
    walk_user(arch::cr3() & ADDR_MASK, &mut |m| mapped.push(m));
    // Working-set pages first, so a frame mapped twice stays whole.
    for m in &mapped {
        if wanted.contains(&m.va) && !pins.contains(&m.gpa) && frames::owns(m.gpa) {
            p.reap_set.insert(m.va);
            if reap_frames.insert(m.gpa) {
                match p.reap.last_mut() {
                    Some(last) if last.gpa + last.len == m.gpa => last.len += 4096,
                    _ => p.reap.push(IoVec {
                        gpa: m.gpa,
                        len: 4096,
                    }),
                }
                p.reap_pages += 1;
            }
        }
    }
    let mut failed = false;
    for m in mapped {
        if pins.contains(&m.gpa) || reap_frames.contains(&m.gpa) || !frames::owns(m.gpa) {
            continue;
        }
        let slot = match slot_of.get(&m.gpa) {
            Some(&s) => {
                st.slots[s as usize] = st.slots[s as usize].saturating_add(1);
                s
            }
            None => {
                let Some(s) = st.alloc_slot() else {
                    failed = true;
                    break;
                };
                slot_of.insert(m.gpa, s);
                p.out.push(SwapPage {
                    gpa: m.gpa,
                    slot: s,
                });
                s
            }
        };
        p.swap.push((m.leaf, slot, m.gpa));
    }
    if failed {
        rollback(st, &p);
        return Err(-(crate::errno::Errno::ENOSPC as i64));
    }
    Ok(p)
}

fn rollback(st: &mut SwapState, p: &Plan) {
    for &(_, slot, _) in &p.swap {
        st.put_slot(slot);
    }
}

/// Sends `items` in batches of at most [`MAX_IOVECS`].
fn send<T>(call: Call, items: &[T]) -> i64 {
    let mut total = 0;
    for batch in items.chunks(MAX_IOVECS as usize) {
        let gpa = super::kva_to_gpa(batch.as_ptr() as u64);
        let rc = hostcall::call(call, [gpa, batch.len() as u64, 0, 0, 0, 0]);
        if rc < 0 {
            return rc;
        }
        total += rc;
    }
    total
}

/// Serves a hibernate request; returns whether the caller should park
/// (the request came outside a blocking host call).
pub fn hibernate() -> bool {
    // Read before any host call of ours, which resets it.
    let in_flight = *IN_FLIGHT.lock();
    if hostcall::call(Call::HibernateBegin, [0; 6]) < 0 {
        log::debug!("stale hibernate request ignored");
        return false;
    }
    let abort = |rc: i64| {
        hostcall::call(Call::HibernateAbort, [rc as u64, 0, 0, 0, 0, 0]);
        false
    };
    let pins = match in_flight_pins(in_flight) {
        Ok(p) => p,
        Err(call) => {
            log::warn!("hibernation refused: interrupted {call:?} holds buffers we cannot pin");
            return abort(-(crate::errno::Errno::EBUSY as i64));
        }
    };
    // Reclaim first: the walk and the writes then start from a lean guest.
    crate::control::reclaim();
    let mut st = STATE.lock();
    // The working set: see the module doc.
    let recorded = core::mem::take(&mut st.recorded);
    let faults = core::mem::take(&mut st.faults);
    if st.reap_set.is_empty() {
        st.reap_set = recorded;
    } else if faults >= RERECORD_FAULTS {
        log::debug!("{faults} swap faults after a REAP wake: re-recording the working set");
        st.reap_set.extend(recorded);
    }
    let p = match plan(&mut st, &pins) {
        Ok(p) => p,
        Err(rc) => return abort(rc),
    };
    let mut rc = send(Call::SwapOut, &p.out);
    if rc >= 0 {
        rc = send(Call::ReapOut, &p.reap);
    }
    if rc >= 0 {
        rc = hostcall::call(Call::HibernatePrepare, [0; 6]);
    }
    if rc < 0 {
        rollback(&mut st, &p);
        log::warn!("hibernation aborted: {rc}");
        return abort(rc);
    }
    for &(leaf, slot, gpa) in &p.swap {
        // SAFETY: `leaf` is a live leaf entry found by the walk; nothing
        // changed the page tables since (one vCPU, the program is stopped).
        unsafe { *leaf = swap_entry(slot).0 };
        frames::put_swapped(gpa);
    }
    arch::flush_tlb();
    st.reap_set = p.reap_set;
    drop(st);
    // Hands the swapped frames (now free) back to the host with the rest.
    crate::control::reclaim();
    hostcall::call(
        Call::HibernateCommit,
        [p.out.len() as u64, p.reap_pages, 0, 0, 0, 0],
    );
    log::debug!(
        "hibernated: {} pages swapped out ({} PTEs), {} pages to the REAP file, {} pinned",
        p.out.len(),
        p.swap.len(),
        p.reap_pages,
        pins.len()
    );
    in_flight.is_none()
}

/// Waits, hibernated, until the VMM wakes the sandbox.
pub fn park() {
    hostcall::call(Call::HibernatePark, [0; 6]);
}

/// Resolves a fault on the swapped page `page` of `vma`: reads it and the
/// swapped pages of its window back in one host call.
pub fn swap_in(mm: &mut AddrSpace, vma: &Vma, page: u64) -> Result<(), FaultError> {
    let window = SWAP_IN_PAGES * 4096;
    let start = (page & !(window - 1)).max(vma.start);
    let end = ((page & !(window - 1)) + window).min(vma.end);
    let mut batch: Vec<(u64, *mut u64, SwapPage)> = Vec::new();
    let mut va = start;
    while va < end {
        if let Some(leaf) = mm.pt.leaf(va, false) {
            // SAFETY: `leaf` points into a live page-table page of `mm`.
            let pte = Pte(unsafe { *leaf });
            if pte.swapped() {
                let Some(gpa) = frames::alloc_zeroed() else {
                    if va <= page {
                        free_batch(&batch);
                        return Err(FaultError::Oom);
                    }
                    break;
                };
                let slot = pte.swap_slot();
                batch.push((va, leaf, SwapPage { gpa, slot }));
            }
        }
        va += 4096;
    }
    let pages: Vec<SwapPage> = batch.iter().map(|b| b.2).collect();
    let rc = send(Call::SwapIn, &pages);
    if rc < 0 {
        log::error!("swap-in at {page:#x} failed: {rc}");
        free_batch(&batch);
        return Err(FaultError::Oom);
    }
    let flags = pte_flags(vma.prot);
    let mut st = STATE.lock();
    st.faults += 1;
    for (va, leaf, sp) in batch {
        // SAFETY: as above; not-present -> present needs no TLB flush.
        unsafe { *leaf = Pte::new(sp.gpa, flags).0 };
        st.put_slot(sp.slot);
        st.recorded.insert(va);
    }
    Ok(())
}

fn free_batch(batch: &[(u64, *mut u64, SwapPage)]) {
    for b in batch {
        frames::put(b.2.gpa);
    }
}
