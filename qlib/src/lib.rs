//! `qlib`: what the guest kernel and the VMM share.
//!
//! Everything here is pure logic that plain `cargo test` on the host
//! reaches: the host-call ABI, the bitmap page allocator, page-table entry
//! helpers, ELF parsing, the initial user stack layout and the swap/REAP file
//! format.
#![cfg_attr(not(feature = "std"), no_std)]

pub mod abi;
pub mod bitmap_alloc;
pub mod caps;
pub mod cmsg;
pub mod elf;
pub mod exec_order;
pub mod exec_perm;
pub mod io_abi;
pub mod layout;
pub mod netinfo;
pub mod pte;
pub mod seccomp;
pub mod shebang;
pub mod stint;
pub mod swapfile;
pub mod syscall_names;
pub mod test_rng;
pub mod user_stack;
pub mod vvar;
