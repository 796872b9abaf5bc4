//! The raw ELF64 header and program headers: field offsets, constants and
//! the checks that concern one program header alone.

use super::{
    ElfError, ElfType, LoadSegment, MAX_INTERP_LEN, MAX_SEGMENT_ALIGN, PHENT_SIZE, SegmentFlags,
    SegmentProblem, TruncatedPart, USER_VA_END,
};

pub(super) const PAGE_SIZE: u64 = 4096;
pub(super) const EHDR_SIZE: usize = 64;
pub(super) const PHDR_SIZE: usize = PHENT_SIZE as usize;

pub(super) const ELFMAG: [u8; 4] = *b"\x7fELF";
pub(super) const ELFCLASS32: u8 = 1;
pub(super) const ELFCLASS64: u8 = 2;
pub(super) const ELFDATA2LSB: u8 = 1;
pub(super) const ET_EXEC: u16 = 2;
pub(super) const ET_DYN: u16 = 3;
pub(super) const EM_X86_64: u16 = 62;

pub(super) const PT_LOAD: u32 = 1;
pub(super) const PT_INTERP: u32 = 3;
pub(super) const PT_PHDR: u32 = 6;
pub(super) const PT_TLS: u32 = 7;
pub(super) const PT_GNU_STACK: u32 = 0x6474_e551;

pub(super) const PF_X: u32 = 1;
pub(super) const PF_W: u32 = 2;
pub(super) const PF_R: u32 = 4;

/// The fields of the ELF header that matter.
pub(super) struct Ehdr {
    pub(super) e_type: ElfType,
    pub(super) entry: u64,
    pub(super) phoff: u64,
    pub(super) phentsize: u16,
    pub(super) phnum: u16,
}

/// The fields of a program header that matter.
pub(super) struct Phdr {
    pub(super) p_type: u32,
    pub(super) flags: u32,
    pub(super) offset: u64,
    pub(super) vaddr: u64,
    pub(super) filesz: u64,
    pub(super) memsz: u64,
    pub(super) align: u64,
}

fn u16_at<const N: usize>(rec: &[u8; N], off: usize) -> u16 {
    u16::from_le_bytes([rec[off], rec[off + 1]])
}

fn u32_at<const N: usize>(rec: &[u8; N], off: usize) -> u32 {
    u32::from_le_bytes([rec[off], rec[off + 1], rec[off + 2], rec[off + 3]])
}

fn u64_at<const N: usize>(rec: &[u8; N], off: usize) -> u64 {
    let mut bytes = [0; 8];
    bytes.copy_from_slice(&rec[off..off + 8]);
    u64::from_le_bytes(bytes)
}

impl SegmentFlags {
    fn from_bits(p_flags: u32) -> Self {
        Self {
            read: p_flags & PF_R != 0,
            write: p_flags & PF_W != 0,
            exec: p_flags & PF_X != 0,
        }
    }
}

fn bad_segment(index: u16, problem: SegmentProblem) -> ElfError {
    ElfError::BadSegment { index, problem }
}

impl Ehdr {
    pub(super) fn read(file: &[u8]) -> Result<Self, ElfError> {
        if file.get(..4) != Some(&ELFMAG[..]) {
            return Err(ElfError::NotElf);
        }
        let truncated = ElfError::Truncated(TruncatedPart::Header);
        match file.get(4).copied() {
            Some(ELFCLASS64) => {}
            Some(ELFCLASS32) => return Err(ElfError::Not64Bit),
            Some(class) => return Err(ElfError::BadClass(class)),
            None => return Err(truncated),
        }
        match file.get(5).copied() {
            Some(ELFDATA2LSB) => {}
            Some(data) => return Err(ElfError::BadDataEncoding(data)),
            None => return Err(truncated),
        }
        let h: &[u8; EHDR_SIZE] = file.first_chunk().ok_or(truncated)?;
        let machine = u16_at(h, 18);
        if machine != EM_X86_64 {
            return Err(ElfError::WrongMachine(machine));
        }
        let e_type = match u16_at(h, 16) {
            ET_EXEC => ElfType::Exec,
            ET_DYN => ElfType::Dyn,
            other => return Err(ElfError::NotExecutable(other)),
        };
        Ok(Self {
            e_type,
            entry: u64_at(h, 24),
            phoff: u64_at(h, 32),
            phentsize: u16_at(h, 54),
            phnum: u16_at(h, 56),
        })
    }
}

impl Phdr {
    /// Program header `index` of the table at `phoff`.
    pub(super) fn read(file: &[u8], phoff: u64, index: u16) -> Result<Self, ElfError> {
        let start = u64::from(index)
            .checked_mul(u64::from(PHENT_SIZE))
            .and_then(|rel| rel.checked_add(phoff))
            .and_then(|start| usize::try_from(start).ok());
        let p: &[u8; PHDR_SIZE] = start
            .and_then(|start| file.get(start..))
            .and_then(<[u8]>::first_chunk)
            .ok_or(ElfError::Truncated(TruncatedPart::ProgramHeader(index)))?;
        Ok(Self {
            p_type: u32_at(p, 0),
            flags: u32_at(p, 4),
            offset: u64_at(p, 8),
            vaddr: u64_at(p, 16),
            filesz: u64_at(p, 32),
            memsz: u64_at(p, 40),
            align: u64_at(p, 48),
        })
    }

    /// Checks a `PT_LOAD` (see the module doc) against a file of `file_len` bytes.
    pub(super) fn check_load(&self, index: u16, file_len: u64) -> Result<LoadSegment, ElfError> {
        let problem = |p| bad_segment(index, p);
        if self.filesz > self.memsz {
            return Err(problem(SegmentProblem::FileszOverMemsz));
        }
        if self.align != 0 && (!self.align.is_power_of_two() || self.align > MAX_SEGMENT_ALIGN) {
            return Err(problem(SegmentProblem::BadAlign(self.align)));
        }
        let file_end = self.offset.checked_add(self.filesz);
        let mem_end = self.vaddr.checked_add(self.memsz);
        let (Some(file_end), Some(mem_end)) = (file_end, mem_end) else {
            return Err(problem(SegmentProblem::Overflow));
        };
        if mem_end > USER_VA_END {
            return Err(problem(SegmentProblem::NotUserAddress));
        }
        if self.filesz > 0 {
            if file_end > file_len {
                return Err(ElfError::Truncated(TruncatedPart::Segment(index)));
            }
            if self.offset % PAGE_SIZE != self.vaddr % PAGE_SIZE {
                return Err(problem(SegmentProblem::OffsetMisaligned));
            }
        }
        Ok(LoadSegment {
            vaddr: self.vaddr,
            memsz: self.memsz,
            file_offset: self.offset,
            filesz: self.filesz,
            flags: SegmentFlags::from_bits(self.flags),
        })
    }

    /// Checks a `PT_INTERP` and returns its path without the NUL.
    pub(super) fn interp_path<'f>(&self, file: &'f [u8]) -> Result<&'f [u8], ElfError> {
        if !(2..=MAX_INTERP_LEN).contains(&self.filesz) {
            return Err(ElfError::BadInterp);
        }
        let bytes = self
            .offset
            .checked_add(self.filesz)
            .and_then(|end| Some(usize::try_from(self.offset).ok()?..usize::try_from(end).ok()?))
            .and_then(|range| file.get(range))
            .ok_or(ElfError::Truncated(TruncatedPart::Interp))?;
        match bytes.split_last() {
            Some((0, path)) if !path.contains(&0) => Ok(path),
            _ => Err(ElfError::BadInterp),
        }
    }
}
