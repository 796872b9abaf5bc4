//! The Linux x86-64 signal frame, as the handler sees it on its stack:
//!
//! ```text
//!   frame + 0    pretcode      sa_restorer: the handler's return address
//!   frame + 8    ucontext      uc_flags, uc_link, uc_stack (24 bytes),
//!                              uc_mcontext (struct sigcontext, 256 bytes),
//!                              uc_sigmask (8 bytes)              304 bytes
//!   frame + 312  siginfo_t     128 bytes
//!   ...          (padding)
//!   fpstate      XSAVE area    `fpu::size()` bytes (2,432 with AVX-512 here;
//!                              512, FXSAVE, without XSAVE), 64-byte
//!                              aligned, above the frame, then the
//!                              4-byte FP_XSTATE_MAGIC2
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
//! runs: saving them at delivery and loading them at `rt_sigreturn` is all
//! it takes. The program's AVX/AVX-512 registers are live too (the
//! hypervisor runs user mode with the host's XCR0, `arch::fpu`), so the
//! frame holds their XSAVE area, as Linux's does: `uc_flags` has
//! `UC_FP_XSTATE`, the legacy area's software bytes (464..512) say
//! FP_XSTATE_MAGIC1, the sizes and the features, and FP_XSTATE_MAGIC2
//! follows the area. A frame without them (a handler that built its own
//! FXSAVE-only context) restores x87/SSE and initializes the rest, as
//! Linux does. Without a handler that uses AVX the loss went unseen;
//! glibc's string functions use YMM/ZMM registers and `vzeroupper`, and
//! the JVM's compiled code keeps values in them across its SIGSEGV traps.

use crate::arch::entry::TrapFrame;
use crate::arch::fpu::{self, FpuState};
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
/// `uc_flags`: `UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS`, as Linux sets.
const UC_FLAGS: u64 = 2 | 4;
/// RFLAGS bits `rt_sigreturn` takes from the frame (Linux `FIX_EFLAGS`):
/// CF PF AF ZF SF TF DF OF AC RF.
const SIGRETURN_FLAGS: u64 = 0x5_0dd5;
const USER_CS: u64 = 0x33;
const USER_SS: u64 = 0x2b;
/// `uc_flags` bit: the frame's FPU area is in the XSAVE format.
const UC_FP_XSTATE: u64 = 1;
/// The software-reserved bytes of the legacy area (`struct _fpx_sw_bytes`).
const SW_BYTES: usize = 464;
const FP_XSTATE_MAGIC1: u32 = 0x4650_5853;
const FP_XSTATE_MAGIC2: u32 = 0x4650_5845;
const MAGIC2_SIZE: u64 = 4;

/// Bytes the FPU state takes in a frame (the XSAVE area and MAGIC2).
pub fn fpstate_size() -> u64 {
    if fpu::mask() == 0 {
        fpu::FXSAVE_SIZE as u64
    } else {
        fpu::size() as u64 + MAGIC2_SIZE
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
    let mut st = FpuState::current();
    let xsave = fpu::mask() != 0;
    if xsave {
        let size = fpu::size();
        let sw = &mut st.0[SW_BYTES..fpu::FXSAVE_SIZE];
        sw.fill(0);
        sw[0..4].copy_from_slice(&FP_XSTATE_MAGIC1.to_le_bytes());
        sw[4..8].copy_from_slice(&(size as u32 + MAGIC2_SIZE as u32).to_le_bytes());
        sw[8..16].copy_from_slice(&fpu::mask().to_le_bytes());
        sw[16..20].copy_from_slice(&(size as u32).to_le_bytes());
        uaccess::copy_out(mm, fpstate, &st.0[..size])?;
        uaccess::copy_out(
            mm,
            fpstate.wrapping_add(size as u64),
            &FP_XSTATE_MAGIC2.to_le_bytes(),
        )?;
    } else {
        uaccess::copy_out(mm, fpstate, &st.0[..fpu::FXSAVE_SIZE])?;
    }
    let mut buf = [0u64; (FRAME_SIZE / 8) as usize];
    buf[0] = restorer;
    buf[1] = if xsave {
        UC_FLAGS | UC_FP_XSTATE
    } else {
        UC_FLAGS
    };
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

/// Loads the FPU state saved at `fpstate` (0: leave it as it is). An
/// XSAVE frame whose magic numbers and sizes check out restores the
/// features it names; any other restores x87/SSE only and initializes
/// the rest (as Linux). What is loaded is sanitized first (`sanitize`).
pub fn restore_fpu(mm: &mut AddrSpace, fpstate: u64) -> Result<(), Errno> {
    if fpstate == 0 {
        return Ok(());
    }
    let mut st = FpuState::boxed();
    uaccess::copy_in(mm, fpstate, &mut st.0[..fpu::FXSAVE_SIZE])?;
    let mut features = fpu::LEGACY;
    if let Some((xstate_size, xfeatures)) = xstate_frame(&st.0) {
        let mut magic2 = [0u8; 4];
        uaccess::copy_in(mm, fpstate.wrapping_add(xstate_size as u64), &mut magic2)?;
        if u32::from_le_bytes(magic2) == FP_XSTATE_MAGIC2 {
            let rest = &mut st.0[fpu::FXSAVE_SIZE..xstate_size];
            uaccess::copy_in(mm, fpstate.wrapping_add(fpu::FXSAVE_SIZE as u64), rest)?;
            features |= xfeatures;
        }
    }
    st.sanitize(features);
    st.restore();
    Ok(())
}

/// The XSAVE area size and features a frame's software bytes announce,
/// if they are an XSAVE frame this kernel could have written.
fn xstate_frame(legacy: &[u8]) -> Option<(usize, u64)> {
    if fpu::mask() == 0 {
        return None;
    }
    let sw = &legacy[SW_BYTES..fpu::FXSAVE_SIZE];
    let u32_at = |i: usize| u32::from_le_bytes([sw[i], sw[i + 1], sw[i + 2], sw[i + 3]]);
    let magic1 = u32_at(0);
    let extended = u32_at(4) as usize;
    let xfeatures = u64::from(u32_at(8)) | u64::from(u32_at(12)) << 32;
    let size = u32_at(16) as usize;
    let ok = magic1 == FP_XSTATE_MAGIC1
        && (fpu::FXSAVE_SIZE + 64..=fpu::size()).contains(&size)
        && extended == size + MAGIC2_SIZE as usize;
    ok.then_some((size, xfeatures))
}

// The layout of the module doc.
const _: () = assert!(FRAME_SIZE == 440 && MCONTEXT_OFFSET == 48 && SIGINFO_OFFSET == 312);
