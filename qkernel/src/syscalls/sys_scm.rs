//! `SCM_RIGHTS`: fds passed over Unix sockets with `sendmsg`/`recvmsg`.
//!
//! The fds cross the host socket as the VMM's own (`io_abi::MsgFds`), so
//! they reach processes inside and outside the sandbox alike. Between
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
//! becomes what the receiver sees; a receiver with `SO_PASSCRED` gets the
//! sender's credentials ahead of any fds (`sys_ucred`). Other control
//! messages get `EINVAL`, as on a Unix socket.

use alloc::sync::Arc;
use alloc::vec::Vec;

use qlib::io_abi::{MSG_MAX_FDS, MsgFds, SockAddr, io};
use spin::Mutex;

use super::rw::{UserBuf, host_transfer};
use crate::errno::{Errno, SysResult};
use crate::fs::stat::{S_IFDIR, S_IFMT, S_IFREG, STATX_SIZE};
use crate::fs::{Backing, File, HostKind, O_ACCMODE, O_APPEND, host};
use crate::mm::uaccess;
use crate::process::Process;
use crate::task::park;

use super::sys_ucred::{self, Ucred};

const SOL_SOCKET: i32 = 1;
const SCM_RIGHTS: i32 = 1;
const SCM_CREDENTIALS: i32 = 2;
const MSG_DONTWAIT: u64 = 0x40;
const MSG_NOSIGNAL: u64 = 0x4000;
const MSG_CTRUNC: u32 = 0x8;
const MSG_CMSG_CLOEXEC: u64 = 0x4000_0000;
/// `sizeof(struct cmsghdr)`.
const CMSG_HDR: usize = 16;
/// Longest control buffer read (Linux's `optmem_max` default is 20 KiB).
const CONTROL_MAX: u64 = 20 << 10;
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
}

/// The control data of the outgoing `msghdr` at `msg_va`.
pub fn control_to_send(p: &mut Process, msg_va: u64) -> Result<Control, Errno> {
    let control: u64 = uaccess::read(&mut p.mm, msg_va + 32)?;
    let len: u64 = uaccess::read(&mut p.mm, msg_va + 40)?;
    let mut out = Control::default();
    if control == 0 || len == 0 {
        return Ok(out);
    }
    if len > CONTROL_MAX {
        return Err(Errno(105)); // ENOBUFS
    }
    let mut buf = alloc::vec![0u8; len as usize];
    uaccess::copy_in(&mut p.mm, control, &mut buf)?;
    let files = &mut out.files;
    let mut off = 0usize;
    while off + CMSG_HDR <= buf.len() {
        let h = &buf[off..];
        let clen = u64::from_le_bytes(h[0..8].try_into().map_err(|_| Errno::EINVAL)?) as usize;
        let level = i32::from_le_bytes(h[8..12].try_into().map_err(|_| Errno::EINVAL)?);
        let kind = i32::from_le_bytes(h[12..16].try_into().map_err(|_| Errno::EINVAL)?);
        if clen < CMSG_HDR || clen > buf.len() - off {
            return Err(Errno::EINVAL);
        }
        match (level, kind) {
            (SOL_SOCKET, SCM_RIGHTS) => {
                for c in h[CMSG_HDR..clen].chunks_exact(4) {
                    let fd = i32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                    files.push(p.files.get(fd as u32 as u64)?);
                }
            }
            (SOL_SOCKET, SCM_CREDENTIALS) => {
                // struct ucred {pid, uid, gid}: a process may only claim
                // itself (root may claim any uid/gid).
                if clen < CMSG_HDR + 12 {
                    return Err(Errno::EINVAL);
                }
                let w = |i: usize| {
                    let o = CMSG_HDR + 4 * i;
                    u32::from_le_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]])
                };
                // Linux: any of the real, effective and saved ids.
                let uid_ok = p.caps.has(crate::creds::CAP_SETUID) || p.ids[..2].contains(&w(1));
                let gid_ok = p.caps.has(crate::creds::CAP_SETGID) || p.ids[2..].contains(&w(2));
                // Another pid needs CAP_SYS_ADMIN, which the guest never
                // grants.
                let pid_ok = w(0) == crate::task::current_tgid();
                if !pid_ok || !uid_ok || !gid_ok {
                    return Err(Errno::EPERM);
                }
                out.cred = Some(Ucred {
                    pid: w(0),
                    uid: w(1),
                    gid: w(2),
                });
            }
            _ => return Err(Errno::EINVAL),
        }
        off += clen.next_multiple_of(8);
    }
    if out.files.len() > MSG_MAX_FDS {
        log::warn!("SCM_RIGHTS of more than {MSG_MAX_FDS} fds: EINVAL");
        return Err(Errno::EINVAL);
    }
    Ok(out)
}

/// Sends `bufs` over host socket `hfd` (of open file `f`) with `files`
/// attached to the first byte.
pub fn send_with_rights(
    p: &mut Process,
    f: &File,
    hfd: i32,
    bufs: &[UserBuf],
    mut addr: Option<SockAddr>,
    flags: u64,
    files: &[Arc<File>],
) -> SysResult {
    if files.is_empty() {
        return Ok(0);
    }
    let mut ctl = MsgFds {
        count: files.len() as u32,
        ..MsgFds::default()
    };
    let mut keys = Vec::with_capacity(files.len());
    // Stand-ins for the kernel's own files (guest pipes, /dev/null):
    // a host memfd each, whose inode keys the file in flight. Closed once
    // sent (the socket holds its own reference).
    let mut tokens = Vec::new();
    for (i, file) in files.iter().enumerate() {
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
        ctl.fds[i] = hf;
        match host::statx_fd(hf) {
            Ok(sx) => keys.push(identity(&sx)),
            Err(e) => {
                tokens.iter().for_each(|&t| host::close(t));
                return Err(e);
            }
        }
    }
    let mut io_flags = io::WRITE | ((flags & !MSG_DONTWAIT) << 32);
    let blocking = !f.nonblocking() && flags & MSG_DONTWAIT == 0;
    // With other tasks to run, a full socket parks this one instead of
    // blocking the vCPU in the host.
    let park = blocking && park::worthwhile();
    if blocking && !park {
        io_flags |= io::BLOCK;
    }
    let r = host_transfer(p, bufs, true, |iov, done| {
        let c = if done == 0 { Some(&mut ctl) } else { None };
        host::msg_ctl(hfd, iov, addr.as_mut(), io_flags, c)
    });
    if park && r == Err(Errno::EAGAIN) {
        tokens.iter().for_each(|&t| host::close(t));
        return park::wait_on(&[(hfd, park::POLLOUT)], park::deadline(None));
    }
    if r.is_ok_and(|n| n > 0) {
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
/// room for `SCM_RIGHTS`; installs the fds received and writes the
/// control data to the user's `msghdr` at `msg_va` (`msg_controllen`,
/// `MSG_CTRUNC` in the returned flags). Returns the byte count and the
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
    let mut ctl = MsgFds::default();
    let r = host_transfer(p, bufs, false, |iov, _| {
        host::msg_ctl(hfd, iov, Some(&mut addr), io_flags, Some(&mut ctl))
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
    let count = (ctl.count as usize).min(MSG_MAX_FDS);
    // SCM_CREDENTIALS first, as Linux puts it.
    let mut out = Vec::new();
    if sys_ucred::passcred(hfd) {
        let cred = sys_ucred::received_cred(hfd)?;
        let clen = CMSG_HDR + 12;
        if (room as usize) < clen {
            addr.pad |= MSG_CTRUNC;
        } else {
            out.extend_from_slice(&(clen as u64).to_le_bytes());
            out.extend_from_slice(&SOL_SOCKET.to_le_bytes());
            out.extend_from_slice(&SCM_CREDENTIALS.to_le_bytes());
            out.extend_from_slice(&cred.bytes());
            out.resize(clen.next_multiple_of(8), 0);
        }
    }
    // How many fds fit the rest.
    let fit = (room as usize)
        .saturating_sub(out.len())
        .saturating_sub(CMSG_HDR)
        / 4;
    let keep = count.min(fit);
    let mut fds = Vec::with_capacity(keep);
    for i in 0..count {
        let file = received_file(ctl.fds[i], ctl.flags[i], ctl.modes[i]);
        if i < keep {
            let cloexec = flags & MSG_CMSG_CLOEXEC != 0;
            fds.push(p.files.insert(file, cloexec)? as i32);
        }
    }
    if ctl.truncated != 0 || keep < count {
        addr.pad |= MSG_CTRUNC;
    }
    if keep > 0 {
        let clen = CMSG_HDR + 4 * keep;
        out.extend_from_slice(&(clen as u64).to_le_bytes());
        out.extend_from_slice(&SOL_SOCKET.to_le_bytes());
        out.extend_from_slice(&SCM_RIGHTS.to_le_bytes());
        for fd in &fds {
            out.extend_from_slice(&fd.to_le_bytes());
        }
        out.resize(out.len().next_multiple_of(8), 0);
    }
    if out.is_empty() {
        uaccess::write(&mut p.mm, msg_va + 40, &0u64)?;
        return Ok((n, addr));
    }
    let used = (out.len() as u64).min(room);
    uaccess::copy_out(&mut p.mm, control, &out[..used as usize])?;
    uaccess::write(&mut p.mm, msg_va + 40, &used)?;
    Ok((n, addr))
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
