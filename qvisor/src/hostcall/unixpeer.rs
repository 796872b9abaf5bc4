//! `fd::UNIX_PEER`: who is at the other end of a guest Unix socket.
//!
//! Every guest socket is a socket of this VMM process, so the host's
//! `SO_PEERCRED` names the VMM for every peer inside the sandbox and says
//! nothing of which guest process it is. The guest keeps its own table of
//! its sockets' owners (`qkernel/src/syscalls/sys_ucred.rs`); what it needs
//! from the host is the link between two sockets: this socket's inode and
//! its peer's, which the host's `sock_diag` (`UNIX_DIAG_PEER`) gives for a
//! connected Unix socket, and whether the peer is the VMM's own.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use qlib::io_abi::UnixPeer;

use super::HostCalls;
use super::sys::err;

const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLM_F_REQUEST: u16 = 1;
const NLMSG_ERROR: u16 = 2;
/// `unix_diag_req.udiag_show`: the peer's inode.
const UDIAG_SHOW_PEER: u32 = 4;
/// The `rtattr` type that carries it.
const UNIX_DIAG_PEER: u16 = 2;
/// `sizeof(struct nlmsghdr)`.
const NLMSG_HDR: usize = 16;
/// `sizeof(struct unix_diag_msg)`.
const DIAG_MSG: usize = 16;

impl HostCalls<'_> {
    /// Writes the [`UnixPeer`] of socket `fd` at GPA `out`.
    pub(super) fn unix_peer(&self, fd: i32, out: u64, len: u64) -> i64 {
        if len < size_of::<UnixPeer>() as u64 {
            return err(libc::EINVAL);
        }
        let mut peer = UnixPeer::default();
        // SAFETY: an all-zero `stat` is valid; fstat fills it.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `fd` is ours and `st` is writable.
        if unsafe { libc::fstat(fd, &mut st) } < 0 {
            return err(errno());
        }
        if st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
            return err(libc::ENOTSOCK);
        }
        // Socket inode numbers are 32-bit (`get_next_ino`).
        peer.ino = st.st_ino as u32;
        let mut cred = libc::ucred {
            pid: 0,
            uid: u32::MAX,
            gid: u32::MAX,
        };
        let mut l = size_of::<libc::ucred>() as libc::socklen_t;
        // SAFETY: SO_PEERCRED writes one ucred into `cred`.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_PEERCRED,
                (&raw mut cred).cast(),
                &mut l,
            )
        };
        if rc < 0 {
            return err(errno());
        }
        // SAFETY: getpid has no preconditions.
        peer.inside = u32::from(cred.pid != 0 && cred.pid == unsafe { libc::getpid() });
        peer.uid = cred.uid;
        peer.gid = cred.gid;
        peer.peer_ino = match diag_peer(peer.ino) {
            Ok(p) => p,
            Err(e) => {
                log::debug!("sock_diag of socket {}: errno {e}", peer.ino);
                0
            }
        };
        match self.ram.write(out, peer) {
            Ok(()) => 0,
            Err(_) => err(libc::EFAULT),
        }
    }
}

fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// The inode of the peer of the Unix socket with inode `ino` (0: none),
/// from one `sock_diag` request.
fn diag_peer(ino: u32) -> Result<u32, i32> {
    // SAFETY: plain socket(2); the result is checked.
    let raw = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::NETLINK_SOCK_DIAG,
        )
    };
    if raw < 0 {
        return Err(errno());
    }
    // SAFETY: `raw` is a new fd that nothing else owns.
    let sock = unsafe { OwnedFd::from_raw_fd(raw) };
    let mut req = [0u8; NLMSG_HDR + 24];
    let total = req.len() as u32;
    req[0..4].copy_from_slice(&total.to_ne_bytes());
    req[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    req[6..8].copy_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    // struct unix_diag_req: family, protocol, pad, states, ino, show,
    // cookie (any: ~0 twice).
    let body = &mut req[NLMSG_HDR..];
    body[0] = libc::AF_UNIX as u8;
    body[4..8].copy_from_slice(&u32::MAX.to_ne_bytes());
    body[8..12].copy_from_slice(&ino.to_ne_bytes());
    body[12..16].copy_from_slice(&UDIAG_SHOW_PEER.to_ne_bytes());
    body[16..24].fill(0xff);
    // SAFETY: `req` is readable for its length; the fd is ours.
    let n = unsafe { libc::send(sock.as_raw_fd(), req.as_ptr().cast(), req.len(), 0) };
    if n < 0 {
        return Err(errno());
    }
    let mut buf = [0u8; 512];
    // SAFETY: `buf` is writable for its length.
    let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n < 0 {
        return Err(errno());
    }
    parse_reply(&buf[..n as usize])
}

/// The peer inode in a `sock_diag` reply.
fn parse_reply(buf: &[u8]) -> Result<u32, i32> {
    let u16_at = |o: usize| buf.get(o..o + 2).map(|b| u16::from_ne_bytes([b[0], b[1]]));
    let u32_at = |o: usize| {
        buf.get(o..o + 4)
            .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
    };
    let len = u32_at(0).ok_or(libc::EIO)? as usize;
    let kind = u16_at(4).ok_or(libc::EIO)?;
    if kind == NLMSG_ERROR {
        let e = u32_at(NLMSG_HDR).ok_or(libc::EIO)? as i32;
        return Err(if e < 0 { -e } else { libc::EIO });
    }
    let end = len.min(buf.len());
    let mut at = NLMSG_HDR + DIAG_MSG;
    while at + 4 <= end {
        let alen = u16_at(at).ok_or(libc::EIO)? as usize;
        let atype = u16_at(at + 2).ok_or(libc::EIO)?;
        if alen < 4 {
            break;
        }
        if atype == UNIX_DIAG_PEER {
            return u32_at(at + 4).ok_or(libc::EIO);
        }
        at += alen.next_multiple_of(4);
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;
    use std::os::unix::net::UnixStream;

    fn ino(s: &UnixStream) -> u32 {
        let fd = s.as_raw_fd();
        std::fs::metadata(format!("/proc/self/fd/{fd}"))
            .map(|m| m.ino() as u32)
            .unwrap_or(0)
    }

    #[test]
    fn a_socketpairs_ends_name_each_other() {
        let (a, b) = UnixStream::pair().unwrap();
        assert_eq!(diag_peer(ino(&a)), Ok(ino(&b)));
        assert_eq!(diag_peer(ino(&b)), Ok(ino(&a)));
    }

    #[test]
    fn short_or_garbled_replies_are_errors_not_panics() {
        assert_eq!(parse_reply(&[]), Err(libc::EIO));
        assert_eq!(parse_reply(&[1, 2, 3]), Err(libc::EIO));
        let mut r = [0u8; NLMSG_HDR + DIAG_MSG + 3];
        r[0] = r.len() as u8;
        assert_eq!(parse_reply(&r), Ok(0));
    }
}
