//! User page tables. Each address space has a PGD pair (PLATFORM.md): the
//! kernel PGD (8 KiB aligned, CR3 bit 12 clear) maps the kernel and the
//! user half; the user PGD (kernel PGD + 4 KiB) maps the user half and,
//! read-only, the `.cpu_entry` pages. Lower-half PML4 entries are written
//! into both. Page-table pages come from the kernel heap; user pages from
//! the bitmap allocator.

use alloc::boxed::Box;

use qlib::layout::{BOOT_PGD_GPA, KERNEL_BASE, USER_PT_END};
use qlib::pte::{ACCESSED, DIRTY, NO_EXEC, PRESENT, Pte, USER, WRITABLE, indexes};

use super::{gpa_to_kva, kva_to_gpa};

/// One 4 KiB page-table page.
#[repr(C, align(4096))]
pub struct Table(pub [u64; 512]);

#[repr(C, align(8192))]
struct PgdPair([u64; 1024]);

/// Accessed set up front: the hypervisor's page walk need not write it.
const TABLE_FLAGS: u64 = PRESENT | WRITABLE | USER | ACCESSED;

fn new_table() -> u64 {
    let t = Box::leak(Box::new(Table([0; 512])));
    kva_to_gpa(t as *mut Table as u64)
}

/// Returns a page-table page to the heap.
///
/// # Safety
/// `table_gpa` must be a page made by [`new_table`] that no live table
/// entry (and no CR3) names any more.
unsafe fn free_table(table_gpa: u64) {
    // SAFETY: `new_table` leaked a `Box<Table>` from the heap, which lives
    // in the kernel image: its address is `KERNEL_BASE + gpa`; the caller
    // guarantees nothing refers to it.
    drop(unsafe { Box::from_raw((KERNEL_BASE + table_gpa) as *mut Table) });
}

fn entry(table_gpa: u64, index: usize) -> *mut u64 {
    (gpa_to_kva(table_gpa) as *mut u64).wrapping_add(index)
}

/// The page tables of one user address space.
pub struct PageTables {
    /// GPA of the kernel PGD; the user PGD follows it.
    pgd: u64,
}

/// The user-PGD entry for PML4 slot 511, shared by every address space:
/// maps the `.cpu_entry` pages (built once by [`init_entry_map`]).
static ENTRY_MAP: spin::Once<u64> = spin::Once::new();

unsafe extern "C" {
    static __cpu_entry_data: u8;
    static __cpu_entry_idt: u8;
    static __cpu_entry_stack: u8;
    static __cpu_entry_end: u8;
}

/// Builds the user-PGD mapping of the `.cpu_entry` pages: the GDT/TSS and
/// IDT (read-only) and
/// the entry stacks (read-write: the hypervisor pushes exception frames
/// through the user PGD).
pub fn init_entry_map() {
    ENTRY_MAP.call_once(|| {
        let pdpt = new_table();
        // Addresses of linker symbols, never dereferenced here.
        // Every vCPU's entry stacks (`arch::cpu::ENTRY_STACKS`) up to the
        // end of the section.
        let stacks = &raw const __cpu_entry_stack as u64;
        let end = &raw const __cpu_entry_end as u64;
        let fixed = [
            (&raw const __cpu_entry_data as u64, NO_EXEC),
            (&raw const __cpu_entry_idt as u64, NO_EXEC),
        ];
        let stack_pages = (stacks..end)
            .step_by(4096)
            .map(|va| (va, NO_EXEC | WRITABLE | DIRTY));
        for (va, nx) in fixed.into_iter().chain(stack_pages) {
            let [_, i3, i2, i1] = indexes(va);
            // SAFETY: the tables are fresh heap pages reached through the
            // direct map; nothing else references them yet.
            unsafe {
                let pd = walk_or_create(pdpt, i3);
                let pt = walk_or_create(pd, i2);
                *entry(pt, i1) = Pte::new(kva_to_gpa(va), PRESENT | USER | ACCESSED | nx).0;
            }
        }
        pdpt | TABLE_FLAGS
    });
}

/// # Safety
/// `table` must be a live page-table page.
unsafe fn walk_or_create(table: u64, index: usize) -> u64 {
    let e = entry(table, index);
    // SAFETY: the caller guarantees `table` is a page-table page.
    unsafe {
        let v = Pte(*e);
        if v.present() {
            return v.addr();
        }
        let t = new_table();
        *e = t | TABLE_FLAGS;
        t
    }
}

impl PageTables {
    /// A new address space: kernel half copied from the boot PGD, user
    /// half empty, the entry pages mapped into the user PGD.
    pub fn new() -> Self {
        let pair = Box::leak(Box::new(PgdPair([0; 1024])));
        let boot = gpa_to_kva(BOOT_PGD_GPA) as *const u64;
        for i in 256..512 {
            // SAFETY: the boot PGD is a live page-table page in guest RAM.
            pair.0[i] = unsafe { *boot.add(i) };
        }
        pair.0[512 + 511] = *ENTRY_MAP.get().expect("init_entry_map ran at boot");
        Self {
            pgd: kva_to_gpa(pair as *mut PgdPair as u64),
        }
    }

    /// Frees the page-table pages of the user half and the PGD pair
    /// (`execve`). The user pages must have been released first; the
    /// shared `.cpu_entry` map (user PGD slot 511) is not ours and stays.
    ///
    /// # Safety
    /// CR3 must name another PGD (and the TLB hold nothing of this one
    /// that is used again): the tables go back to the heap.
    pub unsafe fn free(self) {
        let present = |table: u64, i: usize| {
            // SAFETY: `table` is a live page-table page of this space.
            let e = Pte(unsafe { *entry(table, i) });
            e.present().then(|| e.addr())
        };
        for i4 in 0..256 {
            let Some(pdpt) = present(self.pgd, i4) else {
                continue;
            };
            for i3 in 0..512 {
                let Some(pd) = present(pdpt, i3) else {
                    continue;
                };
                for i2 in 0..512 {
                    if let Some(pt) = present(pd, i2) {
                        // SAFETY: only `pd` names it, and `pd` goes too.
                        unsafe { free_table(pt) };
                    }
                }
                // SAFETY: as above, for `pdpt`.
                unsafe { free_table(pd) };
            }
            // SAFETY: named by the PGD pair only, which goes too.
            unsafe { free_table(pdpt) };
        }
        // SAFETY: `new` leaked this `Box<PgdPair>` from the heap (kernel
        // image, `KERNEL_BASE + gpa`); the caller guarantees CR3 is
        // elsewhere.
        drop(unsafe { Box::from_raw((KERNEL_BASE + self.pgd) as *mut PgdPair) });
    }

    /// CR3 value of the kernel PGD.
    pub fn kernel_cr3(&self) -> u64 {
        self.pgd
    }

    /// A pointer to the leaf entry for `va` (a user address), creating the
    /// intermediate tables when `create`.
    pub fn leaf(&mut self, va: u64, create: bool) -> Option<*mut u64> {
        if va >= USER_PT_END {
            return None;
        }
        let [i4, i3, i2, i1] = indexes(va);
        let top = entry(self.pgd, i4);
        // SAFETY: the PGD pair and all tables below it are page-table pages
        // owned by this address space.
        unsafe {
            let mut pdpt = Pte(*top);
            if !pdpt.present() {
                if !create {
                    return None;
                }
                let t = new_table();
                *top = t | TABLE_FLAGS;
                *entry(self.pgd + 4096, i4) = t | TABLE_FLAGS;
                pdpt = Pte(*top);
            }
            let mut table = pdpt.addr();
            for index in [i3, i2] {
                let e = Pte(*entry(table, index));
                table = if e.present() {
                    e.addr()
                } else if create {
                    walk_or_create(table, index)
                } else {
                    return None;
                };
            }
            Some(entry(table, i1))
        }
    }

    /// The leaf entry of `va`, if its tables exist.
    pub fn get(&mut self, va: u64) -> Pte {
        // SAFETY: `self.pgd` is this live address space's kernel PGD.
        unsafe { lookup(self.pgd, va) }
    }
}

/// The leaf entry of user address `va` in the address space whose kernel
/// PGD is at `pgd` (0 if its tables do not reach it).
///
/// # Safety
/// `pgd` is the kernel PGD of a live address space.
pub unsafe fn lookup(pgd: u64, va: u64) -> Pte {
    if va >= USER_PT_END {
        return Pte(0);
    }
    let [i4, i3, i2, i1] = indexes(va);
    let mut table = pgd;
    for index in [i4, i3, i2] {
        // SAFETY: `table` is a live page-table page of that space (the
        // caller's contract, then the present entries below it).
        let e = Pte(unsafe { *entry(table, index) });
        if !e.present() {
            return Pte(0);
        }
        table = e.addr();
    }
    // SAFETY: as above.
    Pte(unsafe { *entry(table, i1) })
}
