//! Loading an ELF program into a fresh address space (like `execve`):
//! segments mapped eagerly (no fault per page on the way in), the `brk`
//! heap after the program's last segment, the stack with argv, envp and the
//! auxiliary vector (`qlib::user_stack`).
//!
//! A dynamically linked program comes with its interpreter's image (read
//! and vetted by the VMM). As on Linux, the program is mapped as usual
//! (`ET_EXEC` at its addresses, a PIE at [`ET_DYN_BASE`]), the interpreter
//! at [`INTERP_BASE`], and the program starts at the interpreter's entry
//! with `AT_BASE` = the interpreter's load address and `AT_PHDR`,
//! `AT_ENTRY` describing the program.

use alloc::vec;
use alloc::vec::Vec;

use qlib::elf::{self, ElfType};
use qlib::user_stack::{self as us, StackInput};

use crate::arch;
use crate::errno::Errno;
use crate::mm::addr_space::{AddrSpace, STACK_SIZE, STACK_TOP};
use crate::mm::filemap::Mapped;
use crate::mm::vma::{FileBacking, PROT_EXEC, PROT_READ, PROT_WRITE, VmaKind};
use crate::mm::{gpa_to_kva, page_down, page_up, uaccess};

/// Where a PIE (static or dynamic) is loaded (Linux's `ELF_ET_DYN_BASE`
/// without randomisation), rounded up to the program's alignment.
const ET_DYN_BASE: u64 = 0x5555_5555_4000;
/// Where an `ET_DYN` interpreter is loaded: below the `mmap` area
/// (`MMAP_TOP`), which hands out addresses top-down and skips it.
const INTERP_BASE: u64 = 0x7f00_0000_0000;
/// End (exclusive) of the space a loaded image may use.
const IMAGE_LIMIT: u64 = crate::mm::addr_space::MMAP_TOP;
/// A page of zeros (the `.bss` part of a segment's last file page).
static ZEROS: [u8; 4096] = [0; 4096];
/// Stack pages mapped before the program starts.
const STACK_PREFAULT: u64 = 32 * 4096;

/// What the program is started with.
pub struct Exec<'a> {
    /// The ELF image.
    pub image: &'a [u8],
    /// The interpreter's ELF image for a dynamically linked program.
    pub interp: Option<&'a [u8]>,
    /// argv strings.
    pub argv: &'a [&'a [u8]],
    /// envp strings.
    pub envp: &'a [&'a [u8]],
    /// `AT_EXECFN`.
    pub execfn: &'a [u8],
    /// uid, euid, gid, egid.
    pub ids: [u32; 4],
    /// `AT_RANDOM` bytes.
    pub random: [u8; 16],
}

/// Where the program starts.
pub struct Entry {
    /// Initial RIP.
    pub rip: u64,
    /// Initial RSP.
    pub rsp: u64,
}

/// Why a program could not be loaded.
#[derive(Debug)]
pub enum LoadError {
    /// The image is not a runnable static ELF.
    Elf(elf::ElfError),
    /// The loader cannot place it (see [`Refusal`]).
    Refused(Refusal),
    /// Another failure (mapping the return page).
    Errno(Errno),
}

/// Why a parsed program cannot be placed, for a one-line message.
#[derive(Debug, Clone, Copy)]
pub enum Refusal {
    /// Its segments (at the load bias) end at `end`, above [`IMAGE_LIMIT`]
    /// (the `mmap` area, the stack and the return page lie there).
    AboveLimit {
        /// The interpreter's segments, not the program's.
        interp: bool,
        /// End (exclusive) of the segments, or `u64::MAX` on overflow.
        end: u64,
    },
    /// The interpreter's segments overlap the program's.
    InterpOverlap,
    /// Guest memory ran out while mapping `what`.
    NoMemory(&'static str),
    /// argv and envp do not fit the stack.
    ArgsTooBig,
}

impl core::fmt::Display for LoadError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Elf(e) => write!(f, "{e}"),
            Self::Refused(r) => write!(f, "{r}"),
            Self::Errno(e) => write!(f, "cannot map the program ({e:?})"),
        }
    }
}

impl core::fmt::Display for Refusal {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            Self::AboveLimit { interp, end } => {
                let who = if interp { "the interpreter's" } else { "its" };
                if end == u64::MAX {
                    write!(f, "{who} segments overflow the address space")
                } else {
                    write!(
                        f,
                        "{who} segments end at {end:#x}, above the highest address a program may use ({IMAGE_LIMIT:#x})"
                    )
                }
            }
            Self::InterpOverlap => f.write_str("the interpreter's segments overlap the program's"),
            Self::NoMemory(what) => write!(
                f,
                "out of guest memory for {what} (give the sandbox more memory)"
            ),
            Self::ArgsTooBig => f.write_str(
                "arguments and environment do not fit the 8 MiB stack (Argument list too long)",
            ),
        }
    }
}

impl From<Errno> for LoadError {
    fn from(e: Errno) -> Self {
        Self::Errno(e)
    }
}

impl From<Refusal> for LoadError {
    fn from(r: Refusal) -> Self {
        Self::Refused(r)
    }
}

/// Copies bytes into user memory regardless of the VMA's protection (the
/// pages must be present).
fn poke(mm: &mut AddrSpace, va: u64, bytes: &[u8]) -> Result<(), Errno> {
    let mut done = 0usize;
    while done < bytes.len() {
        let at = va + done as u64;
        let n = ((4096 - (at & 0xfff)) as usize).min(bytes.len() - done);
        let pte = mm.pt.get(at);
        if !pte.present() {
            return Err(Errno::EFAULT);
        }
        let dst = gpa_to_kva(pte.addr() + (at & 0xfff)) as *mut u8;
        // SAFETY: the destination lies inside one present user page reached
        // through the direct map; `bytes` is kernel memory.
        unsafe { core::ptr::copy_nonoverlapping(bytes[done..].as_ptr(), dst, n) };
        done += n;
    }
    Ok(())
}

/// Maps the `PT_LOAD`s of `image` (parsed as `info`) at `bias`, first
/// checking the whole biased range is free and below [`IMAGE_LIMIT`];
/// returns the end of the last page.
fn map_image(
    mm: &mut AddrSpace,
    image: &[u8],
    info: &elf::ElfInfo,
    bias: u64,
    interp: bool,
) -> Result<u64, LoadError> {
    let above = |end| Refusal::AboveLimit { interp, end };
    let lo = page_down(info.min_vaddr)
        .checked_add(bias)
        .ok_or(above(u64::MAX))?;
    let end = info.max_vaddr.checked_add(bias).and_then(page_up);
    let hi = end
        .filter(|&hi| hi <= IMAGE_LIMIT)
        .ok_or(above(end.unwrap_or(u64::MAX)))?;
    if mm.vmas.overlaps(lo, hi) {
        return Err(Refusal::InterpOverlap.into());
    }
    let what = if interp {
        "the interpreter's segments"
    } else {
        "the program's segments"
    };
    let oom = |_| Refusal::NoMemory(what);
    // An image in the file window: its segments map the page-cache pages.
    let window = Mapped::of(image);
    let mut top = 0;
    for seg in info.segments() {
        // In range: `lo <= vaddr + bias` and `vaddr + memsz + bias <= hi`.
        let start = page_down(seg.vaddr + bias);
        let end = page_up(seg.vaddr + bias + seg.memsz).ok_or(above(u64::MAX))?;
        let mut prot = 0;
        if seg.flags.read {
            prot |= PROT_READ;
        }
        if seg.flags.write {
            prot |= PROT_WRITE;
        }
        if seg.flags.exec {
            prot |= PROT_EXEC;
        }
        let file = image
            .get(seg.file_offset as usize..(seg.file_offset + seg.filesz) as usize)
            .ok_or(LoadError::Errno(Errno::ENOEXEC))?;
        let seg_va = seg.vaddr + bias;
        // File pages when the image is in the window, the segment's page
        // offsets match (as `mmap` needs) and it shares no page with the
        // previous segment.
        if let Some(m) = window
            && (seg_va & 0xfff) == (seg.file_offset & 0xfff)
            && !mm.vmas.overlaps(start, end)
        {
            let file_end = page_up(seg_va + seg.filesz).ok_or(above(u64::MAX))?;
            let delta = (m.gpa + page_down(seg.file_offset)).wrapping_sub(start);
            let backing = FileBacking {
                delta,
                end: if seg.filesz == 0 { start } else { file_end },
            };
            mm.add_file_vma(start, end, prot, backing);
            // Writable segments are copied page by page as they are
            // written (`mm::fault`); the rest is mapped now.
            if prot & PROT_WRITE == 0 {
                mm.populate(start, end).map_err(oom)?;
            }
            // The rest of the last file page is the start of `.bss`:
            // zeros, in a private copy.
            let bss = seg_va + seg.filesz;
            if seg.memsz > seg.filesz && seg.filesz > 0 && bss & 0xfff != 0 {
                let page = page_down(bss);
                mm.populate_private(page, page + 4096).map_err(oom)?;
                mm.make_private(page, page + 4096).map_err(oom)?;
                poke(mm, bss, &ZEROS[..(4096 - (bss & 0xfff)) as usize])?;
            }
            top = top.max(end);
            continue;
        }
        // A page shared with the previous segment gets both protections,
        // and keeps that segment's bytes (its file pages copied first).
        let prev: Vec<(u64, u64)> = mm
            .vmas
            .iter_range(start, end)
            .map(|v| (v.start.max(start), v.end.min(end)))
            .collect();
        for (s, e) in prev {
            mm.populate_private(s, e).map_err(oom)?;
        }
        let shared = mm.vmas.remove_range(start, end);
        mm.add_vma(start, end, prot, VmaKind::Anon);
        for v in shared {
            mm.vmas.protect(v.start, v.end, v.prot | prot);
        }
        mm.populate(start, end).map_err(oom)?;
        // A page shared with a file-backed segment must not be written in
        // place.
        mm.make_private(start, end).map_err(oom)?;
        poke(mm, seg_va, file)?;
        top = top.max(end);
    }
    Ok(top)
}

/// The load bias of an `ET_DYN` image placed at `base` (rounded up to its
/// alignment); 0 for `ET_EXEC`.
fn dyn_bias(info: &elf::ElfInfo, base: u64, interp: bool) -> Result<u64, Refusal> {
    match info.e_type {
        ElfType::Dyn => base
            .checked_next_multiple_of(info.max_align)
            .and_then(|b| b.checked_sub(page_down(info.min_vaddr)))
            .ok_or(Refusal::AboveLimit {
                interp,
                end: u64::MAX,
            }),
        ElfType::Exec => Ok(0),
    }
}

/// A vetted program: its ELF information and its interpreter's.
pub type Vetted<'a> = (elf::ElfInfo, Option<(&'a [u8], elf::ElfInfo)>);

/// Checks that `image` (and `interp`, given exactly when the program
/// names one) can be loaded: the checks `load` relies on, so that
/// `execve` can fail before its point of no return.
pub fn vet<'a>(image: &[u8], interp: Option<&'a [u8]>) -> Result<Vetted<'a>, elf::ElfError> {
    let info = elf::parse(image)?;
    let interp = match (info.interp, interp) {
        (None, _) => None,
        (Some(_), None) => {
            return Err(info
                .require_static()
                .err()
                .unwrap_or(elf::ElfError::BadInterp));
        }
        (Some(_), Some(image)) => {
            let iinfo = elf::parse(image)?;
            iinfo.require_static()?;
            Some((image, iinfo))
        }
    };
    Ok((info, interp))
}

/// Loads `exec` into the fresh `mm` and maps the kernel's return page
/// (`arch::user_return`), the vvar page and the vDSO (`crate::vdso`): what
/// boot and `execve` both do.
pub fn load_fresh(mm: &mut AddrSpace, exec: &Exec<'_>) -> Result<Entry, LoadError> {
    let entry = load(mm, exec)?;
    arch::user_return::map(mm)?;
    crate::vdso::map(mm)?;
    Ok(entry)
}

/// Loads `exec` into `mm`; returns the entry state.
pub fn load(mm: &mut AddrSpace, exec: &Exec<'_>) -> Result<Entry, LoadError> {
    let (info, interp) = vet(exec.image, exec.interp).map_err(LoadError::Elf)?;
    let bias = dyn_bias(&info, ET_DYN_BASE, false)?;
    let top = map_image(mm, exec.image, &info, bias, false)?;
    let (at_base, rip) = match &interp {
        Some((image, iinfo)) => {
            let ibias = dyn_bias(iinfo, INTERP_BASE, true)?;
            map_image(mm, image, iinfo, ibias, true)?;
            (ibias, iinfo.entry + ibias)
        }
        None => (0, info.entry + bias),
    };
    mm.brk_start = top;
    mm.brk = top;

    let stack_bottom = STACK_TOP - STACK_SIZE;
    mm.add_vma(
        stack_bottom,
        STACK_TOP,
        PROT_READ | PROT_WRITE,
        VmaKind::Stack,
    );
    mm.populate(STACK_TOP - STACK_PREFAULT, STACK_TOP)
        .map_err(|_| Refusal::NoMemory("the stack"))?;

    let phdr = info.phdr_vaddr.map_or(0, |p| p + bias);
    let hwcap = u64::from(arch::cpuid(1).3);
    let auxv = [
        (us::AT_PHDR, phdr),
        (us::AT_PHENT, u64::from(info.phentsize)),
        (us::AT_PHNUM, u64::from(info.phnum)),
        (us::AT_PAGESZ, 4096),
        (us::AT_BASE, at_base),
        (us::AT_FLAGS, 0),
        (us::AT_ENTRY, info.entry + bias),
        (us::AT_UID, u64::from(exec.ids[0])),
        (us::AT_EUID, u64::from(exec.ids[1])),
        (us::AT_GID, u64::from(exec.ids[2])),
        (us::AT_EGID, u64::from(exec.ids[3])),
        (us::AT_SECURE, 0),
        (us::AT_HWCAP, hwcap),
        (us::AT_HWCAP2, 0),
        (us::AT_CLKTCK, 100),
        (us::AT_SYSINFO_EHDR, qlib::layout::VDSO_VA),
    ];
    let input = StackInput {
        argv: exec.argv,
        envp: exec.envp,
        auxv: &auxv,
        random: exec.random,
        execfn: exec.execfn,
        platform: b"x86_64",
    };
    let mut size = 16 * 1024;
    let (buf, rsp): (Vec<u8>, u64) = loop {
        let mut buf = vec![0u8; size];
        match us::build(&mut buf, STACK_TOP, &input) {
            Ok(rsp) => break (buf, rsp),
            // argv + envp may take a quarter of the 8 MiB stack.
            Err(_) if size < 4 << 20 => size *= 4,
            Err(_) => return Err(Refusal::ArgsTooBig.into()),
        }
    };
    let used = (STACK_TOP - rsp) as usize;
    let tail = &buf[buf.len() - used..];
    uaccess::copy_out(mm, rsp, tail).map_err(|_| Refusal::NoMemory("the stack"))?;
    Ok(Entry { rip, rsp })
}
