//! The program's extended register state (x87, SSE, AVX, AVX-512): what a
//! task switch saves and restores, and what `execve` resets.
//!
//! The guest's CR4 leaves OSXSAVE clear, yet on this hypervisor user mode
//! runs with the host's XSAVE setup: CPUID reports OSXSAVE and AVX-512,
//! and XCR0 reads 0xe7 (x87, SSE, AVX, opmask, ZMM_Hi256, Hi16_ZMM), so a
//! program (glibc's string functions, the JVM's JIT code) uses YMM/ZMM
//! registers. `fxsave64` saves only x87 and the low 128 bits of XMM0-15:
//! a thread preempted in an AVX loop got the upper halves, ZMM16-31 and
//! the opmask registers of whichever thread ran before it (the JVM crash
//! under time slices, docs/threads.md). So when CPUID reports OSXSAVE the
//! state is saved with `xsave64` for every component XCR0 enables (the
//! standard, uncompacted format); otherwise with `fxsave64`.
//!
//! The kernel itself uses no FPU, SSE or AVX register (soft-float target),
//! so the program's registers are live, untouched, whenever it runs.

use core::arch::asm;

use alloc::boxed::Box;

/// Bytes of a saved state: the largest XSAVE area we accept. XCR0 0xe7
/// needs 2,432 bytes on these AMD hosts (CPUID 0xD; Intel: 2,688);
/// components that would end beyond this (AMX tiles) are left out of the
/// mask, with a log line.
pub const AREA_SIZE: usize = 4096;
/// XCR0 bit of PKRU: never saved or restored (`wrpkru` kills the VM here).
const PKRU: u64 = 1 << 9;
/// x87 and SSE: always part of the state.
pub const LEGACY: u64 = 3;
/// The FXSAVE (legacy) area.
pub const FXSAVE_SIZE: usize = 512;
/// End of the XSAVE header (64 bytes after the legacy area).
const XSAVE_HEADER_END: usize = 576;

/// One saved register state (the FXSAVE layout in the first 512 bytes,
/// then the XSAVE header and the extended components at their CPUID
/// offsets). 64-byte aligned, as `xsave64` requires.
#[repr(C, align(64))]
pub struct FpuState(pub [u8; AREA_SIZE]);

/// The XSAVE components saved (0: no XSAVE, `fxsave64` is used) and the
/// size of their area (512 without XSAVE).
static SETUP: spin::Once<(u64, usize)> = spin::Once::new();

fn setup() -> (u64, usize) {
    *SETUP.call_once(|| {
        let osxsave = super::cpuid(1).2 >> 27 & 1 == 1;
        if !osxsave {
            return (0, FXSAVE_SIZE);
        }
        let xcr0 = xgetbv0();
        let mut m = (xcr0 & !PKRU) | LEGACY;
        // The legacy area and the XSAVE header.
        let mut size = XSAVE_HEADER_END;
        for i in 2..63 {
            if m >> i & 1 == 0 {
                continue;
            }
            let r = core::arch::x86_64::__cpuid_count(0xd, i);
            let end = r.ebx as usize + r.eax as usize;
            if r.eax == 0 {
                // XCR0 here is the host's (the hypervisor runs user mode
                // with it), which may enable components the guest's CPUID
                // does not describe (AMX on Intel hosts): never saved.
                m &= !(1 << i);
            } else if end > AREA_SIZE {
                log::warn!("xsave component {i} ({} bytes) not saved", r.eax);
                m &= !(1 << i);
            } else {
                size = size.max(end);
            }
        }
        log::debug!("xsave: xcr0 {xcr0:#x}, saving {m:#x} ({size} bytes)");
        (m, size)
    })
}

/// The components this kernel saves: XCR0 less PKRU and less what does
/// not fit in [`AREA_SIZE`]; 0 when the CPU does not report OSXSAVE.
pub fn mask() -> u64 {
    setup().0
}

/// Bytes of the saved state that matter: the XSAVE area of [`mask`]'s
/// components (what a signal frame holds), or 512 (FXSAVE).
pub fn size() -> usize {
    setup().1
}

fn xgetbv0() -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: only called when CPUID reports OSXSAVE, so `xgetbv` with
    // ECX = 0 is defined; it only reads XCR0.
    unsafe { asm!("xgetbv", in("ecx") 0, out("eax") lo, out("edx") hi, options(nomem, nostack)) };
    (u64::from(hi) << 32) | u64::from(lo)
}

/// The state a new program starts with: x87 control word 0x37f, MXCSR
/// 0x1f80, every register clear; the XSAVE header's XSTATE_BV is 0, so
/// `xrstor64` puts every extended component in its initial state.
static CLEAN: FpuState = {
    let mut a = [0u8; AREA_SIZE];
    a[0] = 0x7f;
    a[1] = 0x03;
    a[24] = 0x80;
    a[25] = 0x1f;
    FpuState(a)
};

impl FpuState {
    /// A zeroed state on the heap (built there: 4 KiB would be a lot for
    /// a kernel stack).
    pub fn boxed() -> Box<FpuState> {
        let b = Box::<FpuState>::new_zeroed();
        // SAFETY: `FpuState` is a byte array, for which all zeroes is a
        // valid value.
        unsafe { b.assume_init() }
    }

    /// The initial state of a new program.
    pub fn clean() -> Box<FpuState> {
        let mut b = Self::boxed();
        b.0.copy_from_slice(&CLEAN.0);
        b
    }

    /// The current registers (a new thread or process starts with its
    /// creator's).
    pub fn current() -> Box<FpuState> {
        let mut b = Self::boxed();
        b.save();
        b
    }

    /// Saves the current registers.
    pub fn save(&mut self) {
        let m = mask();
        let p = self.0.as_mut_ptr();
        if m == 0 {
            // SAFETY: a 512-byte (at least), 16-byte-aligned buffer;
            // CR4.OSFXSR is set at boot.
            unsafe { asm!("fxsave64 [{}]", in(reg) p, options(nostack)) };
        } else {
            // SAFETY: a 64-byte-aligned buffer of AREA_SIZE bytes, which
            // holds every component in `m` (`mask`); OSXSAVE is reported,
            // so `xsave64` is defined. It writes only the buffer.
            unsafe {
                asm!("xsave64 [{}]", in(reg) p, in("eax") m as u32,
                     in("edx") (m >> 32) as u32, options(nostack));
            }
        }
    }

    /// Loads the registers saved by [`FpuState::save`] (or [`CLEAN`]).
    pub fn restore(&self) {
        let m = mask();
        let p = self.0.as_ptr();
        if m == 0 {
            // SAFETY: the image came from fxsave64 or is CLEAN (valid
            // MXCSR), 16-byte aligned.
            unsafe { asm!("fxrstor64 [{}]", in(reg) p, options(nostack, readonly)) };
        } else {
            // SAFETY: the image came from `xsave64` with this mask, or is
            // CLEAN (valid MXCSR, zero XSAVE header: every component
            // initialized), so its header is valid and `xrstor64` does not
            // fault; it changes only the program's registers.
            unsafe {
                asm!("xrstor64 [{}]", in(reg) p, in("eax") m as u32,
                     in("edx") (m >> 32) as u32, options(nostack, readonly));
            }
        }
    }
}

impl FpuState {
    /// Makes a state that came from the program (a signal frame) safe to
    /// load: MXCSR keeps only the bits the CPU supports, and the XSAVE
    /// header loads only the components in `features` (and saved here),
    /// in the standard format with its reserved bytes zero; the other
    /// components are initialized by the restore. So the restore cannot
    /// fault.
    pub fn sanitize(&mut self, features: u64) {
        let cur = FpuState::current();
        let mut supported = u32::from_le_bytes(word(&cur.0, 28));
        if supported == 0 {
            supported = 0xffbf;
        }
        let mxcsr = u32::from_le_bytes(word(&self.0, 24)) & supported;
        self.0[24..28].copy_from_slice(&mxcsr.to_le_bytes());
        if mask() != 0 {
            let bv = u64::from_le_bytes(dword(&self.0, FXSAVE_SIZE)) & features & mask();
            self.0[FXSAVE_SIZE..XSAVE_HEADER_END].fill(0);
            self.0[FXSAVE_SIZE..FXSAVE_SIZE + 8].copy_from_slice(&bv.to_le_bytes());
        }
    }
}

fn word(b: &[u8], at: usize) -> [u8; 4] {
    let mut w = [0; 4];
    w.copy_from_slice(&b[at..at + 4]);
    w
}

fn dword(b: &[u8], at: usize) -> [u8; 8] {
    let mut w = [0; 8];
    w.copy_from_slice(&b[at..at + 8]);
    w
}

/// Resets the program's registers to their initial state (`execve`).
pub fn reset() {
    CLEAN.restore();
}
