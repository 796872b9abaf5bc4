//! Credentials of Unix sockets: `SO_PEERCRED` and `SCM_CREDENTIALS`.
//!
//! Every guest socket is a host socket of the one VMM process, so the
//! host's answers name the VMM, not a guest process. This table keeps,
//! per guest `AF_UNIX` socket (by host fd), what Linux keeps per socket:
//! - `peer_cred`: the credentials a peer's `SO_PEERCRED` reports (pid and
//!   effective ids), taken at `socketpair`, `connect`, `listen` and
//!   `accept`, as Linux takes them;
//! - `sender`: the credentials of the process that last sent on it (pid
//!   and real ids, or what it claimed with an `SCM_CREDENTIALS` message
//!   Linux accepts), attached to what a receiver with `SO_PASSCRED` reads.
//!
//! A socket's peer is found without a host call for a socketpair; for a
//! connected socket, the host's `sock_diag` names the peer's inode
//! (`fd::UNIX_PEER`) and the table finds the guest socket with that inode.
//! A peer outside the sandbox shows pid 0 (it is in no pid namespace the
//! program sees) and the uid and gid the host reports, as a process in a
//! container sees one.
//!
//! Where Linux is more precise: the credentials attach to the socket, not
//! to each message, so when two processes send on one socket the receiver
//! sees the last sender's for data still queued from the first; an
//! unconnected datagram carries the last unconnected datagram sender's.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use qlib::io_abi::{SockAddr, UnixPeer, fd as fdop};
use spin::Mutex;

use crate::errno::Errno;
use crate::fs::host;
use crate::process::Process;

/// `struct ucred`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ucred {
    pub pid: u32,
    pub uid: u32,
    pub gid: u32,
}

impl Ucred {
    /// `struct ucred`'s bytes.
    pub fn bytes(&self) -> [u8; 12] {
        let mut b = [0u8; 12];
        b[0..4].copy_from_slice(&self.pid.to_le_bytes());
        b[4..8].copy_from_slice(&self.uid.to_le_bytes());
        b[8..12].copy_from_slice(&self.gid.to_le_bytes());
        b
    }
}

/// Linux's answer for a socket with no peer credentials.
const NOBODY: Ucred = Ucred {
    pid: 0,
    uid: u32::MAX,
    gid: u32::MAX,
};

#[derive(Debug, Clone, Default)]
struct Sock {
    peer_cred: Option<Ucred>,
    sender: Option<Ucred>,
    listening: bool,
    /// The peer socket (host fd): the other end of a socketpair, or the
    /// guest socket found at the other end of a connection.
    pair: Option<i32>,
    /// This socket's host inode, once asked.
    ino: Option<u32>,
    /// The address it was bound to (guest form), for a listener.
    bound: Option<Vec<u8>>,
    /// The address it connected to (guest form).
    target: Option<Vec<u8>>,
}

static SOCKS: Mutex<BTreeMap<i32, Sock>> = Mutex::new(BTreeMap::new());
/// The sender of the last datagram sent to an address.
static LAST_DGRAM: Mutex<Option<Ucred>> = Mutex::new(None);

/// The caller's credentials for `SO_PEERCRED`: pid, effective ids.
fn effective(p: &Process) -> Ucred {
    Ucred {
        pid: crate::task::current_tgid(),
        uid: p.ids[1],
        gid: p.ids[3],
    }
}

/// The caller's credentials for `SCM_CREDENTIALS`: pid, real ids.
pub fn real(p: &Process) -> Ucred {
    Ucred {
        pid: crate::task::current_tgid(),
        uid: p.ids[0],
        gid: p.ids[2],
    }
}

fn addr_key(addr: &SockAddr) -> Vec<u8> {
    addr.bytes[..(addr.len as usize).min(addr.bytes.len())].to_vec()
}

/// A new `AF_UNIX` socket (`socket`).
pub fn created(hfd: i32) {
    SOCKS.lock().insert(hfd, Sock::default());
}

/// A new socketpair: each end's peer credentials are the creator's.
pub fn paired(p: &Process, a: i32, b: i32) {
    let cred = Some(effective(p));
    let mut t = SOCKS.lock();
    for (me, other) in [(a, b), (b, a)] {
        t.insert(
            me,
            Sock {
                peer_cred: cred,
                pair: Some(other),
                ..Sock::default()
            },
        );
    }
}

/// `accept` on `listener` gave `hfd`: a guest Unix socket whose
/// credentials are the accepting process's.
pub fn accepted(p: &Process, listener: i32, hfd: i32) {
    let mut t = SOCKS.lock();
    if t.contains_key(&listener) {
        t.insert(
            hfd,
            Sock {
                peer_cred: Some(effective(p)),
                ..Sock::default()
            },
        );
    }
}

/// `bind` of `hfd` to `addr` succeeded.
pub fn bound(hfd: i32, addr: &SockAddr) {
    if let Some(s) = SOCKS.lock().get_mut(&hfd) {
        s.bound = Some(addr_key(addr));
    }
}

/// `connect` of `hfd` to `addr` succeeded (or is in progress): its peer
/// sees the connecting process.
pub fn connected(p: &Process, hfd: i32, addr: &SockAddr) {
    if let Some(s) = SOCKS.lock().get_mut(&hfd) {
        s.peer_cred = Some(effective(p));
        s.target = Some(addr_key(addr));
    }
}

/// `listen` on `hfd` succeeded: connectors see the listening process.
pub fn listening(p: &Process, hfd: i32) {
    if let Some(s) = SOCKS.lock().get_mut(&hfd) {
        s.peer_cred = Some(effective(p));
        s.listening = true;
    }
}

/// `SO_PASSCRED` set on `hfd`: a socket the table did not hold yet (one
/// received from outside, say) joins it. The host socket has the option
/// too, so the host writes the `SCM_CREDENTIALS` messages, whose data the
/// guest replaces (`sys_scm`).
pub fn set_passcred(hfd: i32) {
    SOCKS.lock().entry(hfd).or_default();
}

/// Data went out on `hfd` from `cred` (to `to`, for an unconnected
/// datagram).
pub fn sent(hfd: i32, cred: Ucred, to: Option<&SockAddr>) {
    let mut t = SOCKS.lock();
    let Some(s) = t.get_mut(&hfd) else {
        return;
    };
    s.sender = Some(cred);
    drop(t);
    if to.is_some() {
        *LAST_DGRAM.lock() = Some(cred);
    }
}

/// Host fd `hfd` was closed: no socket names it as its peer any more
/// (its number may come back for something else).
pub fn closed(hfd: i32) {
    let mut t = SOCKS.lock();
    if t.remove(&hfd).is_some() {
        for s in t.values_mut() {
            if s.pair == Some(hfd) {
                s.pair = None;
            }
        }
    }
}

fn ask_host(hfd: i32) -> Result<UnixPeer, Errno> {
    let mut buf = [0u8; size_of::<UnixPeer>()];
    host::fd_op_buf(fdop::UNIX_PEER, hfd, 0, 0, &mut buf)?;
    let w =
        |i: usize| u32::from_le_bytes([buf[4 * i], buf[4 * i + 1], buf[4 * i + 2], buf[4 * i + 3]]);
    Ok(UnixPeer {
        ino: w(0),
        peer_ino: w(1),
        inside: w(2),
        uid: w(3),
        gid: w(4),
        pad: 0,
    })
}

/// Who is at the other end of `hfd`.
enum Peer {
    /// Not connected.
    None,
    /// A guest socket (host fd).
    Guest(i32),
    /// A connection inside the sandbox whose other end the table does not
    /// hold (not accepted yet): the listener it connected to, if known.
    Pending(Option<i32>),
    /// Outside the sandbox: the host's uid and gid.
    Outside(u32, u32),
}

fn peer(hfd: i32) -> Result<Peer, Errno> {
    if let Some(other) = SOCKS.lock().get(&hfd).and_then(|s| s.pair) {
        return Ok(Peer::Guest(other));
    }
    let me = ask_host(hfd)?;
    if let Some(s) = SOCKS.lock().get_mut(&hfd) {
        s.ino = Some(me.ino);
    }
    if me.inside == 0 {
        return Ok(if me.peer_ino == 0 {
            Peer::None
        } else {
            Peer::Outside(me.uid, me.gid)
        });
    }
    // A connection not accepted yet has a peer with no inode.
    if me.peer_ino != 0
        && let Some(found) = by_inode(me.peer_ino)?
    {
        if let Some(s) = SOCKS.lock().get_mut(&hfd) {
            s.pair = Some(found);
        }
        return Ok(Peer::Guest(found));
    }
    let t = SOCKS.lock();
    let target = t.get(&hfd).and_then(|s| s.target.clone());
    let listener = target.and_then(|want| {
        t.iter()
            .find(|(_, s)| s.listening && s.bound.as_ref() == Some(&want))
            .map(|(&fd, _)| fd)
    });
    Ok(Peer::Pending(listener))
}

/// The guest socket whose host inode is `ino`; asks the host for the
/// inodes not known yet (no lock held across the calls).
fn by_inode(ino: u32) -> Result<Option<i32>, Errno> {
    let unknown: Vec<i32> = {
        let t = SOCKS.lock();
        if let Some((&fd, _)) = t.iter().find(|(_, s)| s.ino == Some(ino)) {
            return Ok(Some(fd));
        }
        t.iter()
            .filter(|(_, s)| s.ino.is_none())
            .map(|(&fd, _)| fd)
            .collect()
    };
    for fd in unknown {
        let Ok(u) = ask_host(fd) else { continue };
        if let Some(s) = SOCKS.lock().get_mut(&fd) {
            s.ino = Some(u.ino);
        }
        if u.ino == ino {
            return Ok(Some(fd));
        }
    }
    Ok(None)
}

/// `SO_PEERCRED` of socket `hfd`. A socket the table does not hold yet
/// (received from outside, or not `AF_UNIX`) joins it, so the host's
/// answer, which names host pids, never reaches the program.
pub fn peer_cred(hfd: i32) -> Result<Ucred, Errno> {
    match SOCKS.lock().entry(hfd).or_default() {
        // A listener reports its own (Linux sets them at listen).
        s if s.listening => return Ok(s.peer_cred.unwrap_or(NOBODY)),
        _ => {}
    }
    Ok(match peer(hfd)? {
        Peer::None => NOBODY,
        Peer::Guest(fd) | Peer::Pending(Some(fd)) => SOCKS
            .lock()
            .get(&fd)
            .and_then(|s| s.peer_cred)
            .unwrap_or(NOBODY),
        Peer::Pending(None) => NOBODY,
        Peer::Outside(uid, gid) => Ucred { pid: 0, uid, gid },
    })
}

/// The credentials a receive on `hfd` with `SO_PASSCRED` attaches.
pub fn received_cred(hfd: i32) -> Result<Ucred, Errno> {
    Ok(match peer(hfd)? {
        Peer::None => LAST_DGRAM.lock().unwrap_or(NOBODY),
        Peer::Guest(fd) => {
            let t = SOCKS.lock();
            let s = t.get(&fd);
            s.and_then(|s| s.sender.or(s.peer_cred)).unwrap_or(NOBODY)
        }
        Peer::Pending(_) => NOBODY,
        Peer::Outside(uid, gid) => Ucred { pid: 0, uid, gid },
    })
}
