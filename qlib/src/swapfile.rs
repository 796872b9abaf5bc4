//! The on-disk format of a sandbox's swap file and REAP file (DESIGN.md,
//! "Hibernation"). Both live in the sandbox's state directory, are written
//! by the VMM from guest RAM and read back into it.
//!
//! ```text
//! offset 0          header block (4 KiB; HEADER_LEN bytes used, rest zero)
//! offset 4096       data: page_count pages of 4 KiB, page i at 4096 * (1 + i)
//! table_offset      table: page_count entries of ENTRY_LEN bytes
//!                   (table_offset = 4096 * (1 + page_count))
//! ```
//!
//! Header (little-endian):
//! ```text
//!  0  magic        [u8; 8]  b"QRUNSWAP" (swap file) or b"QRUNREAP" (REAP file)
//!  8  version      u32      VERSION
//! 12  reserved     u32      0
//! 16  page_count   u64      pages in the data area (<= MAX_PAGES)
//! 24  table_crc    u32      CRC-32 (IEEE) of the whole table
//! 28  header_crc   u32      CRC-32 of bytes 0..28
//! ```
//!
//! Table entry (little-endian), one per data page:
//! ```text
//!  0  gpa          u64      REAP: guest-physical address the page goes back
//!                           to; swap file: 0 (the guest's PTE names the slot)
//!  8  crc          u32      CRC-32 of the page's 4096 bytes
//! 12  flags        u32      bit 0: the entry holds a page (swap slots may
//!                           be unused); other bits 0
//! ```
//!
//! Swap file: page `i` of the data area is swap *slot* `i`, the number the
//! guest keeps in a swapped-out PTE (`crate::pte::swap_entry`); slots are
//! rewritten in place by later hibernations. REAP file: the pages of the
//! recorded working set, in the order they are read back, rewritten whole by
//! every hibernation.
//!
//! A reader accepts a file only if the magic, version and header checksum
//! match, `page_count <= min(MAX_PAGES, its own cap)` (the VMM passes the
//! pages of guest RAM), the table checksum matches and the file is at least
//! [`file_len`] bytes long; every page read is checked against its entry's
//! CRC before the guest may see it. The header is written last, so a file
//! whose write was cut short is refused.

use thiserror::Error;

/// Size of a page, of the header block and the unit of every offset.
pub const PAGE: u64 = 4096;
/// Format version.
pub const VERSION: u32 = 1;
/// Bytes of the header block that carry data.
pub const HEADER_LEN: usize = 32;
/// Bytes of one table entry.
pub const ENTRY_LEN: usize = 16;
/// Largest page count a reader accepts: 2 GiB, the most guest RAM there is.
pub const MAX_PAGES: u64 = (2 << 30) / PAGE;
/// Entry flag: the entry holds a page.
pub const ENTRY_USED: u32 = 1;

/// Which of the two files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Slot-addressed pages of swapped-out PTEs.
    Swap,
    /// The recorded working set, read back in one batch on wake.
    Reap,
}

impl Kind {
    /// The file's magic.
    pub const fn magic(self) -> [u8; 8] {
        match self {
            Self::Swap => *b"QRUNSWAP",
            Self::Reap => *b"QRUNREAP",
        }
    }
}

/// Why a file (or a page of it) was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum FormatError {
    /// Shorter than its header says (or than a header).
    #[error("file truncated")]
    Truncated,
    /// Not a file of the expected kind.
    #[error("bad magic")]
    BadMagic,
    /// A version this reader does not know.
    #[error("unsupported version {0}")]
    Version(u32),
    /// The header's checksum does not match.
    #[error("header checksum mismatch")]
    HeaderChecksum,
    /// More pages than the reader accepts.
    #[error("page count {0} exceeds the cap {1}")]
    TooManyPages(u64, u64),
    /// The table's checksum does not match.
    #[error("table checksum mismatch")]
    TableChecksum,
    /// A page does not match its checksum.
    #[error("page {0} checksum mismatch")]
    PageChecksum(u64),
    /// An entry is malformed (unknown flags, unaligned address).
    #[error("bad table entry {0}")]
    BadEntry(u64),
}

/// CRC-32 of `bytes` (a page, the table, a header).
pub fn checksum(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

/// The decoded header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Swap or REAP.
    pub kind: Kind,
    /// Pages in the data area.
    pub page_count: u64,
    /// CRC-32 of the table.
    pub table_crc: u32,
}

impl Header {
    /// Encodes the header (the first [`HEADER_LEN`] bytes of the file).
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..8].copy_from_slice(&self.kind.magic());
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        b[16..24].copy_from_slice(&self.page_count.to_le_bytes());
        b[24..28].copy_from_slice(&self.table_crc.to_le_bytes());
        let crc = checksum(&b[..28]);
        b[28..32].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes and checks a header of `kind`, refusing more than `cap`
    /// pages (capped again by [`MAX_PAGES`]).
    pub fn decode(bytes: &[u8], kind: Kind, cap: u64) -> Result<Self, FormatError> {
        let b = bytes.get(..HEADER_LEN).ok_or(FormatError::Truncated)?;
        if b[0..8] != kind.magic() {
            return Err(FormatError::BadMagic);
        }
        let version = u32::from_le_bytes(b[8..12].try_into().expect("4 bytes"));
        if version != VERSION {
            return Err(FormatError::Version(version));
        }
        let crc = u32::from_le_bytes(b[28..32].try_into().expect("4 bytes"));
        if checksum(&b[..28]) != crc || b[12..16] != [0; 4] {
            return Err(FormatError::HeaderChecksum);
        }
        let page_count = u64::from_le_bytes(b[16..24].try_into().expect("8 bytes"));
        let cap = cap.min(MAX_PAGES);
        if page_count > cap {
            return Err(FormatError::TooManyPages(page_count, cap));
        }
        Ok(Self {
            kind,
            page_count,
            table_crc: u32::from_le_bytes(b[24..28].try_into().expect("4 bytes")),
        })
    }
}

/// File offset of data page (slot) `i`.
pub const fn page_offset(i: u64) -> u64 {
    PAGE * (1 + i)
}

/// File offset of the table of a file of `page_count` pages.
pub const fn table_offset(page_count: u64) -> u64 {
    page_offset(page_count)
}

/// Bytes of the table of `page_count` pages.
pub const fn table_len(page_count: u64) -> u64 {
    page_count * ENTRY_LEN as u64
}

/// Smallest valid length of a file of `page_count` pages.
pub const fn file_len(page_count: u64) -> u64 {
    table_offset(page_count) + table_len(page_count)
}

/// One table entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Entry {
    /// REAP: destination GPA; swap file: 0.
    pub gpa: u64,
    /// CRC-32 of the page.
    pub crc: u32,
    /// [`ENTRY_USED`] or 0.
    pub flags: u32,
}

impl Entry {
    /// A used entry for a page with checksum `crc`.
    pub const fn used(gpa: u64, crc: u32) -> Self {
        Self {
            gpa,
            crc,
            flags: ENTRY_USED,
        }
    }

    /// Whether the entry holds a page.
    pub const fn is_used(&self) -> bool {
        self.flags & ENTRY_USED != 0
    }

    /// Encodes the entry.
    pub fn encode(&self) -> [u8; ENTRY_LEN] {
        let mut b = [0u8; ENTRY_LEN];
        b[0..8].copy_from_slice(&self.gpa.to_le_bytes());
        b[8..12].copy_from_slice(&self.crc.to_le_bytes());
        b[12..16].copy_from_slice(&self.flags.to_le_bytes());
        b
    }

    /// Decodes entry number `index`; refuses unknown flags and unaligned
    /// addresses.
    pub fn decode(b: &[u8; ENTRY_LEN], index: u64) -> Result<Self, FormatError> {
        let e = Self {
            gpa: u64::from_le_bytes(b[0..8].try_into().expect("8 bytes")),
            crc: u32::from_le_bytes(b[8..12].try_into().expect("4 bytes")),
            flags: u32::from_le_bytes(b[12..16].try_into().expect("4 bytes")),
        };
        if e.flags & !ENTRY_USED != 0 || !e.gpa.is_multiple_of(PAGE) {
            return Err(FormatError::BadEntry(index));
        }
        Ok(e)
    }
}

/// Checks the table bytes against `header` and calls `f(index, entry)` for
/// each entry.
pub fn decode_table(
    header: &Header,
    table: &[u8],
    mut f: impl FnMut(u64, Entry),
) -> Result<(), FormatError> {
    let len = usize::try_from(table_len(header.page_count)).map_err(|_| FormatError::Truncated)?;
    let table = table.get(..len).ok_or(FormatError::Truncated)?;
    if checksum(table) != header.table_crc {
        return Err(FormatError::TableChecksum);
    }
    for (i, chunk) in table.chunks_exact(ENTRY_LEN).enumerate() {
        let e = Entry::decode(chunk.try_into().expect("ENTRY_LEN bytes"), i as u64)?;
        f(i as u64, e);
    }
    Ok(())
}

/// Checks page `index` against its entry.
pub fn verify_page(index: u64, entry: &Entry, page: &[u8]) -> Result<(), FormatError> {
    if !entry.is_used() || page.len() as u64 != PAGE || checksum(page) != entry.crc {
        return Err(FormatError::PageChecksum(index));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use proptest::prelude::*;

    fn table_bytes(entries: &[Entry]) -> std::vec::Vec<u8> {
        entries.iter().flat_map(|e| e.encode()).collect()
    }

    #[test]
    fn layout_is_as_documented() {
        assert_eq!(page_offset(0), 4096);
        assert_eq!(table_offset(3), 4 * 4096);
        assert_eq!(file_len(3), 4 * 4096 + 48);
        let h = Header {
            kind: Kind::Reap,
            page_count: 7,
            table_crc: 0xdead_beef,
        };
        let b = h.encode();
        assert_eq!(&b[0..8], b"QRUNREAP");
        assert_eq!(u32::from_le_bytes(b[8..12].try_into().unwrap()), VERSION);
        assert_eq!(u64::from_le_bytes(b[16..24].try_into().unwrap()), 7);
    }

    #[test]
    fn wrong_kind_version_and_cap_are_refused() {
        let h = Header {
            kind: Kind::Swap,
            page_count: 10,
            table_crc: 0,
        };
        let b = h.encode();
        assert_eq!(
            Header::decode(&b, Kind::Reap, 100),
            Err(FormatError::BadMagic)
        );
        assert_eq!(
            Header::decode(&b, Kind::Swap, 9),
            Err(FormatError::TooManyPages(10, 9))
        );
        let mut v = b;
        v[8] = 2;
        assert_eq!(
            Header::decode(&v, Kind::Swap, 100),
            Err(FormatError::Version(2))
        );
        assert_eq!(
            Header::decode(&b[..20], Kind::Swap, 100),
            Err(FormatError::Truncated)
        );
    }

    #[test]
    fn a_flipped_page_bit_is_caught() {
        let mut page = [0x5au8; 4096];
        let e = Entry::used(0x1000, checksum(&page));
        assert_eq!(verify_page(3, &e, &page), Ok(()));
        page[100] ^= 1;
        assert_eq!(verify_page(3, &e, &page), Err(FormatError::PageChecksum(3)));
        let unused = Entry::default();
        assert!(verify_page(0, &unused, &[0u8; 4096]).is_err());
    }

    proptest! {
        #[test]
        fn header_round_trips(kind in prop_oneof![Just(Kind::Swap), Just(Kind::Reap)],
                              n in 0..=MAX_PAGES, crc in any::<u32>()) {
            let h = Header { kind, page_count: n, table_crc: crc };
            prop_assert_eq!(Header::decode(&h.encode(), kind, MAX_PAGES), Ok(h));
        }

        #[test]
        fn any_header_corruption_is_refused(n in 0..1000u64, byte in 0..HEADER_LEN, bit in 0..8u8) {
            let h = Header { kind: Kind::Swap, page_count: n, table_crc: 1 };
            let mut b = h.encode();
            b[byte] ^= 1 << bit;
            prop_assert!(Header::decode(&b, Kind::Swap, MAX_PAGES).is_err());
        }

        #[test]
        fn decoding_garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200),
                                         cap in any::<u64>()) {
            if let Ok(h) = Header::decode(&bytes, Kind::Reap, cap) {
                prop_assert!(h.page_count <= cap.min(MAX_PAGES));
                let _ = decode_table(&h, &bytes, |_, _| {});
            }
        }

        #[test]
        fn table_round_trips(pages in proptest::collection::vec((0..1u64 << 40, any::<u32>(), any::<bool>()), 0..64)) {
            let entries: std::vec::Vec<Entry> = pages.iter().map(|&(g, c, used)| Entry {
                gpa: g * PAGE, crc: c, flags: u32::from(used),
            }).collect();
            let t = table_bytes(&entries);
            let h = Header { kind: Kind::Reap, page_count: entries.len() as u64, table_crc: checksum(&t) };
            let mut out = std::vec::Vec::new();
            prop_assert_eq!(decode_table(&h, &t, |i, e| out.push((i, e))), Ok(()));
            prop_assert_eq!(out.len(), entries.len());
            for (i, e) in out {
                prop_assert_eq!(e, entries[i as usize]);
            }
        }

        #[test]
        fn table_corruption_or_truncation_is_refused(n in 1..32usize, at in any::<prop::sample::Index>(), bit in 0..8u8) {
            let entries: std::vec::Vec<Entry> = (0..n).map(|i| Entry::used(i as u64 * PAGE, i as u32)).collect();
            let mut t = table_bytes(&entries);
            let h = Header { kind: Kind::Swap, page_count: n as u64, table_crc: checksum(&t) };
            let r = decode_table(&h, &t[..t.len() - 1], |_, _| ());
            prop_assert_eq!(r, Err(FormatError::Truncated));
            let i = at.index(t.len());
            t[i] ^= 1 << bit;
            let r = decode_table(&h, &t, |_, _| ());
            prop_assert!(r.is_err());
        }
    }
}
