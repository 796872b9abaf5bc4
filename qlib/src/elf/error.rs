//! Why [`parse`](super::parse) refused a file, with one-line messages.

use core::fmt;

/// How many bytes of a `PT_INTERP` path [`InterpPath`] keeps for messages.
pub const INTERP_PATH_KEEP: usize = 64;

/// Everything that makes [`parse`](super::parse) or
/// [`ElfInfo::require_static`](super::ElfInfo::require_static) refuse a file.
///
/// `Copy` and allocation-free so the guest kernel can carry it around; the
/// `Display` text is a short sentence without a trailing period.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElfError {
    /// The file does not start with `\x7fELF`.
    NotElf,
    /// `ELFCLASS32`.
    Not64Bit,
    /// An `EI_CLASS` byte that is neither 32- nor 64-bit.
    BadClass(u8),
    /// `EI_DATA` is not little endian (2 is big endian, anything else is invalid).
    BadDataEncoding(u8),
    /// `e_machine` is not `EM_X86_64`.
    WrongMachine(u16),
    /// `e_type` is neither `ET_EXEC` nor `ET_DYN`.
    NotExecutable(u16),
    /// Some part of the file the headers point at lies beyond its end.
    Truncated(TruncatedPart),
    /// `e_phentsize` is not 56.
    BadPhentsize(u16),
    /// `e_phnum` is above [`MAX_PHNUM`](super::MAX_PHNUM).
    TooManyProgramHeaders(u16),
    /// More than [`MAX_LOAD_SEGMENTS`](super::MAX_LOAD_SEGMENTS) non-empty `PT_LOAD`s.
    TooManyLoadSegments,
    /// No non-empty `PT_LOAD` at all.
    NoLoadSegments,
    /// Program header `index` is a `PT_LOAD` a loader cannot honour.
    BadSegment {
        /// Index in the program-header table.
        index: u16,
        /// What is wrong with it.
        problem: SegmentProblem,
    },
    /// `PT_INTERP` is repeated, empty, longer than 4096 bytes or not NUL-terminated.
    BadInterp,
    /// `e_entry` lies outside every loadable segment.
    BadEntry(u64),
    /// The file names an interpreter (a dynamic loader) where only a static
    /// file will do (an interpreter cannot have one of its own).
    Dynamic(InterpPath),
}

/// The part of the file that [`ElfError::Truncated`] found cut off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TruncatedPart {
    /// The 64-byte ELF header.
    Header,
    /// Program header `n` (its 56 bytes, at `e_phoff + 56 * n`).
    ProgramHeader(u16),
    /// The file bytes of the segment described by program header `n`.
    Segment(u16),
    /// The `PT_INTERP` path.
    Interp,
}

/// What is wrong with a `PT_LOAD` in [`ElfError::BadSegment`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegmentProblem {
    /// `p_filesz > p_memsz`.
    FileszOverMemsz,
    /// `p_align` is neither 0 nor a power of two up to
    /// [`MAX_SEGMENT_ALIGN`](super::MAX_SEGMENT_ALIGN).
    BadAlign(u64),
    /// `p_vaddr + p_memsz` or `p_offset + p_filesz` overflows 64 bits.
    Overflow,
    /// The segment ends above the lower (user) half of the address space.
    NotUserAddress,
    /// `p_offset` and `p_vaddr` differ modulo the page size, so the segment
    /// cannot be mapped from the file.
    OffsetMisaligned,
    /// The segment starts below the end of the previous `PT_LOAD`
    /// (the ELF spec requires them sorted by `p_vaddr`).
    Overlap,
}

/// The first [`INTERP_PATH_KEEP`] bytes of a `PT_INTERP` path, stored inline
/// so [`ElfError`] needs neither a lifetime nor an allocation.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct InterpPath {
    bytes: [u8; INTERP_PATH_KEEP],
    len: u8,
    truncated: bool,
}

impl InterpPath {
    /// An empty path (a placeholder before `PT_INTERP` is seen).
    pub const EMPTY: Self = Self {
        bytes: [0; INTERP_PATH_KEEP],
        len: 0,
        truncated: false,
    };

    /// Keeps the first [`INTERP_PATH_KEEP`] bytes of `path` (given without
    /// its terminating NUL).
    pub fn new(path: &[u8]) -> Self {
        let kept = path.len().min(INTERP_PATH_KEEP);
        let mut out = Self::EMPTY;
        if let (Some(dst), Some(src)) = (out.bytes.get_mut(..kept), path.get(..kept)) {
            dst.copy_from_slice(src);
        }
        out.len = u8::try_from(kept).unwrap_or(u8::MAX);
        out.truncated = kept < path.len();
        out
    }

    /// The kept bytes.
    pub fn as_bytes(&self) -> &[u8] {
        self.bytes.get(..usize::from(self.len)).unwrap_or(&[])
    }

    /// Whether the path was longer than what is kept.
    pub fn is_truncated(&self) -> bool {
        self.truncated
    }
}

impl fmt::Debug for InterpPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{self}\"")
    }
}

/// Printable ASCII as is, anything else as `\xNN`, `...` when cut short.
impl fmt::Display for InterpPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for &b in self.as_bytes() {
            if b.is_ascii_graphic() || b == b' ' {
                write!(f, "{}", char::from(b))?;
            } else {
                write!(f, "\\x{b:02x}")?;
            }
        }
        if self.truncated {
            f.write_str("...")?;
        }
        Ok(())
    }
}

impl fmt::Display for ElfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::NotElf => f.write_str("not an ELF file"),
            Self::Not64Bit => f.write_str("32-bit ELF (only x86-64 is supported)"),
            Self::BadClass(c) => write!(f, "invalid ELF class {c}"),
            Self::BadDataEncoding(2) => {
                f.write_str("big-endian ELF (only little-endian x86-64 is supported)")
            }
            Self::BadDataEncoding(d) => write!(f, "invalid ELF data encoding {d}"),
            Self::WrongMachine(m) => match machine_name(m) {
                Some(name) => write!(f, "ELF for {name} (only x86-64 is supported)"),
                None => write!(f, "ELF for machine {m} (only x86-64 is supported)"),
            },
            Self::NotExecutable(t) => match t {
                0 => f.write_str("ELF file of no type (ET_NONE), not an executable"),
                1 => f.write_str("relocatable object file, not an executable"),
                4 => f.write_str("core dump, not an executable"),
                _ => write!(f, "ELF type {t:#x} is not an executable"),
            },
            Self::Truncated(part) => {
                f.write_str("truncated ELF: ")?;
                match part {
                    TruncatedPart::Header => f.write_str("the ELF header")?,
                    TruncatedPart::ProgramHeader(n) => write!(f, "program header {n}")?,
                    TruncatedPart::Segment(n) => write!(f, "the data of segment {n}")?,
                    TruncatedPart::Interp => f.write_str("the interpreter path")?,
                }
                f.write_str(" lies beyond the end of the file")
            }
            Self::BadPhentsize(n) => write!(f, "program header size {n} (expected 56)"),
            Self::TooManyProgramHeaders(n) => write!(
                f,
                "{n} program headers (at most {} are accepted)",
                super::MAX_PHNUM
            ),
            Self::TooManyLoadSegments => write!(
                f,
                "more than {} loadable segments",
                super::MAX_LOAD_SEGMENTS
            ),
            Self::NoLoadSegments => f.write_str("no loadable segments"),
            Self::BadSegment { index, problem } => {
                write!(f, "program header {index}: ")?;
                match problem {
                    SegmentProblem::FileszOverMemsz => f.write_str("file size exceeds memory size"),
                    SegmentProblem::BadAlign(a) => write!(
                        f,
                        "alignment {a:#x} is not a power of two up to {:#x}",
                        super::MAX_SEGMENT_ALIGN
                    ),
                    SegmentProblem::Overflow => f.write_str("address or offset range overflows"),
                    SegmentProblem::NotUserAddress => {
                        f.write_str("segment lies outside the user address range")
                    }
                    SegmentProblem::OffsetMisaligned => {
                        f.write_str("file offset and address differ modulo the page size")
                    }
                    SegmentProblem::Overlap => {
                        f.write_str("segment overlaps or precedes the previous one")
                    }
                }
            }
            Self::BadInterp => f.write_str("malformed PT_INTERP"),
            Self::BadEntry(e) => write!(f, "entry point {e:#x} is outside every loadable segment"),
            Self::Dynamic(path) => write!(f, "dynamically linked (needs {path})"),
        }
    }
}

impl core::error::Error for ElfError {}

/// Names for the `e_machine` values a user is likely to try.
fn machine_name(m: u16) -> Option<&'static str> {
    Some(match m {
        3 => "i386",
        8 => "MIPS",
        20 => "PowerPC",
        21 => "PowerPC64",
        22 => "S/390",
        40 => "ARM",
        183 => "AArch64",
        243 => "RISC-V",
        258 => "LoongArch",
        _ => return None,
    })
}
