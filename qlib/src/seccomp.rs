//! The container's seccomp filter (OCI `linux.seccomp`) as the guest
//! kernel applies it to the program's system calls.
//!
//! The program's syscalls never reach the host kernel: the guest kernel
//! serves them. So the OCI profile is enforced in the guest, before a
//! syscall is dispatched, with the kernel's semantics: of the rules that
//! match a call (its number, and every argument comparison of the rule),
//! the most restrictive action wins (the order the kernel ranks the
//! results of several filters); no match gives the default action. The
//! runtime compiles the profile (syscall names to x86-64 numbers) into the
//! binary form below; the VMM hands it to the guest in the boot data.
//!
//! # Format (little-endian, version 1)
//! ```text
//! header  16 bytes: magic "QSECCOMP" (u64), version u32 = 1, default action u32
//! rules   count x 160 bytes, sorted by syscall number:
//!           nr u32, action u32, nargs u32 (<= 6), reserved u32 (0),
//!           6 x { index u32 (< 6), op u32 (Op), value u64, value_two u64 }
//! ```
//! Actions are the kernel's `SECCOMP_RET_*` values (action in the top 16
//! bits, data such as the errno in the low 16). A reader accepts at most
//! [`MAX_RULES`] rules and refuses unknown actions and operators.

use core::cmp::Ordering;

/// `"QSECCOMP"` as a little-endian u64.
pub const MAGIC: u64 = u64::from_le_bytes(*b"QSECCOMP");
/// Format version.
pub const VERSION: u32 = 1;
/// Bytes of the header.
pub const HEADER: usize = 16;
/// Bytes of one rule.
pub const RULE: usize = 160;
/// Most rules a reader accepts.
pub const MAX_RULES: usize = 8192;

/// `SECCOMP_RET_KILL_PROCESS`.
pub const KILL_PROCESS: u32 = 0x8000_0000;
/// `SECCOMP_RET_KILL_THREAD`.
pub const KILL_THREAD: u32 = 0;
/// `SECCOMP_RET_TRAP`: SIGSYS.
pub const TRAP: u32 = 0x0003_0000;
/// `SECCOMP_RET_ERRNO`: the low 16 bits are the errno.
pub const ERRNO: u32 = 0x0005_0000;
/// `SECCOMP_RET_TRACE`: with no tracer, the call fails with `ENOSYS`.
pub const TRACE: u32 = 0x7ff0_0000;
/// `SECCOMP_RET_LOG`: allowed, and logged.
pub const LOG: u32 = 0x7ffc_0000;
/// `SECCOMP_RET_ALLOW`.
pub const ALLOW: u32 = 0x7fff_0000;

/// The action part of a result.
pub const fn action_kind(action: u32) -> u32 {
    action & 0xffff_0000
}

fn known_action(action: u32) -> bool {
    matches!(
        action_kind(action),
        KILL_PROCESS | KILL_THREAD | TRAP | ERRNO | TRACE | LOG | ALLOW
    )
}

/// Whether `a` is more restrictive than `b` (the kernel compares the
/// action parts as signed numbers: KILL_PROCESS first, ALLOW last).
pub fn more_restrictive(a: u32, b: u32) -> bool {
    (action_kind(a) as i32).cmp(&(action_kind(b) as i32)) == Ordering::Less
}

/// An argument comparison (`SCMP_CMP_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Op {
    /// `arg != value`.
    Ne = 1,
    /// `arg < value`.
    Lt = 2,
    /// `arg <= value`.
    Le = 3,
    /// `arg == value`.
    Eq = 4,
    /// `arg >= value`.
    Ge = 5,
    /// `arg > value`.
    Gt = 6,
    /// `arg & value == value_two`.
    MaskedEq = 7,
}

impl Op {
    fn from_u32(v: u32) -> Option<Op> {
        Some(match v {
            1 => Op::Ne,
            2 => Op::Lt,
            3 => Op::Le,
            4 => Op::Eq,
            5 => Op::Ge,
            6 => Op::Gt,
            7 => Op::MaskedEq,
            _ => return None,
        })
    }

    /// The OCI name (`SCMP_CMP_EQ` …).
    pub fn from_oci(name: &str) -> Option<Op> {
        Some(match name {
            "SCMP_CMP_NE" => Op::Ne,
            "SCMP_CMP_LT" => Op::Lt,
            "SCMP_CMP_LE" => Op::Le,
            "SCMP_CMP_EQ" => Op::Eq,
            "SCMP_CMP_GE" => Op::Ge,
            "SCMP_CMP_GT" => Op::Gt,
            "SCMP_CMP_MASKED_EQ" => Op::MaskedEq,
            _ => return None,
        })
    }

    fn holds(self, arg: u64, value: u64, value_two: u64) -> bool {
        match self {
            Op::Ne => arg != value,
            Op::Lt => arg < value,
            Op::Le => arg <= value,
            Op::Eq => arg == value,
            Op::Ge => arg >= value,
            Op::Gt => arg > value,
            Op::MaskedEq => arg & value == value_two,
        }
    }
}

/// One argument comparison of a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArgCmp {
    /// Argument index, 0..6.
    pub index: u32,
    pub op: Op,
    pub value: u64,
    pub value_two: u64,
}

/// Why a filter was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    #[error("seccomp filter: bad header")]
    Header,
    #[error("seccomp filter: size does not match its rule count")]
    Size,
    #[error("seccomp filter: more than {MAX_RULES} rules")]
    TooManyRules,
    #[error("seccomp filter: unknown action {0:#x}")]
    Action(u32),
    #[error("seccomp filter: bad argument comparison")]
    Arg,
    #[error("seccomp filter: rules not sorted by syscall number")]
    Order,
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from(u32_at(b, o)) | (u64::from(u32_at(b, o + 4)) << 32)
}

/// A checked filter over its encoded bytes.
#[derive(Debug, Clone, Copy)]
pub struct Filter<'a> {
    default: u32,
    rules: &'a [u8],
}

impl<'a> Filter<'a> {
    /// Checks `bytes` (the format in the module doc).
    pub fn parse(bytes: &'a [u8]) -> Result<Filter<'a>, FilterError> {
        if bytes.len() < HEADER || u64_at(bytes, 0) != MAGIC || u32_at(bytes, 8) != VERSION {
            return Err(FilterError::Header);
        }
        let default = u32_at(bytes, 12);
        if !known_action(default) {
            return Err(FilterError::Action(default));
        }
        let rules = &bytes[HEADER..];
        if !rules.len().is_multiple_of(RULE) {
            return Err(FilterError::Size);
        }
        if rules.len() / RULE > MAX_RULES {
            return Err(FilterError::TooManyRules);
        }
        let mut last = 0;
        for rule in rules.chunks_exact(RULE) {
            let (nr, action, nargs) = (u32_at(rule, 0), u32_at(rule, 4), u32_at(rule, 8));
            if nr < last {
                return Err(FilterError::Order);
            }
            last = nr;
            if !known_action(action) {
                return Err(FilterError::Action(action));
            }
            if nargs > 6 || u32_at(rule, 12) != 0 {
                return Err(FilterError::Arg);
            }
            for i in 0..nargs as usize {
                let a = 16 + i * 24;
                if u32_at(rule, a) >= 6 || Op::from_u32(u32_at(rule, a + 4)).is_none() {
                    return Err(FilterError::Arg);
                }
            }
        }
        Ok(Filter { default, rules })
    }

    /// The default action.
    pub fn default_action(&self) -> u32 {
        self.default
    }

    fn rule(&self, i: usize) -> &'a [u8] {
        &self.rules[i * RULE..(i + 1) * RULE]
    }

    fn count(&self) -> usize {
        self.rules.len() / RULE
    }

    /// The action for syscall `nr` with `args`.
    pub fn evaluate(&self, nr: u64, args: &[u64; 6]) -> u32 {
        let Ok(nr) = u32::try_from(nr) else {
            return self.default;
        };
        // First rule for `nr` (rules are sorted by number).
        let (mut lo, mut hi) = (0, self.count());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if u32_at(self.rule(mid), 0) < nr {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let mut found: Option<u32> = None;
        for i in lo..self.count() {
            let rule = self.rule(i);
            if u32_at(rule, 0) != nr {
                break;
            }
            let matches = (0..u32_at(rule, 8) as usize).all(|k| {
                let a = 16 + k * 24;
                let arg = args[u32_at(rule, a) as usize];
                Op::from_u32(u32_at(rule, a + 4))
                    .is_some_and(|op| op.holds(arg, u64_at(rule, a + 8), u64_at(rule, a + 16)))
            });
            let action = u32_at(rule, 4);
            if matches && found.is_none_or(|f| more_restrictive(action, f)) {
                found = Some(action);
            }
        }
        found.unwrap_or(self.default)
    }
}

/// A rule to encode.
#[cfg(feature = "std")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub nr: u32,
    pub action: u32,
    pub args: Vec<ArgCmp>,
}

/// Encodes a filter (rules in any order; at most 6 comparisons each).
#[cfg(feature = "std")]
pub fn encode(default: u32, rules: &[Rule]) -> Result<Vec<u8>, FilterError> {
    if !known_action(default) {
        return Err(FilterError::Action(default));
    }
    if rules.len() > MAX_RULES {
        return Err(FilterError::TooManyRules);
    }
    let mut sorted: Vec<&Rule> = rules.iter().collect();
    sorted.sort_by_key(|r| r.nr);
    let mut out = Vec::with_capacity(HEADER + rules.len() * RULE);
    out.extend_from_slice(&MAGIC.to_le_bytes());
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&default.to_le_bytes());
    for r in sorted {
        if !known_action(r.action) {
            return Err(FilterError::Action(r.action));
        }
        if r.args.len() > 6 || r.args.iter().any(|a| a.index >= 6) {
            return Err(FilterError::Arg);
        }
        let start = out.len();
        out.extend_from_slice(&r.nr.to_le_bytes());
        out.extend_from_slice(&r.action.to_le_bytes());
        out.extend_from_slice(&(r.args.len() as u32).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        for a in &r.args {
            out.extend_from_slice(&a.index.to_le_bytes());
            out.extend_from_slice(&(a.op as u32).to_le_bytes());
            out.extend_from_slice(&a.value.to_le_bytes());
            out.extend_from_slice(&a.value_two.to_le_bytes());
        }
        out.resize(start + RULE, 0);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmp(index: u32, op: Op, value: u64, value_two: u64) -> ArgCmp {
        ArgCmp {
            index,
            op,
            value,
            value_two,
        }
    }

    fn rule(nr: u32, action: u32, args: Vec<ArgCmp>) -> Rule {
        Rule { nr, action, args }
    }

    #[test]
    fn default_applies_without_a_match() {
        let bytes = encode(ERRNO | 1, &[rule(39, ALLOW, vec![])]).unwrap();
        let f = Filter::parse(&bytes).unwrap();
        assert_eq!(f.evaluate(39, &[0; 6]), ALLOW);
        assert_eq!(f.evaluate(40, &[0; 6]), ERRNO | 1);
        assert_eq!(f.evaluate(u64::MAX, &[0; 6]), ERRNO | 1);
    }

    #[test]
    fn the_most_restrictive_matching_rule_wins() {
        // Docker's profile: socket allowed, but not AF_VSOCK (40).
        let bytes = encode(
            ERRNO | 1,
            &[
                rule(41, ERRNO | 97, vec![cmp(0, Op::Eq, 40, 0)]),
                rule(41, ALLOW, vec![]),
            ],
        )
        .unwrap();
        let f = Filter::parse(&bytes).unwrap();
        assert_eq!(f.evaluate(41, &[2, 1, 0, 0, 0, 0]), ALLOW);
        assert_eq!(f.evaluate(41, &[40, 1, 0, 0, 0, 0]), ERRNO | 97);
    }

    #[test]
    fn every_comparison_of_a_rule_must_hold() {
        let args = vec![cmp(0, Op::MaskedEq, 0xff, 0x08), cmp(2, Op::Lt, 10, 0)];
        let bytes = encode(KILL_PROCESS, &[rule(135, ALLOW, args)]).unwrap();
        let f = Filter::parse(&bytes).unwrap();
        assert_eq!(f.evaluate(135, &[0x108, 0, 9, 0, 0, 0]), ALLOW);
        assert_eq!(f.evaluate(135, &[0x109, 0, 9, 0, 0, 0]), KILL_PROCESS);
        assert_eq!(f.evaluate(135, &[0x108, 0, 10, 0, 0, 0]), KILL_PROCESS);
        for (op, arg, want) in [
            (Op::Ne, 5, false),
            (Op::Le, 5, true),
            (Op::Ge, 4, false),
            (Op::Gt, 6, true),
        ] {
            let bytes = encode(TRAP, &[rule(1, ALLOW, vec![cmp(1, op, 5, 0)])]).unwrap();
            let f = Filter::parse(&bytes).unwrap();
            assert_eq!(
                f.evaluate(1, &[0, arg, 0, 0, 0, 0]) == ALLOW,
                want,
                "{op:?}"
            );
        }
    }

    #[test]
    fn ranking_follows_the_kernel() {
        let order = [
            KILL_PROCESS,
            KILL_THREAD,
            TRAP,
            ERRNO | 5,
            TRACE,
            LOG,
            ALLOW,
        ];
        for w in order.windows(2) {
            assert!(more_restrictive(w[0], w[1]), "{:#x} vs {:#x}", w[0], w[1]);
            assert!(!more_restrictive(w[1], w[0]));
        }
    }

    #[test]
    fn bad_filters_are_refused() {
        let good = encode(ALLOW, &[rule(1, ERRNO | 1, vec![cmp(0, Op::Eq, 1, 0)])]).unwrap();
        assert!(Filter::parse(&good).is_ok());
        assert_eq!(Filter::parse(&good[..10]).unwrap_err(), FilterError::Header);
        assert_eq!(
            Filter::parse(&good[..good.len() - 1]).unwrap_err(),
            FilterError::Size
        );
        let mut bad = good.clone();
        bad[HEADER + 4..HEADER + 8].copy_from_slice(&0x1234_0000u32.to_le_bytes());
        assert_eq!(
            Filter::parse(&bad).unwrap_err(),
            FilterError::Action(0x1234_0000)
        );
        let mut bad = good.clone();
        bad[HEADER + 16..HEADER + 20].copy_from_slice(&6u32.to_le_bytes());
        assert_eq!(Filter::parse(&bad).unwrap_err(), FilterError::Arg);
        let mut bad = good.clone();
        bad[HEADER + 20..HEADER + 24].copy_from_slice(&9u32.to_le_bytes());
        assert_eq!(Filter::parse(&bad).unwrap_err(), FilterError::Arg);
        let two = encode(ALLOW, &[rule(2, TRAP, vec![]), rule(1, TRAP, vec![])]).unwrap();
        let mut swapped = two.clone();
        swapped[HEADER..HEADER + RULE].copy_from_slice(&two[HEADER + RULE..]);
        swapped[HEADER + RULE..].copy_from_slice(&two[HEADER..HEADER + RULE]);
        assert_eq!(Filter::parse(&swapped).unwrap_err(), FilterError::Order);
        assert!(encode(0x1234_0000, &[]).is_err());
        assert!(encode(ALLOW, &[rule(1, ALLOW, vec![cmp(7, Op::Eq, 0, 0)])]).is_err());
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..700)) {
            let mut b = bytes;
            if b.len() >= 16 {
                b[..8].copy_from_slice(&MAGIC.to_le_bytes());
                b[8..12].copy_from_slice(&VERSION.to_le_bytes());
            }
            if let Ok(f) = Filter::parse(&b) {
                let _ = f.evaluate(1, &[1, 2, 3, 4, 5, 6]);
            }
        }
    }
}
