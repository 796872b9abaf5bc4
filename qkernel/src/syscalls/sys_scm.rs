//! Control messages of `sendmsg`/`recvmsg` (docs/ancillary-data.md).
//!
//! Every control message crosses the host socket: the VMM passes the
//! program's `cmsghdr` list to the host's `sendmsg` (after checking it,
//! `qlib::cmsg::verdict`) and receives with the program's room, so IP and
//! IPv6 messages (`IP_PKTINFO`, `IP_TTL`, `IPV6_HOPLIMIT`, `IPV6_TCLASS`
//! …), timestamps and the truncation rules (`MSG_CTRUNC`, a message cut
//! at the end of the buffer) are the host kernel's, which is Linux. Two
//! `SOL_SOCKET` messages are the guest's business:
//!
//! `SCM_RIGHTS`: the fds cross the host socket as the VMM's own, so they
//! reach processes inside and outside the sandbox alike. Between
//! processes of this sandbox the receiver gets the sender's very open
//! file (status flags, path, kind): each file sent is kept in a small
//! in-flight list, keyed by its host inode, until a receive finds it (the
//! new host fd is then closed); a file from outside the sandbox becomes a
//! new open file of the kind its host mode says. The kernel's own files
//! (guest pipes, `/dev/null`) have no host fd: a host memfd stands in for
//! each on the wire, so they pass between the sandbox's processes (a
//! receiver outside the sandbox gets an empty memfd).
//!
//! `SCM_CREDENTIALS`: an outgoing one is checked as Linux checks it and
//! becomes what the receiver sees (it does not cross); in a received
//! one, which the host writes for a socket with `SO_PASSCRED`, the guest
//! puts the sender's credentials (`sys_ucred`) in place of the host's.

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;

use qlib::cmsg::{self, SCM_CREDENTIALS, SCM_RIGHTS, SOL_SOCKET, Walk};
use qlib::io_abi::{MSG_CONTROL_MAX, MSG_MAX_FDS, MsgCtl, SockAddr, io};
use spin::Mutex;

use super::rw::{UserBuf, host_send, host_transfer};
use crate::errno::{Errno, SysResult};
use crate::fs::stat::{S_IFDIR, S_IFMT, S_IFREG, STATX_SIZE};
use crate::fs::{Backing, File, HostKind, O_ACCMODE, O_APPEND, host};
use crate::mm::uaccess;
use crate::process::Process;
use crate::task::park;

use super::sys_ucred::{self, Ucred};

const MSG_DONTWAIT: u64 = 0x40;
const MSG_NOSIGNAL: u64 = 0x4000;
const MSG_CTRUNC: u32 = 0x8;
const MSG_CMSG_CLOEXEC: u64 = 0x4000_0000;
const ENOBUFS: Errno = Errno(105);
/// Most files kept in flight.
const IN_FLIGHT_MAX: usize = 64;
const S_IFSOCK: u32 = 0o140000;
const S_IFIFO: u32 = 0o010000;

/// A file sent and not yet received: (host device and inode, file).
type InFlight = ((u64, u64), Arc<File>);

static IN_FLIGHT: Mutex<Vec<InFlight>> = Mutex::new(Vec::new());

fn identity(sx: &[u8; STATX_SIZE]) -> (u64, u64) {
    let u64_at = |o: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&sx[o..o + 8]);
        u64::from_le_bytes(b)
    };
    (u64_at(136), u64_at(32))
}

/// What an outgoing `msghdr`'s control data passes.
#[derive(Default)]
pub struct Control {
    /// Files passed with `SCM_RIGHTS`.
    pub files: Vec<Arc<File>>,
    /// Credentials claimed with `SCM_CREDENTIALS` (checked).
    pub cred: Option<Ucred>,
    /// The other messages, as the program wrote them (each padded).
    pub raw: Vec<u8>,
}

impl Control {
    /// Whether anything must reach the host's `sendmsg`.
    pub fn for_host(&self) -> bool {
        !self.files.is_empty() || !self.raw.is_empty()
    }
}

/// The control data of the outgoing `msghdr` at `msg_va`, walked as
/// Linux walks it (`qlib::cmsg::Walk::send`: `EINVAL` for a bad header).
pub fn control_to_send(p: &mut Process, msg_va: u64) -> Result<Control, Errno> {
    let control: u64 = uaccess::read(&mut p.mm, msg_va + 32)?;
    let len: u64 = uaccess::read(&mut p.mm, msg_va + 40)?;
    let mut out = Control::default();
    if len == 0 {
        return Ok(out);
    }
    if len > MSG_CONTROL_MAX {
        return Err(ENOBUFS);
    }
    let mut buf = alloc::vec![0u8; len as usize];
    uaccess::copy_in(&mut p.mm, control, &mut buf)?;
    for h in Walk::send(&buf) {
        let h = h.map_err(|_| Errno::EINVAL)?;
        let data = &buf[h.data(buf.len())];
        match (h.level, h.kind) {
            (SOL_SOCKET, SCM_RIGHTS) => {
                for c in data.chunks_exact(4) {
                    let fd = i32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                    out.files.push(p.files.get(fd as u32 as u64)?);
                }
            }
            (SOL_SOCKET, SCM_CREDENTIALS) => out.cred = Some(claimed(p, data)?),
            _ => {
                out.raw.extend_from_slice(&buf[h.off..h.off + h.len]);
                out.raw.resize(cmsg::align(out.raw.len()), 0);
            }
        }
    }
    if out.files.len() > MSG_MAX_FDS {
        log::warn!("SCM_RIGHTS of more than {MSG_MAX_FDS} fds: EINVAL");
        return Err(Errno::EINVAL);
    }
    Ok(out)
}

/// The credentials an `SCM_CREDENTIALS` message (`struct ucred` {pid,
/// uid, gid}) claims, if Linux lets the caller claim them: itself (root
/// may claim any uid/gid).
fn claimed(p: &Process, data: &[u8]) -> Result<Ucred, Errno> {
    if data.len() < 12 {
        return Err(Errno::EINVAL);
    }
    let w = |i: usize| {
        let o = 4 * i;
        u32::from_le_bytes([data[o], data[o + 1], data[o + 2], data[o + 3]])
    };
    // Linux: any of the real, effective and saved ids.
    let uid_ok = p.caps.has(crate::creds::CAP_SETUID) || p.ids[..2].contains(&w(1));
    let gid_ok = p.caps.has(crate::creds::CAP_SETGID) || p.ids[2..].contains(&w(2));
    // Another pid needs CAP_SYS_ADMIN, which the guest never grants.
    let pid_ok = w(0) == crate::task::current_tgid();
    if !pid_ok || !uid_ok || !gid_ok {
        return Err(Errno::EPERM);
    }
    Ok(Ucred {
        pid: w(0),
        uid: w(1),
        gid: w(2),
    })
}

/// Sends `bufs` over host socket `hfd` (of open file `f`) with the
/// control data `ctl` attached to the first byte: its other messages as
/// they are, its files as one `SCM_RIGHTS` message of host fds.
pub fn send_with_control(
    p: &mut Process,
    f: &File,
    hfd: i32,
    bufs: &[UserBuf],
    mut addr: Option<SockAddr>,
    flags: u64,
    ctl: &Control,
) -> SysResult {
    let files = &ctl.files;
    let mut wire = ctl.raw.clone();
    let mut keys = Vec::with_capacity(files.len());
    // Stand-ins for the kernel's own files (guest pipes, /dev/null):
    // a host memfd each, whose inode keys the file in flight. Closed once
    // sent (the socket holds its own reference).
    let mut tokens = Vec::new();
    if !files.is_empty() {
        let data = 4 * files.len();
        wire.extend_from_slice(&(cmsg::len(data) as u64).to_le_bytes());
        wire.extend_from_slice(&SOL_SOCKET.to_le_bytes());
        wire.extend_from_slice(&SCM_RIGHTS.to_le_bytes());
    }
    for file in files {
        if let Some(z) = &file.frozen {
            // Whoever receives it may move the host offset.
            z.set(None);
        }
        let hf = match file.host_fd() {
            Some(hf) => hf,
            None => match host::new_fd(qlib::io_abi::new::MEMFD, 0, 0, 0) {
                Ok(t) => {
                    tokens.push(t);
                    t
                }
                Err(e) => {
                    tokens.iter().for_each(|&t| host::close(t));
                    return Err(e);
                }
            },
        };
        wire.extend_from_slice(&hf.to_le_bytes());
        match host::statx_fd(hf) {
            Ok(sx) => keys.push(identity(&sx)),
            Err(e) => {
                tokens.iter().for_each(|&t| host::close(t));
                return Err(e);
            }
        }
    }
    wire.resize(cmsg::align(wire.len()), 0);
    let mut rec = Box::new(MsgCtl {
        buf: if wire.is_empty() {
            0
        } else {
            host::buf_gpa(&wire)
        },
        len: wire.len() as u64,
        ..MsgCtl::default()
    });
    let mut io_flags = io::WRITE | ((flags & !MSG_DONTWAIT) << 32);
    let blocking = !f.nonblocking() && flags & MSG_DONTWAIT == 0;
    // With other tasks to run, a full socket parks this one instead of
    // blocking the vCPU in the host.
    let park = blocking && park::worthwhile();
    if blocking && !park {
        io_flags |= io::BLOCK;
    }
    let r = host_send(p, bufs, |iov, done| {
        let c = if done == 0 { Some(&mut *rec) } else { None };
        host::msg_ctl(hfd, iov, addr.as_mut(), io_flags, c)
    });
    if park && r == Err(Errno::EAGAIN) {
        tokens.iter().for_each(|&t| host::close(t));
        return park::wait_on(&[(hfd, park::POLLOUT)], park::deadline(None));
    }
    // An empty datagram is news to a reader too.
    if r.is_ok() {
        park::wake_readers_of_peer(hfd);
    }
    match r {
        Ok(_) => {
            let mut q = IN_FLIGHT.lock();
            for (key, file) in keys.into_iter().zip(files) {
                if q.len() >= IN_FLIGHT_MAX {
                    q.remove(0);
                }
                q.push((key, file.clone()));
            }
        }
        Err(Errno::EPIPE) if flags & MSG_NOSIGNAL == 0 => crate::signal::raise_sigpipe(),
        Err(_) => {}
    }
    tokens.iter().for_each(|&t| host::close(t));
    r
}

/// Receives into `bufs` from host socket `hfd` (of open file `f`) with
/// the control room of the user's `msghdr` at `msg_va`; installs the fds
/// received, puts the sender's credentials in an `SCM_CREDENTIALS`
/// message, and writes the control data and `msg_controllen` back
/// (`MSG_CTRUNC` in the returned flags). Returns the byte count and the
/// sender's address.
pub fn recv_with_control(
    p: &mut Process,
    f: &File,
    hfd: i32,
    bufs: &[UserBuf],
    flags: u64,
    msg_va: u64,
) -> Result<(usize, SockAddr), Errno> {
    let control: u64 = uaccess::read(&mut p.mm, msg_va + 32)?;
    let room: u64 = uaccess::read(&mut p.mm, msg_va + 40)?;
    let mut io_flags = (flags & !(MSG_DONTWAIT | MSG_CMSG_CLOEXEC)) << 32;
    let blocking = !f.nonblocking() && flags & MSG_DONTWAIT == 0;
    let park = blocking && park::worthwhile();
    if blocking && !park {
        io_flags |= io::BLOCK;
    }
    let mut addr = SockAddr::default();
    let mut kbuf = alloc::vec![0u8; room.min(MSG_CONTROL_MAX) as usize];
    let mut rec = Box::new(MsgCtl {
        buf: if kbuf.is_empty() {
            0
        } else {
            host::buf_gpa(&kbuf)
        },
        len: kbuf.len() as u64,
        ..MsgCtl::default()
    });
    let r = host_transfer(p, bufs, false, |iov, _| {
        host::msg_ctl(hfd, iov, Some(&mut addr), io_flags, Some(&mut *rec))
    });
    if park && r == Err(Errno::EAGAIN) {
        // The handler's result is dropped: it runs again once woken.
        park::wait_on(&[(hfd, park::POLLIN)], park::deadline(None))?;
        return Err(Errno::EAGAIN);
    }
    let n = r?;
    // The VMM receives with MSG_CMSG_CLOEXEC (its own copies of the fds),
    // which the host reports back in msg_flags: the program sees it only
    // if it asked for it, as on Linux.
    addr.pad = (addr.pad & !(MSG_CMSG_CLOEXEC as u32)) | (flags & MSG_CMSG_CLOEXEC) as u32;
    let used = (rec.len as usize).min(kbuf.len());
    let (used, truncated) = translate(p, hfd, &mut kbuf[..used], &rec, flags)?;
    if truncated {
        addr.pad |= MSG_CTRUNC;
    }
    if used > 0 {
        uaccess::copy_out(&mut p.mm, control, &kbuf[..used])?;
    }
    uaccess::write(&mut p.mm, msg_va + 40, &(used as u64))?;
    Ok((n, addr))
}

/// Turns the control data the host received (`buf`, with the VMM's
/// record `rec`) into the program's: each `SCM_RIGHTS` fd installed,
/// `SCM_CREDENTIALS` naming the sender as the guest knows it. Returns
/// the bytes to hand over and whether fds were lost on the way (no fd
/// left in the table: the message ends at the last one installed, as
/// Linux ends it, and `MSG_CTRUNC` says so).
fn translate(
    p: &mut Process,
    hfd: i32,
    buf: &mut [u8],
    rec: &MsgCtl,
    flags: u64,
) -> Result<(usize, bool), Errno> {
    let headers: Vec<_> = Walk::received(buf).filter_map(Result::ok).collect();
    let adopted = (rec.fds as usize).min(MSG_MAX_FDS);
    let cloexec = flags & MSG_CMSG_CLOEXEC != 0;
    let mut info = 0usize;
    // Where the data handed over ends, once an fd was lost.
    let mut cut: Option<usize> = None;
    for h in headers {
        let data = h.data(buf.len());
        match (h.level, h.kind) {
            (SOL_SOCKET, SCM_CREDENTIALS) => {
                let cred = sys_ucred::received_cred(hfd)?.bytes();
                let k = data.len().min(cred.len());
                buf[data.start..data.start + k].copy_from_slice(&cred[..k]);
            }
            (SOL_SOCKET, SCM_RIGHTS) => {
                let mut installed = 0usize;
                let mut lost = cut.is_some();
                for i in 0..data.len() / 4 {
                    let o = data.start + 4 * i;
                    let v = i32::from_le_bytes([buf[o], buf[o + 1], buf[o + 2], buf[o + 3]]);
                    // Every fd the VMM adopted becomes a file, so that one
                    // not installed closes.
                    let file = (v >= 0 && info < adopted).then(|| {
                        info += 1;
                        received_file(v, rec.flags[info - 1], rec.modes[info - 1])
                    });
                    let Some(file) = file.filter(|_| !lost) else {
                        lost = true;
                        continue;
                    };
                    match p.files.insert(file, cloexec) {
                        Ok(fd) => {
                            // At or before `o`, which was already read.
                            let w = data.start + 4 * installed;
                            buf[w..w + 4].copy_from_slice(&(fd as i32).to_le_bytes());
                            installed += 1;
                        }
                        Err(_) => lost = true,
                    }
                }
                if lost && cut.is_none() {
                    // Linux's scm_detach_fds: a shorter message, or none.
                    cut = Some(if installed == 0 {
                        h.off
                    } else {
                        let clen = cmsg::len(4 * installed) as u64;
                        buf[h.off..h.off + 8].copy_from_slice(&clen.to_le_bytes());
                        (h.off + cmsg::space(4 * installed)).min(buf.len())
                    });
                }
            }
            _ => {}
        }
    }
    Ok(match cut {
        Some(end) => (end, true),
        None => (buf.len(), false),
    })
}

/// The open file for host fd `hfd` the VMM adopted: the sender's own if
/// it is in flight here, else a new one.
fn received_file(hfd: i32, host_flags: u32, mode: u32) -> Arc<File> {
    if let Ok(sx) = host::statx_fd(hfd) {
        let key = identity(&sx);
        let mut q = IN_FLIGHT.lock();
        if let Some(i) = q.iter().position(|(k, _)| *k == key) {
            let (_, file) = q.remove(i);
            drop(q);
            host::close(hfd);
            return file;
        }
    }
    let (kind, path) = match mode & S_IFMT {
        S_IFSOCK => (HostKind::Socket, alloc::format!("socket:[{hfd}]")),
        S_IFIFO => (HostKind::Pipe, alloc::format!("pipe:[{hfd}]")),
        S_IFREG | S_IFDIR => (HostKind::File, alloc::format!("received:[{hfd}]")),
        _ => (HostKind::EventFd, "anon_inode:[received]".into()),
    };
    let flags = host_flags & (O_ACCMODE | O_APPEND);
    File::new(Backing::Host { fd: hfd, kind }, flags, path)
}
