//! Socket and event host calls: the socket ops of `Fd`, `Msg`, `NewFd`,
//! `epoll_ctl` and timerfds. Sockets are host sockets in the sandbox
//! process's network namespace; `AF_UNIX` addresses are translated by
//! `unix` (paths resolved inside the rootfs, abstract names tagged).

use qlib::io_abi::{SockAddr, fd as fdop, io, new};

use super::HostCalls;
use super::sys::{err, owned, ret};
use super::unix::Use;

const EFAULT: i64 = err(libc::EFAULT);
const EINVAL: i64 = err(libc::EINVAL);
/// Longest socket option value passed through.
const MAX_OPT: u64 = 256;
/// `SO_PASSPIDFD`, `SO_PEERPIDFD`.
const PIDFD_OPTS: [i32; 2] = [76, 77];
/// Linux's bridge ioctls (not in `libc` for Linux).
const SIOCBRADDBR: u64 = 0x89a0;
const SIOCBRDELBR: u64 = 0x89a1;
/// Type bits the guest keeps for itself.
const TYPE_FLAGS: i32 = libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;

impl HostCalls<'_> {
    fn sockaddr(&self, gpa: u64) -> Result<SockAddr, i64> {
        let a: SockAddr = self.ram.read(gpa).map_err(|_| EFAULT)?;
        if a.len as usize > a.bytes.len() {
            return Err(EINVAL);
        }
        Ok(a)
    }

    /// Socket ops of `Fd` (`fd` already checked).
    pub(super) fn sock_op(&mut self, fd: i32, a: [u64; 6]) -> i64 {
        match self.sock_op_inner(fd, a) {
            Ok(v) | Err(v) => v,
        }
    }

    fn sock_op_inner(&mut self, fd: i32, a: [u64; 6]) -> Result<i64, i64> {
        Ok(match a[0] {
            // SAFETY: valid fd and integer arguments.
            fdop::LISTEN => ret(unsafe { libc::listen(fd, a[2] as i32) } as i64),
            // SAFETY: as above.
            fdop::SHUTDOWN => ret(unsafe { libc::shutdown(fd, a[2] as i32) } as i64),
            fdop::BIND | fdop::CONNECT => {
                let guest = self.sockaddr(a[2])?;
                let how = if a[0] == fdop::BIND {
                    Use::Bind
                } else {
                    Use::Connect
                };
                if how == Use::Bind {
                    return self.bind(fd, guest);
                }
                let host = self.host_addr(guest, how)?;
                let p = host.addr.bytes.as_ptr().cast::<libc::sockaddr>();
                self.connect(fd, p, host.addr.len, a[3] & io::BLOCK != 0)
            }
            fdop::GETSOCKNAME | fdop::GETPEERNAME => {
                let mut addr = SockAddr::default();
                let mut len = addr.bytes.len() as libc::socklen_t;
                let p = addr.bytes.as_mut_ptr().cast::<libc::sockaddr>();
                // SAFETY: `p` has `len` writable bytes, `len` is ours.
                let rc = unsafe {
                    if a[0] == fdop::GETSOCKNAME {
                        libc::getsockname(fd, p, &mut len)
                    } else {
                        libc::getpeername(fd, p, &mut len)
                    }
                };
                if rc < 0 {
                    return Ok(ret(rc as i64));
                }
                addr.len = len;
                let addr = self.guest_unix_name(addr);
                self.ram.write(a[2], addr).map_err(|_| EFAULT)?;
                0
            }
            fdop::SETSOCKOPT | fdop::GETSOCKOPT => {
                if a[5] > MAX_OPT && a[0] == fdop::SETSOCKOPT {
                    return Err(EINVAL);
                }
                let mut val = vec![0u8; a[5].min(MAX_OPT) as usize];
                let mut len = val.len() as libc::socklen_t;
                let (level, name) = (a[2] as i32, a[3] as i32);
                if level == libc::SOL_SOCKET && PIDFD_OPTS.contains(&name) {
                    // Host pidfds (as an answer, or with every message
                    // received) would be fds the VMM never handed out:
                    // the answer of a kernel before 6.5.
                    return Err(err(libc::ENOPROTOOPT));
                }
                if a[0] == fdop::SETSOCKOPT {
                    self.ram.read_bytes(a[4], &mut val).map_err(|_| EFAULT)?;
                    // SAFETY: `val` holds `len` bytes.
                    ret(
                        unsafe { libc::setsockopt(fd, level, name, val.as_ptr().cast(), len) }
                            as i64,
                    )
                } else {
                    // SAFETY: `val` has `len` writable bytes.
                    let rc = unsafe {
                        libc::getsockopt(fd, level, name, val.as_mut_ptr().cast(), &mut len)
                    };
                    if rc < 0 {
                        return Ok(ret(rc as i64));
                    }
                    let n = (len as usize).min(val.len());
                    self.ram.write_bytes(a[4], &val[..n]).map_err(|_| EFAULT)?;
                    n as i64
                }
            }
            fdop::ACCEPT => self.accept(fd, a[2], a[3] & io::BLOCK != 0)?,
            fdop::UNIX_PEER => self.unix_peer(fd, a[4], a[5]),
            fdop::FIONREAD => {
                let mut n: libc::c_int = 0;
                // SAFETY: FIONREAD writes one int.
                let rc = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut n) };
                // Its 32 bits as they are: a file's size past 2 GiB makes
                // Linux's count negative, which must not read as -errno.
                if rc < 0 {
                    ret(rc as i64)
                } else {
                    i64::from(n as u32)
                }
            }
            fdop::BRIDGE => {
                // A NUL-terminated interface name of at most IFNAMSIZ bytes.
                let mut name = [0u8; libc::IFNAMSIZ];
                let n = usize::try_from(a[5]).map_err(|_| EINVAL)?;
                if n > name.len() {
                    return Err(EINVAL);
                }
                self.ram
                    .read_bytes(a[4], &mut name[..n])
                    .map_err(|_| EFAULT)?;
                name[libc::IFNAMSIZ - 1] = 0;
                let req = if a[2] == 0 { SIOCBRADDBR } else { SIOCBRDELBR };
                // SAFETY: valid fd; `name` is NUL-terminated and outlives
                // the call, which only reads it.
                ret(unsafe { libc::ioctl(fd, req as _, name.as_ptr()) } as i64)
            }
            fdop::WINSIZE => {
                let mut ws = libc::winsize {
                    ws_row: 0,
                    ws_col: 0,
                    ws_xpixel: 0,
                    ws_ypixel: 0,
                };
                // SAFETY: TIOCGWINSZ writes one winsize.
                let rc = unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut ws) };
                if rc < 0 {
                    ret(rc as i64)
                } else {
                    i64::from(ws.ws_row) | i64::from(ws.ws_col) << 16
                }
            }
            _ => err(libc::ENOSYS),
        })
    }

    fn bind(&mut self, fd: i32, guest: SockAddr) -> Result<i64, i64> {
        // A random autobind name may be taken: a few more draws.
        for _ in 0..16 {
            let host = self.host_addr(guest, Use::Bind)?;
            let addr = host.addr;
            let p = addr.bytes.as_ptr().cast::<libc::sockaddr>();
            // SAFETY: `p` points at `addr.len` valid bytes.
            let rc = ret(unsafe { libc::bind(fd, p, addr.len) } as i64);
            if rc == err(libc::EADDRINUSE) && host.autobind {
                continue;
            }
            if rc == 0 && host.rewritten {
                self.unix_names
                    .insert(addr.bytes[..addr.len as usize].to_vec(), host.guest);
            }
            return Ok(rc);
        }
        Ok(err(libc::EADDRINUSE))
    }

    fn connect(&self, fd: i32, p: *const libc::sockaddr, len: u32, block: bool) -> i64 {
        // SAFETY: `p` points at `len` valid bytes (caller).
        let rc = ret(unsafe { libc::connect(fd, p, len) } as i64);
        if rc != err(libc::EINPROGRESS) || !block {
            return rc;
        }
        let mut fds = [libc::pollfd {
            fd,
            events: libc::POLLOUT,
            revents: 0,
        }];
        let w = self.wait(&mut fds, u64::MAX);
        if w < 0 {
            return w;
        }
        let mut e: libc::c_int = 0;
        let mut l = size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: SO_ERROR writes one int into `e`.
        unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_ERROR,
                (&raw mut e).cast(),
                &mut l,
            )
        };
        if e != 0 {
            return err(e);
        }
        // Consume the completed connection, so that a later connect says
        // EISCONN as it does after a blocking connect.
        // SAFETY: as above for `p`.
        unsafe { libc::connect(fd, p, len) };
        0
    }

    fn accept(&mut self, fd: i32, addr_gpa: u64, block: bool) -> Result<i64, i64> {
        let mut addr = SockAddr::default();
        let mut len = addr.bytes.len() as libc::socklen_t;
        let p = addr.bytes.as_mut_ptr().cast::<libc::sockaddr>();
        let nfd = self.blocking(fd, libc::POLLIN, block, || {
            len = 128;
            // SAFETY: `p` has `len` writable bytes.
            ret(unsafe { libc::accept4(fd, p, &mut len, TYPE_FLAGS) } as i64)
        });
        if nfd < 0 {
            // Already `-errno`, or `RET_RESTART` (a control request cut
            // the wait short): `owned` would read a stale errno instead.
            return Err(nfd);
        }
        let nfd = owned(nfd)?;
        if addr_gpa != 0 {
            addr.len = len;
            let addr = self.guest_unix_name(addr);
            self.ram.write(addr_gpa, addr).map_err(|_| EFAULT)?;
        }
        Ok(self.fds.adopt(nfd))
    }

    /// `Msg`: sendmsg/recvmsg with the guest's iovecs and address.
    pub(super) fn msg(
        &mut self,
        fd: u64,
        iov: u64,
        count: u64,
        addr_gpa: u64,
        flags: u64,
        ctl_gpa: u64,
    ) -> i64 {
        let fd = match self.fds.check(fd) {
            Ok(fd) => fd,
            Err(e) => return e,
        };
        let Ok(mut iovecs) = self.ram.host_iovecs(iov, count) else {
            return EFAULT;
        };
        let write = flags & io::WRITE != 0;
        let mut msg_flags = ((flags >> 32) as i32) & !libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL;
        // Control data: the checked messages to send, or room for the
        // ones received (their fds close-on-exec in the VMM).
        let mut control = match (ctl_gpa, write) {
            (0, _) => None,
            (g, true) => match self.control_to_send(g) {
                Ok(c) => Some(c),
                Err(e) => return e,
            },
            (g, false) => match self.control_room(g) {
                Ok(c) => Some(c),
                Err(e) => return e,
            },
        };
        if ctl_gpa != 0 && !write {
            msg_flags |= libc::MSG_CMSG_CLOEXEC;
        }
        // A destination names an existing socket, as `connect` does; its
        // host address stays valid (`_keep`) until the send is done.
        let (mut addr, _keep) = match (addr_gpa, write) {
            (0, _) => (None, None),
            (g, true) => match self
                .sockaddr(g)
                .and_then(|a| self.host_addr(a, Use::Connect))
            {
                Ok(h) => (Some(h.addr), Some(h)),
                Err(e) => return e,
            },
            (_, false) => (Some(SockAddr::default()), None),
        };
        // SAFETY: msghdr is plain data; all-zero is a valid empty header.
        let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
        hdr.msg_iov = iovecs.as_mut_ptr();
        hdr.msg_iovlen = iovecs.len();
        if let Some(a) = addr.as_mut() {
            hdr.msg_name = a.bytes.as_mut_ptr().cast();
            hdr.msg_namelen = if write { a.len } else { a.bytes.len() as u32 };
        }
        let room = control.as_ref().map_or(0, Vec::len);
        if let Some(c) = control.as_mut().filter(|c| !c.is_empty()) {
            hdr.msg_control = c.as_mut_ptr().cast();
        }
        let events = if write { libc::POLLOUT } else { libc::POLLIN };
        let n = self.blocking(fd, events, flags & io::BLOCK != 0, || {
            // A failed try may have left it changed.
            hdr.msg_controllen = room;
            // SAFETY: `hdr` points at checked guest iovecs (guest RAM stays
            // mapped), at our address buffer and at our control buffer of
            // `room` bytes (or none).
            ret(unsafe {
                if write {
                    libc::sendmsg(fd, &hdr, msg_flags)
                } else {
                    libc::recvmsg(fd, &mut hdr, msg_flags)
                }
            } as i64)
        });
        if n >= 0
            && !write
            && let Some(c) = control.as_mut()
            && self
                .control_received(c, hdr.msg_controllen, ctl_gpa)
                .is_err()
        {
            return EFAULT;
        }
        if n >= 0
            && !write
            && let Some(mut a) = addr
        {
            {
                a.len = hdr.msg_namelen;
                a = self.guest_unix_name(a);
                a.pad = hdr.msg_flags as u32;
                if self.ram.write(addr_gpa, a).is_err() {
                    return EFAULT;
                }
            }
        }
        n
    }

    /// `NewFd`: pipes, sockets, eventfds, timerfds, epoll instances, all
    /// non-blocking and close-on-exec on the host.
    pub(super) fn new_fd(&mut self, a: [u64; 6]) -> i64 {
        let one = |this: &mut Self, rc: i64| match owned(rc) {
            Ok(fd) => this.fds.adopt(fd),
            Err(e) => e,
        };
        let (dom, ty, proto) = (a[1] as i32, a[2] as i32, a[3] as i32);
        match a[0] {
            new::PIPE | new::SOCKETPAIR => {
                let mut fds = [-1i32; 2];
                let rc = if a[0] == new::PIPE {
                    let flags = libc::O_NONBLOCK | libc::O_CLOEXEC | (a[1] as i32 & libc::O_DIRECT);
                    // SAFETY: `fds` holds two ints.
                    unsafe { libc::pipe2(fds.as_mut_ptr(), flags) }
                } else {
                    if dom != libc::AF_UNIX {
                        return err(libc::EAFNOSUPPORT);
                    }
                    // SAFETY: as above.
                    unsafe {
                        libc::socketpair(
                            dom,
                            (ty & !TYPE_FLAGS) | TYPE_FLAGS,
                            proto,
                            fds.as_mut_ptr(),
                        )
                    }
                };
                if rc < 0 {
                    return ret(rc as i64);
                }
                let (r, w) = (owned(fds[0].into()), owned(fds[1].into()));
                let (Ok(r), Ok(w)) = (r, w) else {
                    return err(libc::EMFILE);
                };
                let pair = [self.fds.adopt(r), self.fds.adopt(w)];
                // Both or neither: one end refused (EMFILE), or no place
                // to tell the guest, closes the other.
                let undo = |this: &mut Self, rc: i64| {
                    for n in pair.into_iter().filter(|n| *n >= 0) {
                        this.fds.close(n as u64);
                    }
                    rc
                };
                if let Some(&e) = pair.iter().find(|n| **n < 0) {
                    return undo(self, e);
                }
                for (i, v) in pair.iter().enumerate() {
                    if self.ram.write(a[4] + i as u64 * 4, *v as i32).is_err() {
                        return undo(self, EFAULT);
                    }
                }
                0
            }
            new::SOCKET => {
                if ![libc::AF_INET, libc::AF_INET6, libc::AF_UNIX].contains(&dom) {
                    return err(libc::EAFNOSUPPORT);
                }
                let base = ty & !TYPE_FLAGS;
                if base == libc::SOCK_RAW && dom != libc::AF_UNIX {
                    // Raw IP sockets are not passed through: the answer of
                    // a Linux process without CAP_NET_RAW.
                    return err(libc::EPERM);
                }
                let icmp = (dom == libc::AF_INET && proto == libc::IPPROTO_ICMP)
                    || (dom == libc::AF_INET6 && proto == libc::IPPROTO_ICMPV6);
                if base == libc::SOCK_DGRAM && icmp {
                    // ICMP "ping" sockets: Linux's answer outside
                    // `net.ipv4.ping_group_range` (its default), whatever
                    // the host's setting.
                    return err(libc::EACCES);
                }
                if ![libc::SOCK_STREAM, libc::SOCK_DGRAM, libc::SOCK_SEQPACKET].contains(&base) {
                    return err(libc::ESOCKTNOSUPPORT);
                }
                // SAFETY: integer arguments only.
                one(self, unsafe { libc::socket(dom, base | TYPE_FLAGS, proto) }
                    as i64)
            }
            new::EVENTFD => {
                let flags =
                    libc::EFD_NONBLOCK | libc::EFD_CLOEXEC | (a[2] as i32 & libc::EFD_SEMAPHORE);
                // SAFETY: integer arguments only.
                one(self, unsafe { libc::eventfd(a[1] as u32, flags) } as i64)
            }
            new::TIMERFD => {
                // SAFETY: integer arguments only.
                let fd = unsafe {
                    libc::timerfd_create(a[1] as i32, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC)
                };
                one(self, fd as i64)
            }
            new::MEMFD => {
                // SAFETY: a NUL-terminated name and integer flags.
                let fd = unsafe { libc::memfd_create(c"qrun-memfd".as_ptr(), libc::MFD_CLOEXEC) };
                one(self, fd as i64)
            }
            // SAFETY: integer argument only.
            new::EPOLL => one(self, unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) }
                as i64),
            _ => err(libc::ENOSYS),
        }
    }

    pub(super) fn epoll_ctl(&mut self, epfd: i32, a: [u64; 6]) -> i64 {
        let target = match self.fds.check(a[3]) {
            Ok(fd) => fd,
            Err(e) => return e,
        };
        let mut ev = libc::epoll_event {
            events: a[4] as u32,
            u64: a[5],
        };
        // SAFETY: valid fds and an event record of ours.
        ret(unsafe { libc::epoll_ctl(epfd, a[2] as i32, target, &mut ev) } as i64)
    }

    pub(super) fn timerfd(&mut self, fd: i32, a: [u64; 6]) -> i64 {
        let read_spec = |gpa: u64| -> Result<libc::itimerspec, i64> {
            let mut v = [0u64; 4];
            for (i, x) in v.iter_mut().enumerate() {
                *x = self.ram.read(gpa + i as u64 * 8).map_err(|_| EFAULT)?;
            }
            let ts = |s: u64, ns: u64| libc::timespec {
                tv_sec: s as i64,
                tv_nsec: ns as i64,
            };
            Ok(libc::itimerspec {
                it_interval: ts(v[0], v[1]),
                it_value: ts(v[2], v[3]),
            })
        };
        let write_spec = |gpa: u64, s: &libc::itimerspec| -> i64 {
            let v = [
                s.it_interval.tv_sec as u64,
                s.it_interval.tv_nsec as u64,
                s.it_value.tv_sec as u64,
                s.it_value.tv_nsec as u64,
            ];
            for (i, x) in v.iter().enumerate() {
                if self.ram.write(gpa + i as u64 * 8, *x).is_err() {
                    return EFAULT;
                }
            }
            0
        };
        // SAFETY: itimerspec is plain data; all-zero is valid.
        let mut old: libc::itimerspec = unsafe { std::mem::zeroed() };
        if a[0] == fdop::TIMERFD_GET {
            // SAFETY: valid fd and an itimerspec of ours.
            let rc = unsafe { libc::timerfd_gettime(fd, &mut old) };
            return if rc < 0 {
                ret(rc as i64)
            } else {
                write_spec(a[2], &old)
            };
        }
        let new = match read_spec(a[3]) {
            Ok(s) => s,
            Err(e) => return e,
        };
        // SAFETY: valid fd and itimerspecs of ours.
        let rc = unsafe { libc::timerfd_settime(fd, a[2] as i32, &new, &mut old) };
        if rc < 0 {
            return ret(rc as i64);
        }
        if a[4] != 0 { write_spec(a[4], &old) } else { 0 }
    }
}
