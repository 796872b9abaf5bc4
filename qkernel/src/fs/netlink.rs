//! `NETLINK_ROUTE` sockets kept in the guest: enough rtnetlink for
//! `getifaddrs`, `if_nameindex` and `ip addr`/`ip link` (`RTM_GETLINK` and
//! `RTM_GETADDR`, dumped or one link by index), answered from the links
//! and addresses of the sandbox's network namespace (`Call::NetIfaces`:
//! the namespace its host sockets live in). Nothing reaches the host's
//! netlink.
//!
//! As Linux: a message whose header is short or longer than what was sent
//! ends the datagram without an answer; a request for a type that is not
//! served gets an `NLMSG_ERROR` of `EOPNOTSUPP`, a single `RTM_GETLINK`
//! whose payload is short one of `EINVAL` and an unknown index `ENODEV`;
//! `NLM_F_ACK` is honoured. Not as Linux: nothing is ever multicast (a
//! subscription hears nothing), and a read with nothing queued returns
//! `EAGAIN` even on a blocking socket, since nothing will ever come.

use alloc::boxed::Box;
use alloc::collections::{BTreeSet, VecDeque};
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};

use qlib::abi::Call;
use qlib::netinfo::{Addr, Link, NetInfo};
use spin::Mutex;

use crate::errno::Errno;
use crate::hostcall;

pub const AF_NETLINK: u16 = 16;
pub const NETLINK_ROUTE: u64 = 0;

const NLMSG_HDRLEN: usize = 16;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_MULTI: u16 = 0x2;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_DUMP: u16 = 0x300;
/// `NLM_F_CAPPED`: an ack without the request's payload.
const NLM_F_CAPPED: u16 = 0x100;
const RTM_NEWLINK: u16 = 16;
const RTM_GETLINK: u16 = 18;
const RTM_NEWADDR: u16 = 20;
const RTM_GETADDR: u16 = 22;
const AF_INET: u8 = 2;

const IFLA_ADDRESS: u16 = 1;
const IFLA_BROADCAST: u16 = 2;
const IFLA_IFNAME: u16 = 3;
const IFLA_MTU: u16 = 4;
const IFLA_TXQLEN: u16 = 13;
const IFLA_OPERSTATE: u16 = 16;
const IFLA_LINKMODE: u16 = 17;
const IFA_ADDRESS: u16 = 1;
const IFA_LOCAL: u16 = 2;
const IFA_LABEL: u16 = 3;
const IFA_BROADCAST: u16 = 4;
const IFA_FLAGS: u16 = 8;
/// `IFA_F_PERMANENT`: a configured address (not from autoconfiguration).
const IFA_F_PERMANENT: u32 = 0x80;

/// Largest datagram of a dump (Linux's `NLMSG_GOODSIZE` on 4 KiB pages is
/// a little under a page).
const DGRAM_MAX: usize = 3600;
/// Most datagrams queued on one socket; a request beyond is refused with
/// `ENOBUFS`.
const QUEUE_MAX: usize = 64;

/// Port ids in use (`nl_pid`).
static PORTS: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());
/// The next port id for a process's second and later sockets (Linux
/// hands out negative ids from -4096 down).
static NEXT_PORT: Mutex<u32> = Mutex::new(0u32.wrapping_sub(4096));

#[derive(Debug, Default)]
struct State {
    /// The port id, 0 until bound (explicitly or by the first send).
    port: u32,
    queue: VecDeque<Vec<u8>>,
}

/// A guest `NETLINK_ROUTE` socket.
#[derive(Debug)]
pub struct Netlink {
    st: Mutex<State>,
    ino: u64,
}

/// Inode numbers of netlink sockets (`fstat`, `socket:[N]`).
static NEXT_INO: AtomicU64 = AtomicU64::new(0x4e4c_0000);

impl Drop for Netlink {
    fn drop(&mut self) {
        let port = self.st.lock().port;
        if port != 0 {
            PORTS.lock().remove(&port);
        }
    }
}

/// A new port id: the process's id if free, else a fresh negative one.
fn new_port(tgid: u32) -> u32 {
    let mut ports = PORTS.lock();
    if ports.insert(tgid) {
        return tgid;
    }
    let mut next = NEXT_PORT.lock();
    loop {
        let p = *next;
        *next = next.wrapping_sub(1);
        if p != 0 && ports.insert(p) {
            return p;
        }
    }
}

impl Netlink {
    /// A new socket, not bound.
    pub fn new() -> Self {
        Self {
            st: Mutex::new(State::default()),
            ino: NEXT_INO.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// Its inode number.
    pub fn ino(&self) -> u64 {
        self.ino
    }

    fn port(&self, st: &mut State) -> u32 {
        if st.port == 0 {
            st.port = new_port(crate::task::current_tgid());
        }
        st.port
    }

    /// `bind`: `sockaddr_nl` bytes. Port 0 picks one; another port must be
    /// free (`EADDRINUSE`); a bound socket may only bind its own port.
    pub fn bind(&self, addr: &[u8]) -> Result<(), Errno> {
        if addr.len() < 12 || u16::from_ne_bytes([addr[0], addr[1]]) != AF_NETLINK {
            return Err(Errno::EINVAL);
        }
        let want = u32::from_ne_bytes([addr[4], addr[5], addr[6], addr[7]]);
        let mut st = self.st.lock();
        if st.port != 0 {
            return if want == 0 || want == st.port {
                Ok(())
            } else {
                Err(Errno::EINVAL)
            };
        }
        if want == 0 {
            self.port(&mut st);
        } else if PORTS.lock().insert(want) {
            st.port = want;
        } else {
            return Err(Errno::EADDRINUSE);
        }
        Ok(())
    }

    /// `getsockname`: the `sockaddr_nl` (port 0 until bound).
    pub fn name(&self) -> [u8; 12] {
        sockaddr_nl(self.st.lock().port)
    }

    /// A datagram sent to the kernel (`dest`: the `nl_pid` it was sent
    /// to, if named; only the kernel, 0, listens).
    pub fn send(&self, data: &[u8], dest: Option<u32>) -> Result<usize, Errno> {
        if dest.is_some_and(|d| d != 0) {
            return Err(Errno::ECONNREFUSED);
        }
        let mut st = self.st.lock();
        if st.queue.len() >= QUEUE_MAX {
            return Err(Errno::ENOBUFS);
        }
        let port = self.port(&mut st);
        drop(st);
        let replies = answer(data, port, fetch);
        let mut st = self.st.lock();
        for r in replies {
            if st.queue.len() >= QUEUE_MAX {
                break;
            }
            st.queue.push_back(r);
        }
        Ok(data.len())
    }

    /// The next datagram (removed unless `peek`); `EAGAIN` if none.
    pub fn recv(&self, peek: bool) -> Result<Vec<u8>, Errno> {
        let mut st = self.st.lock();
        let d = if peek {
            st.queue.front().cloned()
        } else {
            st.queue.pop_front()
        };
        d.ok_or(Errno::EAGAIN)
    }
}

/// A `sockaddr_nl` for port `port` (groups 0).
pub fn sockaddr_nl(port: u32) -> [u8; 12] {
    let mut b = [0u8; 12];
    b[..2].copy_from_slice(&AF_NETLINK.to_ne_bytes());
    b[4..8].copy_from_slice(&port.to_ne_bytes());
    b
}

/// The interfaces from the VMM.
pub fn fetch() -> Box<NetInfo> {
    let info = Box::new(NetInfo::default());
    let gpa = crate::mm::kva_to_gpa(&*info as *const NetInfo as u64);
    if hostcall::call(Call::NetIfaces, [gpa, 0, 0, 0, 0, 0]) < 0 {
        return Box::new(NetInfo::default());
    }
    // SAFETY: the VMM wrote the struct behind the compiler's back; every
    // bit pattern of it is valid.
    let read = unsafe { core::ptr::read_volatile(&*info) };
    let mut info = Box::new(read);
    info.links = info.links.min(qlib::netinfo::MAX_LINKS as u32);
    info.addrs = info.addrs.min(qlib::netinfo::MAX_ADDRS as u32);
    info
}

/// The request's header fields.
#[derive(Clone, Copy)]
struct Hdr {
    len: usize,
    ty: u16,
    flags: u16,
    seq: u32,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Starts a message; returns where it begins (its length is set by
/// [`end`]).
fn begin(out: &mut Vec<u8>, ty: u16, flags: u16, seq: u32, port: u32) -> usize {
    let at = out.len();
    out.extend_from_slice(&0u32.to_ne_bytes());
    out.extend_from_slice(&ty.to_ne_bytes());
    out.extend_from_slice(&flags.to_ne_bytes());
    out.extend_from_slice(&seq.to_ne_bytes());
    out.extend_from_slice(&port.to_ne_bytes());
    at
}

fn end(out: &mut Vec<u8>, at: usize) {
    let len = (out.len() - at) as u32;
    out[at..at + 4].copy_from_slice(&len.to_ne_bytes());
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
}

/// An attribute (`struct rtattr`), padded to 4 bytes.
fn attr(out: &mut Vec<u8>, ty: u16, data: &[u8]) {
    out.extend_from_slice(&((4 + data.len()) as u16).to_ne_bytes());
    out.extend_from_slice(&ty.to_ne_bytes());
    out.extend_from_slice(data);
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
}

/// A NUL-terminated name field's bytes with the NUL.
fn cstr(name: &[u8; 16]) -> &[u8] {
    let n = name.iter().position(|&b| b == 0).unwrap_or(15);
    &name[..=n]
}

/// An `RTM_NEWLINK` for `l`.
fn link_msg(out: &mut Vec<u8>, l: &Link, flags: u16, seq: u32, port: u32) {
    let at = begin(out, RTM_NEWLINK, flags, seq, port);
    // struct ifinfomsg: family, pad, type, index, flags, change.
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&l.hw_type.to_ne_bytes());
    out.extend_from_slice(&l.index.to_ne_bytes());
    out.extend_from_slice(&l.flags.to_ne_bytes());
    out.extend_from_slice(&0u32.to_ne_bytes());
    let mut name = l.name;
    name[15] = 0;
    attr(out, IFLA_IFNAME, cstr(&name));
    attr(out, IFLA_TXQLEN, &l.txqlen.to_ne_bytes());
    attr(out, IFLA_OPERSTATE, &[l.operstate]);
    attr(out, IFLA_LINKMODE, &[0]);
    attr(out, IFLA_MTU, &l.mtu.to_ne_bytes());
    let n = usize::from(l.hw_len.min(8));
    if n > 0 {
        attr(out, IFLA_ADDRESS, &l.hw[..n]);
        attr(out, IFLA_BROADCAST, &l.brd[..n]);
    }
    end(out, at);
}

/// An `RTM_NEWADDR` for `a`.
fn addr_msg(out: &mut Vec<u8>, a: &Addr, flags: u16, seq: u32, port: u32) {
    let at = begin(out, RTM_NEWADDR, flags, seq, port);
    // struct ifaddrmsg: family, prefixlen, flags, scope, index.
    out.extend_from_slice(&[a.family, a.prefix, IFA_F_PERMANENT as u8, a.scope]);
    out.extend_from_slice(&a.index.to_ne_bytes());
    if a.family == AF_INET {
        attr(out, IFA_ADDRESS, &a.addr[..4]);
        attr(out, IFA_LOCAL, &a.addr[..4]);
        if a.has_brd != 0 {
            attr(out, IFA_BROADCAST, &a.brd);
        }
        let mut label = a.label;
        label[15] = 0;
        attr(out, IFA_LABEL, cstr(&label));
    } else {
        attr(out, IFA_ADDRESS, &a.addr);
    }
    attr(out, IFA_FLAGS, &IFA_F_PERMANENT.to_ne_bytes());
    end(out, at);
}

/// An `NLMSG_ERROR` for request `h` (its bytes `req`): `err` 0 is an ack
/// (header only), else the whole request follows, as Linux.
fn error_msg(out: &mut Vec<u8>, h: Hdr, req: &[u8], err: i32, port: u32) {
    let flags = if err == 0 { NLM_F_CAPPED } else { 0 };
    let at = begin(out, NLMSG_ERROR, flags, h.seq, port);
    out.extend_from_slice(&err.to_ne_bytes());
    if err == 0 {
        out.extend_from_slice(&req[..NLMSG_HDRLEN]);
    } else {
        out.extend_from_slice(req);
    }
    end(out, at);
}

/// Appends `msg` to the datagrams, starting a new one when the last is
/// full.
fn push(dgrams: &mut Vec<Vec<u8>>, msg: &[u8]) {
    match dgrams.last_mut() {
        Some(d) if d.len() + msg.len() <= DGRAM_MAX => d.extend_from_slice(msg),
        _ => dgrams.push(msg.to_vec()),
    }
}

/// The answers (datagrams) to datagram `data` from port `port`, with
/// `info` giving the interfaces (called at most once, only if needed).
fn answer(data: &[u8], port: u32, info: impl FnOnce() -> Box<NetInfo>) -> Vec<Vec<u8>> {
    let mut info = Some(info);
    let mut cached: Option<Box<NetInfo>> = None;
    let mut out: Vec<Vec<u8>> = Vec::new();
    let mut at = 0;
    while data.len().saturating_sub(at) >= NLMSG_HDRLEN {
        let b = &data[at..];
        let h = Hdr {
            len: u32_at(b, 0) as usize,
            ty: u16::from_ne_bytes([b[4], b[5]]),
            flags: u16::from_ne_bytes([b[6], b[7]]),
            seq: u32_at(b, 8),
        };
        if h.len < NLMSG_HDRLEN || h.len > b.len() {
            break;
        }
        let req = &b[..h.len];
        let payload = &req[NLMSG_HDRLEN..];
        let mut msgs: Vec<u8> = Vec::new();
        let err = if h.ty < RTM_NEWLINK {
            // Control messages: nothing to do.
            0
        } else if h.ty != RTM_GETLINK && h.ty != RTM_GETADDR {
            -Errno::EOPNOTSUPP.0
        } else if h.flags & NLM_F_DUMP == NLM_F_DUMP {
            if payload.is_empty() {
                // Linux ignores a dump request without even a family.
                at += h.len.next_multiple_of(4);
                continue;
            }
            let inf = cached.get_or_insert_with(|| info.take().map_or_else(Box::default, |f| f()));
            let mut dgrams: Vec<Vec<u8>> = Vec::new();
            if h.ty == RTM_GETLINK {
                for l in &inf.link[..inf.links as usize] {
                    let mut m = Vec::new();
                    link_msg(&mut m, l, NLM_F_MULTI, h.seq, port);
                    push(&mut dgrams, &m);
                }
            } else {
                let family = payload[0];
                for a in &inf.addr[..inf.addrs as usize] {
                    if family == 0 || family == a.family {
                        let mut m = Vec::new();
                        addr_msg(&mut m, a, NLM_F_MULTI, h.seq, port);
                        push(&mut dgrams, &m);
                    }
                }
            }
            let mut done = Vec::new();
            let d = begin(&mut done, NLMSG_DONE, NLM_F_MULTI, h.seq, port);
            done.extend_from_slice(&0i32.to_ne_bytes());
            end(&mut done, d);
            push(&mut dgrams, &done);
            out.extend(dgrams);
            at += h.len.next_multiple_of(4);
            if h.flags & NLM_F_ACK != 0 {
                let mut m = Vec::new();
                error_msg(&mut m, h, req, 0, port);
                out.push(m);
            }
            continue;
        } else if h.ty == RTM_GETADDR {
            -Errno::EOPNOTSUPP.0
        } else if payload.len() < 16 {
            -Errno::EINVAL.0
        } else {
            // One link, by index.
            let index = u32_at(payload, 4);
            let inf = cached.get_or_insert_with(|| info.take().map_or_else(Box::default, |f| f()));
            match inf.link[..inf.links as usize]
                .iter()
                .find(|l| l.index == index && index != 0)
            {
                Some(l) => {
                    link_msg(&mut msgs, l, 0, h.seq, port);
                    0
                }
                None => -Errno::ENODEV.0,
            }
        };
        if !msgs.is_empty() {
            out.push(core::mem::take(&mut msgs));
        }
        if err != 0 || h.flags & NLM_F_ACK != 0 {
            error_msg(&mut msgs, h, req, err, port);
            out.push(msgs);
        }
        at += h.len.next_multiple_of(4);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lo_info() -> Box<NetInfo> {
        let mut i = Box::new(NetInfo::default());
        i.links = 1;
        i.link[0].index = 1;
        i.link[0].name[..2].copy_from_slice(b"lo");
        i.addrs = 1;
        i.addr[0].index = 1;
        i.addr[0].family = AF_INET;
        i.addr[0].addr[..4].copy_from_slice(&[127, 0, 0, 1]);
        i
    }

    fn req(ty: u16, flags: u16, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        let at = begin(&mut v, ty, flags, 7, 0);
        v.extend_from_slice(payload);
        end(&mut v, at);
        v
    }

    #[test]
    fn a_last_message_without_padding_ends_the_datagram() {
        // 17 bytes: the next message would start past the end.
        let r = req(RTM_GETLINK, NLM_F_DUMP | 1, &[0]);
        let out = answer(&r[..17], 5, lo_info);
        assert!(!out.is_empty());
    }

    #[test]
    fn short_or_overlong_headers_get_no_answer() {
        assert!(answer(&[0; 8], 5, lo_info).is_empty());
        let mut r = req(RTM_GETLINK, NLM_F_DUMP | 1, &[0]);
        r[0] = 200;
        assert!(answer(&r, 5, lo_info).is_empty());
    }

    #[test]
    fn link_dump_ends_with_done() {
        let out = answer(&req(RTM_GETLINK, NLM_F_DUMP | 1, &[0]), 5, lo_info);
        let all: Vec<u8> = out.concat();
        assert_eq!(u16::from_ne_bytes([all[4], all[5]]), RTM_NEWLINK);
        let last = &all[all.len() - 20..];
        assert_eq!(u16::from_ne_bytes([last[4], last[5]]), NLMSG_DONE);
    }

    #[test]
    fn unknown_type_is_eopnotsupp_and_short_getlink_einval() {
        let out = answer(&req(999, 1, &[0; 4]), 5, lo_info);
        assert_eq!(i32::from_ne_bytes(out[0][16..20].try_into().unwrap()), -95);
        let out = answer(&req(RTM_GETLINK, 1, &[0; 4]), 5, lo_info);
        assert_eq!(i32::from_ne_bytes(out[0][16..20].try_into().unwrap()), -22);
    }
}
