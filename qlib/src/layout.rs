//! The guest memory map, shared by the VMM (which builds the boot page
//! tables and places the boot data) and the guest kernel.
//!
//! ```text
//! guest-physical                            guest-virtual
//! 0x0000_0000 +---------------------+
//!             | (unused, null page) |
//! 0x0000_1000 | BootInfo            |
//! 0x0000_2000 | PV page (hypervisor |       the MSR 0x4b564d10 page: the
//!             |  writes it)         |       hypervisor stores CR2 here
//! 0x0000_3000 | ControlPage         |       VMM -> guest control requests
//! 0x0001_0000 | boot page tables    |       kernel PGD (8 KiB aligned) and
//!             |  PGD pair, PDPTs,   |       user PGD = kernel PGD + 4 KiB,
//!             |  PDs (2 MiB pages)  |       then the tables below it
//! 0x0010_0000 | kernel image        |  <->  KERNEL_BASE + GPA (top 2 GiB)
//!             | free RAM: the page  |
//!             |  allocator's chunks |  <->  DIRECT_MAP + GPA
//!             | boot data (program, |
//!             |  argv, envp)        |
//!    mem_size +---------------------+
//! ```
//! Upper half: `DIRECT_MAP` (PML4 slot 272) maps all guest RAM with 2 MiB
//! pages; `KERNEL_BASE` (slot 511, the top 2 GiB) maps it again for the
//! kernel image, which is linked at `KERNEL_BASE + KERNEL_LOAD_GPA`. Every
//! mapping has U=1 (PLATFORM.md); the user PGD maps no kernel memory but the
//! `.cpu_entry` pages (GDT/TSS, IDT, entry stacks) and the return page. PML4 slot 256 belongs to the hypervisor.

/// GPA of [`crate::abi::BootInfo`].
pub const BOOT_INFO_GPA: u64 = 0x1000;
/// GPA of the 4 KiB PV page handed to the hypervisor.
pub const PV_PAGE_GPA: u64 = 0x2000;
/// GPA of vCPU `k`'s PV page: [`PV_PAGE_GPA`] for the boot vCPU, then
/// 0x9000.. 0xf000 for vCPUs 1..7 (below the boot page tables).
pub const fn pv_page_gpa(k: usize) -> u64 {
    if k == 0 {
        PV_PAGE_GPA
    } else {
        0x8000 + 0x1000 * k as u64
    }
}
const _: () = assert!(pv_page_gpa(crate::abi::MAX_VCPUS - 1) < BOOT_PGD_GPA);

/// GPA of [`crate::abi::ControlPage`].
pub const CONTROL_GPA: u64 = 0x3000;
/// GPA of the boot kernel PGD (8 KiB aligned, CR3 bit 12 clear).
pub const BOOT_PGD_GPA: u64 = 0x10000;
/// GPA where the boot page tables end (exclusive).
pub const BOOT_PT_END_GPA: u64 = 0x40000;
/// GPA the kernel image is loaded at.
pub const KERNEL_LOAD_GPA: u64 = 0x10_0000;
/// Virtual base of the direct map of guest RAM (PML4 slot 272).
pub const DIRECT_MAP: u64 = 0xffff_8800_0000_0000;
/// Virtual base of the kernel-image map (the top 2 GiB, PML4 slot 511).
pub const KERNEL_BASE: u64 = 0xffff_ffff_8000_0000;
/// Guest RAM limit imposed by the direct-map and kernel-image maps.
pub const MAX_MEM: u64 = 2 << 30;
/// Guest-physical base of the file window: host files mapped by the VMM
/// (`MAP_PRIVATE`, read-only) so that guest user pages of programs,
/// libraries and file mappings are the host's page-cache pages, shared by
/// every sandbox (docs/memory.md). Above the most guest RAM there is; the
/// direct map covers it (read through `DIRECT_MAP + GPA`), the kernel-image
/// map does not.
pub const FILE_WINDOW_GPA: u64 = 4 << 30;
/// Size of the file window: the cap on the distinct file bytes one sandbox
/// maps from the page cache (a full window makes the guest copy files into
/// its RAM as before). KVM keeps ~2 MiB of kernel memory per GiB of memslot
/// (shadow-paging rmaps), so the window is not made larger than needed.
pub const FILE_WINDOW_SIZE: u64 = 1 << 30;

/// Whether `gpa` lies in the file window.
pub const fn in_file_window(gpa: u64) -> bool {
    gpa >= FILE_WINDOW_GPA && gpa < FILE_WINDOW_GPA + FILE_WINDOW_SIZE
}

/// Smallest guest RAM that boots.
pub const MIN_MEM: u64 = 16 << 20;
/// Size of a page.
pub const PAGE_SIZE: u64 = 4096;
/// Size of a large page.
pub const LARGE_PAGE_SIZE: u64 = 2 << 20;
/// First address above the user space programs manage (exclusive): no
/// `mmap`, `munmap`, `mprotect` or user copy reaches it. The page at
/// `USER_END` is the kernel's return page (`sysretq` stub), mapped
/// read+execute in every user address space; Linux's `TASK_SIZE` is one
/// page higher.
pub const USER_END: u64 = 0x0000_7fff_ffff_e000;
/// The return page: mapped in user page tables, never in a user VMA.
pub const USER_RETURN_VA: u64 = USER_END;
/// First address above everything user page tables map (exclusive).
pub const USER_PT_END: u64 = USER_RETURN_VA + PAGE_SIZE;

/// Where every user address space maps the vvar page (the clock
/// parameters, read-only: `crate::vvar`) and, right above it, the vDSO
/// (`linux-vdso.so.1`, read + execute). A fixed place (Linux randomizes
/// it): between the top of `mmap`'s range (`0x7fff_0000_0000`, which
/// `mmap` without `MAP_FIXED` never reaches) and the 8 MiB stack below
/// [`USER_END`]. The vDSO's code finds the vvar page at its own address
/// minus one page (RIP-relative, fixed at link time: `vdso.lds`).
pub const VVAR_VA: u64 = 0x7fff_f000_0000;
/// Where the vDSO's ELF image starts (`AT_SYSINFO_EHDR`).
pub const VDSO_VA: u64 = VVAR_VA + PAGE_SIZE;
/// Most pages the vDSO image may take.
pub const VDSO_MAX_PAGES: u64 = 4;

/// PML4 slot of a virtual address.
pub const fn pml4_slot(va: u64) -> usize {
    ((va >> 39) & 0x1ff) as usize
}
