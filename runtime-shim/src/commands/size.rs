//! Memory sizes on the command line: `256M`, `1G`, `65536K`, bytes.

/// Parses a size such as `256M` or `1073741824`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (digits, mult) = match s.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let mult = match c.to_ascii_uppercase() {
                'K' => 1u64 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                _ => return Err(format!("bad size '{s}': unknown unit '{c}'")),
            };
            (&s[..i], mult)
        }
        _ => (s, 1),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("bad size '{s}': expected a number with K, M or G"))?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("bad size '{s}': too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse_size("256M"), Ok(256 << 20));
        assert_eq!(parse_size("1g"), Ok(1 << 30));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("12Q").is_err());
        assert!(parse_size("M").is_err());
        assert!(parse_size("99999999999999G").is_err());
    }
}
