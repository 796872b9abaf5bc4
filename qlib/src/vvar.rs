//! The vvar page: the clock parameters the guest kernel keeps and every
//! program reads, read-only, from the vDSO (`qkernel/vdso/vdso.c`, which
//! declares the same layout as `struct vvar`; both sides assert it).
//!
//! ```text
//! offset  field         meaning
//! 0x00    seq           sequence counter: odd while the kernel writes
//! 0x04    getcpu_sys    0: getcpu answers vCPU 0; 1: the vDSO asks the kernel
//! 0x08    tsc_base      TSC value at which the bases below hold
//! 0x10    mult          ns = (ticks * mult) >> shift
//! 0x18    shift
//! 0x1c    (pad)
//! 0x20    mono_base     CLOCK_MONOTONIC (= BOOTTIME) in ns at tsc_base
//! 0x28    real_base     CLOCK_REALTIME (= TAI) in ns at tsc_base
//! ```
//! The kernel's own clocks are computed from these same fields with the
//! same formula ([`Vvar::ns_at`]), so the syscall and the vDSO give equal
//! answers for the same TSC reading.

/// Version of [`Vvar`]'s layout (the vDSO is built with the kernel, so it
/// only documents changes).
pub const VVAR_LAYOUT: u32 = 1;

/// Fixed-point shift of [`Vvar::mult`]: 2^-40 relative precision.
pub const SHIFT: u32 = 40;

/// The clock parameters (module doc).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Vvar {
    /// Odd while the kernel writes the fields below.
    pub seq: u32,
    /// Whether `getcpu` must ask the kernel (more than one vCPU online).
    pub getcpu_sys: u32,
    /// TSC at which `mono_base` and `real_base` hold.
    pub tsc_base: u64,
    /// ns per tick, scaled by `2^shift`.
    pub mult: u64,
    /// The scale of `mult`.
    pub shift: u32,
    /// Zero.
    pub pad: u32,
    /// `CLOCK_MONOTONIC` at `tsc_base`, ns.
    pub mono_base: u64,
    /// `CLOCK_REALTIME` at `tsc_base`, ns.
    pub real_base: u64,
}

const _: () = assert!(size_of::<Vvar>() == 0x30);
const _: () = assert!(core::mem::offset_of!(Vvar, tsc_base) == 0x08);
const _: () = assert!(core::mem::offset_of!(Vvar, mult) == 0x10);
const _: () = assert!(core::mem::offset_of!(Vvar, shift) == 0x18);
const _: () = assert!(core::mem::offset_of!(Vvar, mono_base) == 0x20);
const _: () = assert!(core::mem::offset_of!(Vvar, real_base) == 0x28);

/// `mult` for a TSC rate of `khz` (not 0) at [`SHIFT`].
pub const fn mult_for_khz(khz: u64) -> u64 {
    ((1_000_000u128 << SHIFT) / khz as u128) as u64
}

/// The TSC interval `ticks` in ns at `mult`/`shift`. The vDSO computes
/// exactly this (a 64x64->128 multiply and a shift).
pub const fn ticks_to_ns(ticks: u64, mult: u64, shift: u32) -> u64 {
    ((ticks as u128 * mult as u128) >> shift) as u64
}

impl Vvar {
    /// Nanoseconds since `tsc_base` at TSC reading `tsc`.
    pub const fn elapsed_ns(&self, tsc: u64) -> u64 {
        ticks_to_ns(tsc.wrapping_sub(self.tsc_base), self.mult, self.shift)
    }

    /// A clock whose value at `tsc_base` is `base`, at TSC reading `tsc`.
    pub const fn ns_at(&self, base: u64, tsc: u64) -> u64 {
        base.wrapping_add(self.elapsed_ns(tsc))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_second_of_ticks_is_one_second_within_a_ns() {
        for khz in [1_000_000u64, 2_100_000, 2_995_123, 3_600_000] {
            let m = mult_for_khz(khz);
            let ns = ticks_to_ns(khz * 1000, m, SHIFT);
            assert!(ns.abs_diff(1_000_000_000) <= 1, "{khz} kHz: {ns}");
        }
    }

    #[test]
    fn a_day_drifts_under_a_microsecond_from_the_exact_division() {
        let khz = 2_995_123u64;
        let ticks = khz * 1000 * 86_400;
        let exact = (u128::from(ticks) * 1_000_000 / u128::from(khz)) as u64;
        let fixed = ticks_to_ns(ticks, mult_for_khz(khz), SHIFT);
        assert!(exact.abs_diff(fixed) < 1000, "{exact} vs {fixed}");
    }

    #[test]
    fn clocks_never_go_backwards_as_the_tsc_advances() {
        let v = Vvar {
            tsc_base: 1000,
            mult: mult_for_khz(2_345_678),
            shift: SHIFT,
            mono_base: 5,
            ..Vvar::default()
        };
        let mut last = 0;
        for tsc in (1000..2_000_000u64).step_by(7) {
            let ns = v.ns_at(v.mono_base, tsc);
            assert!(ns >= last);
            last = ns;
        }
    }
}
