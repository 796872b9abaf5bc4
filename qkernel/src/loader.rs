//! Loading a static ELF program into a fresh address space (like
//! `execve`): segments mapped eagerly (no fault per page on the way in),
//! the `brk` heap after the last segment, the stack with argv, envp and the
//! auxiliary vector (`qlib::user_stack`).

use alloc::vec;
use alloc::vec::Vec;

use qlib::elf::{self, ElfType};
use qlib::user_stack::{self as us, StackInput};

use crate::arch;
use crate::errno::Errno;
use crate::mm::addr_space::{AddrSpace, STACK_SIZE, STACK_TOP};
use crate::mm::vma::{PROT_EXEC, PROT_READ, PROT_WRITE, VmaKind};
use crate::mm::{gpa_to_kva, page_down, page_up, uaccess};

/// Where a static-PIE program is loaded (Linux's `ELF_ET_DYN_BASE`
/// without randomisation).
const ET_DYN_BASE: u64 = 0x5555_5555_4000;
/// Stack pages mapped before the program starts.
const STACK_PREFAULT: u64 = 32 * 4096;

/// What the program is started with.
pub struct Exec<'a> {
    /// The ELF image.
    pub image: &'a [u8],
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
    /// Out of memory or arguments too large.
    Errno(Errno),
}

impl From<Errno> for LoadError {
    fn from(e: Errno) -> Self {
        Self::Errno(e)
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

/// Loads `exec` into `mm`; returns the entry state.
pub fn load(mm: &mut AddrSpace, exec: &Exec<'_>) -> Result<Entry, LoadError> {
    let info = elf::parse(exec.image).map_err(LoadError::Elf)?;
    info.require_static().map_err(LoadError::Elf)?;
    let bias = match info.e_type {
        ElfType::Dyn => ET_DYN_BASE - page_down(info.min_vaddr),
        _ => 0,
    };
    let mut top = 0;
    for seg in info.segments() {
        let start = page_down(seg.vaddr + bias);
        let end = page_up(seg.vaddr + bias + seg.memsz).ok_or(Errno::ENOMEM)?;
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
        // A page shared with the previous segment gets both protections.
        let shared = mm.vmas.remove_range(start, end);
        mm.add_vma(start, end, prot, VmaKind::Anon);
        for v in shared {
            mm.vmas.protect(v.start, v.end, v.prot | prot);
        }
        mm.populate(start, end)?;
        let file = exec
            .image
            .get(seg.file_offset as usize..(seg.file_offset + seg.filesz) as usize)
            .ok_or(Errno::ENOEXEC)?;
        poke(mm, seg.vaddr + bias, file)?;
        top = top.max(end);
    }
    mm.brk_start = top;
    mm.brk = top;

    let stack_bottom = STACK_TOP - STACK_SIZE;
    mm.add_vma(
        stack_bottom,
        STACK_TOP,
        PROT_READ | PROT_WRITE,
        VmaKind::Stack,
    );
    mm.populate(STACK_TOP - STACK_PREFAULT, STACK_TOP)?;

    let phdr = info.phdr_vaddr.map_or(0, |p| p + bias);
    let hwcap = u64::from(arch::cpuid(1).3);
    let auxv = [
        (us::AT_PHDR, phdr),
        (us::AT_PHENT, u64::from(info.phentsize)),
        (us::AT_PHNUM, u64::from(info.phnum)),
        (us::AT_PAGESZ, 4096),
        (us::AT_BASE, 0),
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
            Err(_) if size < 1 << 20 => size *= 4,
            Err(_) => return Err(Errno::E2BIG.into()),
        }
    };
    let used = (STACK_TOP - rsp) as usize;
    let tail = &buf[buf.len() - used..];
    uaccess::copy_out(mm, rsp, tail)?;
    Ok(Entry {
        rip: info.entry + bias,
        rsp,
    })
}
