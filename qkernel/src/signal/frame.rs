//! The Linux x86-64 signal frame, as the handler sees it on its stack:
//!
//! ```text
//!   frame + 0    pretcode      sa_restorer: the handler's return address
//!   frame + 8    ucontext      uc_flags, uc_link, uc_stack (24 bytes),
//!                              uc_mcontext (struct sigcontext, 256 bytes),
//!                              uc_sigmask (8 bytes)              304 bytes
//!   frame + 312  siginfo_t     128 bytes
//!   ...          (padding)
//!   fpstate      FXSAVE area   512 bytes, 64-byte aligned, above the frame
//! ```
//!
//! `struct sigcontext`: r8..r15, rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp,
//! rip, eflags, then cs/gs/fs/ss (u16 each), err, trapno, oldmask, cr2,
//! the fpstate pointer and 8 reserved words. The frame address is 8 mod 16
//! so that `rsp + 8` is 16-aligned at the handler's first instruction, as
//! after a `call`.
//!
//! The guest kernel is built without SSE (soft-float target), so the
//! program's FPU/SSE registers are live, untouched, whenever the kernel
//! runs: `fxsave64` at delivery and `fxrstor64` at `rt_sigreturn` are all
//! it takes. CR4.OSXSAVE is off, so there is no AVX state to save.

use crate::arch::entry::TrapFrame;
use crate::errno::Errno;
use crate::mm::addr_space::AddrSpace;
use crate::mm::uaccess;

use super::Info;

/// Size of the frame below the FPU area (pretcode, ucontext, siginfo).
pub const FRAME_SIZE: u64 = 8 + UCONTEXT_SIZE + SIGINFO_SIZE;
const UCONTEXT_SIZE: u64 = 304;
const SIGINFO_SIZE: u64 = 128;
/// Offsets from the frame start.
pub const UC_OFFSET: u64 = 8;
const MCONTEXT_OFFSET: u64 = UC_OFFSET + 40;
const SIGMASK_OFFSET: u64 = UC_OFFSET + 296;
pub const SIGINFO_OFFSET: u64 = 8 + UCONTEXT_SIZE;
/// The FXSAVE area.
pub const FPSTATE_SIZE: u64 = 512;

/// `uc_flags`: `UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS`, as Linux sets.
const UC_FLAGS: u64 = 2 | 4;
/// RFLAGS bits `rt_sigreturn` takes from the frame (Linux `FIX_EFLAGS`):
/// CF PF AF ZF SF TF DF OF AC RF.
const SIGRETURN_FLAGS: u64 = 0x5_0dd5;
const USER_CS: u64 = 0x33;
const USER_SS: u64 = 0x2b;

/// An FXSAVE area (16-byte alignment is required by the instruction).
#[repr(C, align(16))]
pub struct FxArea(pub [u8; 512]);

impl FxArea {
    /// The program's current FPU/SSE state.
    pub fn save() -> FxArea {
        let mut a = FxArea([0; 512]);
        // SAFETY: `a` is a 512-byte, 16-byte-aligned buffer; fxsave64 only
        // writes it. CR4.OSFXSR is set at boot.
        unsafe {
            core::arch::asm!("fxsave64 [{}]", in(reg) a.0.as_mut_ptr(), options(nostack));
        }
        a
    }

    /// Loads this state into the FPU. MXCSR is first clamped to the bits
    /// the CPU supports (reserved bits make `fxrstor64` fault).
    pub fn restore(mut self) {
        let cur = FxArea::save();
        let mut mask = u32::from_le_bytes(cur.0[28..32].try_into().expect("4 bytes"));
        if mask == 0 {
            mask = 0xffbf;
        }
        let mxcsr = u32::from_le_bytes(self.0[24..28].try_into().expect("4 bytes")) & mask;
        self.0[24..28].copy_from_slice(&mxcsr.to_le_bytes());
        // SAFETY: a 512-byte, 16-byte-aligned FXSAVE image whose MXCSR has
        // no reserved bit set, so fxrstor64 cannot fault; it only changes
        // the program's FPU/SSE registers, which the kernel does not use.
        unsafe {
            core::arch::asm!("fxrstor64 [{}]", in(reg) self.0.as_ptr(), options(nostack));
        }
    }
}

/// The saved user context: what goes into `uc_mcontext`.
pub struct Saved<'a> {
    pub regs: &'a TrapFrame,
    pub info: &'a Info,
    pub signo: u32,
    pub oldmask: u64,
    /// `uc_stack`: sp, flags, size.
    pub stack: (u64, i32, u64),
}

fn sigcontext(s: &Saved<'_>, fpstate: u64) -> [u64; 32] {
    let r = s.regs;
    let segs = USER_CS | (USER_SS << 48);
    [
        r.r8,
        r.r9,
        r.r10,
        r.r11,
        r.r12,
        r.r13,
        r.r14,
        r.r15,
        r.rdi,
        r.rsi,
        r.rbp,
        r.rbx,
        r.rdx,
        r.rax,
        r.rcx,
        r.rsp,
        r.rip,
        r.rflags,
        segs,
        s.info.error,
        s.info.trapno,
        s.oldmask,
        if s.info.trapno == 14 { s.info.addr } else { 0 }, // cr2
        fpstate,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
    ]
}

fn siginfo(s: &Saved<'_>) -> [u64; 16] {
    super::siginfo_words(s.signo, *s.info)
}

/// Writes the frame at `frame` (8 mod 16) and the FPU state at `fpstate`
/// (64-byte aligned). A bad stack gives `EFAULT`.
pub fn write(
    mm: &mut AddrSpace,
    frame: u64,
    fpstate: u64,
    restorer: u64,
    s: &Saved<'_>,
) -> Result<(), Errno> {
    let fx = FxArea::save();
    uaccess::copy_out(mm, fpstate, &fx.0)?;
    let mut buf = [0u64; (FRAME_SIZE / 8) as usize];
    buf[0] = restorer;
    buf[1] = UC_FLAGS;
    buf[2] = 0; // uc_link
    buf[3] = s.stack.0;
    buf[4] = u64::from(s.stack.1 as u32);
    buf[5] = s.stack.2;
    let mc = (MCONTEXT_OFFSET / 8) as usize;
    buf[mc..mc + 32].copy_from_slice(&sigcontext(s, fpstate));
    buf[(SIGMASK_OFFSET / 8) as usize] = s.oldmask;
    let si = (SIGINFO_OFFSET / 8) as usize;
    buf[si..si + 16].copy_from_slice(&siginfo(s));
    let mut bytes = [0u8; FRAME_SIZE as usize];
    for (chunk, w) in bytes.chunks_exact_mut(8).zip(buf.iter()) {
        chunk.copy_from_slice(&w.to_le_bytes());
    }
    uaccess::copy_out(mm, frame, &bytes)
}

/// What `rt_sigreturn` reads back from a frame.
pub struct Restored {
    pub mask: u64,
    pub fpstate: u64,
}

/// Reads the `ucontext` at `uc` into `regs` (unsanitized: the caller
/// checks RIP and RSP; RFLAGS, CS and SS are fixed on the way out).
pub fn read(mm: &mut AddrSpace, uc: u64, regs: &mut TrapFrame) -> Result<Restored, Errno> {
    let mut bytes = [0u8; UCONTEXT_SIZE as usize];
    uaccess::copy_in(mm, uc, &mut bytes)?;
    let w = |i: usize| {
        let at = (MCONTEXT_OFFSET - UC_OFFSET) as usize + i * 8;
        u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
    };
    regs.r8 = w(0);
    regs.r9 = w(1);
    regs.r10 = w(2);
    regs.r11 = w(3);
    regs.r12 = w(4);
    regs.r13 = w(5);
    regs.r14 = w(6);
    regs.r15 = w(7);
    regs.rdi = w(8);
    regs.rsi = w(9);
    regs.rbp = w(10);
    regs.rbx = w(11);
    regs.rdx = w(12);
    regs.rax = w(13);
    regs.rcx = w(14);
    regs.rsp = w(15);
    regs.rip = w(16);
    // As Linux: only the arithmetic flags, DF, TF, AC and RF come from the
    // frame; the rest stay as they were (and are sanitized on the way out).
    regs.rflags = (regs.rflags & !SIGRETURN_FLAGS) | (w(17) & SIGRETURN_FLAGS);
    regs.cs = USER_CS;
    regs.ss = USER_SS;
    let at = (SIGMASK_OFFSET - UC_OFFSET) as usize;
    let mask = u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    Ok(Restored {
        mask,
        fpstate: w(23),
    })
}

/// Loads the FPU state saved at `fpstate` (0: leave it as it is).
pub fn restore_fpu(mm: &mut AddrSpace, fpstate: u64) -> Result<(), Errno> {
    if fpstate == 0 {
        return Ok(());
    }
    let mut fx = FxArea([0; 512]);
    uaccess::copy_in(mm, fpstate, &mut fx.0)?;
    fx.restore();
    Ok(())
}

// The layout of the module doc.
const _: () = assert!(FRAME_SIZE == 440 && MCONTEXT_OFFSET == 48 && SIGINFO_OFFSET == 312);
