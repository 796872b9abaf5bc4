//! x86-64 page-table entry helpers.

/// Present.
pub const PRESENT: u64 = 1 << 0;
/// Writable.
pub const WRITABLE: u64 = 1 << 1;
/// User-accessible (required on every mapping on our hypervisor).
pub const USER: u64 = 1 << 2;
/// Accessed.
pub const ACCESSED: u64 = 1 << 5;
/// Dirty.
pub const DIRTY: u64 = 1 << 6;
/// Large page (in a PDPT or PD entry).
pub const HUGE: u64 = 1 << 7;
/// Global.
pub const GLOBAL: u64 = 1 << 8;
/// Software bit 9: the page is in the swap file ("swapped"), PTE not present.
pub const SWAPPED: u64 = 1 << 9;
/// No-execute.
pub const NO_EXEC: u64 = 1 << 63;
/// Physical-address bits of an entry.
pub const ADDR_MASK: u64 = 0x000f_ffff_ffff_f000;

/// The indexes of `va` at the four levels, top first.
pub const fn indexes(va: u64) -> [usize; 4] {
    [
        ((va >> 39) & 0x1ff) as usize,
        ((va >> 30) & 0x1ff) as usize,
        ((va >> 21) & 0x1ff) as usize,
        ((va >> 12) & 0x1ff) as usize,
    ]
}

/// A page-table entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(transparent)]
pub struct Pte(pub u64);

impl Pte {
    /// An entry mapping `pa` with `flags`.
    pub const fn new(pa: u64, flags: u64) -> Self {
        Self((pa & ADDR_MASK) | flags)
    }
    /// Whether the present bit is set.
    pub const fn present(self) -> bool {
        self.0 & PRESENT != 0
    }
    /// Physical address the entry points at.
    pub const fn addr(self) -> u64 {
        self.0 & ADDR_MASK
    }
    /// Whether the entry is a swapped-out page.
    pub const fn swapped(self) -> bool {
        self.0 & (PRESENT | SWAPPED) == SWAPPED
    }
    /// Flags of the entry.
    pub const fn flags(self) -> u64 {
        self.0 & !ADDR_MASK
    }
}

/// A swapped-out PTE: not present, [`SWAPPED`] set, the swap slot in the
/// address bits (see [`crate::swapfile`]).
pub const fn swap_entry(slot: u64) -> Pte {
    Pte(((slot << 12) & ADDR_MASK) | SWAPPED)
}

/// Largest swap slot a PTE can hold.
pub const MAX_SWAP_SLOT: u64 = ADDR_MASK >> 12;

impl Pte {
    /// The swap slot of a swapped-out PTE.
    pub const fn swap_slot(self) -> u64 {
        (self.0 & ADDR_MASK) >> 12
    }
}

/// PTE flags for a user page with the given protection. Accessed is set
/// (and Dirty on a writable page, which is only mapped when the page is
/// to be written or was zeroed for the program): the hypervisor's shadow
/// MMU would otherwise take one more fault per page to set them in the
/// guest's table (docs/memory.md, "Warm latency"); nothing reads them.
pub const fn user_flags(write: bool, exec: bool) -> u64 {
    let mut f = PRESENT | USER | ACCESSED;
    if write {
        f |= WRITABLE | DIRTY;
    }
    if !exec {
        f |= NO_EXEC;
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_split_address() {
        assert_eq!(indexes(0xffff_8800_0020_1000), [272, 0, 1, 1]);
        assert_eq!(indexes(0x40_0000), [0, 0, 2, 0]);
    }

    #[test]
    fn entry_round_trip() {
        let p = Pte::new(0x1234_5000, user_flags(true, false));
        assert!(p.present());
        assert_eq!(p.addr(), 0x1234_5000);
        assert!(p.0 & NO_EXEC != 0);
        assert!(!p.swapped());
        assert!(Pte(SWAPPED | 0x5000).swapped());
    }

    #[test]
    fn swap_entries_round_trip() {
        for slot in [0, 1, 12345, MAX_SWAP_SLOT] {
            let p = swap_entry(slot);
            assert!(p.swapped() && !p.present());
            assert_eq!(p.swap_slot(), slot);
        }
    }
}
