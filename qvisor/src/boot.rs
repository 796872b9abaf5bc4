//! Preparing guest RAM before the first instruction: the kernel image, the
//! boot page tables, the boot data (program, argv, env) and `BootInfo`.
//! The memory map is `qlib::layout`.

use qlib::abi::{ABI_VERSION, BOOT_MAGIC, BootInfo, IoVec};
use qlib::layout::{
    BOOT_INFO_GPA, BOOT_PGD_GPA, BOOT_PT_END_GPA, DIRECT_MAP, FILE_WINDOW_GPA, FILE_WINDOW_SIZE,
    KERNEL_BASE, KERNEL_LOAD_GPA, LARGE_PAGE_SIZE, PAGE_SIZE, pml4_slot,
};
use qlib::pte::{HUGE, PRESENT, USER, WRITABLE};

use crate::error::VmmError;
use crate::guest_mem::GuestRam;

/// What the program sees: its image, arguments and environment.
pub struct Program<'a> {
    /// The ELF image: its range in the file window (`crate::file_window`).
    pub image: IoVec,
    /// The interpreter's ELF image, empty for a static program.
    pub interp: IoVec,
    /// argv, `argv[0]` included.
    pub argv: &'a [String],
    /// `KEY=VALUE` strings.
    pub envp: &'a [String],
    /// The path as given, for `AT_EXECFN`.
    pub execfn: &'a str,
    /// The ELF file run (`/proc/self/exe`): the program, or for a `#!`
    /// script its interpreter.
    pub exe: &'a str,
    /// The working directory inside the rootfs.
    pub cwd: &'a str,
    /// The hostname.
    pub hostname: &'a str,
    /// The seccomp filter (`qlib::seccomp` format), empty for none.
    pub seccomp: &'a [u8],
    /// vCPUs (1..=`qlib::abi::MAX_VCPUS`).
    pub cpus: u64,
    /// `qlib::abi::BootInfo::flags` (`BOOT_INIT`).
    pub flags: u64,
    /// `qlib::abi::Creds` as bytes; `None` for none.
    pub creds: Option<[u8; core::mem::size_of::<qlib::abi::Creds>()]>,
    /// `sys/a/b=value` strings for the guest's `/proc/sys`.
    pub sysctl: &'a [String],
    /// Mountinfo records of the mounts inside the rootfs (`BootInfo::mounts`).
    pub mounts: &'a [String],
    /// `linux.devices` records (`BootInfo::devices`).
    pub devices: &'a [String],
    /// `uid_map` and `gid_map` texts, or none (`BootInfo::id_maps`).
    pub id_maps: &'a [String],
}

/// Guest kernel log level forwarded to the host: 0 = off .. 5 = trace.
pub type LogLevel = u64;

/// The whole pages of the kernel's read-only segments (code and
/// constants: not writable, no bss) as loaded: `(gpa, bytes of image,
/// executable)`. Nothing writes them after boot, so a hibernated sandbox
/// can drop them and copy them back from the image at wake (`hibernate`).
pub type KernelText = Vec<TextPages>;

/// Whole read-only pages of the kernel image in guest RAM.
#[derive(Debug, Clone, Copy)]
pub struct TextPages {
    /// Guest-physical address (page aligned).
    pub gpa: u64,
    /// The image's bytes for them (whole pages).
    pub bytes: &'static [u8],
    /// Code (else constants).
    pub exec: bool,
    /// Mapped from the qrun binary (`crate::kernel_text`), not copied:
    /// dropped, they come back from the page cache by themselves.
    pub from_file: bool,
}

/// Loads the kernel ELF into guest RAM; returns its entry point and its
/// code pages ([`KernelText`]).
pub fn load_kernel(ram: &GuestRam, image: &'static [u8]) -> Result<(u64, KernelText), VmmError> {
    let bad = VmmError::KernelImage;
    let u16_at = |o: usize| -> Result<u64, VmmError> {
        let b = image.get(o..o + 2).ok_or(bad("truncated"))?;
        Ok(u64::from(u16::from_le_bytes([b[0], b[1]])))
    };
    let u64_at = |o: usize| -> Result<u64, VmmError> {
        let b = image.get(o..o + 8).ok_or(bad("truncated"))?;
        Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))
    };
    if image.get(0..4) != Some(b"\x7fELF".as_slice()) {
        return Err(bad("not an ELF file"));
    }
    let entry = u64_at(24)?;
    let phoff = u64_at(32)? as usize;
    let phentsize = u16_at(54)? as usize;
    let phnum = u16_at(56)? as usize;
    let mut text = Vec::new();
    for i in 0..phnum {
        let ph = phoff + i * phentsize;
        let p_type = u64_at(ph)? & 0xffff_ffff;
        if p_type != 1 {
            continue;
        }
        let flags = u64_at(ph)? >> 32;
        let offset = u64_at(ph + 8)? as usize;
        let paddr = u64_at(ph + 24)?;
        let filesz = u64_at(ph + 32)? as usize;
        let memsz = u64_at(ph + 40)?;
        if paddr < KERNEL_LOAD_GPA || paddr + memsz > ram.size() {
            return Err(bad("segment outside guest RAM"));
        }
        let bytes = image
            .get(offset..offset + filesz)
            .ok_or(bad("segment beyond end of file"))?;
        // PF_W clear, no bss: whole pages only (the segment's first and
        // last pages may hold a neighbour's bytes).
        let mut whole = None;
        if flags & 2 == 0 && filesz as u64 == memsz {
            let start = paddr.next_multiple_of(PAGE_SIZE);
            let end = (paddr + memsz) & !(PAGE_SIZE - 1);
            if end > start {
                let from = offset + (start - paddr) as usize;
                if let Some(b) = image.get(from..from + (end - start) as usize) {
                    let from_file = crate::kernel_text::map(ram, start, b);
                    text.push(TextPages {
                        gpa: start,
                        bytes: b,
                        exec: flags & 1 != 0,
                        from_file,
                    });
                    whole = from_file.then_some((start, end));
                }
            }
        }
        // Guest RAM is fresh anonymous memory: the bss is already zero.
        // Pages mapped from the binary already hold their bytes.
        let write = |gpa: u64, b: &[u8]| {
            ram.write_bytes(gpa, b)
                .map_err(|_| bad("segment outside guest RAM"))
        };
        match whole {
            Some((start, end)) => {
                let head = (start - paddr) as usize;
                let tail = (end - paddr) as usize;
                write(paddr, &bytes[..head])?;
                write(end, &bytes[tail..])?;
            }
            None => write(paddr, bytes)?,
        }
    }
    Ok((entry, text))
}

/// End (exclusive) of the guest-physical memory the kernel image uses
/// (its segments, bss included).
pub fn kernel_end(image: &[u8]) -> Result<u64, VmmError> {
    let bad = VmmError::KernelImage;
    let at = |o: usize, n: usize| -> Result<u64, VmmError> {
        let b = image.get(o..o + n).ok_or(bad("truncated"))?;
        let mut v = [0u8; 8];
        v[..n].copy_from_slice(b);
        Ok(u64::from_le_bytes(v))
    };
    let (phoff, phentsize, phnum) = (at(32, 8)? as usize, at(54, 2)? as usize, at(56, 2)?);
    let mut end = KERNEL_LOAD_GPA;
    for i in 0..phnum as usize {
        let ph = phoff + i * phentsize;
        if at(ph, 4)? == 1 {
            let seg_end = at(ph + 24, 8)?.checked_add(at(ph + 40, 8)?);
            end = end.max(seg_end.ok_or(bad("segment outside guest RAM"))?);
        }
    }
    Ok(end)
}

/// The smallest guest RAM that runs `program` with the kernel `image`:
/// the kernel, one 4 MiB chunk of user memory (the kernel hands out user
/// pages by chunk) and the boot data (argv, envp …; the program and its
/// interpreter are in the file window),
/// rounded up to a MiB.
pub fn min_memory(image: &[u8], program: &Program<'_>) -> Result<u64, VmmError> {
    let chunk = qlib::bitmap_alloc::CHUNK_SIZE as u64;
    let pool_start = kernel_end(image)?.next_multiple_of(chunk);
    let min = pool_start + chunk + boot_data_size(program);
    Ok(min.next_multiple_of(1 << 20))
}

/// Bytes [`write_boot_info`] places at the top of guest RAM.
fn boot_data_size(program: &Program<'_>) -> u64 {
    let strings = |v: &[String]| v.iter().map(|s| s.len() as u64 + 1).sum::<u64>();
    [
        strings(program.argv),
        strings(program.envp),
        program.execfn.len() as u64 + 1,
        program.cwd.len() as u64,
        program.hostname.len() as u64,
        program.exe.len() as u64,
        program.seccomp.len() as u64,
        program.creds.map_or(0, |c| c.len() as u64),
        strings(program.sysctl),
        strings(program.mounts),
        strings(program.devices),
        strings(program.id_maps),
    ]
    .iter()
    .map(|n| n.next_multiple_of(PAGE_SIZE))
    .sum()
}

/// Builds the boot page tables: the direct map and the kernel-image map of
/// all guest RAM with 2 MiB pages, U=1 (PLATFORM.md), and the file window
/// in the direct map. The user PGD (the
/// kernel PGD + 4 KiB) starts empty. Returns the kernel PGD's GPA.
pub fn build_page_tables(ram: &GuestRam) -> Result<u64, VmmError> {
    let bad = |_| VmmError::KernelImage("boot page tables outside guest RAM");
    let kernel_pgd = BOOT_PGD_GPA;
    let direct_pdpt = kernel_pgd + 2 * PAGE_SIZE;
    let kernel_pdpt = direct_pdpt + PAGE_SIZE;
    let first_pd = kernel_pdpt + PAGE_SIZE;
    let gib = 1u64 << 30;
    let pds = ram.size().div_ceil(gib);
    assert!(first_pd + pds * PAGE_SIZE <= BOOT_PT_END_GPA);
    let table = PRESENT | WRITABLE | USER;
    for pd in 0..pds {
        let pd_gpa = first_pd + pd * PAGE_SIZE;
        let mut entries = [0u8; 4096];
        for (i, e) in entries.chunks_exact_mut(8).enumerate() {
            let gpa = pd * gib + i as u64 * LARGE_PAGE_SIZE;
            if gpa < ram.size() {
                e.copy_from_slice(&(gpa | table | HUGE).to_le_bytes());
            }
        }
        ram.write_bytes(pd_gpa, &entries).map_err(bad)?;
        // Direct map: PDPT slot `pd`; kernel map: the top 2 GiB.
        ram.write::<u64>(direct_pdpt + pd * 8, pd_gpa | table)
            .map_err(bad)?;
        let kslot = ((KERNEL_BASE >> 30) & 0x1ff) + pd;
        ram.write::<u64>(kernel_pdpt + kslot * 8, pd_gpa | table)
            .map_err(bad)?;
    }
    // The file window in the direct map (not in the kernel-image map).
    let window_pd = first_pd + pds * PAGE_SIZE;
    let window_gib = FILE_WINDOW_SIZE.div_ceil(gib);
    assert!(window_pd + window_gib * PAGE_SIZE <= BOOT_PT_END_GPA);
    for pd in 0..window_gib {
        let pd_gpa = window_pd + pd * PAGE_SIZE;
        let mut entries = [0u8; 4096];
        for (i, e) in entries.chunks_exact_mut(8).enumerate() {
            let off = pd * gib + i as u64 * LARGE_PAGE_SIZE;
            if off < FILE_WINDOW_SIZE {
                let gpa = FILE_WINDOW_GPA + off;
                e.copy_from_slice(&(gpa | table | HUGE).to_le_bytes());
            }
        }
        ram.write_bytes(pd_gpa, &entries).map_err(bad)?;
        let pslot = FILE_WINDOW_GPA / gib + pd;
        ram.write::<u64>(direct_pdpt + pslot * 8, pd_gpa | table)
            .map_err(bad)?;
    }
    let slot = |va| pml4_slot(va) as u64 * 8;
    ram.write::<u64>(kernel_pgd + slot(DIRECT_MAP), direct_pdpt | table)
        .map_err(bad)?;
    ram.write::<u64>(kernel_pgd + slot(KERNEL_BASE), kernel_pdpt | table)
        .map_err(bad)?;
    Ok(kernel_pgd)
}

/// Copies the program, argv, envp and execfn to the top of guest RAM and
/// writes `BootInfo`.
pub fn write_boot_info(
    ram: &GuestRam,
    program: &Program<'_>,
    log_level: LogLevel,
    ids: [u32; 4],
) -> Result<(), VmmError> {
    let join = |v: &[String]| -> Vec<u8> {
        let mut out = Vec::new();
        for s in v {
            out.extend_from_slice(s.as_bytes());
            out.push(0);
        }
        out
    };
    let argv = join(program.argv);
    let envp = join(program.envp);
    let mut execfn = program.execfn.as_bytes().to_vec();
    execfn.push(0);
    let (cwd, hostname) = (program.cwd.as_bytes(), program.hostname.as_bytes());
    let exe = program.exe.as_bytes();
    let creds: &[u8] = program.creds.as_ref().map_or(&[], |c| c.as_slice());
    let sysctl = join(program.sysctl);
    let mounts = join(program.mounts);
    let devices = join(program.devices);
    let id_maps = join(program.id_maps);
    let parts: [&[u8]; 12] = [
        &argv,
        &envp,
        &execfn,
        cwd,
        hostname,
        exe,
        program.seccomp,
        creds,
        &sysctl,
        &mounts,
        &devices,
        &id_maps,
    ];
    let total: u64 = parts
        .iter()
        .map(|p| (p.len() as u64).next_multiple_of(PAGE_SIZE))
        .sum();
    // Leave at least half of RAM to the kernel and the program.
    if total > ram.size() / 2 {
        return Err(VmmError::BootDataTooBig(total));
    }
    let start = (ram.size() - total) & !(PAGE_SIZE - 1);
    let mut at = start;
    let mut place = |bytes: &[u8]| -> Result<IoVec, VmmError> {
        ram.write_bytes(at, bytes)
            .map_err(|_| VmmError::BootDataTooBig(total))?;
        let v = IoVec {
            gpa: at,
            len: bytes.len() as u64,
        };
        at += (bytes.len() as u64).next_multiple_of(PAGE_SIZE);
        Ok(v)
    };
    let (image, interp) = (program.image, program.interp);
    let argv_v = place(&argv)?;
    let envp_v = place(&envp)?;
    let execfn_v = place(&execfn)?;
    let cwd_v = place(cwd)?;
    let hostname_v = place(hostname)?;
    let exe_v = place(exe)?;
    let seccomp_v = place(program.seccomp)?;
    let creds_v = place(creds)?;
    let sysctl_v = place(&sysctl)?;
    let mounts_v = place(&mounts)?;
    let devices_v = place(&devices)?;
    let id_maps_v = place(&id_maps)?;
    let stdio = crate::stdio::facts();
    let mut seed = [0u64; 4];
    for s in &mut seed {
        *s = random_u64();
    }
    let info = BootInfo {
        magic: BOOT_MAGIC,
        abi_version: ABI_VERSION,
        mem_size: ram.size(),
        boot_data_gpa: start,
        program: image,
        argv: argv_v,
        argc: program.argv.len() as u64,
        envp: envp_v,
        envc: program.envp.len() as u64,
        execfn: execfn_v,
        log_level,
        seed,
        ids,
        stdio_mode: stdio.mode,
        tty_mask: stdio.tty_mask,
        winsize: stdio.winsize,
        termios: stdio.termios,
        cwd: cwd_v,
        hostname: hostname_v,
        interp,
        exe: exe_v,
        seccomp: seccomp_v,
        cpus: program.cpus,
        flags: program.flags,
        creds: creds_v,
        sysctl: sysctl_v,
        mounts: mounts_v,
        devices: devices_v,
        id_maps: id_maps_v,
    };
    ram.write(BOOT_INFO_GPA, info)
        .map_err(|_| VmmError::KernelImage("boot info outside guest RAM"))
}

fn random_u64() -> u64 {
    let mut buf = [0u8; 8];
    // SAFETY: getrandom writes at most buf.len() bytes into the valid buffer.
    let n = unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n != 8 {
        // getrandom(2) cannot fail for 8 bytes after boot; fall back to time.
        return std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x5eed);
    }
    u64::from_le_bytes(buf)
}
