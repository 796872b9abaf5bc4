//! Signal names and numbers as `kill` accepts them: `9`, `KILL`, `SIGKILL`,
//! `sigkill`, and the real-time `RTMIN+N` / `SIGRTMAX-N` forms.

use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
#[error("unknown signal '{0}'")]
pub struct UnknownSignal(pub String);

pub const SIGKILL: i32 = 9;
pub const SIGCONT: i32 = 18;
pub const SIGSTOP: i32 = 19;
const SIGRTMIN: i32 = 34;
const SIGRTMAX: i32 = 64;

/// Linux x86-64 signal names, by number (index 0 unused).
const NAMES: [&str; 32] = [
    "", "HUP", "INT", "QUIT", "ILL", "TRAP", "ABRT", "BUS", "FPE", "KILL", "USR1", "SEGV", "USR2",
    "PIPE", "ALRM", "TERM", "STKFLT", "CHLD", "CONT", "STOP", "TSTP", "TTIN", "TTOU", "URG",
    "XCPU", "XFSZ", "VTALRM", "PROF", "WINCH", "IO", "PWR", "SYS",
];

/// Parses a signal; the result is in `1..=64`.
pub fn parse(s: &str) -> Result<i32, UnknownSignal> {
    let unknown = || UnknownSignal(s.to_owned());
    if let Ok(n) = s.parse::<i32>() {
        return if (1..=SIGRTMAX).contains(&n) && !(32..SIGRTMIN).contains(&n) {
            Ok(n)
        } else {
            Err(unknown())
        };
    }
    let upper = s.to_ascii_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    if let Some(n) = NAMES.iter().position(|n| !n.is_empty() && *n == name) {
        return i32::try_from(n).map_err(|_| unknown());
    }
    match name {
        "IOT" => return Ok(6),
        "POLL" => return Ok(29),
        "RTMIN" => return Ok(SIGRTMIN),
        "RTMAX" => return Ok(SIGRTMAX),
        _ => {}
    }
    let offset = |rest: &str| rest.parse::<i32>().ok().filter(|n| (0..=30).contains(n));
    if let Some(k) = name.strip_prefix("RTMIN+").and_then(offset) {
        return Ok(SIGRTMIN + k);
    }
    if let Some(k) = name.strip_prefix("RTMAX-").and_then(offset) {
        return Ok(SIGRTMAX - k);
    }
    Err(unknown())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers() {
        assert_eq!(parse("9"), Ok(9));
        assert_eq!(parse("KILL"), Ok(9));
        assert_eq!(parse("SIGTERM"), Ok(15));
        assert_eq!(parse("sigstop"), Ok(SIGSTOP));
        assert_eq!(parse("CONT"), Ok(SIGCONT));
        assert_eq!(parse("RTMIN+2"), Ok(36));
        assert_eq!(parse("SIGRTMAX-1"), Ok(63));
    }

    #[test]
    fn unknown_signals() {
        for s in ["0", "65", "33", "SIGFOO", "", "RTMIN+40", "-9"] {
            assert!(parse(s).is_err(), "{s}");
        }
    }
}
