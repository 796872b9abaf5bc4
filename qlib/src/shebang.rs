//! `#!` scripts, parsed as Linux's `binfmt_script` does: the first
//! [`HEAD_SIZE`] bytes of the file hold `#!`, optional spaces or tabs, the
//! interpreter path, and optionally one argument (the rest of the line,
//! spaces and tabs trimmed at both ends, inner ones kept). The line ends at
//! a newline or at the end of those bytes; without a newline, an
//! interpreter path that runs to the end could be cut off and the file is
//! not taken as a script.

/// Bytes of the file Linux looks at (`BINPRM_BUF_SIZE`).
pub const HEAD_SIZE: usize = 256;

/// `#!` rewrites one exec may go through (a script whose interpreter is a
/// script ...) before it fails with `ELOOP`, as Linux's
/// `BINPRM_MAX_RECURSION` + 1.
pub const MAX_NESTING: usize = 5;

/// A parsed `#!` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shebang<'a> {
    /// The interpreter path.
    pub interp: &'a [u8],
    /// Its one optional argument.
    pub arg: Option<&'a [u8]>,
}

fn spacetab(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

fn terminator(b: u8) -> bool {
    spacetab(b) || b == 0
}

/// The `#!` line of a file starting with `head` (the whole file or at
/// least its first [`HEAD_SIZE`] bytes); `None` if it is not a script.
pub fn parse(head: &[u8]) -> Option<Shebang<'_>> {
    // Linux's buffer is zero-padded and its last byte is never used.
    let buf = &head[..head.len().min(HEAD_SIZE - 1)];
    if !buf.starts_with(b"#!") {
        return None;
    }
    let end = match buf.iter().position(|&b| b == b'\n') {
        Some(nl) => nl,
        None if head.len() < HEAD_SIZE => buf.len(),
        None => {
            // The path must be followed by a terminator inside the buffer.
            let name = 2 + buf[2..].iter().position(|&b| !spacetab(b))?;
            buf[name..].iter().position(|&b| terminator(b))?;
            buf.len()
        }
    };
    let line = &buf[2..end];
    let line = &line[..line.len() - line.iter().rev().take_while(|&&b| spacetab(b)).count()];
    let start = line.iter().position(|&b| !spacetab(b))?;
    let line = &line[start..];
    let (interp, arg) = match line.iter().position(|&b| terminator(b)) {
        None => (line, None),
        Some(sep) if line[sep] == 0 => (&line[..sep], None),
        Some(sep) => {
            let rest = &line[sep..];
            let arg = rest.iter().position(|&b| !spacetab(b)).map(|a| &rest[a..]);
            // A NUL ends the argument, as it ends a C string.
            let arg = arg.map(|a| &a[..a.iter().position(|&b| b == 0).unwrap_or(a.len())]);
            (&line[..sep], arg)
        }
    };
    Some(Shebang { interp, arg })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sb(s: &[u8]) -> Option<(&[u8], Option<&[u8]>)> {
        parse(s).map(|x| (x.interp, x.arg))
    }

    #[test]
    fn common_forms() {
        assert_eq!(sb(b"#!/bin/sh\necho"), Some((&b"/bin/sh"[..], None)));
        assert_eq!(
            sb(b"#! /bin/sh -e \n"),
            Some((&b"/bin/sh"[..], Some(&b"-e"[..])))
        );
        assert_eq!(
            sb(b"#!/usr/bin/env python3 -u\n"),
            Some((&b"/usr/bin/env"[..], Some(&b"python3 -u"[..])))
        );
        assert_eq!(sb(b"#!/bin/sh"), Some((&b"/bin/sh"[..], None)));
        assert_eq!(sb(b"#!sh\t-x\n"), Some((&b"sh"[..], Some(&b"-x"[..]))));
    }

    #[test]
    fn not_scripts() {
        assert_eq!(sb(b""), None);
        assert_eq!(sb(b"#"), None);
        assert_eq!(sb(b"\x7fELF"), None);
        assert_eq!(sb(b"#!\n/bin/sh"), None);
        assert_eq!(sb(b"#!   \t \n"), None);
        // No newline in the first 255 bytes and the path runs to the end.
        let mut long = b"#!/".to_vec();
        long.resize(300, b'a');
        assert_eq!(sb(&long), None);
        // ... but a path followed by a blank is kept.
        let mut ok = b"#!/bin/sh ".to_vec();
        ok.resize(300, b'x');
        let got = parse(&ok).expect("a script");
        assert_eq!(got.interp, b"/bin/sh");
        assert_eq!(got.arg.map(<[u8]>::len), Some(255 - 10));
    }
}
