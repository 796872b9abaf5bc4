//! A parser for static Linux x86-64 executables.
//!
//! [`parse`] takes the whole file as a `&[u8]`, reads the ELF header and the
//! program-header table, and checks everything a loader relies on, so the
//! loader can map the segments it returns without checking again. It never
//! allocates, never panics and uses checked arithmetic on every value read
//! from the file; the result, [`ElfInfo`], is `Copy`.
//!
//! # What is accepted
//!
//! - `e_ident`: `\x7fELF`, `ELFCLASS64`, `ELFDATA2LSB` (other `e_ident`
//!   bytes are ignored, as Linux does); `e_machine == EM_X86_64`;
//!   `e_type` `ET_EXEC` or `ET_DYN`.
//! - `e_phentsize == 56`, `e_phnum <= MAX_PHNUM`, every program header
//!   inside the file.
//! - Each `PT_LOAD`: file bytes inside the file, `p_filesz <= p_memsz`,
//!   `p_align` 0 or a power of two up to [`MAX_SEGMENT_ALIGN`],
//!   `p_vaddr + p_memsz` at most [`USER_VA_END`] (for `ET_DYN` before the
//!   load bias is added: the loader must check the biased range),
//!   `p_offset == p_vaddr` modulo the page size when it has file bytes, and
//!   sorted by `p_vaddr` without overlap (pages may be shared). `PT_LOAD`s
//!   with `p_memsz == 0` are checked, then left out of
//!   [`ElfInfo::segments`]; at most [`MAX_LOAD_SEGMENTS`] others.
//! - `e_entry` inside a loadable segment.
//! - `PT_INTERP` (at most one): 2 to 4096 bytes ending in NUL, inside the
//!   file. Its presence makes the program dynamically linked: the loader
//!   maps the interpreter too ([`ElfInfo::interp_bytes`]), and
//!   [`ElfInfo::require_static`] refuses it where only a static file will
//!   do (an interpreter). `ET_DYN` without it is a static PIE and needs a
//!   load bias.
//!
//! Section headers are not read.

mod error;
#[cfg(test)]
mod fuzz;
mod header;

pub use error::{ElfError, INTERP_PATH_KEEP, InterpPath, SegmentProblem, TruncatedPart};

use header::{Ehdr, PAGE_SIZE, PF_X, PT_GNU_STACK, PT_INTERP, PT_LOAD, PT_PHDR, PT_TLS, Phdr};

/// Size of one ELF64 program header, also the value of `AT_PHENT`.
pub const PHENT_SIZE: u16 = 56;
/// Most program headers [`parse`] accepts.
pub const MAX_PHNUM: u16 = 128;
/// Most non-empty `PT_LOAD`s [`parse`] accepts.
pub const MAX_LOAD_SEGMENTS: usize = 16;
/// End (exclusive) of the lower half of the x86-64 address space.
pub const USER_VA_END: u64 = 0x0000_8000_0000_0000;
/// Largest `p_align` accepted for a `PT_LOAD` (1 GiB).
pub const MAX_SEGMENT_ALIGN: u64 = 1 << 30;
/// Longest `PT_INTERP` accepted, NUL included (Linux's `PATH_MAX`).
pub const MAX_INTERP_LEN: u64 = 4096;

/// `e_type` of an accepted file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElfType {
    /// `ET_EXEC`: loaded at the addresses in the file.
    Exec,
    /// `ET_DYN`: position independent, loaded at a bias chosen by the loader.
    Dyn,
}

/// Access rights of a segment (`PF_R`, `PF_W`, `PF_X`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SegmentFlags {
    /// `PF_R`.
    pub read: bool,
    /// `PF_W`.
    pub write: bool,
    /// `PF_X`.
    pub exec: bool,
}

/// A checked, non-empty `PT_LOAD`: `memsz` bytes at `vaddr`, the first
/// `filesz` of them copied from `file_offset`, the rest zero.
///
/// From [`parse`]: `filesz <= memsz`, `vaddr + memsz <= USER_VA_END`,
/// `file_offset + filesz <= file.len()`, and when `filesz > 0`,
/// `file_offset % 4096 == vaddr % 4096`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadSegment {
    /// `p_vaddr` (add the load bias for [`ElfType::Dyn`]).
    pub vaddr: u64,
    /// `p_memsz`, never 0.
    pub memsz: u64,
    /// `p_offset`.
    pub file_offset: u64,
    /// `p_filesz`.
    pub filesz: u64,
    /// `p_flags`.
    pub flags: SegmentFlags,
}

impl LoadSegment {
    /// End (exclusive) of the segment in memory.
    pub fn end(&self) -> u64 {
        self.vaddr.saturating_add(self.memsz)
    }

    fn contains(&self, addr: u64) -> bool {
        self.vaddr <= addr && addr < self.end()
    }
}

/// What a loader needs to know about an accepted file. Addresses are as in
/// the file: for [`ElfType::Dyn`] add the load bias.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ElfInfo {
    /// `e_type`.
    pub e_type: ElfType,
    /// `e_entry` (`AT_ENTRY`).
    pub entry: u64,
    /// `e_phoff`: where the program headers are in the file.
    pub phoff: u64,
    /// `e_phnum` (`AT_PHNUM`).
    pub phnum: u16,
    /// `e_phentsize` (`AT_PHENT`), always [`PHENT_SIZE`].
    pub phentsize: u16,
    /// Where the program headers are once loaded (`AT_PHDR`): from
    /// `PT_PHDR` when present, else from the `PT_LOAD` whose file bytes hold
    /// the whole table; `None` when no segment maps them.
    pub phdr_vaddr: Option<u64>,
    /// `PT_INTERP` as (`p_offset`, `p_filesz`), the NUL included: the
    /// program is dynamically linked.
    pub interp: Option<(u64, u64)>,
    /// `PT_GNU_STACK` asks for an executable stack. Without `PT_GNU_STACK`
    /// this is false, as on Linux x86-64 since 5.8.
    pub exec_stack: bool,
    /// A `PT_TLS` is present (recorded only).
    pub has_tls: bool,
    /// Lowest `p_vaddr` of the loadable segments.
    pub min_vaddr: u64,
    /// Highest `p_vaddr + p_memsz` (exclusive) of the loadable segments.
    pub max_vaddr: u64,
    /// Largest `p_align` of the loadable segments, at least the page size
    /// (the alignment a load bias for [`ElfType::Dyn`] must have).
    pub max_align: u64,
    interp_path: InterpPath,
    segments: [LoadSegment; MAX_LOAD_SEGMENTS],
    nsegments: u8,
}

impl ElfInfo {
    /// The non-empty `PT_LOAD`s, sorted by address, not overlapping.
    pub fn segments(&self) -> &[LoadSegment] {
        self.segments
            .get(..usize::from(self.nsegments))
            .unwrap_or(&[])
    }

    /// `Err(ElfError::Dynamic)` naming the interpreter when the program has
    /// a `PT_INTERP`.
    pub fn require_static(&self) -> Result<(), ElfError> {
        match self.interp {
            Some(_) => Err(ElfError::Dynamic(self.interp_path)),
            None => Ok(()),
        }
    }

    /// The interpreter path (without its NUL), first
    /// [`INTERP_PATH_KEEP`] bytes.
    pub fn interp_path(&self) -> Option<&InterpPath> {
        self.interp.map(|_| &self.interp_path)
    }

    /// The whole interpreter path (without its NUL) read from `file`, the
    /// same bytes [`parse`] accepted; `None` for a static program or when
    /// `file` is not the parsed file.
    pub fn interp_bytes<'f>(&self, file: &'f [u8]) -> Option<&'f [u8]> {
        let (offset, filesz) = self.interp?;
        let start = usize::try_from(offset).ok()?;
        let end = usize::try_from(offset.checked_add(filesz)?).ok()?;
        let (last, path) = file.get(start..end)?.split_last()?;
        (*last == 0).then_some(path)
    }

    /// `ET_DYN` without `PT_INTERP`: a static program that needs a load bias.
    pub fn is_static_pie(&self) -> bool {
        self.e_type == ElfType::Dyn && self.interp.is_none()
    }

    fn push_segment(&mut self, index: u16, seg: LoadSegment) -> Result<(), ElfError> {
        if let Some(prev) = self.segments().last()
            && seg.vaddr < prev.end()
        {
            return Err(ElfError::BadSegment {
                index,
                problem: SegmentProblem::Overlap,
            });
        }
        let slot = self
            .segments
            .get_mut(usize::from(self.nsegments))
            .ok_or(ElfError::TooManyLoadSegments)?;
        *slot = seg;
        self.nsegments += 1;
        if self.nsegments == 1 {
            self.min_vaddr = seg.vaddr;
        }
        self.max_vaddr = seg.end();
        Ok(())
    }
}

/// Parses and checks the executable `file` (the whole file); see the module
/// doc for what is accepted.
pub fn parse(file: &[u8]) -> Result<ElfInfo, ElfError> {
    parse_head(file, u64::try_from(file.len()).unwrap_or(u64::MAX))
}

/// [`parse`] from the first bytes of a file of `file_len` bytes: `head`
/// must hold the ELF header, the program-header table and the
/// `PT_INTERP` string (a head that does not is reported as a cut-off
/// file); segments are checked against `file_len`.
pub fn parse_head(file: &[u8], file_len: u64) -> Result<ElfInfo, ElfError> {
    let ehdr = Ehdr::read(file)?;
    if ehdr.phentsize != PHENT_SIZE {
        return Err(ElfError::BadPhentsize(ehdr.phentsize));
    }
    if ehdr.phnum > MAX_PHNUM {
        return Err(ElfError::TooManyProgramHeaders(ehdr.phnum));
    }
    let mut info = ElfInfo {
        e_type: ehdr.e_type,
        entry: ehdr.entry,
        phoff: ehdr.phoff,
        phnum: ehdr.phnum,
        phentsize: ehdr.phentsize,
        phdr_vaddr: None,
        interp: None,
        exec_stack: false,
        has_tls: false,
        min_vaddr: 0,
        max_vaddr: 0,
        max_align: PAGE_SIZE,
        interp_path: InterpPath::EMPTY,
        segments: [LoadSegment::default(); MAX_LOAD_SEGMENTS],
        nsegments: 0,
    };
    // The whole table first, so a cut-off file is reported as such rather
    // than by the first segment whose data is missing.
    for index in 0..ehdr.phnum {
        Phdr::read(file, ehdr.phoff, index)?;
    }
    let mut pt_phdr = None;
    for index in 0..ehdr.phnum {
        let ph = Phdr::read(file, ehdr.phoff, index)?;
        match ph.p_type {
            PT_LOAD => {
                let seg = ph.check_load(index, file_len)?;
                info.max_align = info.max_align.max(ph.align);
                if seg.memsz > 0 {
                    info.push_segment(index, seg)?;
                }
            }
            PT_INTERP => {
                if info.interp.is_some() {
                    return Err(ElfError::BadInterp);
                }
                info.interp_path = InterpPath::new(ph.interp_path(file)?);
                info.interp = Some((ph.offset, ph.filesz));
            }
            PT_PHDR => {
                pt_phdr.get_or_insert(ph.vaddr);
            }
            PT_TLS => info.has_tls = true,
            PT_GNU_STACK => info.exec_stack = ph.flags & PF_X != 0,
            _ => {}
        }
    }
    if info.nsegments == 0 {
        return Err(ElfError::NoLoadSegments);
    }
    if !info.segments().iter().any(|s| s.contains(info.entry)) {
        return Err(ElfError::BadEntry(info.entry));
    }
    info.phdr_vaddr = pt_phdr.or_else(|| loaded_phdr_vaddr(&info));
    Ok(info)
}

/// Where the `PT_LOAD` whose file bytes hold the whole program-header table
/// maps it (what Linux reports as `AT_PHDR` when there is no `PT_PHDR`).
fn loaded_phdr_vaddr(info: &ElfInfo) -> Option<u64> {
    let table_len = u64::from(info.phnum).checked_mul(u64::from(PHENT_SIZE))?;
    let table_end = info.phoff.checked_add(table_len)?;
    info.segments().iter().find_map(|s| {
        let file_end = s.file_offset.checked_add(s.filesz)?;
        (s.file_offset <= info.phoff && table_end <= file_end)
            .then(|| s.vaddr.checked_add(info.phoff - s.file_offset))?
    })
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::header::*;
    use super::*;
    use proptest::prelude::*;
    use std::{format, string::ToString, vec, vec::Vec};

    /// A program header for [`elf`].
    #[derive(Clone, Copy)]
    struct Ph {
        p_type: u32,
        flags: u32,
        offset: u64,
        vaddr: u64,
        filesz: u64,
        memsz: u64,
        align: u64,
    }

    const R: u32 = PF_R;
    const RX: u32 = PF_R | PF_X;
    const RW: u32 = PF_R | PF_W;

    fn load(flags: u32, offset: u64, vaddr: u64, filesz: u64, memsz: u64) -> Ph {
        Ph {
            p_type: PT_LOAD,
            flags,
            offset,
            vaddr,
            filesz,
            memsz,
            align: 0x1000,
        }
    }

    fn other(p_type: u32, flags: u32, offset: u64, vaddr: u64, size: u64) -> Ph {
        Ph {
            p_type,
            flags,
            offset,
            vaddr,
            filesz: size,
            memsz: size,
            align: 8,
        }
    }

    /// An x86-64 ELF of `len` bytes with the program headers at offset 64.
    fn elf(e_type: u16, entry: u64, phdrs: &[Ph], len: usize) -> Vec<u8> {
        let mut f = vec![0u8; len.max(EHDR_SIZE + PHDR_SIZE * phdrs.len())];
        f[..4].copy_from_slice(&ELFMAG);
        f[4] = ELFCLASS64;
        f[5] = ELFDATA2LSB;
        f[6] = 1;
        f[16..18].copy_from_slice(&e_type.to_le_bytes());
        f[18..20].copy_from_slice(&EM_X86_64.to_le_bytes());
        f[20..24].copy_from_slice(&1u32.to_le_bytes());
        f[24..32].copy_from_slice(&entry.to_le_bytes());
        f[32..40].copy_from_slice(&64u64.to_le_bytes());
        f[52..54].copy_from_slice(&64u16.to_le_bytes());
        f[54..56].copy_from_slice(&PHENT_SIZE.to_le_bytes());
        f[56..58].copy_from_slice(&(phdrs.len() as u16).to_le_bytes());
        for (i, ph) in phdrs.iter().enumerate() {
            let p = &mut f[EHDR_SIZE + PHDR_SIZE * i..][..PHDR_SIZE];
            p[0..4].copy_from_slice(&ph.p_type.to_le_bytes());
            p[4..8].copy_from_slice(&ph.flags.to_le_bytes());
            p[8..16].copy_from_slice(&ph.offset.to_le_bytes());
            p[16..24].copy_from_slice(&ph.vaddr.to_le_bytes());
            p[24..32].copy_from_slice(&ph.vaddr.to_le_bytes());
            p[32..40].copy_from_slice(&ph.filesz.to_le_bytes());
            p[40..48].copy_from_slice(&ph.memsz.to_le_bytes());
            p[48..56].copy_from_slice(&ph.align.to_le_bytes());
        }
        f
    }

    /// Program headers of a small static `ET_EXEC`, like busybox's.
    fn static_phdrs() -> Vec<Ph> {
        vec![
            load(R, 0, 0x40_0000, 0x1000, 0x1000),
            load(RX, 0x1000, 0x40_1000, 0x100, 0x100),
            load(RW, 0x1100, 0x40_2100, 0x80, 0x2000),
            other(PT_TLS, R, 0x1100, 0x40_2100, 0x10),
            other(PT_GNU_STACK, RW, 0, 0, 0),
        ]
    }

    fn static_exec() -> Vec<u8> {
        elf(ET_EXEC, 0x40_1000, &static_phdrs(), 0x1180)
    }

    /// Writes `value` into field `field_off` of program header `i`.
    fn set_ph_field(f: &mut [u8], i: usize, field_off: usize, value: u64) {
        let at = EHDR_SIZE + PHDR_SIZE * i + field_off;
        if field_off < 8 {
            f[at..at + 4].copy_from_slice(&(value as u32).to_le_bytes());
        } else {
            f[at..at + 8].copy_from_slice(&value.to_le_bytes());
        }
    }

    #[test]
    fn parses_static_exec() {
        let info = parse(&static_exec()).expect("valid");
        assert_eq!(info.e_type, ElfType::Exec);
        assert_eq!(info.entry, 0x40_1000);
        assert_eq!((info.phoff, info.phnum, info.phentsize), (64, 5, 56));
        assert_eq!(info.phdr_vaddr, Some(0x40_0040));
        assert_eq!((info.min_vaddr, info.max_vaddr), (0x40_0000, 0x40_4100));
        assert_eq!(info.max_align, 0x1000);
        assert!(info.has_tls);
        assert!(!info.exec_stack);
        assert_eq!(info.interp, None);
        assert_eq!(info.interp_path(), None);
        assert!(!info.is_static_pie());
        assert_eq!(info.require_static(), Ok(()));
        let segs = info.segments();
        assert_eq!(segs.len(), 3);
        assert_eq!(
            segs[2],
            LoadSegment {
                vaddr: 0x40_2100,
                memsz: 0x2000,
                file_offset: 0x1100,
                filesz: 0x80,
                flags: SegmentFlags {
                    read: true,
                    write: true,
                    exec: false
                },
            }
        );
        assert!(segs[1].flags.exec && !segs[1].flags.write);
    }

    #[test]
    fn parses_static_pie_and_pt_phdr() {
        let phdrs = [
            other(PT_PHDR, R, 64, 0x40, 56 * 4),
            load(R, 0, 0, 0x1000, 0x1000),
            load(RX, 0x1000, 0x1000, 0x100, 0x100),
            other(PT_GNU_STACK, RW | PF_X, 0, 0, 0),
        ];
        let info = parse(&elf(ET_DYN, 0x1010, &phdrs, 0x1100)).expect("valid");
        assert_eq!(info.e_type, ElfType::Dyn);
        assert!(info.is_static_pie());
        assert!(info.exec_stack);
        assert!(!info.has_tls);
        assert_eq!(info.phdr_vaddr, Some(0x40));
        assert_eq!((info.min_vaddr, info.max_vaddr), (0, 0x1100));
    }

    #[test]
    fn phdr_vaddr_none_when_not_loaded() {
        let phdrs = [load(RX, 0x1000, 0x40_1000, 0x100, 0x100)];
        let info = parse(&elf(ET_EXEC, 0x40_1000, &phdrs, 0x1100)).expect("valid");
        assert_eq!(info.phdr_vaddr, None);
    }

    #[test]
    fn skips_empty_load_and_records_max_align() {
        let mut phdrs = static_phdrs();
        phdrs.insert(1, load(R, 0x1000, 0x40_1000, 0, 0));
        phdrs[2].align = 0x20_0000;
        let info = parse(&elf(ET_EXEC, 0x40_1000, &phdrs, 0x1180)).expect("valid");
        assert_eq!(info.segments().len(), 3);
        assert_eq!(info.max_align, 0x20_0000);
    }

    #[test]
    fn dynamic_names_its_interpreter() {
        let path = b"/lib64/ld-linux-x86-64.so.2\0";
        let mut phdrs = static_phdrs();
        phdrs.push(other(PT_INTERP, R, 0x200, 0x40_0200, path.len() as u64));
        let mut f = elf(ET_EXEC, 0x40_1000, &phdrs, 0x1180);
        f[0x200..0x200 + path.len()].copy_from_slice(path);
        let info = parse(&f).expect("valid");
        assert_eq!(info.interp, Some((0x200, path.len() as u64)));
        assert_eq!(
            info.interp_path().map(InterpPath::as_bytes),
            Some(&path[..path.len() - 1])
        );
        assert_eq!(info.interp_bytes(&f), Some(&path[..path.len() - 1]));
        assert_eq!(info.interp_bytes(&f[..0x210]), None);
        let err = info.require_static().expect_err("dynamic");
        assert_eq!(
            err.to_string(),
            "dynamically linked (needs /lib64/ld-linux-x86-64.so.2)"
        );
    }

    #[test]
    fn long_or_odd_interp_is_cut_and_escaped() {
        let mut path = vec![b'a'; 100];
        path[0] = 0xff;
        path.push(0);
        let mut phdrs = static_phdrs();
        phdrs.push(other(PT_INTERP, R, 0x200, 0, path.len() as u64));
        let mut f = elf(ET_EXEC, 0x40_1000, &phdrs, 0x1180);
        f[0x200..0x200 + path.len()].copy_from_slice(&path);
        let Err(ElfError::Dynamic(p)) = parse(&f).expect("valid").require_static() else {
            panic!("expected Dynamic");
        };
        assert!(p.is_truncated());
        assert_eq!(p.as_bytes().len(), INTERP_PATH_KEEP);
        assert_eq!(p.to_string(), format!("\\xff{}...", "a".repeat(63)));
    }

    /// `static_exec` with `edit` applied, parsed.
    fn parse_edited(edit: impl FnOnce(&mut Vec<u8>)) -> Result<ElfInfo, ElfError> {
        let mut f = static_exec();
        edit(&mut f);
        parse(&f)
    }

    fn parse_phdrs(phdrs: &[Ph]) -> Result<ElfInfo, ElfError> {
        parse(&elf(ET_EXEC, 0x40_1000, phdrs, 0x1180))
    }

    #[test]
    fn rejects_bad_identification() {
        assert_eq!(parse(&[]), Err(ElfError::NotElf));
        assert_eq!(parse(b"#!/bin/sh\n"), Err(ElfError::NotElf));
        assert_eq!(
            parse(b"\x7fELF"),
            Err(ElfError::Truncated(TruncatedPart::Header))
        );
        let e = parse_edited(|f| f[4] = ELFCLASS32);
        assert_eq!(e, Err(ElfError::Not64Bit));
        assert_eq!(
            e.unwrap_err().to_string(),
            "32-bit ELF (only x86-64 is supported)"
        );
        assert_eq!(parse_edited(|f| f[4] = 0), Err(ElfError::BadClass(0)));
        let e = parse_edited(|f| f[5] = 2).unwrap_err();
        assert_eq!(e, ElfError::BadDataEncoding(2));
        assert!(e.to_string().starts_with("big-endian"));
        let e = parse_edited(|f| f[18..20].copy_from_slice(&183u16.to_le_bytes())).unwrap_err();
        assert_eq!(e, ElfError::WrongMachine(183));
        assert_eq!(e.to_string(), "ELF for AArch64 (only x86-64 is supported)");
        let e = parse_edited(|f| f[16] = 1).unwrap_err();
        assert_eq!(e, ElfError::NotExecutable(1));
        assert_eq!(e.to_string(), "relocatable object file, not an executable");
        assert_eq!(
            parse_edited(|f| f.truncate(63)),
            Err(ElfError::Truncated(TruncatedPart::Header))
        );
    }

    #[test]
    fn rejects_bad_program_header_table() {
        let e = parse_edited(|f| f.truncate(64 + 56 * 3 + 10)).unwrap_err();
        assert_eq!(e, ElfError::Truncated(TruncatedPart::ProgramHeader(3)));
        assert_eq!(
            e.to_string(),
            "truncated ELF: program header 3 lies beyond the end of the file"
        );
        let e = parse_edited(|f| f[32..40].copy_from_slice(&u64::MAX.to_le_bytes()));
        assert_eq!(e, Err(ElfError::Truncated(TruncatedPart::ProgramHeader(0))));
        let e = parse_edited(|f| f[54] = 32);
        assert_eq!(e, Err(ElfError::BadPhentsize(32)));
        let e = parse_edited(|f| f[56..58].copy_from_slice(&0xffffu16.to_le_bytes()));
        assert_eq!(e, Err(ElfError::TooManyProgramHeaders(0xffff)));
        assert_eq!(parse_edited(|f| f[56] = 0), Err(ElfError::NoLoadSegments));
        let many: Vec<Ph> = (0..17)
            .map(|i| load(RX, 0x1000, 0x40_1000 + i * 0x1000, 0x10, 0x10))
            .collect();
        assert_eq!(parse_phdrs(&many), Err(ElfError::TooManyLoadSegments));
    }

    #[test]
    fn rejects_bad_load_segments() {
        let bad = |index, problem| Err(ElfError::BadSegment { index, problem });
        let with = |i: usize, edit: fn(&mut Ph)| {
            let mut phdrs = static_phdrs();
            edit(&mut phdrs[i]);
            parse_phdrs(&phdrs)
        };
        assert_eq!(
            with(2, |p| p.filesz = 0x3000),
            bad(2, SegmentProblem::FileszOverMemsz)
        );
        assert_eq!(
            with(1, |p| p.align = 0x1800),
            bad(1, SegmentProblem::BadAlign(0x1800))
        );
        assert_eq!(
            with(1, |p| p.align = 1 << 40),
            bad(1, SegmentProblem::BadAlign(1 << 40))
        );
        assert_eq!(
            with(2, |p| p.memsz = u64::MAX),
            bad(2, SegmentProblem::Overflow)
        );
        assert_eq!(
            with(2, |p| p.offset = u64::MAX - 8),
            bad(2, SegmentProblem::Overflow)
        );
        assert_eq!(
            with(2, |p| p.vaddr = USER_VA_END - 0x1000),
            bad(2, SegmentProblem::NotUserAddress)
        );
        assert_eq!(
            with(1, |p| p.offset = 0x1008),
            bad(1, SegmentProblem::OffsetMisaligned)
        );
        assert_eq!(
            with(1, |p| (p.vaddr, p.offset) = (0x40_0ff0, 0xff0)),
            bad(1, SegmentProblem::Overlap)
        );
        assert_eq!(
            with(2, |p| p.filesz = 0x100),
            Err(ElfError::Truncated(TruncatedPart::Segment(2)))
        );
        // A bss-only segment may have any offset.
        let info = with(2, |p| (p.filesz, p.offset) = (0, u64::MAX - 0x10));
        assert!(info.is_ok());
        let mut phdrs = static_phdrs();
        phdrs.swap(1, 2);
        assert_eq!(parse_phdrs(&phdrs), bad(2, SegmentProblem::Overlap));
    }

    #[test]
    fn rejects_bad_entry_and_interp() {
        let e = parse(&elf(ET_EXEC, 0x40_4100, &static_phdrs(), 0x1180));
        assert_eq!(e, Err(ElfError::BadEntry(0x40_4100)));
        let with_interp = |offset, size, text: &[u8]| {
            let mut phdrs = static_phdrs();
            phdrs.push(other(PT_INTERP, R, offset, 0, size));
            let mut f = elf(ET_EXEC, 0x40_1000, &phdrs, 0x1180);
            f[0x200..0x200 + text.len()].copy_from_slice(text);
            parse(&f)
        };
        assert_eq!(with_interp(0x200, 5, b"/ld\0\0"), Err(ElfError::BadInterp));
        assert_eq!(with_interp(0x200, 4, b"/ld/"), Err(ElfError::BadInterp));
        assert_eq!(with_interp(0x200, 1, b"\0"), Err(ElfError::BadInterp));
        assert_eq!(with_interp(0x200, 5000, b""), Err(ElfError::BadInterp));
        assert_eq!(
            with_interp(0x1170, 0x20, b""),
            Err(ElfError::Truncated(TruncatedPart::Interp))
        );
        assert_eq!(
            with_interp(u64::MAX, 0x20, b""),
            Err(ElfError::Truncated(TruncatedPart::Interp))
        );
        assert!(with_interp(0x200, 4, b"/ld\0").is_ok());
        let mut phdrs = static_phdrs();
        phdrs.push(other(PT_INTERP, R, 0x200, 0, 4));
        phdrs.push(other(PT_INTERP, R, 0x200, 0, 4));
        let mut f = elf(ET_EXEC, 0x40_1000, &phdrs, 0x1180);
        f[0x200..0x204].copy_from_slice(b"/ld\0");
        assert_eq!(parse(&f), Err(ElfError::BadInterp));
    }

    #[test]
    fn every_message_is_one_short_line() {
        let errors = [
            ElfError::NotElf,
            ElfError::Not64Bit,
            ElfError::BadClass(9),
            ElfError::BadDataEncoding(2),
            ElfError::BadDataEncoding(7),
            ElfError::WrongMachine(3),
            ElfError::WrongMachine(999),
            ElfError::NotExecutable(0),
            ElfError::NotExecutable(4),
            ElfError::NotExecutable(0xfe00),
            ElfError::Truncated(TruncatedPart::Header),
            ElfError::Truncated(TruncatedPart::Segment(1)),
            ElfError::Truncated(TruncatedPart::Interp),
            ElfError::BadPhentsize(0),
            ElfError::TooManyProgramHeaders(200),
            ElfError::TooManyLoadSegments,
            ElfError::NoLoadSegments,
            ElfError::BadSegment {
                index: 1,
                problem: SegmentProblem::BadAlign(3),
            },
            ElfError::BadSegment {
                index: 1,
                problem: SegmentProblem::OffsetMisaligned,
            },
            ElfError::BadInterp,
            ElfError::BadEntry(0x1234),
            ElfError::Dynamic(InterpPath::new(b"/lib/ld-musl-x86_64.so.1")),
        ];
        for e in errors {
            let msg = e.to_string();
            assert!(!msg.is_empty() && msg.len() < 100, "{msg}");
            assert!(!msg.contains('\n') && !msg.ends_with('.'), "{msg}");
        }
    }

    /// Reads a binary of the host for a test; says so loudly when it is
    /// missing, and fails under `CI=true`.
    fn host_binary(path: &str) -> Option<Vec<u8>> {
        match std::fs::read(path) {
            Ok(bytes) => Some(bytes),
            Err(e) => {
                std::eprintln!("SKIPPED: cannot read {path}: {e}");
                assert!(
                    std::env::var("CI").as_deref() != Ok("true"),
                    "{path} is needed under CI=true"
                );
                None
            }
        }
    }

    #[test]
    fn parses_host_busybox() {
        let Some(file) = host_binary("/bin/busybox") else {
            return;
        };
        let info = parse(&file).expect("busybox parses");
        assert_eq!(info.require_static(), Ok(()));
        assert_invariants(&info, file.len());
        assert!(info.segments().iter().any(|s| s.flags.exec));
        let phdr = info.phdr_vaddr.expect("busybox maps its program headers");
        assert!(info.min_vaddr <= phdr && phdr < info.max_vaddr);
        assert!(!info.exec_stack);
        // 32-bit by one byte.
        let mut bytes = file;
        bytes[4] = ELFCLASS32;
        assert_eq!(parse(&bytes), Err(ElfError::Not64Bit));
    }

    #[test]
    fn host_ls_is_dynamic() {
        let Some(file) = host_binary("/bin/ls") else {
            return;
        };
        let info = parse(&file).expect("ls parses");
        assert_invariants(&info, file.len());
        let err = info.require_static().expect_err("ls is dynamic");
        let ElfError::Dynamic(path) = err else {
            panic!("expected Dynamic, got {err:?}");
        };
        assert!(path.as_bytes().starts_with(b"/lib"), "{path}");
        assert!(err.to_string().contains("ld-linux"), "{err}");
    }

    /// What every accepted file guarantees.
    fn assert_invariants(info: &ElfInfo, file_len: usize) {
        let segs = info.segments();
        assert!(!segs.is_empty() && segs.len() <= MAX_LOAD_SEGMENTS);
        assert_eq!(info.min_vaddr, segs[0].vaddr);
        assert_eq!(info.max_vaddr, segs[segs.len() - 1].end());
        assert!(info.max_vaddr <= USER_VA_END);
        assert!(info.max_align.is_power_of_two() && info.max_align <= MAX_SEGMENT_ALIGN);
        assert!(segs.iter().any(|s| s.contains(info.entry)));
        for pair in segs.windows(2) {
            assert!(pair[0].end() <= pair[1].vaddr);
        }
        for s in segs {
            assert!(s.memsz > 0 && s.filesz <= s.memsz);
            assert!(
                s.vaddr
                    .checked_add(s.memsz)
                    .is_some_and(|e| e <= USER_VA_END)
            );
            if s.filesz > 0 {
                let end = s.file_offset.checked_add(s.filesz).expect("no overflow");
                assert!(end <= file_len as u64);
                assert_eq!(s.file_offset % PAGE_SIZE, s.vaddr % PAGE_SIZE);
            }
        }
    }

    /// Values likely to hit edge cases in a header field.
    fn edgy_value() -> impl Strategy<Value = u64> {
        prop_oneof![
            Just(0u64),
            Just(1),
            Just(PAGE_SIZE),
            Just(USER_VA_END),
            Just(u64::MAX),
            Just(u64::MAX - 0xfff),
            0u64..0x2000,
            0x40_0000u64..0x40_5000,
            any::<u64>(),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            if let Ok(info) = parse(&bytes) {
                assert_invariants(&info, bytes.len());
            }
        }

        #[test]
        fn random_tail_after_magic_never_panics(
            tail in proptest::collection::vec(any::<u8>(), 0..600),
        ) {
            let mut bytes = b"\x7fELF\x02\x01".to_vec();
            bytes.extend_from_slice(&tail);
            if let Ok(info) = parse(&bytes) {
                assert_invariants(&info, bytes.len());
            }
        }

        #[test]
        fn mutated_elf_never_panics(
            flips in proptest::collection::vec((0usize..0x200, any::<u8>()), 0..8),
            fields in proptest::collection::vec(
                (0usize..5, prop::sample::select(vec![0usize, 4, 8, 16, 32, 40, 48]), edgy_value()),
                0..4,
            ),
            cut in proptest::option::of(0usize..0x1180),
        ) {
            let mut f = static_exec();
            for (i, field, value) in fields {
                set_ph_field(&mut f, i, field, value);
            }
            for (at, byte) in flips {
                f[at] = byte;
            }
            if let Some(len) = cut {
                f.truncate(len);
            }
            if let Ok(info) = parse(&f) {
                assert_invariants(&info, f.len());
                let _ = info.require_static().map_err(|e| e.to_string());
            } else if let Err(e) = parse(&f) {
                prop_assert!(!e.to_string().is_empty());
            }
        }
    }
}
