//! `AF_UNIX` addresses between the guest and the host.
//!
//! Path names resolve inside the rootfs with the same rules as files
//! (`openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)`) and reach the host
//! as `/proc/self/fd` paths:
//!
//! - `bind` makes a new name: its directory is opened in-root and the
//!   socket is bound at `/proc/self/fd/D/NAME` (a final symlink is not
//!   followed, as on Linux: the bind fails with `EADDRINUSE`).
//! - `connect` and `sendto` name an existing socket, through symlinks too:
//!   the socket itself is opened `O_PATH` in-root and reached as
//!   `/proc/self/fd/S`, so no symlink is ever followed by the host's
//!   resolution.
//!
//! Abstract names (`\0name`) live in the network namespace. A sandbox that
//! shares the host's ([`AbstractNames::Private`]) gets a namespace of its
//! own: each name is prefixed with a random tag of the sandbox, so its own
//! sockets meet and nothing outside (the host, other sandboxes) is named.

use std::os::fd::{AsRawFd, OwnedFd};

use qlib::io_abi::SockAddr;

use super::HostCalls;
use super::sys::err;
use crate::rootfs::SpecialName;

/// `sizeof(struct sockaddr_un)`.
const SUN_LEN: usize = 110;
/// Where `sun_path` starts.
const PATH_AT: usize = 2;

/// What the address is for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Use {
    /// A new name (`bind`).
    Bind,
    /// An existing socket (`connect`, `sendto`).
    Connect,
}

/// How abstract names are seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AbstractNames {
    /// As they are: the sandbox has a network namespace of its own.
    Shared,
    /// Behind this tag: the sandbox shares the host's network namespace.
    Private(Vec<u8>),
}

impl AbstractNames {
    /// A private namespace with a fresh random tag.
    pub fn private() -> Self {
        let mut raw = [0u8; 8];
        // SAFETY: getrandom writes at most `raw.len()` bytes into `raw`.
        let n = unsafe { libc::getrandom(raw.as_mut_ptr().cast(), raw.len(), 0) };
        if n != raw.len() as isize {
            // Never short for 8 bytes; fall back on the clock and pid.
            let t = super::monotonic_ns() ^ (u64::from(std::process::id()) << 32);
            raw = t.to_ne_bytes();
        }
        let mut tag: Vec<u8> = raw
            .iter()
            .flat_map(|b| format!("{b:02x}").into_bytes())
            .collect();
        tag.push(b'/');
        Self::Private(tag)
    }

    /// For an autobind (`bind` with an empty address): a name as Linux
    /// picks (five hex digits) behind the tag, `None` when not private.
    fn autobind(&self) -> Option<Vec<u8>> {
        let Self::Private(tag) = self else {
            return None;
        };
        let mut raw = [0u8; 4];
        // SAFETY: getrandom writes at most `raw.len()` bytes into `raw`.
        unsafe { libc::getrandom(raw.as_mut_ptr().cast(), raw.len(), 0) };
        let n = (u32::from_ne_bytes(raw) ^ super::monotonic_ns() as u32) & 0xf_ffff;
        let mut out = tag.clone();
        out.extend_from_slice(format!("{n:05x}").as_bytes());
        Some(out)
    }

    /// The host name of the guest's abstract name `name` (without its
    /// leading NUL), at most `SUN_LEN - 3` bytes.
    fn host(&self, name: &[u8]) -> Vec<u8> {
        let Self::Private(tag) = self else {
            return name.to_vec();
        };
        let room = SUN_LEN - PATH_AT - 1;
        let mut out = tag.clone();
        if tag.len() + name.len() <= room {
            out.extend_from_slice(name);
        } else {
            // Too long with the tag: keep a head and a hash of the whole
            // name (the guest's name is given back through `unix_names`).
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            name.hash(&mut h);
            let hash = format!("{:016x}", h.finish());
            let head = room - tag.len() - hash.len();
            out.extend_from_slice(&name[..head]);
            out.extend_from_slice(hash.as_bytes());
        }
        out
    }

    /// The guest's name for the host's abstract name `name`, when it is
    /// one of this namespace's (its tag stripped).
    fn guest<'n>(&self, name: &'n [u8]) -> Option<&'n [u8]> {
        match self {
            Self::Shared => Some(name),
            Self::Private(tag) => name.strip_prefix(tag.as_slice()),
        }
    }
}

/// A host address and what keeps it valid (the fd its path names).
pub(super) struct HostAddr {
    pub addr: SockAddr,
    /// The name as the program gave it (a relative path stays relative):
    /// what `getsockname` reports after a `bind`.
    pub guest: SockAddr,
    /// Whether the name was rewritten (a path or a tagged abstract name).
    pub rewritten: bool,
    /// A random autobind name of a private namespace: if taken, try again.
    pub autobind: bool,
    _keep: Option<OwnedFd>,
}

fn abstract_addr(family: [u8; 2], name: &[u8]) -> SockAddr {
    let mut h = SockAddr::default();
    h.bytes[..PATH_AT].copy_from_slice(&family);
    h.bytes[PATH_AT + 1..PATH_AT + 1 + name.len()].copy_from_slice(name);
    h.len = (PATH_AT + 1 + name.len()) as u32;
    h
}

/// `a` without the `a.pad` bytes the guest put before its path.
fn as_given(a: SockAddr) -> SockAddr {
    let pad = a.pad as usize;
    let len = a.len as usize;
    if pad == 0 || PATH_AT + pad >= len {
        return SockAddr { pad: 0, ..a };
    }
    let mut g = SockAddr::default();
    g.bytes[..PATH_AT].copy_from_slice(&a.bytes[..PATH_AT]);
    g.bytes[PATH_AT..len - pad].copy_from_slice(&a.bytes[PATH_AT + pad..len]);
    g.len = (len - pad) as u32;
    g
}

fn with_path(family: [u8; 2], host: &[u8]) -> Result<SockAddr, i64> {
    // The host path needs its NUL within `sun_path`.
    if PATH_AT + host.len() >= SUN_LEN {
        return Err(err(libc::ENAMETOOLONG));
    }
    let mut a = SockAddr::default();
    a.bytes[..PATH_AT].copy_from_slice(&family);
    a.bytes[PATH_AT..PATH_AT + host.len()].copy_from_slice(host);
    a.len = (PATH_AT + host.len() + 1) as u32;
    Ok(a)
}

impl HostCalls<'_> {
    /// The host address for the guest's `a` (a path up to the 128 bytes
    /// of `SockAddr`: the guest checked the program's length and may have
    /// put its cwd before a relative path); other families unchanged.
    pub(super) fn host_addr(&self, a: SockAddr, how: Use) -> Result<HostAddr, i64> {
        let same = |addr| HostAddr {
            addr,
            guest: addr,
            rewritten: false,
            autobind: false,
            _keep: None,
        };
        let family = [a.bytes[0], a.bytes[1]];
        let len = a.len as usize;
        if u16::from_ne_bytes(family) != libc::AF_UNIX as u16 {
            return Ok(same(a));
        }
        if len <= PATH_AT {
            // An autobind: in the host's namespace, a name behind the tag
            // (so that the sandbox's own sockets can reach it).
            return Ok(match (how, self.abstract_names.autobind()) {
                (Use::Bind, Some(name)) => HostAddr {
                    autobind: true,
                    ..same(abstract_addr(family, &name))
                },
                _ => same(a),
            });
        }
        let raw = &a.bytes[PATH_AT..len];
        if raw[0] == 0 {
            if len > SUN_LEN {
                return Err(err(libc::EINVAL));
            }
            let name = self.abstract_names.host(&raw[1..]);
            return Ok(HostAddr {
                addr: abstract_addr(family, &name),
                guest: a,
                rewritten: self.abstract_names != AbstractNames::Shared,
                autobind: false,
                _keep: None,
            });
        }
        let path = &raw[..raw.iter().position(|&b| b == 0).unwrap_or(raw.len())];
        let (host, keep) = match how {
            Use::Bind => {
                let parent = self.root.parent(path).map_err(|e| match e {
                    // `bind("/")`, `bind("dir/..")`: the name exists.
                    Ok(SpecialName::Dot | SpecialName::DotDot) => err(libc::EADDRINUSE),
                    Err(e) => err(e),
                })?;
                let mut host = format!("/proc/self/fd/{}/", parent.dir.as_raw_fd()).into_bytes();
                host.extend_from_slice(parent.name.as_bytes());
                (host, parent.dir)
            }
            Use::Connect => {
                let fd = self.root.object(path, false).map_err(err)?;
                let host = format!("/proc/self/fd/{}", fd.as_raw_fd()).into_bytes();
                (host, fd)
            }
        };
        Ok(HostAddr {
            addr: with_path(family, &host)?,
            guest: as_given(a),
            rewritten: true,
            autobind: false,
            _keep: Some(keep),
        })
    }

    /// An `AF_UNIX` address the host reports, as the guest named it: a
    /// path bound through [`Self::host_addr`] or an abstract name of the
    /// sandbox's. A tagged name of another namespace cannot occur (nobody
    /// in this sandbox can reach one); an untagged one (an autobind name)
    /// is reported as it is.
    pub(super) fn guest_unix_name(&self, addr: SockAddr) -> SockAddr {
        let n = (addr.len as usize).min(addr.bytes.len());
        let key = &addr.bytes[..n];
        // The host may report the path with or without its NUL.
        let with_nul = [key, &[0]].concat();
        if let Some(guest) = self
            .unix_names
            .get(key)
            .or_else(|| self.unix_names.get(&with_nul))
        {
            return *guest;
        }
        let family = u16::from_ne_bytes([addr.bytes[0], addr.bytes[1]]);
        if family != libc::AF_UNIX as u16 || n <= PATH_AT + 1 || addr.bytes[PATH_AT] != 0 {
            return addr;
        }
        match self.abstract_names.guest(&key[PATH_AT + 1..]) {
            Some(name) => abstract_addr([key[0], key[1]], name),
            None => addr,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_names_are_tagged_and_fit() {
        let p = AbstractNames::private();
        let AbstractNames::Private(tag) = &p else {
            panic!("not private");
        };
        assert_eq!(tag.len(), 17);
        assert_ne!(p, AbstractNames::private(), "tags are random");
        let short = p.host(b"name");
        assert_eq!(&short[..tag.len()], tag.as_slice());
        assert_eq!(p.guest(&short), Some(b"name".as_slice()));
        assert_eq!(p.guest(b"name"), None, "untagged names are not ours");
        let long = vec![b'x'; 107];
        let folded = p.host(&long);
        assert_eq!(folded.len(), SUN_LEN - 3);
        assert_ne!(folded, p.host(&[b'x'; 106]), "folding keeps names apart");
        assert_eq!(AbstractNames::Shared.host(b"name"), b"name");
        let auto = p.autobind().expect("private namespaces autobind");
        assert_eq!(auto.len(), tag.len() + 5);
        assert_eq!(p.guest(&auto).map(<[u8]>::len), Some(5));
        assert_eq!(AbstractNames::Shared.autobind(), None);
    }

    #[test]
    fn relative_names_are_given_back_as_given() {
        let mut a = SockAddr::default();
        let fam = (libc::AF_UNIX as u16).to_ne_bytes();
        a.bytes[..2].copy_from_slice(&fam);
        a.bytes[2..13].copy_from_slice(b"/cwd/r.sock");
        a.len = 13;
        a.pad = 5;
        let g = as_given(a);
        assert_eq!(&g.bytes[..g.len as usize], [&fam[..], b"r.sock"].concat());
        a.pad = 0;
        assert_eq!(as_given(a).len, 13);
    }

    #[test]
    fn host_paths_need_their_nul() {
        let fam = (libc::AF_UNIX as u16).to_ne_bytes();
        assert!(with_path(fam, &[b'a'; 107]).is_ok());
        assert_eq!(
            with_path(fam, &[b'a'; 108]).map(|a| a.len),
            Err(err(libc::ENAMETOOLONG))
        );
    }
}
