//! Hibernation, guest side (DESIGN.md "Hibernation"): deflate on
//! [`qlib::abi::control::HIBERNATE`], swap-in on page faults, and the
//! working set that goes to the REAP file.
//!
//! Deflate ([`hibernate`]), with the program stopped (we are in the kernel,
//! one vCPU, one task), streaming: no per-page kernel heap is used, so the
//! kernel's own footprint does not grow with the program's.
//! 1. `HibernateBegin`; reclaim; one walk of the user half of the page
//!    tables (raw, through the direct map: this may run inside a syscall
//!    that holds the process lock). Each present page of the page
//!    allocator either belongs to the working set (its PTE keeps the
//!    frame; the page goes to the REAP file) or gets a swap slot and a swap
//!    entry in its PTE (present clear, bit 9, slot; a frame mapped by
//!    several PTEs is written once, under one slot). Pages go to the VMM
//!    in `SwapOut`/`ReapOut` batches of up to 1024 as the walk goes; the
//!    VMM writes them (O_DIRECT from guest RAM) but drops nothing yet. Pages
//!    named by an interrupted blocking host call are pinned.
//! 2. One TLB flush; `HibernatePrepare` writes the files' tables. Any
//!    failure (disk full): the PTEs get their frames back, the slots are
//!    freed, `HibernateAbort`; nothing was lost.
//! 3. The swapped frames are freed without zeroing; reclaim hands every
//!    free page (those too) back to the host; `HibernateCommit` drops the
//!    REAP pages. The guest goes back to the blocking call the request
//!    interrupted (it deflates nowhere else: a request seen at a syscall
//!    stays pending until the program waits), so readiness of what it waits
//!    on wakes the sandbox (the VMM reads the REAP file back before the
//!    guest runs).
//!
//! Swap-in ([`swap_in`]): a fault on a swapped PTE reads the faulting page
//! and every swapped page of its aligned [`SWAP_IN_PAGES`] window in one
//! `SwapIn` call, then maps them (not-present -> present: no flush).
//!
//! Working set, kept in software bits of present PTEs: bit 11 marks a page
//! swapped in since the last hibernation, bit 10 a page of the working set.
//! After a page-fault wake the pages swapped in become the working set;
//! after a REAP wake the set is kept, and widened by the pages swapped in
//! when there were at least [`RERECORD_FAULTS`] swap faults (the working
//! set moved). Unmapped pages drop out with their PTEs.
//!
//! Rule for kernel code: do not hold user guest-physical addresses across
//! a host call other than in that call's own arguments (those of a
//! restarted blocking call are pinned, see [`in_flight_pins`]).
//!
//! Lock order: `STATE`, then the page allocator; never the process lock.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::vec::Vec;

use core::sync::atomic::{AtomicBool, Ordering};
use qlib::abi::{Call, IoVec, MAX_IOVECS, SwapPage};
use qlib::pte::{
    ADDR_MASK, HUGE, MAX_SWAP_SLOT, NO_EXEC, PRESENT, Pte, USER, WRITABLE, swap_entry,
};
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
    /// During a deflate: the frame (GPA >> 12) each slot allocated by it
    /// holds, 0 for other slots.
    moving: Vec<u32>,
    /// No free slot below this index.
    first_free: usize,
    /// The last hibernation wrote a REAP file.
    had_reap: bool,
    /// Swap faults since the last hibernation.
    faults: u64,
    /// Slots of `MAP_SHARED` anonymous pages already read back by one
    /// process while other PTEs still name them: the frame they got (this
    /// map holds a reference), so every sharer maps the same frame.
    resident: BTreeMap<u64, u64>,
}

static STATE: Mutex<SwapState> = Mutex::new(SwapState {
    slots: Vec::new(),
    moving: Vec::new(),
    first_free: 0,
    had_reap: false,
    faults: 0,
    resident: BTreeMap::new(),
});

/// Software bit 10 of a present user PTE (ignored by the MMU): the page is
/// in the working set and goes to the REAP file.
const PTE_WORKING_SET: u64 = 1 << 10;
/// Software bit 11 of a present user PTE: swapped in since the last
/// hibernation.
const PTE_RECORDED: u64 = 1 << 11;
/// Bits of a PTE a swap entry keeps, so an aborted deflate can restore it
/// (the MMU ignores every bit of a not-present entry).
const KEPT_FLAGS: u64 = WRITABLE | USER | NO_EXEC;

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
            self.moving.push(0);
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
            if let Some(gpa) = self.resident.remove(&slot) {
                frames::put(gpa);
            }
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
    leaf: *mut u64,
    gpa: u64,
}

/// Calls `f` for every present 4 KiB user leaf of the address space whose
/// kernel PGD is at `pgd`.
fn walk_user(pgd: u64, f: &mut dyn FnMut(Mapped)) {
    let table = |gpa: u64| gpa_to_kva(gpa) as *mut u64;
    // Reads below: page-table pages of the address space of `pgd` (the
    // running process's or a switched-out one's), reached through the
    // direct map; one vCPU, and nothing else walks or changes them while
    // the kernel runs this.
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
                        f(Mapped {
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
        // Kernel buffers only (`fs::host`: the PollFd array, epoll events,
        // socket addresses and option buffers are kernel copies; `Open`'s
        // path is a kernel string, waiting for a FIFO's peer).
        Call::Sleep | Call::Poll | Call::EpollWait | Call::Fd | Call::Open => {}
        // User data moves in place: the iovec list names user pages.
        Call::Readv | Call::Writev | Call::Io | Call::Msg => {
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

/// Which present pages go to the REAP file (module doc).
#[derive(Clone, Copy)]
enum Select {
    /// Those swapped in since the last hibernation.
    Recorded,
    /// The working set kept from the last hibernation.
    WorkingSet,
    /// Both: the working set moved.
    Both,
}

impl Select {
    fn bits(self) -> u64 {
        match self {
            Self::Recorded => PTE_RECORDED,
            Self::WorkingSet => PTE_WORKING_SET,
            Self::Both => PTE_RECORDED | PTE_WORKING_SET,
        }
    }
}

/// A host-call list filled as the walk goes and sent when full.
struct Batch<T> {
    call: Call,
    items: Vec<T>,
    rc: i64,
}

impl<T> Batch<T> {
    fn new(call: Call) -> Self {
        Self {
            call,
            items: Vec::with_capacity(MAX_IOVECS as usize),
            rc: 0,
        }
    }

    fn flush(&mut self) {
        if self.rc >= 0 && !self.items.is_empty() {
            self.rc = send(self.call, &self.items);
        }
        self.items.clear();
    }

    fn push(&mut self, item: T) {
        self.items.push(item);
        if self.items.len() as u64 == MAX_IOVECS {
            self.flush();
        }
    }
}

impl Batch<IoVec> {
    fn push_page(&mut self, gpa: u64) {
        match self.items.last_mut() {
            Some(last) if last.gpa + last.len == gpa => last.len += 4096,
            _ => self.push(IoVec { gpa, len: 4096 }),
        }
    }
}

/// What one deflate did.
#[derive(Default)]
struct Counts {
    swapped: u64,
    ptes: u64,
    reap: u64,
}

/// The deflate walk: swap entries into PTEs, pages to the VMM in batches.
/// Returns the counts, or the first error (then [`undo`] runs).
fn deflate(st: &mut SwapState, pins: &BTreeSet<u64>, select: Select) -> Result<Counts, i64> {
    let mut out = Batch::<SwapPage>::new(Call::SwapOut);
    let mut reap = Batch::<IoVec>::new(Call::ReapOut);
    // Frames mapped more than once: their one slot. They always go to the
    // swap file (a frame cannot be both kept and moved).
    let mut shared: BTreeMap<u64, u64> = BTreeMap::new();
    let mut n = Counts::default();
    let mut full = false;
    // Every process's address space: a frame shared copy-on-write between
    // them is one slot, and each PTE that lets go of it drops one
    // reference (the frame goes when the last one does).
    let pgds = address_spaces();
    let mut visit = |m: Mapped| {
        if full || out.rc < 0 || reap.rc < 0 || pins.contains(&m.gpa) {
            return;
        }
        let refs = frames::user_refs(m.gpa);
        // Shared file pages stay: written back before, and their object
        // names the frame.
        if refs == 0 || super::sharedfile::owns(m.gpa) {
            return;
        }
        // SAFETY: `m.leaf` is a live leaf entry found by the walk.
        let pte = unsafe { *m.leaf };
        if refs == 1 && pte & select.bits() != 0 {
            // SAFETY: as above; software bits only, the mapping stays.
            unsafe { *m.leaf = (pte | PTE_WORKING_SET) & !PTE_RECORDED };
            reap.push_page(m.gpa);
            n.reap += 1;
            return;
        }
        let slot = match shared.get(&m.gpa) {
            Some(&slot) => {
                st.slots[slot as usize] = st.slots[slot as usize].saturating_add(1);
                slot
            }
            None => {
                let Some(slot) = st.alloc_slot() else {
                    full = true;
                    return;
                };
                st.moving[slot as usize] = (m.gpa >> 12) as u32;
                if refs > 1 {
                    shared.insert(m.gpa, slot);
                }
                out.push(SwapPage { gpa: m.gpa, slot });
                n.swapped += 1;
                slot
            }
        };
        // SAFETY: as above. Present -> not present: flushed after the walk.
        unsafe { *m.leaf = swap_entry(slot).0 | (pte & KEPT_FLAGS) };
        n.ptes += 1;
    };
    for pgd in &pgds {
        walk_user(*pgd, &mut visit);
    }
    out.flush();
    reap.flush();
    arch::flush_tlb();
    if full {
        return Err(-i64::from(crate::errno::Errno::ENOSPC.0));
    }
    if out.rc < 0 {
        return Err(out.rc);
    }
    if reap.rc < 0 {
        return Err(reap.rc);
    }
    Ok(n)
}

/// Before a deflate: every PTE still naming a slot of a `MAP_SHARED`
/// anonymous page that another process already read back
/// (`SwapState::resident`) maps that frame now, so every sharer names it
/// and the walk gives it one new slot. Left as it was, the frame got a new
/// slot from the processes that had read it back while the others kept
/// the old slot, and the next wake gave them two frames: the processes
/// no longer saw each other's writes (issue 13, `hibcycles`).
fn settle_resident(st: &mut SwapState) {
    if st.resident.is_empty() {
        return;
    }
    let resident = st.resident.clone();
    let mut mapped = 0u64;
    for pgd in address_spaces() {
        walk_swapped(pgd, &mut |leaf, pte| {
            let slot = pte.swap_slot();
            if let Some(&gpa) = resident.get(&slot) {
                frames::get(gpa);
                // SAFETY: `leaf` is a live leaf entry found by the walk;
                // not present -> present needs no TLB flush.
                unsafe { *leaf = Pte::new(gpa, (pte.0 & KEPT_FLAGS) | PRESENT).0 };
                // The slot's last PTE drops the map's reference too.
                st.put_slot(slot);
                mapped += 1;
            }
        });
    }
    if !st.resident.is_empty() {
        log::warn!(
            "{} shared swap slots still named by no PTE found: {:?}",
            st.resident.len(),
            st.resident.keys().collect::<Vec<_>>()
        );
    }
    log::debug!(
        "hibernation: {mapped} PTEs mapped to {} shared frames read back by another process",
        resident.len()
    );
}

/// Calls `f` for every swapped 4 KiB user leaf of the address space whose
/// kernel PGD is at `pgd`.
fn walk_swapped(pgd: u64, f: &mut dyn FnMut(*mut u64, Pte)) {
    let table = |gpa: u64| gpa_to_kva(gpa) as *mut u64;
    // Reads below: page-table pages of a live address space, as in
    // `walk_user`.
    for i4 in 0..256usize {
        // SAFETY: see above.
        let e4 = Pte(unsafe { *table(pgd).add(i4) });
        if !e4.present() {
            continue;
        }
        for i3 in 0..512usize {
            // SAFETY: see above.
            let e3 = Pte(unsafe { *table(e4.addr()).add(i3) });
            if !e3.present() || e3.0 & HUGE != 0 {
                continue;
            }
            for i2 in 0..512usize {
                // SAFETY: see above.
                let e2 = Pte(unsafe { *table(e3.addr()).add(i2) });
                if !e2.present() || e2.0 & HUGE != 0 {
                    continue;
                }
                for i1 in 0..512usize {
                    let leaf = table(e2.addr()).wrapping_add(i1);
                    // SAFETY: see above.
                    let pte = Pte(unsafe { *leaf });
                    if pte.swapped() {
                        f(leaf, pte);
                    }
                }
            }
        }
    }
}

/// Rolls a failed deflate back: PTEs of the slots it allocated point at
/// their frames again, and the slots are free.
fn undo(st: &mut SwapState) {
    for pgd in address_spaces() {
        undo_space(st, pgd);
    }
    st.moving.iter_mut().for_each(|m| *m = 0);
}

/// Removes every user PTE of every address space whose page `drop`
/// selects, dropping its reference (a shared file's pages past the file's
/// new end: `sharedfile`; window pages of a file shrunk on the host:
/// `filemap`).
pub fn unmap_everywhere(drop: &dyn Fn(u64) -> bool) {
    crate::task::offload::recall_all();
    for pgd in address_spaces() {
        walk_user(pgd, &mut |m: Mapped| {
            if drop(m.gpa) {
                // SAFETY: `m.leaf` is a live leaf entry found by the walk;
                // present -> not present is flushed below.
                unsafe { *m.leaf = 0 };
                frames::put(m.gpa);
            }
        });
    }
    arch::flush_tlb();
}

/// The kernel PGDs of every address space: the running process's first.
fn address_spaces() -> Vec<u64> {
    let mut v = alloc::vec![arch::cr3() & ADDR_MASK];
    v.extend(crate::task::other_pgds());
    v
}

/// [`undo`] for the address space of `pgd`.
fn undo_space(st: &mut SwapState, pgd: u64) {
    walk_swapped(pgd, &mut |leaf, pte| {
        let slot = pte.swap_slot() as usize;
        let frame = st.moving.get(slot).copied().unwrap_or(0);
        if frame != 0 {
            let gpa = u64::from(frame) << 12;
            // SAFETY: `leaf` is a live leaf entry found by the walk; not
            // present -> present.
            unsafe { *leaf = Pte::new(gpa, (pte.0 & KEPT_FLAGS) | PRESENT).0 };
            st.put_slot(slot as u64);
        }
    });
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

/// Whether a blocking host call was cut short for the request being served.
pub fn in_blocking_call() -> bool {
    IN_FLIGHT.lock().is_some()
}

/// Serves a hibernate request, from inside an interrupted blocking host
/// call, which is reissued afterwards: the sandbox stays hibernated while
/// it waits. Or, `interrupted`, from the kick interrupt that stopped the
/// program in user mode: no host call is in flight (nothing to pin), and
/// after the commit the vCPU parks in the host until woken ([`park`]).
pub fn hibernate(interrupted: bool) {
    // Read before any host call of ours, which resets it.
    let in_flight = if interrupted { None } else { *IN_FLIGHT.lock() };
    // The barrier: no task runs on a secondary vCPU from here (they wait
    // in the host with the boot page tables; the tasks are collected
    // after the wake).
    crate::task::offload::recall_all();
    // Shared file mappings are written back (their pages stay resident).
    super::sharedfile::sync_all();
    let begin = [u64::from(interrupted), 0, 0, 0, 0, 0];
    if hostcall::call(Call::HibernateBegin, begin) < 0 {
        log::debug!("stale hibernate request ignored");
        return;
    }
    let abort = |rc: i64| {
        hostcall::call(Call::HibernateAbort, [rc as u64, 0, 0, 0, 0, 0]);
    };
    let pins = match in_flight_pins(in_flight) {
        Ok(p) => p,
        Err(call) => {
            log::warn!("hibernation refused: interrupted {call:?} holds buffers we cannot pin");
            return abort(-i64::from(crate::errno::Errno::EBUSY.0));
        }
    };
    // Reclaim first: the walk and the writes then start from a lean guest.
    crate::control::reclaim();
    let mut st = STATE.lock();
    let select = if !st.had_reap {
        Select::Recorded
    } else if st.faults >= RERECORD_FAULTS {
        log::debug!(
            "{} swap faults after a REAP wake: widening the working set",
            st.faults
        );
        Select::Both
    } else {
        Select::WorkingSet
    };
    settle_resident(&mut st);
    let result = deflate(&mut st, &pins, select).and_then(|n| {
        match hostcall::call(Call::HibernatePrepare, [0; 6]) {
            rc if rc < 0 => Err(rc),
            _ => Ok(n),
        }
    });
    let n = match result {
        Ok(n) => n,
        Err(rc) => {
            undo(&mut st);
            arch::flush_tlb();
            log::warn!("hibernation aborted: {rc}");
            return abort(rc);
        }
    };
    // The frames of the swapped PTEs are free once every PTE let go.
    for slot in 0..st.moving.len() {
        let frame = core::mem::take(&mut st.moving[slot]);
        if frame != 0 {
            for _ in 0..st.slots[slot] {
                frames::put_swapped(u64::from(frame) << 12);
            }
        }
    }
    st.had_reap = n.reap > 0;
    st.faults = 0;
    drop(st);
    // Hands the swapped frames (now free) back to the host with the rest.
    crate::control::reclaim();
    if hostcall::call(Call::HibernateCommit, [n.swapped, n.reap, 0, 0, 0, 0]) >= 0 {
        ASLEEP.store(true, Ordering::Release);
    }
    log::debug!(
        "hibernated: {} pages swapped out ({} PTEs), {} pages to the REAP file, {} pinned; from {}",
        n.swapped,
        n.ptes,
        n.reap,
        pins.len(),
        match in_flight {
            _ if interrupted => "the kick",
            Some((Call::Poll, a)) =>
                if a[1] == 0 {
                    "a Poll of no fd"
                } else {
                    "a Poll"
                },
            Some((Call::Sleep, _)) => "a Sleep",
            Some((Call::EpollWait, _)) => "an EpollWait",
            Some(_) => "another blocking call",
            None => "no call",
        }
    );
    if interrupted {
        park();
    } else {
        HIBERNATED_WAIT.store(true, core::sync::atomic::Ordering::Release);
    }
}

/// Set at a committed hibernation, cleared when the VMM returns from a
/// call that wakes the sandbox (any call but [`Call::keeps_hibernated`]
/// ones): while it is set the REAP pages are gone from guest RAM and the
/// swap table is only in the file, so nothing may run the program or
/// touch its memory ([`ensure_awake`]) and timers do not fire.
static ASLEEP: AtomicBool = AtomicBool::new(false);

/// Whether the sandbox is hibernated and nothing has woken it yet.
pub fn asleep() -> bool {
    ASLEEP.load(Ordering::Acquire)
}

/// Called by the host-call path after the VMM returned from `call`.
pub fn after_call(call: Call) {
    if ASLEEP.load(Ordering::Relaxed) && !call.keeps_hibernated() {
        ASLEEP.store(false, Ordering::Release);
    }
}

/// Wakes the sandbox if it is hibernated, before the guest runs a task or
/// touches user memory: after the commit an exec order, a signal or an
/// expired deadline can make a task runnable without any wait returning
/// (those are what wake it otherwise). One exit, only then.
pub fn ensure_awake() {
    if asleep() {
        // The wake first: the log line's own host call comes back here,
        // and while still asleep it would recurse until the stack ends
        // (a triple fault with `--debug`).
        hostcall::call_once(Call::Wake, [0; 6]);
        log::debug!("running after a hibernation: woke the sandbox");
    }
}

/// Set when a hibernation was committed from inside a wait: the wait is
/// reissued without its timeout, so that only what it waits on (or a wake,
/// or a signal) wakes the sandbox; a deadline that passed meanwhile fires
/// right after the wake.
static HIBERNATED_WAIT: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// Whether a hibernation was committed from the wait that was cut short
/// (clears it).
pub fn take_hibernated() -> bool {
    HIBERNATED_WAIT.swap(false, core::sync::atomic::Ordering::AcqRel)
}

/// Waits in the host, using no CPU, until the sandbox is woken (wake,
/// SIGCONT), another control request arrives, or an fd a task is parked on
/// is ready, or a listening socket (a connection to a server whose thread
/// was computing when the hibernation interrupted it): any return from
/// the wait wakes a hibernated sandbox (`Hibernation::on_guest_resume`),
/// and the interrupted task goes on. No deadline: timers do not wake it.
/// A request already posted returns at once (its eventfd wake-up was
/// dropped at `HibernateBegin`), except a `PREEMPT` the slice watcher
/// posted while the guest deflated: it never wakes the sandbox (it is
/// served after the wake; returning for it woke a hibernated sandbox of
/// four computing threads by itself in 3 of 42 hibernations, none in over
/// 150 since).
fn park() {
    if crate::control::pending_but_preempt() {
        return;
    }
    crate::task::park::wait_hibernated();
}

/// Resolves a fault on the swapped page `page` of `vma`: reads it and the
/// swapped pages of its window back in one host call.
pub fn swap_in(mm: &mut AddrSpace, vma: &Vma, page: u64) -> Result<(), FaultError> {
    // The swap table is only in the file while hibernated.
    ensure_awake();
    let window = SWAP_IN_PAGES * 4096;
    let start = (page & !(window - 1)).max(vma.start);
    let end = ((page & !(window - 1)) + window).min(vma.end);
    let shared = vma.kind.is_shared();
    let mut batch: Vec<(u64, *mut u64, SwapPage)> = Vec::new();
    // Shared pages another process already read back: (leaf, frame, slot).
    let mut reuse: Vec<(*mut u64, u64, u64)> = Vec::new();
    let mut va = start;
    while va < end {
        if let Some(leaf) = mm.pt.leaf(va, false) {
            // SAFETY: `leaf` points into a live page-table page of `mm`.
            let pte = Pte(unsafe { *leaf });
            let known = if shared && pte.swapped() {
                STATE.lock().resident.get(&pte.swap_slot()).copied()
            } else {
                None
            };
            if let Some(gpa) = known {
                reuse.push((leaf, gpa, pte.swap_slot()));
            } else if pte.swapped() {
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
    let rc = if pages.is_empty() {
        0
    } else {
        send(Call::SwapIn, &pages)
    };
    if rc < 0 {
        log::error!("swap-in at {page:#x} failed: {rc}");
        free_batch(&batch);
        return Err(FaultError::Oom);
    }
    let flags = pte_flags(vma.prot) | PTE_RECORDED;
    let mut st = STATE.lock();
    st.faults += 1;
    for (_, leaf, sp) in batch {
        // Another vCPU read the same shared slot back meanwhile (the lock
        // is not held across the host call): its frame, not a second one.
        if let Some(&gpa) = st.resident.get(&sp.slot).filter(|_| shared) {
            frames::put(sp.gpa);
            frames::get(gpa);
            // SAFETY: as below.
            unsafe { *leaf = Pte::new(gpa, flags).0 };
            st.put_slot(sp.slot);
            continue;
        }
        // SAFETY: as above; not-present -> present needs no TLB flush.
        unsafe { *leaf = Pte::new(sp.gpa, flags).0 };
        if shared && st.slots.get(sp.slot as usize).is_some_and(|&c| c > 1) {
            // Other PTEs still name the slot: they get this frame.
            frames::get(sp.gpa);
            st.resident.insert(sp.slot, sp.gpa);
        }
        st.put_slot(sp.slot);
    }
    for (leaf, gpa, slot) in reuse {
        frames::get(gpa);
        // SAFETY: as above.
        unsafe { *leaf = Pte::new(gpa, flags).0 };
        st.put_slot(slot);
    }
    Ok(())
}

fn free_batch(batch: &[(u64, *mut u64, SwapPage)]) {
    for b in batch {
        frames::put(b.2.gpa);
    }
}
