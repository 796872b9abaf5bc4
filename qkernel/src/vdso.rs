//! The vDSO (`linux-vdso.so.1`, built from `vdso/vdso.c` by `build.rs`) and
//! its vvar page: the clock parameters (`qlib::vvar`) that the kernel's
//! own clocks (`crate::time`) and every program's vDSO read.
//!
//! Both are pages of the kernel image mapped into every user address space
//! (`VmaKind::Kernel`): the vvar page read-only at `VVAR_VA`, the vDSO
//! read+execute right above it at `VDSO_VA` (`AT_SYSINFO_EHDR`). They are
//! not user frames: fork maps the same pages, exec and `munmap` only drop
//! the PTEs, reclaim and hibernation never swap or hand them back, and a
//! program cannot write them, change their protection or move them
//! (`mm::addr_space`). The kernel is the only writer of the vvar page, under
//! its sequence counter.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};

use qlib::layout::{VDSO_MAX_PAGES, VDSO_VA, VVAR_VA};
use qlib::vvar::Vvar;

use crate::errno::Errno;
use crate::mm::addr_space::AddrSpace;
use crate::mm::kva_to_gpa;
use crate::mm::vma::{PROT_EXEC, PROT_READ};

/// The vvar page: [`Vvar`]'s fields as atomics, the rest of the page zero.
#[repr(C, align(4096))]
struct VvarPage {
    seq: AtomicU32,
    getcpu_sys: AtomicU32,
    tsc_base: AtomicU64,
    mult: AtomicU64,
    shift: AtomicU32,
    pad: AtomicU32,
    mono_base: AtomicU64,
    real_base: AtomicU64,
}

const _: () = assert!(size_of::<VvarPage>() == 4096);
const _: () =
    assert!(core::mem::offset_of!(VvarPage, tsc_base) == core::mem::offset_of!(Vvar, tsc_base));
const _: () = assert!(core::mem::offset_of!(VvarPage, mult) == core::mem::offset_of!(Vvar, mult));
const _: () = assert!(core::mem::offset_of!(VvarPage, shift) == core::mem::offset_of!(Vvar, shift));
const _: () =
    assert!(core::mem::offset_of!(VvarPage, mono_base) == core::mem::offset_of!(Vvar, mono_base));
const _: () =
    assert!(core::mem::offset_of!(VvarPage, real_base) == core::mem::offset_of!(Vvar, real_base));
const _: () =
    assert!(core::mem::offset_of!(VvarPage, getcpu_sys) == core::mem::offset_of!(Vvar, getcpu_sys));

static VVAR: VvarPage = VvarPage {
    seq: AtomicU32::new(0),
    getcpu_sys: AtomicU32::new(0),
    tsc_base: AtomicU64::new(0),
    mult: AtomicU64::new(0),
    shift: AtomicU32::new(0),
    pad: AtomicU32::new(0),
    mono_base: AtomicU64::new(0),
    real_base: AtomicU64::new(0),
};

/// Page-aligned storage for the vDSO image.
#[repr(C, align(4096))]
struct Aligned<T>(T);

const IMAGE_LEN: usize = include_bytes!(concat!(env!("OUT_DIR"), "/vdso.so")).len();

/// The vDSO image, zero padded to whole pages by `build.rs`.
static IMAGE: Aligned<[u8; IMAGE_LEN]> =
    Aligned(*include_bytes!(concat!(env!("OUT_DIR"), "/vdso.so")));
const _: () = assert!(IMAGE_LEN.is_multiple_of(4096) && IMAGE_LEN as u64 <= VDSO_MAX_PAGES * 4096);

/// The clock parameters now (a consistent copy).
pub fn read() -> Vvar {
    loop {
        let seq = VVAR.seq.load(Ordering::Acquire);
        if seq & 1 != 0 {
            core::hint::spin_loop();
            continue;
        }
        let v = Vvar {
            seq,
            getcpu_sys: VVAR.getcpu_sys.load(Ordering::Relaxed),
            tsc_base: VVAR.tsc_base.load(Ordering::Relaxed),
            mult: VVAR.mult.load(Ordering::Relaxed),
            shift: VVAR.shift.load(Ordering::Relaxed),
            pad: 0,
            mono_base: VVAR.mono_base.load(Ordering::Relaxed),
            real_base: VVAR.real_base.load(Ordering::Relaxed),
        };
        fence(Ordering::Acquire);
        if VVAR.seq.load(Ordering::Relaxed) == seq {
            return v;
        }
    }
}

/// Sets the clock parameters (boot calibration), under the sequence
/// counter so that no reader sees a mix of old and new.
pub fn set_clock(tsc_base: u64, mult: u64, shift: u32, mono_base: u64, real_base: u64) {
    let seq = VVAR.seq.load(Ordering::Relaxed);
    VVAR.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
    fence(Ordering::Release);
    VVAR.tsc_base.store(tsc_base, Ordering::Relaxed);
    VVAR.mult.store(mult, Ordering::Relaxed);
    VVAR.shift.store(shift, Ordering::Relaxed);
    VVAR.mono_base.store(mono_base, Ordering::Relaxed);
    VVAR.real_base.store(real_base, Ordering::Relaxed);
    VVAR.seq.store(seq.wrapping_add(2), Ordering::Release);
}

/// Makes the vDSO's `getcpu` ask the kernel (a second vCPU came online:
/// the vDSO cannot tell which one a program runs on).
pub fn getcpu_by_syscall() {
    VVAR.getcpu_sys.store(1, Ordering::Release);
}

/// Maps the vvar page and the vDSO into `mm` (`exec`, boot).
pub fn map(mm: &mut AddrSpace) -> Result<(), Errno> {
    mm.map_kernel_page(VVAR_VA, kva_to_gpa(&raw const VVAR as u64), PROT_READ)?;
    let base = kva_to_gpa(IMAGE.0.as_ptr() as u64);
    for off in (0..IMAGE.0.len() as u64).step_by(4096) {
        mm.map_kernel_page(VDSO_VA + off, base + off, PROT_READ | PROT_EXEC)?;
    }
    Ok(())
}

/// `/proc/PID/maps`' name for a kernel page mapped at `va`.
pub fn name(va: u64) -> &'static str {
    if (VVAR_VA..VDSO_VA).contains(&va) {
        "[vvar]"
    } else if (VDSO_VA..VDSO_VA + IMAGE_LEN as u64).contains(&va) {
        "[vdso]"
    } else {
        ""
    }
}
