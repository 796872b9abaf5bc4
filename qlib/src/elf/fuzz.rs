//! A bounded, seeded fuzz test of [`parse`](super::parse): valid files
//! (made here, and the host's own binaries when present) mutated in the
//! fields a loader reads, in `PT_INTERP` and in length; every result must
//! be a one-line error or an [`ElfInfo`](super::ElfInfo) whose promises
//! hold against the file.

extern crate std;

use std::{format, string::ToString, vec, vec::Vec};

use super::header::{EHDR_SIZE, PHDR_SIZE, PT_INTERP, PT_LOAD};
use super::{ElfType, MAX_SEGMENT_ALIGN, USER_VA_END, parse};

use crate::test_rng::Rng;

fn read(f: &[u8], at: usize, width: usize) -> u64 {
    let mut b = [0u8; 8];
    if let Some(src) = f.get(at..at + width) {
        b[..width].copy_from_slice(src);
    }
    u64::from_le_bytes(b)
}

/// A value worth trying in place of `old`.
fn edge(old: u64, rng: &mut Rng) -> u64 {
    match rng.below(10) {
        0 => 0,
        1 => u64::MAX,
        2 => old.wrapping_add(1 + rng.below(0x2000)),
        3 => old.wrapping_sub(1 + rng.below(0x2000)),
        4 => 1 << rng.below(64),
        5 => old ^ (1 << rng.below(64)),
        6 => USER_VA_END - rng.below(3) * 0x1000,
        7 => (1 << 47) - 0x2000,
        8 => old.wrapping_mul(2),
        _ => rng.next_u64(),
    }
}

/// `file` with one to three mutations: a header or program-header field,
/// the `PT_INTERP` bytes, a truncation or a random byte.
pub(super) fn mutate(file: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut f = file.to_vec();
    for _ in 0..1 + rng.below(3) {
        let phoff = read(&f, 32, 8) as usize;
        let phnum = (read(&f, 56, 2) as usize).min(64);
        let mut fields: Vec<(usize, usize)> = vec![(16, 2), (18, 2), (24, 8), (32, 8)];
        fields.extend([(54, 2), (56, 2), (4, 1), (5, 1)]);
        for i in 0..phnum {
            let p = phoff.saturating_add(PHDR_SIZE * i);
            for (off, width) in [(0, 4), (4, 4), (8, 8), (16, 8), (32, 8), (40, 8), (48, 8)] {
                fields.push((p.saturating_add(off), width));
            }
        }
        match rng.below(8) {
            0 => {
                let len = f.len() as u64;
                f.truncate(rng.below(len) as usize);
            }
            1 => {
                // Rewrite the PT_INTERP path's bytes, if any.
                for i in 0..phnum {
                    let p = phoff.saturating_add(PHDR_SIZE * i);
                    if read(&f, p, 4) == u64::from(PT_INTERP) {
                        let (off, n) = (read(&f, p + 8, 8) as usize, read(&f, p + 32, 8) as usize);
                        if let Some(bytes) = f.get_mut(off..off.saturating_add(n.min(64))) {
                            for b in bytes.iter_mut() {
                                *b = [0, b'/', b'a', 0xff][rng.below(4) as usize];
                            }
                        }
                    }
                }
            }
            2 if !f.is_empty() => {
                let at = rng.below(f.len() as u64) as usize;
                f[at] = rng.next_u64() as u8;
            }
            _ => {
                let (at, width) = fields[rng.below(fields.len() as u64) as usize];
                let value = edge(read(&f, at, width), rng);
                if let Some(dst) = f.get_mut(at..at.saturating_add(width)) {
                    dst.copy_from_slice(&value.to_le_bytes()[..width]);
                }
            }
        }
    }
    f
}

/// Checks what [`parse`] made of `f`; `Some(error text)` for a refusal.
pub(super) fn check(f: &[u8]) -> Option<std::string::String> {
    let info = match parse(f) {
        Ok(info) => info,
        Err(e) => {
            let text = e.to_string();
            assert!(!text.is_empty() && !text.contains('\n'), "{text:?}");
            return Some(text);
        }
    };
    let len = f.len() as u64;
    let segs = info.segments();
    assert!(!segs.is_empty());
    let mut prev_end = 0;
    for s in segs {
        assert!(s.memsz > 0 && s.filesz <= s.memsz);
        assert!(s.vaddr >= prev_end, "{segs:?}");
        assert!(s.vaddr + s.memsz <= USER_VA_END);
        if s.filesz > 0 {
            assert!(s.file_offset + s.filesz <= len);
            assert_eq!(s.file_offset % 4096, s.vaddr % 4096);
        }
        prev_end = s.end();
    }
    assert!(
        segs.iter()
            .any(|s| s.vaddr <= info.entry && info.entry < s.end())
    );
    assert_eq!((info.min_vaddr, info.max_vaddr), (segs[0].vaddr, prev_end));
    assert!(info.max_align.is_power_of_two() && info.max_align <= MAX_SEGMENT_ALIGN);
    assert_eq!(info.interp.is_some(), info.interp_bytes(f).is_some());
    if let Some(path) = info.interp_bytes(f) {
        assert!(!path.is_empty() && !path.contains(&0));
        assert!(info.require_static().is_err());
    }
    let _ = format!("{info:?}");
    assert!(matches!(info.e_type, ElfType::Exec | ElfType::Dyn));
    None
}

/// Seeds: a small static program and a small dynamic PIE made here.
fn made_seeds() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (e_type, interp) in [(2u16, None), (3u16, Some(&b"/lib/ld.so\0"[..]))] {
        let nph = 2 + usize::from(interp.is_some());
        let mut f = vec![0u8; 0x2100];
        f[..4].copy_from_slice(b"\x7fELF");
        f[4..7].copy_from_slice(&[2, 1, 1]);
        f[16..18].copy_from_slice(&e_type.to_le_bytes());
        f[18..20].copy_from_slice(&62u16.to_le_bytes());
        let base: u64 = if e_type == 2 { 0x40_0000 } else { 0 };
        f[24..32].copy_from_slice(&(base + 0x1000).to_le_bytes());
        f[32..40].copy_from_slice(&(EHDR_SIZE as u64).to_le_bytes());
        f[54..56].copy_from_slice(&(PHDR_SIZE as u16).to_le_bytes());
        f[56..58].copy_from_slice(&(nph as u16).to_le_bytes());
        let mut phdrs = vec![
            (PT_LOAD, 5u32, 0u64, base, 0x1100u64, 0x1100u64, 0x1000u64),
            (PT_LOAD, 6, 0x2000, base + 0x2000, 0x100, 0x3000, 0x1000),
        ];
        if let Some(path) = interp {
            f[0x300..0x300 + path.len()].copy_from_slice(path);
            let n = path.len() as u64;
            phdrs.insert(0, (PT_INTERP, 4, 0x300, base + 0x300, n, n, 1));
        }
        for (i, (t, fl, off, va, fs, ms, al)) in phdrs.into_iter().enumerate() {
            let p = EHDR_SIZE + PHDR_SIZE * i;
            f[p..p + 4].copy_from_slice(&t.to_le_bytes());
            f[p + 4..p + 8].copy_from_slice(&fl.to_le_bytes());
            for (k, v) in [off, va, va, fs, ms, al].iter().enumerate() {
                f[p + 8 + 8 * k..p + 16 + 8 * k].copy_from_slice(&v.to_le_bytes());
            }
        }
        out.push(f);
    }
    out
}

/// Seeds: [`made_seeds`] and whichever host binaries exist.
pub(super) fn seeds() -> Vec<Vec<u8>> {
    let mut out = made_seeds();
    for path in ["/bin/true", "/bin/busybox", "/lib64/ld-linux-x86-64.so.2"] {
        if let Ok(bytes) = std::fs::read(path) {
            out.push(bytes);
        }
    }
    out
}

#[test]
fn mutated_files_parse_or_are_refused_in_one_line() {
    let seeds = seeds();
    for s in &seeds[..2] {
        assert_eq!(check(s), None, "the made seeds are valid");
    }
    let mut rng = Rng(0x0e1f_f022_5eed_0001);
    let (mut ok, mut refused) = (0, 0);
    let start = std::time::Instant::now();
    for case in 0..30_000 {
        let seed = &seeds[case % seeds.len()];
        let f = mutate(seed, &mut rng);
        match check(&f) {
            None => ok += 1,
            Some(_) => refused += 1,
        }
    }
    // Both outcomes are exercised.
    assert!(ok > 1000 && refused > 1000, "ok {ok}, refused {refused}");
    assert!(start.elapsed().as_secs() < 20, "{:?}", start.elapsed());
    let _ = ok.to_string();
}
