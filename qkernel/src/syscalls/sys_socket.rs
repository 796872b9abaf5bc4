//! Socket syscalls over host sockets in the sandbox's network namespace
//! (`AF_INET`, `AF_INET6`, `AF_UNIX`; others get `EAFNOSUPPORT` from the
//! VMM), and `NETLINK_ROUTE` sockets kept in the guest (`fs::netlink`).
//! Data moves in place; addresses and options cross as small kernel
//! records.

use alloc::sync::Arc;

use qlib::io_abi::{SockAddr, fd as fdop, io, new};

use super::rw::{UserBuf, host_send, host_transfer, user_iovec_array};
use crate::errno::{Errno, SysResult};
use crate::fs::netlink::{self, Netlink};
use crate::fs::{Backing, File, HostKind, O_NONBLOCK, O_RDWR, host};
use crate::mm::uaccess;
use crate::process::Process;
use crate::task::park;

use super::sys_ucred as ucred;

const SOCK_NONBLOCK: u64 = 0o4000;
const SOCK_CLOEXEC: u64 = 0o2000000;
const MSG_DONTWAIT: u64 = 0x40;
const MSG_NOSIGNAL: u64 = 0x4000;
const AF_UNIX: u16 = 1;
const SOL_SOCKET: u64 = 1;
const SO_PASSCRED: u64 = 16;
const SO_PEERCRED: u64 = 17;
/// `sizeof(struct sockaddr_un)`.
const SUN_LEN: u64 = 110;

pub(super) fn sock(p: &Process, fd: u64) -> Result<(Arc<File>, i32), Errno> {
    let f = p.files.get(fd)?;
    match f.backing {
        Backing::Host {
            fd,
            kind: HostKind::Socket,
        } => Ok((f, fd)),
        _ => Err(Errno::ENOTSOCK),
    }
}

fn install(p: &mut Process, host_fd: i32, flags: u64) -> SysResult {
    let backing = Backing::Host {
        fd: host_fd,
        kind: HostKind::Socket,
    };
    let status = O_RDWR
        | if flags & SOCK_NONBLOCK != 0 {
            O_NONBLOCK
        } else {
            0
        };
    let file = File::new(backing, status, alloc::format!("socket:[{host_fd}]"));
    p.files.insert(file, flags & SOCK_CLOEXEC != 0)
}

/// The guest netlink socket at `fd`, if that is what it is.
fn nl(p: &Process, fd: u64) -> Option<Arc<File>> {
    p.files.get(fd).ok().filter(|f| f.netlink().is_some())
}

const SOCK_DGRAM: u64 = 2;
const SOCK_RAW: u64 = 3;
const MSG_PEEK: u64 = 0x2;
const MSG_TRUNC: u64 = 0x20;
/// Longest netlink request taken.
const NL_SEND_MAX: u64 = 64 << 10;

/// A `NETLINK_ROUTE` socket of the guest's (`SOCK_RAW` or `SOCK_DGRAM`).
fn netlink_socket(p: &mut Process, a: &[u64; 6]) -> SysResult {
    if a[1] & 0xf != SOCK_RAW && a[1] & 0xf != SOCK_DGRAM {
        return Err(Errno::ESOCKTNOSUPPORT);
    }
    if a[2] != netlink::NETLINK_ROUTE {
        return Err(Errno::EPROTONOSUPPORT);
    }
    let n = Netlink::new();
    let name = alloc::format!("socket:[{}]", n.ino());
    let status = O_RDWR
        | if a[1] & SOCK_NONBLOCK != 0 {
            O_NONBLOCK
        } else {
            0
        };
    let file = File::new(Backing::Netlink(n), status, name);
    p.files.insert(file, a[1] & SOCK_CLOEXEC != 0)
}

/// The `nl_pid` a netlink datagram is sent to (`EINVAL`: not a
/// `sockaddr_nl`).
fn nl_dest(addr: &SockAddr) -> Result<u32, Errno> {
    let b = &addr.bytes;
    if addr.len < 12 || u16::from_ne_bytes([b[0], b[1]]) != netlink::AF_NETLINK {
        return Err(Errno::EINVAL);
    }
    Ok(u32::from_ne_bytes([b[4], b[5], b[6], b[7]]))
}

/// A `SockAddr` holding the kernel's `sockaddr_nl` (port `port`).
fn nl_addr(port: u32) -> SockAddr {
    let mut a = SockAddr::default();
    a.bytes[..12].copy_from_slice(&netlink::sockaddr_nl(port));
    a.len = 12;
    a
}

/// Sends `bufs` as one datagram on netlink socket `n`.
fn nl_send(p: &mut Process, n: &Netlink, bufs: &[UserBuf], dest: Option<u32>) -> SysResult {
    let total = bufs.iter().map(|b| b.1).sum::<u64>();
    if total > NL_SEND_MAX {
        return Err(Errno::EMSGSIZE);
    }
    let mut data = alloc::vec![0u8; total as usize];
    let mut at = 0;
    for &(addr, len) in bufs {
        uaccess::copy_in(&mut p.mm, addr, &mut data[at..at + len as usize])?;
        at += len as usize;
    }
    n.send(&data, dest)
}

/// Receives a datagram of netlink socket `n` into `bufs`: the bytes
/// copied (the datagram's length with `MSG_TRUNC`) and the sender (the
/// kernel), whose `pad` carries `MSG_TRUNC` if it did not fit.
fn nl_recv(
    p: &mut Process,
    n: &Netlink,
    bufs: &[UserBuf],
    flags: u64,
) -> Result<(usize, SockAddr), Errno> {
    let d = n.recv(flags & MSG_PEEK != 0)?;
    let mut at = 0;
    for &(addr, len) in bufs {
        let k = (len as usize).min(d.len() - at);
        if k == 0 {
            continue;
        }
        uaccess::copy_out(&mut p.mm, addr, &d[at..at + k])?;
        at += k;
    }
    let mut from = nl_addr(0);
    if at < d.len() {
        from.pad = MSG_TRUNC as u32;
    }
    Ok((if flags & MSG_TRUNC != 0 { d.len() } else { at }, from))
}

/// `read`/`write` on a netlink socket.
pub(super) fn netlink_rw(p: &mut Process, n: &Netlink, bufs: &[UserBuf], write: bool) -> SysResult {
    if write {
        nl_send(p, n, bufs, None)
    } else {
        nl_recv(p, n, bufs, 0).map(|(k, _)| k)
    }
}

/// `socket(domain, type, protocol)`.
pub fn socket(p: &mut Process, a: &[u64; 6]) -> SysResult {
    if a[1] & !(0xf | SOCK_NONBLOCK | SOCK_CLOEXEC) != 0 {
        return Err(Errno::EINVAL);
    }
    if a[0] == u64::from(netlink::AF_NETLINK) {
        return netlink_socket(p, a);
    }
    let fd = host::new_fd(new::SOCKET, a[0], a[1] & 0xf, a[2])?;
    if a[0] == u64::from(AF_UNIX) {
        ucred::created(fd);
    }
    install(p, fd, a[1])
}

/// `socketpair(domain, type, protocol, sv)`.
pub fn socketpair(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let pair = host::new_pair(new::SOCKETPAIR, a[0], a[1] & 0xf, a[2])?;
    park::add_peers(pair[0], pair[1]);
    if a[0] == u64::from(AF_UNIX) {
        ucred::paired(p, pair[0], pair[1]);
    }
    let f0 = install(p, pair[0], a[1])?;
    let f1 = install(p, pair[1], a[1])?;
    uaccess::write(&mut p.mm, a[3], &(f0 as i32))?;
    uaccess::write(&mut p.mm, a[3] + 4, &(f1 as i32))?;
    Ok(0)
}

fn read_addr(p: &mut Process, va: u64, len: u64) -> Result<SockAddr, Errno> {
    let mut addr = SockAddr::default();
    if len > addr.bytes.len() as u64 {
        return Err(Errno::EINVAL);
    }
    uaccess::copy_in(&mut p.mm, va, &mut addr.bytes[..len as usize])?;
    addr.len = len as u32;
    if u16::from_ne_bytes([addr.bytes[0], addr.bytes[1]]) == AF_UNIX {
        if len > SUN_LEN {
            return Err(Errno::EINVAL);
        }
        unix_absolute(p, &mut addr)?;
    }
    Ok(addr)
}

/// A relative `AF_UNIX` path made absolute against the cwd (the VMM
/// resolves paths from the root), with `pad` saying how much was added.
fn unix_absolute(p: &Process, addr: &mut SockAddr) -> Result<(), Errno> {
    let raw = &addr.bytes[2..addr.len as usize];
    let path_len = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    if path_len == 0 || raw[0] == b'/' {
        return Ok(()); // unnamed, abstract or absolute
    }
    let cwd = p.fs.cwd();
    let base = cwd.trim_end_matches('/');
    let add = base.len() + 1;
    let total = 2 + add + path_len;
    if total > addr.bytes.len() {
        return Err(Errno::ENAMETOOLONG);
    }
    addr.bytes.copy_within(2..2 + path_len, 2 + add);
    addr.bytes[2..2 + base.len()].copy_from_slice(base.as_bytes());
    addr.bytes[2 + base.len()] = b'/';
    addr.bytes[total..].fill(0);
    addr.len = total as u32;
    addr.pad = add as u32;
    Ok(())
}

/// Writes `addr` to a user (`sockaddr *`, `socklen_t *`) pair, truncated to
/// the user's length, and stores the full length.
fn write_addr(p: &mut Process, va: u64, len_va: u64, addr: &SockAddr) -> Result<(), Errno> {
    if va == 0 || len_va == 0 {
        return Ok(());
    }
    let room: u32 = uaccess::read(&mut p.mm, len_va)?;
    let n = (room.min(addr.len) as usize).min(addr.bytes.len());
    uaccess::copy_out(&mut p.mm, va, &addr.bytes[..n])?;
    uaccess::write(&mut p.mm, len_va, &addr.len)
}

/// `bind(fd, addr, len)`.
pub fn bind(p: &mut Process, a: &[u64; 6]) -> SysResult {
    if let Some(f) = nl(p, a[0]) {
        let addr = read_addr(p, a[1], a[2])?;
        let n = f.netlink().ok_or(Errno::ENOTSOCK)?;
        n.bind(&addr.bytes[..addr.len as usize])?;
        return Ok(0);
    }
    let (_, fd) = sock(p, a[0])?;
    let mut addr = read_addr(p, a[1], a[2])?;
    let key = addr;
    let r = host::fd_op_addr(fdop::BIND, fd, &mut addr, 0)?;
    ucred::bound(fd, &key);
    Ok(r)
}

/// `connect(fd, addr, len)`.
pub fn connect(p: &mut Process, a: &[u64; 6]) -> SysResult {
    if nl(p, a[0]).is_some() {
        // Only the kernel (port 0) answers.
        let addr = read_addr(p, a[1], a[2])?;
        return match nl_dest(&addr)? {
            0 => Ok(0),
            _ => Err(Errno::ECONNREFUSED),
        };
    }
    let (f, fd) = sock(p, a[0])?;
    let mut addr = read_addr(p, a[1], a[2])?;
    ucred::connected(p, fd, &addr);
    if f.nonblocking() {
        return host::fd_op_addr(fdop::CONNECT, fd, &mut addr, 0);
    }
    if !park::worthwhile() {
        return host::fd_op_addr(fdop::CONNECT, fd, &mut addr, io::BLOCK);
    }
    // Nonblocking connect, then wait for POLLOUT (a parked task); run
    // again, connect completes (0) or reports why it failed, as Linux's
    // second connect on a socket whose connection is in progress does.
    match host::fd_op_addr(fdop::CONNECT, fd, &mut addr, 0) {
        Err(Errno::EINPROGRESS) | Err(Errno::EALREADY) => {
            park::wait_on(&[(fd, park::POLLOUT)], park::deadline(None))
        }
        Err(Errno::EISCONN) if park::rerun() => Ok(0),
        r => r,
    }
}

/// `listen(fd, backlog)`.
pub fn listen(p: &mut Process, a: &[u64; 6]) -> SysResult {
    if nl(p, a[0]).is_some() {
        return Err(Errno::EOPNOTSUPP);
    }
    let (_, fd) = sock(p, a[0])?;
    let r = host::fd_op(fdop::LISTEN, fd, a[1], 0, 0, 0)?;
    crate::task::park::listening(fd);
    ucred::listening(p, fd);
    Ok(r)
}

/// `shutdown(fd, how)`.
pub fn shutdown(p: &mut Process, a: &[u64; 6]) -> SysResult {
    if nl(p, a[0]).is_some() {
        return Ok(0);
    }
    let (_, fd) = sock(p, a[0])?;
    host::fd_op(fdop::SHUTDOWN, fd, a[1], 0, 0, 0)
}

/// `accept4(fd, addr, addrlen, flags)`.
pub fn accept4(p: &mut Process, a: &[u64; 6]) -> SysResult {
    if a[3] & !(SOCK_NONBLOCK | SOCK_CLOEXEC) != 0 {
        return Err(Errno::EINVAL);
    }
    if nl(p, a[0]).is_some() {
        return Err(Errno::EOPNOTSUPP);
    }
    let (f, fd) = sock(p, a[0])?;
    let mut addr = SockAddr::default();
    let park = !f.nonblocking() && park::worthwhile();
    let block = if f.nonblocking() || park {
        0
    } else {
        io::BLOCK
    };
    let nfd = match host::fd_op_addr(fdop::ACCEPT, fd, &mut addr, block) {
        Err(Errno::EAGAIN) if park => {
            return park::wait_on(&[(fd, park::POLLIN)], park::deadline(None));
        }
        r => r? as i32,
    };
    ucred::accepted(p, fd, nfd);
    let gfd = install(p, nfd, a[3])?;
    if let Err(e) = write_addr(p, a[1], a[2], &addr) {
        let _ = p.files.remove(gfd as u64);
        return Err(e);
    }
    Ok(gfd)
}

/// `accept(fd, addr, addrlen)`.
pub fn accept(p: &mut Process, a: &[u64; 6]) -> SysResult {
    accept4(p, &[a[0], a[1], a[2], 0, 0, 0])
}

/// `getsockname(fd, addr, addrlen)` and `getpeername` (`peer`).
fn name(p: &mut Process, a: &[u64; 6], op: u64) -> SysResult {
    if let Some(f) = nl(p, a[0]) {
        let port = match f.netlink() {
            Some(n) if op == fdop::GETSOCKNAME => {
                u32::from_ne_bytes(n.name()[4..8].try_into().map_err(|_| Errno::EINVAL)?)
            }
            _ => 0,
        };
        write_addr(p, a[1], a[2], &nl_addr(port))?;
        return Ok(0);
    }
    let (_, fd) = sock(p, a[0])?;
    let mut addr = SockAddr::default();
    host::fd_op_addr(op, fd, &mut addr, 0)?;
    write_addr(p, a[1], a[2], &addr)?;
    Ok(0)
}

/// `getsockname(fd, addr, addrlen)`.
pub fn getsockname(p: &mut Process, a: &[u64; 6]) -> SysResult {
    name(p, a, fdop::GETSOCKNAME)
}

/// `getpeername(fd, addr, addrlen)`.
pub fn getpeername(p: &mut Process, a: &[u64; 6]) -> SysResult {
    name(p, a, fdop::GETPEERNAME)
}

/// `setsockopt(fd, level, name, value, len)`; on a netlink socket the
/// options are taken and change nothing.
pub fn setsockopt(p: &mut Process, a: &[u64; 6]) -> SysResult {
    if nl(p, a[0]).is_some() {
        if a[4] > 256 {
            return Err(Errno::EINVAL);
        }
        let mut buf = alloc::vec![0u8; a[4] as usize];
        uaccess::copy_in(&mut p.mm, a[3], &mut buf)?;
        return Ok(0);
    }
    let (_, fd) = sock(p, a[0])?;
    if a[4] > 256 {
        return Err(Errno::EINVAL);
    }
    let mut buf = alloc::vec![0u8; a[4] as usize];
    uaccess::copy_in(&mut p.mm, a[3], &mut buf)?;
    let r = host::fd_op_buf(fdop::SETSOCKOPT, fd, a[1], a[2], &mut buf)?;
    if (a[1], a[2]) == (SOL_SOCKET, SO_PASSCRED) && buf.len() >= 4 {
        ucred::set_passcred(fd);
    }
    Ok(r)
}

/// A netlink socket's `SOL_SOCKET` option `name` (`ENOPROTOOPT`: not
/// kept).
fn nl_sockopt(level: u64, name: u64) -> Result<i32, Errno> {
    const SOL_SOCKET: u64 = 1;
    match (level, name) {
        (SOL_SOCKET, 3) => Ok(SOCK_RAW as i32), // SO_TYPE
        (SOL_SOCKET, 7 | 8) => Ok(212_992),     // SO_SNDBUF, SO_RCVBUF
        (SOL_SOCKET, 38) => Ok(netlink::NETLINK_ROUTE as i32), // SO_PROTOCOL
        (SOL_SOCKET, 39) => Ok(i32::from(netlink::AF_NETLINK)), // SO_DOMAIN
        (SOL_SOCKET, 4) => Ok(0),               // SO_ERROR
        _ => Err(Errno::ENOPROTOOPT),
    }
}

/// `getsockopt(fd, level, name, value, len)`.
pub fn getsockopt(p: &mut Process, a: &[u64; 6]) -> SysResult {
    if nl(p, a[0]).is_some() {
        let v = nl_sockopt(a[1], a[2])?;
        let room: u32 = uaccess::read(&mut p.mm, a[4])?;
        if room < 4 {
            return Err(Errno::EINVAL);
        }
        uaccess::write(&mut p.mm, a[3], &v)?;
        uaccess::write(&mut p.mm, a[4], &4u32)?;
        return Ok(0);
    }
    let (_, fd) = sock(p, a[0])?;
    let room: u32 = uaccess::read(&mut p.mm, a[4])?;
    if (a[1], a[2]) == (SOL_SOCKET, SO_PEERCRED) {
        let b = ucred::peer_cred(fd)?.bytes();
        let n = (room as usize).min(b.len());
        uaccess::copy_out(&mut p.mm, a[3], &b[..n])?;
        uaccess::write(&mut p.mm, a[4], &(n as u32))?;
        return Ok(0);
    }
    let mut buf = alloc::vec![0u8; (room as usize).min(256)];
    let n = host::fd_op_buf(fdop::GETSOCKOPT, fd, a[1], a[2], &mut buf)?;
    uaccess::copy_out(&mut p.mm, a[3], &buf[..n.min(buf.len())])?;
    uaccess::write(&mut p.mm, a[4], &(n as u32))?;
    Ok(0)
}

/// Sends `bufs` (to `addr`, if any) with `MSG_*` flags.
fn send(
    p: &mut Process,
    fd: u64,
    bufs: &[UserBuf],
    addr: Option<SockAddr>,
    flags: u64,
    cred: Option<ucred::Ucred>,
) -> SysResult {
    if let Some(f) = nl(p, fd) {
        let dest = addr.as_ref().map(nl_dest).transpose()?;
        return nl_send(p, f.netlink().ok_or(Errno::ENOTSOCK)?, bufs, dest);
    }
    let (f, hfd) = sock(p, fd)?;
    let mut io_flags = io::WRITE | ((flags & !MSG_DONTWAIT) << 32);
    let blocking = !f.nonblocking() && flags & MSG_DONTWAIT == 0;
    let park = blocking && park::worthwhile();
    if blocking && !park {
        io_flags |= io::BLOCK;
    }
    let mut addr = addr;
    let to = addr;
    let r = host_send(p, bufs, |iov, _| {
        host::msg(hfd, iov, addr.as_mut(), io_flags)
    });
    if r.is_ok() {
        ucred::sent(hfd, cred.unwrap_or_else(|| ucred::real(p)), to.as_ref());
    }
    if park && r == Err(Errno::EAGAIN) {
        return park::wait_on(&[(hfd, park::POLLOUT)], park::deadline(None));
    }
    // An empty datagram is news to a reader too.
    if r.is_ok() {
        park::wake_readers_of_peer(hfd);
    }
    if r == Err(Errno::EPIPE) && flags & MSG_NOSIGNAL == 0 {
        crate::signal::raise_sigpipe();
    }
    r
}

/// Receives into `bufs`; returns the count and the sender's address.
fn recv(
    p: &mut Process,
    fd: u64,
    bufs: &[UserBuf],
    flags: u64,
) -> Result<(usize, SockAddr), Errno> {
    if let Some(f) = nl(p, fd) {
        return nl_recv(p, f.netlink().ok_or(Errno::ENOTSOCK)?, bufs, flags);
    }
    let (f, hfd) = sock(p, fd)?;
    let mut io_flags = (flags & !MSG_DONTWAIT) << 32;
    let blocking = !f.nonblocking() && flags & MSG_DONTWAIT == 0;
    let park = blocking && park::worthwhile();
    if blocking && !park {
        io_flags |= io::BLOCK;
    }
    let mut addr = SockAddr::default();
    let r = host_transfer(p, bufs, false, |iov, _| {
        host::msg(hfd, iov, Some(&mut addr), io_flags)
    });
    if park && r == Err(Errno::EAGAIN) {
        // The handler's result is dropped: it runs again once woken.
        park::wait_on(&[(hfd, park::POLLIN)], park::deadline(None))?;
        return Err(Errno::EAGAIN);
    }
    Ok((r?, addr))
}

/// `sendto(fd, buf, len, flags, addr, addrlen)`.
pub fn sendto(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let addr = if a[4] != 0 {
        Some(read_addr(p, a[4], a[5])?)
    } else {
        None
    };
    send(p, a[0], &[(a[1], a[2])], addr, a[3], None)
}

/// `recvfrom(fd, buf, len, flags, addr, addrlen)`.
pub fn recvfrom(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let (n, addr) = recv(p, a[0], &[(a[1], a[2])], a[3])?;
    write_addr(p, a[4], a[5], &addr)?;
    Ok(n)
}

/// `sendmsg(fd, msg, flags)`.
pub fn sendmsg(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let name: u64 = uaccess::read(&mut p.mm, a[1])?;
    let namelen: u32 = uaccess::read(&mut p.mm, a[1] + 8)?;
    let iov: u64 = uaccess::read(&mut p.mm, a[1] + 16)?;
    let iovlen: u64 = uaccess::read(&mut p.mm, a[1] + 24)?;
    let bufs = user_iovec_array(p, iov, iovlen)?;
    let addr = if name != 0 && namelen != 0 {
        Some(read_addr(p, name, u64::from(namelen))?)
    } else {
        None
    };
    let ctl = super::sys_scm::control_to_send(p, a[1])?;
    // A netlink socket is the guest's own: what is not SOL_SOCKET is
    // ignored there, as Linux ignores it.
    if ctl.for_host() && nl(p, a[0]).is_none() {
        let (f, hfd) = sock(p, a[0])?;
        let r = super::sys_scm::send_with_control(p, &f, hfd, &bufs, addr, a[2], &ctl);
        if r.is_ok() {
            ucred::sent(
                hfd,
                ctl.cred.unwrap_or_else(|| ucred::real(p)),
                addr.as_ref(),
            );
        }
        return r;
    }
    send(p, a[0], &bufs, addr, a[2], ctl.cred)
}

/// `op` ([`sendmsg`] or [`recvmsg`]) on each `mmsghdr` of the vector at
/// `vec` (its `msg_len` gets the bytes), at most `UIO_MAXIOV` of them.
/// The first may block as `op` does; the others run `MSG_DONTWAIT`, and
/// one that would block ends the call with the count so far, as an error
/// after the first does on Linux (a syscall that blocks here is run again
/// whole once woken, which would repeat the first ones). An error before
/// the first is the call's error; `enough` after an entry ends it too.
fn per_mmsghdr(
    p: &mut Process,
    a: [u64; 4],
    op: fn(&mut Process, &[u64; 6]) -> SysResult,
    mut enough: impl FnMut() -> bool,
) -> Result<u64, Errno> {
    /// `sizeof(struct mmsghdr)`: a `msghdr` (56 bytes), `msg_len`, padding.
    const MMSGHDR: u64 = 64;
    const MSG_LEN: u64 = 56;
    const UIO_MAXIOV: u64 = 1024;
    let [fd, vec, vlen, flags] = a;
    // The socket first (EBADF, ENOTSOCK), then the vector, as Linux.
    if nl(p, fd).is_none() {
        sock(p, fd)?;
    }
    let vlen = u64::from(vlen as u32).min(UIO_MAXIOV);
    let mut done: u64 = 0;
    while done < vlen {
        let hdr = vec.checked_add(done * MMSGHDR).ok_or(Errno::EFAULT)?;
        let flags = if done == 0 {
            flags
        } else {
            flags | MSG_DONTWAIT
        };
        let r = op(p, &[fd, hdr, flags, 0, 0, 0])
            .and_then(|n| uaccess::write(&mut p.mm, hdr + MSG_LEN, &(n as u32)));
        match r {
            Ok(()) => done += 1,
            Err(e) if done == 0 => return Err(e),
            Err(_) => break,
        }
        if enough() {
            break;
        }
    }
    Ok(done)
}

/// `sendmmsg(fd, msgvec, vlen, flags)`: [`per_mmsghdr`] of [`sendmsg`].
pub fn sendmmsg(p: &mut Process, a: &[u64; 6]) -> SysResult {
    per_mmsghdr(p, [a[0], a[1], a[2], a[3]], sendmsg, || false).map(|n| n as usize)
}

/// `recvmmsg(fd, msgvec, vlen, flags, timeout)`: [`per_mmsghdr`] of
/// [`recvmsg`], so every call behaves as with `MSG_WAITFORONE` (Linux
/// without it waits on a blocking socket until `vlen` came). The timeout
/// is checked after each datagram, as Linux does (the first may wait
/// forever there too), and what is left of it written back.
pub fn recvmmsg(p: &mut Process, a: &[u64; 6]) -> SysResult {
    const MSG_WAITFORONE: u64 = 0x10000;
    let limit = super::sys_poll::read_timespec(p, a[4])?;
    let start = crate::time::monotonic_ns();
    let elapsed = || crate::time::monotonic_ns().saturating_sub(start);
    let flags = a[3] & !MSG_WAITFORONE;
    let n = per_mmsghdr(p, [a[0], a[1], a[2], flags], recvmsg, || {
        limit.is_some_and(|l| elapsed() >= l)
    })?;
    if let Some(l) = limit {
        let left = l.saturating_sub(elapsed());
        uaccess::write(&mut p.mm, a[4], &(left / 1_000_000_000))?;
        uaccess::write(&mut p.mm, a[4] + 8, &(left % 1_000_000_000))?;
    }
    Ok(n as usize)
}

/// `recvmsg(fd, msg, flags)`; control messages as the host socket gives
/// them (`sys_scm`), none from a netlink socket.
pub fn recvmsg(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let name: u64 = uaccess::read(&mut p.mm, a[1])?;
    let iov: u64 = uaccess::read(&mut p.mm, a[1] + 16)?;
    let iovlen: u64 = uaccess::read(&mut p.mm, a[1] + 24)?;
    let bufs = user_iovec_array(p, iov, iovlen)?;
    let control: u64 = uaccess::read(&mut p.mm, a[1] + 32)?;
    let (n, addr) = if control != 0 && nl(p, a[0]).is_none() {
        let (f, hfd) = sock(p, a[0])?;
        super::sys_scm::recv_with_control(p, &f, hfd, &bufs, a[2], a[1])?
    } else {
        recv(p, a[0], &bufs, a[2])?
    };
    if name != 0 {
        write_addr(p, name, a[1] + 8, &addr)?;
    }
    if control == 0 || nl(p, a[0]).is_some() {
        uaccess::write(&mut p.mm, a[1] + 40, &0u64)?; // msg_controllen
    }
    uaccess::write(&mut p.mm, a[1] + 48, &addr.pad)?; // msg_flags
    Ok(n)
}
