//! Error messages as qrun prints them: the error and every source it
//! carries, on one line.
//!
//! The error enums here and in qvisor follow the house style: a message
//! does not repeat its `#[source]`. Whoever prints an error must therefore
//! print the chain, or the cause (ENOENT, ENOTDIR, ...) is lost; every
//! printing site in qrun goes through [`chain`].

use std::path::Path;

/// Longest path a Unix socket address holds (`sun_path` is 108 bytes with
/// the terminating NUL).
pub const MAX_SOCKET_PATH: usize = 107;

/// `e` and its sources, `a: b: c`, skipping a source whose text the
/// message already holds; control characters (a newline in a path or in a
/// config value quoted by a parser) are escaped so the result is one line.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut msg = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        let text = s.to_string();
        if !msg.contains(&text) {
            msg.push_str(": ");
            msg.push_str(&text);
        }
        src = s.source();
    }
    one_line(&msg)
}

/// `text` with control characters escaped (`\n`, `\u{1b}`, ...).
pub fn one_line(text: &str) -> String {
    if !text.chars().any(char::is_control) {
        return text.to_owned();
    }
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().collect()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Why `path` cannot be a Unix socket address, if it cannot: the kernel
/// (and Rust's std, "path must be shorter than SUN_LEN") refuse a longer
/// one; this names the limit.
pub fn socket_path_problem(path: &Path) -> Option<String> {
    let len = path.as_os_str().len();
    (len > MAX_SOCKET_PATH).then(|| {
        format!("path too long ({len} bytes; a Unix socket path holds at most {MAX_SOCKET_PATH})")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("rootfs {0}")]
    struct Outer(String, #[source] std::io::Error);

    #[test]
    fn the_cause_is_named() {
        let e = Outer(
            "/no/such".into(),
            std::io::Error::from_raw_os_error(libc::ENOENT),
        );
        assert_eq!(
            chain(&e),
            "rootfs /no/such: No such file or directory (os error 2)"
        );
    }

    #[test]
    fn one_line_escapes_control_characters() {
        assert_eq!(one_line("a\nb\u{0}c"), "a\\nb\\u{0}c");
        assert_eq!(one_line("plain"), "plain");
    }

    #[test]
    fn long_socket_paths() {
        assert!(socket_path_problem(Path::new("/run/x.sock")).is_none());
        let long = format!("/{}", "a".repeat(107));
        let msg = socket_path_problem(Path::new(&long)).expect("too long");
        assert!(msg.contains("path too long (108 bytes"), "{msg}");
    }
}
