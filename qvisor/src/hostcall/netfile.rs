//! `NetFile`: the sandbox's `/proc/net` files (`dev`, `route`, `tcp`,
//! `udp`, `unix` ...). The guest's sockets are host sockets in the sandbox
//! process's network namespace, so the host's files for that namespace
//! (`/proc/self/net/`: an OCI sandbox process's root has only its own
//! `/proc/self`, no `/proc/thread-self`) list exactly them, as Linux
//! lists a container's. One thing is rewritten: in `unix`, a socket bound to a
//! path is shown with the name the program bound (the host's path holds
//! the rootfs's location), and sockets named outside the sandbox (the
//! host's, when the sandbox shares the host's namespace, and the VMM's own
//! control socket) are left out.

use qlib::io_abi::SockAddr;
use qlib::netinfo::{NET_FILE_MAX, NET_FILES};

use super::HostCalls;
use super::sys::err;

/// `sun_path`'s offset in `struct sockaddr_un`.
const PATH_AT: usize = 2;

impl HostCalls<'_> {
    /// `NetFile`: writes `/proc/net` file number `which` at `out` (at most
    /// `cap` bytes, whole lines); returns the bytes written.
    pub(super) fn net_file(&mut self, which: u64, out: u64, cap: u64) -> i64 {
        let Some(name) = usize::try_from(which).ok().and_then(|i| NET_FILES.get(i)) else {
            return err(libc::EINVAL);
        };
        let Ok(text) = std::fs::read(format!("/proc/self/net/{name}")) else {
            return err(libc::ENOENT);
        };
        let text = if *name == "unix" {
            self.unix_table(&text)
        } else {
            text
        };
        let cap = usize::try_from(cap).unwrap_or(usize::MAX).min(NET_FILE_MAX);
        let text = whole_lines(&text, cap);
        match self.ram.write_bytes(out, text) {
            Ok(()) => text.len() as i64,
            Err(_) => err(libc::EFAULT),
        }
    }

    /// `/proc/net/unix` with the sandbox's names (see the module doc).
    fn unix_table(&self, text: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(text.len());
        for (i, line) in text.split_inclusive(|&b| b == b'\n').enumerate() {
            // Columns: Num RefCount Protocol Flags Type St Inode [Path].
            let body = line.strip_suffix(b"\n").unwrap_or(line);
            let (head, path) = after_fields(body, 7);
            if i == 0 || path.is_empty() {
                out.extend_from_slice(line);
                continue;
            }
            let Some(shown) = self.sandbox_unix_name(path) else {
                continue;
            };
            out.extend_from_slice(head);
            out.extend_from_slice(&shown);
            out.push(b'\n');
        }
        out
    }

    /// The name to show for host `AF_UNIX` name `path` (`@` for abstract),
    /// or `None` when it is not one of the sandbox's.
    fn sandbox_unix_name(&self, path: &[u8]) -> Option<Vec<u8>> {
        let abstract_name = path.strip_prefix(b"@");
        let mut addr = SockAddr::default();
        let family = (libc::AF_UNIX as u16).to_ne_bytes();
        addr.bytes[..PATH_AT].copy_from_slice(&family);
        let name = abstract_name.unwrap_or(path);
        let at = PATH_AT + usize::from(abstract_name.is_some());
        if at + name.len() > addr.bytes.len() {
            return None;
        }
        addr.bytes[at..at + name.len()].copy_from_slice(name);
        addr.len = (at + name.len()) as u32;
        let guest = self.guest_unix_name(addr);
        let n = (guest.len as usize).min(guest.bytes.len());
        if guest.len == addr.len && guest.bytes[..n] == addr.bytes[..n] {
            // Not rewritten: the sandbox's only when abstract names are
            // shared with the host as they are (no tag to strip).
            let shared = matches!(self.abstract_names, super::AbstractNames::Shared);
            return (abstract_name.is_some() && shared).then(|| path.to_vec());
        }
        let g = &guest.bytes[PATH_AT..n];
        Some(match g.strip_prefix(&[0]) {
            Some(abs) => [b"@".as_slice(), abs].concat(),
            None => g.split(|&b| b == 0).next().unwrap_or_default().to_vec(),
        })
    }
}

/// `line` split after its first `n` space-separated fields and the space
/// that follows them: (those fields, the rest).
fn after_fields(line: &[u8], n: usize) -> (&[u8], &[u8]) {
    let mut at = 0;
    for _ in 0..n {
        while line.get(at) == Some(&b' ') {
            at += 1;
        }
        while line.get(at).is_some_and(|&b| b != b' ') {
            at += 1;
        }
    }
    match line.get(at) {
        Some(b' ') => (&line[..=at], &line[at + 1..]),
        _ => (line, &[]),
    }
}

/// The longest prefix of `text` of at most `cap` bytes that ends a line.
fn whole_lines(text: &[u8], cap: usize) -> &[u8] {
    if text.len() <= cap {
        return text;
    }
    match text[..cap].iter().rposition(|&b| b == b'\n') {
        Some(end) => &text[..=end],
        None => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_lines_split_at_the_path() {
        let l = b"0000000000000000: 00000002 00000000 00010000 0001 01    42 /run/x.sock";
        let (head, path) = after_fields(l, 7);
        assert_eq!(path, b"/run/x.sock");
        assert_eq!(head.len() + path.len(), l.len());
        let l = b"0000000000000000: 00000003 00000000 00000000 0001 03 12345";
        assert_eq!(after_fields(l, 7), (l.as_slice(), b"".as_slice()));
    }

    #[test]
    fn lines_are_cut_whole() {
        assert_eq!(whole_lines(b"ab\ncd\n", 100), b"ab\ncd\n");
        assert_eq!(whole_lines(b"ab\ncd\n", 5), b"ab\n");
        assert_eq!(whole_lines(b"abcdef", 3), b"");
    }
}
