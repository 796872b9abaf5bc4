//! The initial user stack of a new process, as Linux x86-64 lays it out for
//! `execve`.
//!
//! [`build`] writes into a caller-provided buffer that stands for the top of
//! the user stack: `buf[buf.len() - 1]` is the byte at `stack_top - 1`.
//! From the top down:
//!
//! ```text
//! stack_top ->  8 zero bytes                      (end marker)
//!               execfn\0                          <- AT_EXECFN
//!               envp[n-1]\0 ... envp[0]\0          (envp[0] lowest)
//!               argv[argc-1]\0 ... argv[0]\0       (argv[0] lowest)
//!               platform\0                        <- AT_PLATFORM (if not empty)
//!               16 random bytes                   <- AT_RANDOM
//!               zero padding                      (so that rsp % 16 == 0)
//!               AT_NULL, 0
//!               ... auxv pairs (key, value) ...
//!               NULL
//!               envp[envc-1] ... envp[0]
//!               NULL
//!               argv[argc-1] ... argv[0]
//! rsp ->        argc
//! ```
//!
//! `rsp` is 16-byte aligned, as the SysV ABI requires at `_start`. The
//! argument strings sit contiguously below the environment strings, so
//! `/proc/<pid>/cmdline`-style ranges can be derived from `argv[0]` and
//! `envp[0]`. The caller's auxv comes first, in its order; `build` appends
//! `AT_RANDOM`, `AT_EXECFN`, `AT_PLATFORM` and `AT_NULL`, as Linux does.
//!
//! Like Linux ≥ 5.18, an empty `argv` becomes a single empty string, so
//! `argc >= 1`. Strings are given without their NUL and must not contain
//! one.

use core::fmt;

/// End of the auxiliary vector.
pub const AT_NULL: u64 = 0;
/// Address of the program headers.
pub const AT_PHDR: u64 = 3;
/// Size of one program header.
pub const AT_PHENT: u64 = 4;
/// Number of program headers.
pub const AT_PHNUM: u64 = 5;
/// Page size.
pub const AT_PAGESZ: u64 = 6;
/// Load address of the interpreter.
pub const AT_BASE: u64 = 7;
/// Flags (0).
pub const AT_FLAGS: u64 = 8;
/// Program entry point.
pub const AT_ENTRY: u64 = 9;
/// Real user id.
pub const AT_UID: u64 = 11;
/// Effective user id.
pub const AT_EUID: u64 = 12;
/// Real group id.
pub const AT_GID: u64 = 13;
/// Effective group id.
pub const AT_EGID: u64 = 14;
/// Address of the platform string ("x86_64").
pub const AT_PLATFORM: u64 = 15;
/// CPUID feature bits.
pub const AT_HWCAP: u64 = 16;
/// Clock ticks per second (`times()`).
pub const AT_CLKTCK: u64 = 17;
/// Secure mode (setuid) flag.
pub const AT_SECURE: u64 = 23;
/// Address of 16 random bytes.
pub const AT_RANDOM: u64 = 25;
/// More feature bits.
pub const AT_HWCAP2: u64 = 26;
/// Address of the executed file name.
pub const AT_EXECFN: u64 = 31;
/// Address of the vDSO.
pub const AT_SYSINFO_EHDR: u64 = 33;
/// Minimal signal stack size.
pub const AT_MINSIGSTKSZ: u64 = 51;

/// Cap on the argument and environment strings (NULs included) plus their
/// pointers: Linux's limit of a quarter of an 8 MiB stack rlimit, the
/// limit the guest's `execve` checks too.
pub const MAX_ARG_BYTES: usize = 2 << 20;

/// Size of the end marker at the very top of the stack.
const END_MARKER: usize = 8;
const WORD: usize = 8;
const ALIGN: u64 = 16;

/// What goes onto the initial stack.
#[derive(Clone, Copy, Debug)]
pub struct StackInput<'a> {
    /// Argument strings, without NULs.
    pub argv: &'a [&'a [u8]],
    /// Environment strings (`KEY=value`), without NULs.
    pub envp: &'a [&'a [u8]],
    /// Auxiliary vector entries without `AT_RANDOM`, `AT_EXECFN`,
    /// `AT_PLATFORM` and `AT_NULL`, which [`build`] adds.
    pub auxv: &'a [(u64, u64)],
    /// The bytes `AT_RANDOM` points at.
    pub random: [u8; 16],
    /// The path given to `execve` (`AT_EXECFN`).
    pub execfn: &'a [u8],
    /// `AT_PLATFORM` string, "x86_64"; empty leaves `AT_PLATFORM` out.
    pub platform: &'a [u8],
}

/// Why [`build`] could not lay out the stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StackError {
    /// The arguments exceed [`MAX_ARG_BYTES`] or the stack does not fit
    /// the buffer (`E2BIG`).
    TooBig,
    /// A string contains a NUL byte.
    InteriorNul,
    /// The caller's auxv holds a key that [`build`] adds itself.
    ReservedAuxv(u64),
    /// `stack_top` is below the buffer's length: the stack would start
    /// below address 0.
    BadStackTop,
}

impl fmt::Display for StackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::TooBig => f.write_str("arguments and environment too big for the stack"),
            Self::InteriorNul => f.write_str("argument, environment or path contains a NUL byte"),
            Self::ReservedAuxv(key) => write!(f, "auxv key {key} is added by the stack builder"),
            Self::BadStackTop => f.write_str("stack top below the stack buffer's size"),
        }
    }
}

impl core::error::Error for StackError {}

/// The `argv` Linux substitutes for an empty one.
const EMPTY_ARGV: &[&[u8]] = &[b""];

/// Bytes needed by `strings` with their NULs and pointers.
fn strings_size(strings: &[&[u8]]) -> Result<(usize, usize), StackError> {
    strings
        .iter()
        .try_fold((0usize, 0usize), |(bytes, ptrs), s| {
            if s.contains(&0) {
                return Err(StackError::InteriorNul);
            }
            let bytes = bytes
                .checked_add(s.len())
                .and_then(|b| b.checked_add(1))
                .ok_or(StackError::TooBig)?;
            Ok((bytes, ptrs.saturating_add(WORD)))
        })
}

/// Sizes of the parts of the stack, checked against the caps.
struct Sizes {
    argc: usize,
    /// Bytes of the argv and envp strings, NULs included.
    strings: usize,
    /// Words from `argc` to the `AT_NULL` value.
    words: usize,
}

impl Sizes {
    fn new(input: &StackInput<'_>, argv: &[&[u8]]) -> Result<Self, StackError> {
        let (arg_bytes, arg_ptrs) = strings_size(argv)?;
        let (env_bytes, env_ptrs) = strings_size(input.envp)?;
        let strings = arg_bytes.checked_add(env_bytes).ok_or(StackError::TooBig)?;
        let total = [arg_ptrs, env_ptrs]
            .into_iter()
            .try_fold(strings, usize::checked_add);
        if total.is_none_or(|t| t > MAX_ARG_BYTES) {
            return Err(StackError::TooBig);
        }
        if input.execfn.contains(&0) || input.platform.contains(&0) {
            return Err(StackError::InteriorNul);
        }
        if let Some(&(key, _)) = input
            .auxv
            .iter()
            .find(|(k, _)| matches!(*k, AT_NULL | AT_RANDOM | AT_EXECFN | AT_PLATFORM))
        {
            return Err(StackError::ReservedAuxv(key));
        }
        // AT_RANDOM, AT_EXECFN, AT_NULL and maybe AT_PLATFORM.
        let added_aux = if input.platform.is_empty() { 3 } else { 4 };
        // argc, argv + NULL, envp + NULL, auxv pairs.
        let words = input
            .auxv
            .len()
            .checked_add(added_aux)
            .and_then(|pairs| pairs.checked_mul(2))
            .and_then(|w| w.checked_add(argv.len()))
            .and_then(|w| w.checked_add(input.envp.len()))
            .and_then(|w| w.checked_add(3))
            .ok_or(StackError::TooBig)?;
        Ok(Self {
            argc: argv.len(),
            strings,
            words,
        })
    }
}

/// Fills the buffer downwards from its end.
struct Writer<'b> {
    buf: &'b mut [u8],
    /// User address of `buf[0]`.
    base: u64,
    /// Index of the lowest byte written so far.
    pos: usize,
}

impl Writer<'_> {
    /// Reserves `len` bytes below what is written and returns their index.
    fn reserve(&mut self, len: usize) -> Result<usize, StackError> {
        self.pos = self.pos.checked_sub(len).ok_or(StackError::TooBig)?;
        Ok(self.pos)
    }

    /// User address of `buf[index]`; `index <= buf.len()` so this cannot
    /// pass `stack_top`.
    fn addr(&self, index: usize) -> u64 {
        self.base.saturating_add(index as u64)
    }

    fn put(&mut self, index: usize, bytes: &[u8]) -> Result<(), StackError> {
        let end = index.checked_add(bytes.len()).ok_or(StackError::TooBig)?;
        self.buf
            .get_mut(index..end)
            .ok_or(StackError::TooBig)?
            .copy_from_slice(bytes);
        Ok(())
    }

    fn zero(&mut self, index: usize, len: usize) -> Result<(), StackError> {
        let end = index.checked_add(len).ok_or(StackError::TooBig)?;
        self.buf
            .get_mut(index..end)
            .ok_or(StackError::TooBig)?
            .fill(0);
        Ok(())
    }

    /// Puts `value` at `*at` and moves `*at` past it.
    fn put_word(&mut self, at: &mut usize, value: u64) -> Result<(), StackError> {
        self.put(*at, &value.to_le_bytes())?;
        *at += WORD;
        Ok(())
    }

    /// Puts `s` and a NUL below what is written; returns its address.
    fn push_cstr(&mut self, s: &[u8]) -> Result<u64, StackError> {
        let index = self.reserve(s.len().checked_add(1).ok_or(StackError::TooBig)?)?;
        self.put(index, s)?;
        self.put(index + s.len(), &[0])?;
        Ok(self.addr(index))
    }
}

/// Lays out the initial stack of a process in `buf`, whose last byte is at
/// user address `stack_top - 1`, and returns the initial `rsp` (the user
/// address of `argc`). Bytes below `rsp` are left untouched.
pub fn build(buf: &mut [u8], stack_top: u64, input: &StackInput<'_>) -> Result<u64, StackError> {
    let argv = if input.argv.is_empty() {
        EMPTY_ARGV
    } else {
        input.argv
    };
    let sizes = Sizes::new(input, argv)?;
    let len = u64::try_from(buf.len()).map_err(|_| StackError::TooBig)?;
    let base = stack_top.checked_sub(len).ok_or(StackError::BadStackTop)?;
    let pos = buf.len();
    let mut w = Writer { buf, base, pos };

    let marker = w.reserve(END_MARKER)?;
    w.zero(marker, END_MARKER)?;
    let execfn = w.push_cstr(input.execfn)?;
    let strings = w.reserve(sizes.strings)?;
    let mut at = strings;
    for s in argv.iter().chain(input.envp) {
        w.put(at, s)?;
        w.put(at + s.len(), &[0])?;
        at += s.len() + 1;
    }
    let platform = match input.platform {
        [] => None,
        p => Some(w.push_cstr(p)?),
    };
    let random = w.reserve(input.random.len())?;
    w.put(random, &input.random)?;

    // The word block goes right below the random bytes, moved down so that
    // it starts (at argc) on a 16-byte boundary; the gap is zeroed.
    let block = sizes.words.checked_mul(WORD).ok_or(StackError::TooBig)?;
    let block = u64::try_from(block).map_err(|_| StackError::TooBig)?;
    let rsp = w
        .addr(random)
        .checked_sub(block)
        .map(|a| a & !(ALIGN - 1))
        .filter(|&a| a >= base)
        .ok_or(StackError::TooBig)?;
    let gap = usize::try_from(w.addr(random) - rsp).map_err(|_| StackError::TooBig)?;
    let start = w.reserve(gap)?;
    w.zero(start, gap)?;

    let mut at = start;
    w.put_word(&mut at, sizes.argc as u64)?;
    let mut string = w.addr(strings);
    for list in [argv, input.envp] {
        for s in list {
            w.put_word(&mut at, string)?;
            string += s.len() as u64 + 1;
        }
        w.put_word(&mut at, 0)?;
    }
    let random = w.addr(random);
    let added = [
        Some((AT_RANDOM, random)),
        Some((AT_EXECFN, execfn)),
        platform.map(|p| (AT_PLATFORM, p)),
        Some((AT_NULL, 0)),
    ];
    for (key, value) in input
        .auxv
        .iter()
        .copied()
        .chain(added.into_iter().flatten())
    {
        w.put_word(&mut at, key)?;
        w.put_word(&mut at, value)?;
    }
    Ok(rsp)
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use proptest::prelude::*;
    use std::{vec, vec::Vec};

    const TOP: u64 = 0x7fff_ffff_f000;
    const RANDOM: [u8; 16] = *b"0123456789abcdef";

    /// The stack read back from the buffer, following its pointers.
    #[derive(Debug)]
    struct Parsed {
        argv: Vec<Vec<u8>>,
        envp: Vec<Vec<u8>>,
        auxv: Vec<(u64, u64)>,
        /// Address of the first byte after the `AT_NULL` pair.
        auxv_end: u64,
    }

    fn word(buf: &[u8], base: u64, addr: u64) -> u64 {
        let i = usize::try_from(addr - base).unwrap();
        u64::from_le_bytes(buf[i..i + 8].try_into().unwrap())
    }

    fn cstr(buf: &[u8], base: u64, addr: u64) -> Vec<u8> {
        let i = usize::try_from(addr - base).unwrap();
        let len = buf[i..]
            .iter()
            .position(|&b| b == 0)
            .expect("NUL-terminated");
        buf[i..i + len].to_vec()
    }

    fn parse_back(buf: &[u8], top: u64, rsp: u64) -> Parsed {
        let base = top - buf.len() as u64;
        assert!(rsp >= base && rsp < top);
        let mut at = rsp;
        let mut next = || {
            let w = word(buf, base, at);
            at += 8;
            w
        };
        let argc = next();
        let argv: Vec<u64> = (0..argc).map(|_| next()).collect();
        assert_eq!(next(), 0, "argv NULL");
        let mut envp = Vec::new();
        loop {
            match next() {
                0 => break,
                p => envp.push(p),
            }
        }
        let mut auxv = Vec::new();
        loop {
            let (key, value) = (next(), next());
            auxv.push((key, value));
            if key == AT_NULL {
                break;
            }
        }
        Parsed {
            argv: argv.iter().map(|&p| cstr(buf, base, p)).collect(),
            envp: envp.iter().map(|&p| cstr(buf, base, p)).collect(),
            auxv,
            auxv_end: at,
        }
    }

    fn aux(parsed: &Parsed, key: u64) -> Option<u64> {
        parsed.auxv.iter().find(|(k, _)| *k == key).map(|&(_, v)| v)
    }

    /// Builds into a fresh buffer of `len` bytes filled with 0xaa, checks
    /// everything and returns the buffer and rsp.
    fn build_and_check(len: usize, top: u64, input: &StackInput<'_>) -> (Vec<u8>, u64) {
        let mut buf = vec![0xaa; len];
        let rsp = build(&mut buf, top, input).expect("fits");
        check(&buf, top, rsp, input);
        (buf, rsp)
    }

    fn check(buf: &[u8], top: u64, rsp: u64, input: &StackInput<'_>) {
        let base = top - buf.len() as u64;
        assert_eq!(rsp % 16, 0, "rsp {rsp:#x} not 16-byte aligned");
        let p = parse_back(buf, top, rsp);
        let argv: Vec<&[u8]> = if input.argv.is_empty() {
            vec![b""]
        } else {
            input.argv.to_vec()
        };
        assert_eq!(p.argv, argv);
        assert_eq!(p.envp, input.envp);

        let random = aux(&p, AT_RANDOM).expect("AT_RANDOM");
        let execfn = aux(&p, AT_EXECFN).expect("AT_EXECFN");
        let mut expected_auxv = input.auxv.to_vec();
        expected_auxv.extend([(AT_RANDOM, random), (AT_EXECFN, execfn)]);
        if !input.platform.is_empty() {
            let platform = aux(&p, AT_PLATFORM).expect("AT_PLATFORM");
            assert_eq!(cstr(buf, base, platform), input.platform);
            expected_auxv.push((AT_PLATFORM, platform));
            assert!(random + 16 <= platform);
        }
        expected_auxv.push((AT_NULL, 0));
        assert_eq!(p.auxv, expected_auxv);
        let r = usize::try_from(random - base).unwrap();
        assert_eq!(buf[r..r + 16], input.random);
        assert_eq!(cstr(buf, base, execfn), input.execfn);

        // Padding between the auxv and the random bytes is zero and short.
        let pad = usize::try_from(p.auxv_end - base).unwrap()..r;
        assert!(pad.len() < 16, "{pad:?}");
        assert!(buf[pad].iter().all(|&b| b == 0));
        // Strings: argv then envp, contiguous, then execfn, then 8 zero bytes.
        let mut expect = Vec::new();
        for s in argv.iter().chain(input.envp) {
            expect.extend_from_slice(s);
            expect.push(0);
        }
        expect.extend_from_slice(input.execfn);
        expect.push(0);
        expect.extend_from_slice(&[0; 8]);
        assert_eq!(buf[buf.len() - expect.len()..], expect[..]);
        // Below rsp nothing is touched.
        let below = usize::try_from(rsp - base).unwrap();
        assert!(buf[..below].iter().all(|&b| b == 0xaa));
    }

    fn sample_auxv() -> Vec<(u64, u64)> {
        vec![
            (AT_SYSINFO_EHDR, 0x7fff_f7ff_d000),
            (AT_MINSIGSTKSZ, 3632),
            (AT_HWCAP, 0x178b_fbff),
            (AT_PAGESZ, 4096),
            (AT_CLKTCK, 100),
            (AT_PHDR, 0x40_0040),
            (AT_PHENT, 56),
            (AT_PHNUM, 10),
            (AT_BASE, 0),
            (AT_FLAGS, 0),
            (AT_ENTRY, 0x40_ebf0),
            (AT_UID, 0),
            (AT_EUID, 0),
            (AT_GID, 0),
            (AT_EGID, 0),
            (AT_SECURE, 0),
            (AT_HWCAP2, 2),
        ]
    }

    fn input<'a>(
        argv: &'a [&'a [u8]],
        envp: &'a [&'a [u8]],
        auxv: &'a [(u64, u64)],
    ) -> StackInput<'a> {
        StackInput {
            argv,
            envp,
            auxv,
            random: RANDOM,
            execfn: b"/bin/busybox",
            platform: b"x86_64",
        }
    }

    #[test]
    fn builds_what_linux_builds() {
        let auxv = sample_auxv();
        let argv: &[&[u8]] = &[b"busybox", b"sh", b"-c", b"echo hi"];
        let envp: &[&[u8]] = &[b"PATH=/bin:/usr/bin", b"HOME=/root"];
        let (buf, rsp) = build_and_check(4096, TOP, &input(argv, envp, &auxv));
        assert_eq!(word(&buf, TOP - 4096, rsp), 4);
    }

    #[test]
    fn any_stack_top_and_count_gives_an_aligned_rsp() {
        let auxv = sample_auxv();
        let strings: &[&[u8]] = &[b"a", b"bc", b"def", b"", b"ghij"];
        for top in [TOP, TOP - 1, TOP - 7, TOP - 8, TOP - 15, 0x1_0000] {
            for argc in 0..=strings.len() {
                for envc in 0..=strings.len() {
                    for platform in [&b"x86_64"[..], b""] {
                        let input = StackInput {
                            platform,
                            ..input(&strings[..argc], &strings[..envc], &auxv)
                        };
                        build_and_check(1024, top, &input);
                    }
                }
            }
        }
    }

    #[test]
    fn empty_argv_becomes_one_empty_string() {
        let (buf, rsp) = build_and_check(512, TOP, &input(&[], &[], &[]));
        assert_eq!(word(&buf, TOP - 512, rsp), 1);
    }

    #[test]
    fn too_small_buffers_are_too_big_errors() {
        let auxv = sample_auxv();
        let argv: &[&[u8]] = &[b"prog", b"arg"];
        let envp: &[&[u8]] = &[b"A=1"];
        let input = input(argv, envp, &auxv);
        let mut fits = None;
        for len in 0..2048 {
            let mut buf = vec![0xaa; len];
            match build(&mut buf, TOP, &input) {
                Ok(rsp) => {
                    check(&buf, TOP, rsp, &input);
                    fits.get_or_insert(len);
                }
                Err(e) => {
                    assert_eq!(e, StackError::TooBig);
                    assert!(fits.is_none(), "fit at {fits:?} but not at {len}");
                }
            }
        }
        // Words, random bytes, "x86_64", argv+envp, execfn, end marker;
        // TOP is 16-aligned so the padding rounds the sum up to 16.
        let min = fits.expect("fits in 2 KiB");
        let words = 1 + 3 + 2 + 2 * (auxv.len() + 4);
        assert_eq!(min, (8 * words + 16 + 7 + 13 + 13 + 8).next_multiple_of(16));
    }

    #[test]
    fn argument_cap() {
        let big = vec![b'x'; MAX_ARG_BYTES - 2 * 8 - 2];
        let mut buf = vec![0; MAX_ARG_BYTES + 4096];
        let ok: &[&[u8]] = &[&big, b""];
        build_and_check(buf.len(), TOP, &input(ok, &[], &[]));
        let over: &[&[u8]] = &[&big, b"y"];
        let err = build(&mut buf, TOP, &input(over, &[], &[]));
        assert_eq!(err, Err(StackError::TooBig));
        let err = build(&mut buf, TOP, &input(&[b"prog"], over, &[]));
        assert_eq!(err, Err(StackError::TooBig));
    }

    #[test]
    fn rejects_bad_input() {
        let mut buf = vec![0; 4096];
        let nul: &[&[u8]] = &[b"a\0b"];
        assert_eq!(
            build(&mut buf, TOP, &input(nul, &[], &[])),
            Err(StackError::InteriorNul)
        );
        assert_eq!(
            build(&mut buf, TOP, &input(&[b"a"], nul, &[])),
            Err(StackError::InteriorNul)
        );
        let bad_execfn = StackInput {
            execfn: b"/bin/\0",
            ..input(&[], &[], &[])
        };
        assert_eq!(
            build(&mut buf, TOP, &bad_execfn),
            Err(StackError::InteriorNul)
        );
        for key in [AT_NULL, AT_RANDOM, AT_EXECFN, AT_PLATFORM] {
            let auxv = [(AT_PAGESZ, 4096), (key, 1)];
            assert_eq!(
                build(&mut buf, TOP, &input(&[], &[], &auxv)),
                Err(StackError::ReservedAuxv(key))
            );
        }
        assert_eq!(
            build(&mut buf, 4095, &input(&[], &[], &[])),
            Err(StackError::BadStackTop)
        );
        // The lowest possible stack works down to address 0.
        build_and_check(4096, 4096, &input(&[b"a"], &[], &[]));
    }

    fn strings() -> impl Strategy<Value = Vec<Vec<u8>>> {
        proptest::collection::vec(proptest::collection::vec(1u8..=255, 0..40), 0..20)
    }

    proptest! {
        #[test]
        fn random_stacks_read_back(
            argv in strings(),
            envp in strings(),
            auxv in proptest::collection::vec((32u64..64, any::<u64>()), 0..24),
            random in any::<[u8; 16]>(),
            execfn in proptest::collection::vec(1u8..=255, 0..64),
            top_offset in 0u64..64,
            len in 0usize..3000,
        ) {
            let argv: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
            let envp: Vec<&[u8]> = envp.iter().map(Vec::as_slice).collect();
            let input = StackInput {
                argv: &argv,
                envp: &envp,
                auxv: &auxv,
                random,
                execfn: &execfn,
                platform: b"x86_64",
            };
            let top = TOP - top_offset;
            let mut buf = vec![0xaa; len];
            match build(&mut buf, top, &input) {
                Ok(rsp) => check(&buf, top, rsp, &input),
                Err(e) => {
                    prop_assert_eq!(e, StackError::TooBig);
                    // It does fit a buffer of the size its parts add up to.
                    let mut big = vec![0xaa; 8192];
                    let rsp = build(&mut big, top, &input).expect("fits 8 KiB");
                    prop_assert!(top - rsp > len as u64);
                }
            }
        }
    }
}
