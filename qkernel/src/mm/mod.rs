//! Memory management: address translation helpers, the user page
//! allocator, page tables, user address spaces and user-memory access.
//!
//! Lock order: `process::PROCESS` before `frames::CACHE` before
//! `frames::FRAMES`; `sharedfile::REG` before `frames::CACHE`; the kernel
//! heap lock is innermost (taken by any allocation).

pub mod addr_space;
pub mod fault;
pub mod filecopy;
pub mod filemap;
pub mod frames;
pub mod heap;
pub mod pagetable;
pub mod sharedfile;
pub mod slack;
pub mod swap;
pub mod uaccess;
pub mod vma;

use qlib::layout::{DIRECT_MAP, KERNEL_BASE};

/// Guest-physical address of a kernel virtual address (kernel image or
/// direct map).
pub fn kva_to_gpa(va: u64) -> u64 {
    if va >= KERNEL_BASE {
        va - KERNEL_BASE
    } else {
        va - DIRECT_MAP
    }
}

/// Direct-map virtual address of a guest-physical address.
pub const fn gpa_to_kva(gpa: u64) -> u64 {
    DIRECT_MAP + gpa
}

/// Page-aligns `v` downwards.
pub const fn page_down(v: u64) -> u64 {
    v & !0xfff
}

/// Page-aligns `v` upwards; `None` on overflow.
pub const fn page_up(v: u64) -> Option<u64> {
    match v.checked_add(0xfff) {
        Some(x) => Some(x & !0xfff),
        None => None,
    }
}
