//! Control messages (`struct cmsghdr` lists) as `sendmsg` takes them and
//! `recvmsg` returns them, and what the VMM lets a sandbox pass to the
//! host's `sendmsg` (docs/ancillary-data.md).
//!
//! Layout (x86-64 Linux): each message is a 16-byte header (`cmsg_len`
//! u64 = header + data bytes, `cmsg_level` i32, `cmsg_type` i32), its data,
//! and padding to 8 bytes before the next one. [`Walk::send`] reads a
//! buffer with the kernel's own rules for `sendmsg` (`for_each_cmsghdr`
//! with `CMSG_OK`): a buffer shorter than a header holds nothing, a
//! header whose length is under 16 or runs past the buffer is `EINVAL`,
//! and the walk ends when the next header would not fit. [`Walk::received`]
//! reads what the host's `recvmsg` wrote, whose last message may be cut
//! short at the end of the buffer (`MSG_CTRUNC`): it never fails and
//! never yields data past the buffer.

use core::ops::Range;

/// `sizeof(struct cmsghdr)`.
pub const HDR: usize = 16;
pub const SOL_SOCKET: i32 = 1;
pub const SOL_IP: i32 = 0;
pub const SOL_IPV6: i32 = 41;
pub const SCM_RIGHTS: i32 = 1;
pub const SCM_CREDENTIALS: i32 = 2;
/// A pidfd of the sender (`SO_PASSPIDFD`): an fd, never passed on.
pub const SCM_PIDFD: i32 = 4;
const SO_PRIORITY: i32 = 12;
const SO_MARK: i32 = 36;
const SO_TIMESTAMPING_OLD: i32 = 37;
const SCM_TXTIME: i32 = 61;
const SCM_TS_OPT_ID: i32 = 81;
const IP_RETOPTS: i32 = 7;
/// IP option type of CIPSO labels (needs `CAP_NET_RAW`).
const IPOPT_CIPSO: u8 = 134;
const IPV6_2292HOPOPTS: i32 = 3;
const IPV6_2292DSTOPTS: i32 = 4;
const IPV6_2292PKTOPTIONS: i32 = 6;
const IPV6_HOPOPTS: i32 = 54;
const IPV6_RTHDRDSTOPTS: i32 = 55;
const IPV6_DSTOPTS: i32 = 59;
/// Highest `SO_PRIORITY` a process without `CAP_NET_ADMIN` may ask.
const PRIORITY_UNPRIVILEGED: u32 = 6;

/// `CMSG_ALIGN`.
pub const fn align(n: usize) -> usize {
    (n + 7) & !7
}

/// `CMSG_SPACE(data)`.
pub const fn space(data: usize) -> usize {
    HDR + align(data)
}

/// `CMSG_LEN(data)`.
pub const fn len(data: usize) -> usize {
    HDR + data
}

/// One message's header, at byte `off` of its buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub off: usize,
    /// `cmsg_len` as written.
    pub len: usize,
    pub level: i32,
    pub kind: i32,
}

impl Header {
    /// Where its data lies in a buffer of `total` bytes (cut at the end).
    pub fn data(&self, total: usize) -> Range<usize> {
        let start = (self.off + HDR).min(total);
        let end = self.off.saturating_add(self.len).clamp(start, total);
        start..end
    }
}

/// A `sendmsg` control buffer that breaks `CMSG_OK`: `EINVAL`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed;

/// Walks the messages of a control buffer (see the module doc).
pub struct Walk<'a> {
    buf: &'a [u8],
    off: usize,
    strict: bool,
    done: bool,
}

impl<'a> Walk<'a> {
    /// A `sendmsg` buffer: a bad header yields `Err` (then the walk ends).
    pub fn send(buf: &'a [u8]) -> Self {
        Self {
            buf,
            off: 0,
            strict: true,
            done: false,
        }
    }

    /// A buffer the host's `recvmsg` filled (its `msg_controllen` bytes).
    pub fn received(buf: &'a [u8]) -> Self {
        Self {
            buf,
            off: 0,
            strict: false,
            done: false,
        }
    }
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(w)
}

fn i32_at(b: &[u8], o: usize) -> i32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[o..o + 4]);
    i32::from_le_bytes(w)
}

impl Iterator for Walk<'_> {
    type Item = Result<Header, Malformed>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.buf.len().saturating_sub(self.off) < HDR {
            return None;
        }
        let off = self.off;
        let raw_len = u64_at(self.buf, off);
        let rest = (self.buf.len() - off) as u64;
        if raw_len < HDR as u64 || (self.strict && raw_len > rest) {
            self.done = true;
            return self.strict.then_some(Err(Malformed));
        }
        let len = raw_len.min(rest) as usize;
        let h = Header {
            off,
            len: if self.strict {
                len
            } else {
                raw_len.min(usize::MAX as u64) as usize
            },
            level: i32_at(self.buf, off + 8),
            kind: i32_at(self.buf, off + 12),
        };
        match off.checked_add(align(len)) {
            Some(next) => self.off = next,
            None => self.done = true,
        }
        Some(Ok(h))
    }
}

/// Why a control message may not reach the host's `sendmsg`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Linux's answer to an unknown or malformed message: `EINVAL`.
    Invalid,
    /// A message that needs a capability the sandbox does not grant
    /// (`CAP_NET_RAW`, `CAP_NET_ADMIN`): `EPERM`, as for an unprivileged
    /// process.
    NotPermitted,
}

impl Refused {
    /// The Linux errno.
    pub fn errno(self) -> i32 {
        match self {
            Self::Invalid => 22,
            Self::NotPermitted => 1,
        }
    }
}

/// What the VMM does with one outgoing message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Passed to the host as it is.
    Forward,
    /// `SCM_RIGHTS`: its fds are the sandbox's and must be translated.
    Rights,
}

/// The VMM's rule for an outgoing message of `level`/`kind` with `data`.
///
/// The host kernel checks everything else as Linux does (it is Linux), but
/// it checks capabilities against the VMM's, so what needs a capability
/// the sandbox lacks is refused here: `SO_MARK`, `SO_PRIORITY` above 6,
/// IPv6 hop-by-hop and destination options, IPv4 CIPSO options.
/// `SCM_CREDENTIALS` never crosses (the guest kernel keeps credentials,
/// docs/unix-credentials.md). Other `SOL_SOCKET` messages are refused as
/// Linux refuses unknown ones, except the send-time timestamping ones.
/// Other levels pass: Linux ignores a level the socket does not have.
pub fn verdict(level: i32, kind: i32, data: &[u8]) -> Result<Verdict, Refused> {
    match (level, kind) {
        (SOL_SOCKET, SCM_RIGHTS) => Ok(Verdict::Rights),
        (SOL_SOCKET, SO_TIMESTAMPING_OLD | SCM_TXTIME | SCM_TS_OPT_ID) => Ok(Verdict::Forward),
        (SOL_SOCKET, SO_PRIORITY) => match data.first_chunk::<4>() {
            Some(v) if u32::from_le_bytes(*v) > PRIORITY_UNPRIVILEGED => Err(Refused::NotPermitted),
            _ => Ok(Verdict::Forward),
        },
        (SOL_SOCKET, SO_MARK) => Err(Refused::NotPermitted),
        (SOL_SOCKET, _) => Err(Refused::Invalid),
        (
            SOL_IPV6,
            IPV6_2292HOPOPTS | IPV6_2292DSTOPTS | IPV6_2292PKTOPTIONS | IPV6_HOPOPTS
            | IPV6_RTHDRDSTOPTS | IPV6_DSTOPTS,
        ) => Err(Refused::NotPermitted),
        (SOL_IP, IP_RETOPTS) if has_cipso(data) => Err(Refused::NotPermitted),
        _ => Ok(Verdict::Forward),
    }
}

/// Whether IPv4 options `opts` hold a CIPSO option (type, length, data;
/// 0 ends the list, 1 is a one-byte no-op).
fn has_cipso(opts: &[u8]) -> bool {
    let mut i = 0;
    while i < opts.len() {
        match opts[i] {
            0 => return false,
            1 => i += 1,
            IPOPT_CIPSO => return true,
            _ => match opts.get(i + 1) {
                Some(&l) if l >= 2 => i += l as usize,
                _ => return false,
            },
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(level: i32, kind: i32, data: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&(len(data.len()) as u64).to_le_bytes());
        v.extend_from_slice(&level.to_le_bytes());
        v.extend_from_slice(&kind.to_le_bytes());
        v.extend_from_slice(data);
        v.resize(space(data.len()), 0);
        v
    }

    #[test]
    fn sizes_are_linuxs() {
        assert_eq!(len(4), 20);
        assert_eq!(space(4), 24);
        assert_eq!(space(12), 32);
        assert_eq!(space(0), 16);
    }

    #[test]
    fn walks_two_messages() {
        let mut b = msg(SOL_IPV6, 52, &7i32.to_le_bytes());
        b.extend(msg(SOL_IPV6, 67, &0x20i32.to_le_bytes()));
        let hs: Vec<_> = Walk::send(&b).map(Result::unwrap).collect();
        assert_eq!(hs.len(), 2);
        assert_eq!(
            (hs[1].off, hs[1].len, hs[1].level, hs[1].kind),
            (24, 20, 41, 67)
        );
        assert_eq!(hs[1].data(b.len()), 40..44);
    }

    #[test]
    fn send_rules_are_cmsg_ok() {
        // Shorter than a header: nothing, no error.
        assert_eq!(Walk::send(&[0u8; 15]).count(), 0);
        // A length under the header or past the buffer: EINVAL.
        let mut b = msg(SOL_IP, 2, &[1, 0, 0, 0]);
        b[0] = 8;
        assert_eq!(Walk::send(&b).next(), Some(Err(Malformed)));
        b[0] = 200;
        assert_eq!(Walk::send(&b).next(), Some(Err(Malformed)));
        // The last message unpadded is fine; a tail shorter than a header
        // after it is ignored.
        let mut b = msg(SOL_IP, 2, &[1, 0, 0, 0]);
        b.truncate(20);
        assert_eq!(Walk::send(&b).count(), 1);
        let mut b = msg(SOL_IP, 2, &[1, 0, 0, 0]);
        b.extend_from_slice(&[0xff; 15]);
        assert_eq!(Walk::send(&b).count(), 1);
        // A huge length never overflows.
        let mut b = vec![0u8; 32];
        b[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(Walk::send(&b).next(), Some(Err(Malformed)));
    }

    #[test]
    fn received_tail_is_cut_at_the_buffer() {
        // put_cmsg's truncation: cmsg_len is what was left of the buffer.
        let mut b = msg(SOL_SOCKET, SCM_CREDENTIALS, &[9; 12]);
        b.truncate(20);
        b[..8].copy_from_slice(&20u64.to_le_bytes());
        let h: Vec<_> = Walk::received(&b).map(Result::unwrap).collect();
        assert_eq!(h.len(), 1);
        assert_eq!(h[0].data(b.len()), 16..20);
        // A length past the buffer is cut, never read past it.
        b[..8].copy_from_slice(&1000u64.to_le_bytes());
        let h: Vec<_> = Walk::received(&b).map(Result::unwrap).collect();
        assert_eq!(h[0].data(b.len()), 16..20);
        // A header under 16 ends the walk without an error.
        b[..8].copy_from_slice(&3u64.to_le_bytes());
        assert_eq!(Walk::received(&b).count(), 0);
    }

    #[test]
    fn verdicts() {
        let v = |l, k, d: &[u8]| verdict(l, k, d);
        assert_eq!(v(SOL_SOCKET, SCM_RIGHTS, &[]), Ok(Verdict::Rights));
        assert_eq!(v(SOL_SOCKET, SCM_CREDENTIALS, &[]), Err(Refused::Invalid));
        assert_eq!(
            v(SOL_SOCKET, SO_MARK, &[1, 0, 0, 0]),
            Err(Refused::NotPermitted)
        );
        assert_eq!(
            v(SOL_SOCKET, SO_PRIORITY, &[6, 0, 0, 0]),
            Ok(Verdict::Forward)
        );
        assert_eq!(
            v(SOL_SOCKET, SO_PRIORITY, &[7, 0, 0, 0]),
            Err(Refused::NotPermitted)
        );
        assert_eq!(v(SOL_SOCKET, 999, &[]), Err(Refused::Invalid));
        assert_eq!(v(SOL_IPV6, 52, &[]), Ok(Verdict::Forward)); // IPV6_HOPLIMIT
        assert_eq!(v(SOL_IPV6, IPV6_HOPOPTS, &[]), Err(Refused::NotPermitted));
        assert_eq!(v(SOL_IP, 8, &[]), Ok(Verdict::Forward)); // IP_PKTINFO
        assert_eq!(v(SOL_IP, IP_RETOPTS, &[1, 7, 3, 4]), Ok(Verdict::Forward));
        assert_eq!(
            v(SOL_IP, IP_RETOPTS, &[1, 134, 6, 0, 0, 0]),
            Err(Refused::NotPermitted)
        );
        assert_eq!(v(17, 103, &[]), Ok(Verdict::Forward)); // UDP_SEGMENT
    }

    #[test]
    fn cipso_scan_ends() {
        assert!(!has_cipso(&[7, 0]));
        assert!(!has_cipso(&[7, 1]));
        assert!(!has_cipso(&[7, 3, 4, 0, 134]));
        assert!(has_cipso(&[1, 1, 7, 3, 4, 134, 2]));
    }
}
