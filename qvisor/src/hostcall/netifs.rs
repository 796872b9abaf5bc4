//! `NetIfaces`: the links and addresses of the sandbox process's network
//! namespace (the one its sockets live in), from `getifaddrs`, for the
//! guest's `NETLINK_ROUTE` answers. Only what `ip addr` shows crosses:
//! names, indices, flags, MTU, queue length, hardware and IP addresses.

use std::ffi::CStr;

use qlib::netinfo::{self, Addr, Link, NetInfo};

use super::HostCalls;
use super::sys::err;

/// `IFF_LOWER_UP`, `IFF_LOOPBACK`.
const IFF_LOWER_UP: u32 = 0x10000;
const IFF_LOOPBACK: u32 = 0x8;
/// `RT_SCOPE_HOST`, `RT_SCOPE_LINK`.
const SCOPE_HOST: u8 = 254;
const SCOPE_LINK: u8 = 253;

impl HostCalls<'_> {
    /// `NetIfaces`: writes a [`NetInfo`] at `out`.
    pub(super) fn net_ifaces(&mut self, out: u64) -> i64 {
        let info = collect();
        match self.ram.write(out, info) {
            Ok(()) => 0,
            Err(_) => err(libc::EFAULT),
        }
    }
}

/// Copies `name` into a NUL-terminated 16-byte field (cut at 15).
fn name16(name: &[u8]) -> [u8; 16] {
    let mut b = [0u8; 16];
    let n = name.len().min(15);
    b[..n].copy_from_slice(&name[..n]);
    b
}

/// The prefix length of a netmask.
fn prefix(mask: &[u8]) -> u8 {
    mask.iter().map(|b| b.count_ones() as u8).sum()
}

/// An `ifreq` ioctl's integer answer for interface `name` (0 if it fails).
fn ifreq_int(sock: i32, name: &[u8; 16], req: libc::c_ulong) -> u32 {
    // SAFETY: ifreq is plain data; zero is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in ifr.ifr_name.iter_mut().zip(name) {
        *d = *s as libc::c_char;
    }
    // SAFETY: `ifr` is a valid ifreq the kernel fills; `sock` is ours.
    let rc = unsafe { libc::ioctl(sock, req as _, &mut ifr) };
    if rc < 0 {
        return 0;
    }
    // SAFETY: SIOCGIFMTU and SIOCGIFTXQLEN answer in the int of the union.
    unsafe { ifr.ifr_ifru.ifru_mtu as u32 }
}

/// The interfaces as `getifaddrs` sees them (empty if it fails).
fn collect() -> NetInfo {
    let mut info = NetInfo::default();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: `head` receives a list freed below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return info;
    }
    // SAFETY: a datagram socket for the ifreq ioctls, closed below.
    let sock = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    let mut p = head;
    while !p.is_null() {
        // SAFETY: `p` is a node of the list getifaddrs returned.
        let ifa = unsafe { &*p };
        p = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: a NUL-terminated name owned by the list.
        let name = unsafe { CStr::from_ptr(ifa.ifa_name) }.to_bytes();
        // SAFETY: `ifa_addr` is non-null and starts with the family.
        let family = i32::from(unsafe { (*ifa.ifa_addr).sa_family });
        match family {
            libc::AF_PACKET if (info.links as usize) < netinfo::MAX_LINKS => {
                // SAFETY: an AF_PACKET address is a sockaddr_ll.
                let ll = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_ll) };
                let mut l = Link {
                    index: ll.sll_ifindex as u32,
                    flags: ifa.ifa_flags,
                    hw_type: ll.sll_hatype,
                    hw_len: ll.sll_halen.min(8),
                    name: name16(name),
                    ..Link::default()
                };
                let n = usize::from(l.hw_len);
                l.hw[..n].copy_from_slice(&ll.sll_addr[..n]);
                if !ifa.ifa_ifu.is_null() {
                    // SAFETY: the broadcast address is a sockaddr_ll too.
                    let b = unsafe { &*(ifa.ifa_ifu as *const libc::sockaddr_ll) };
                    l.brd[..n].copy_from_slice(&b.sll_addr[..n]);
                }
                if sock >= 0 {
                    l.mtu = ifreq_int(sock, &l.name, libc::SIOCGIFMTU);
                    l.txqlen = ifreq_int(sock, &l.name, libc::SIOCGIFTXQLEN);
                }
                // What getifaddrs does not say, from the flags: a loopback
                // reports UNKNOWN, as Linux's.
                l.operstate = if l.flags & IFF_LOOPBACK != 0 {
                    netinfo::OPER_UNKNOWN
                } else if l.flags & IFF_LOWER_UP != 0 {
                    netinfo::OPER_UP
                } else {
                    netinfo::OPER_DOWN
                };
                info.link[info.links as usize] = l;
                info.links += 1;
            }
            libc::AF_INET | libc::AF_INET6 if (info.addrs as usize) < netinfo::MAX_ADDRS => {
                // SAFETY: a NUL-terminated name.
                let index = unsafe { libc::if_nametoindex(ifa.ifa_name) };
                let mut a = Addr {
                    index,
                    family: family as u8,
                    label: name16(name),
                    ..Addr::default()
                };
                if family == libc::AF_INET {
                    // SAFETY: an AF_INET address is a sockaddr_in.
                    let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                    let ip = sin.sin_addr.s_addr.to_ne_bytes();
                    a.addr[..4].copy_from_slice(&ip);
                    if !ifa.ifa_netmask.is_null() {
                        // SAFETY: the netmask has the address's family.
                        let m = unsafe { &*(ifa.ifa_netmask as *const libc::sockaddr_in) };
                        a.prefix = prefix(&m.sin_addr.s_addr.to_ne_bytes());
                    }
                    if ifa.ifa_flags & libc::IFF_BROADCAST as u32 != 0 && !ifa.ifa_ifu.is_null() {
                        // SAFETY: as above, for the broadcast address.
                        let b = unsafe { &*(ifa.ifa_ifu as *const libc::sockaddr_in) };
                        a.brd = b.sin_addr.s_addr.to_ne_bytes();
                        a.has_brd = 1;
                    }
                    a.scope = if ip[0] == 127 { SCOPE_HOST } else { 0 };
                } else {
                    // SAFETY: an AF_INET6 address is a sockaddr_in6.
                    let sin6 = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
                    let ip = sin6.sin6_addr.s6_addr;
                    a.addr = ip;
                    if !ifa.ifa_netmask.is_null() {
                        // SAFETY: the netmask has the address's family.
                        let m = unsafe { &*(ifa.ifa_netmask as *const libc::sockaddr_in6) };
                        a.prefix = prefix(&m.sin6_addr.s6_addr);
                    }
                    a.scope = if ip == std::net::Ipv6Addr::LOCALHOST.octets() {
                        SCOPE_HOST
                    } else if ip[0] == 0xfe && ip[1] & 0xc0 == 0x80 {
                        SCOPE_LINK
                    } else {
                        0
                    };
                }
                info.addr[info.addrs as usize] = a;
                info.addrs += 1;
            }
            _ => {}
        }
    }
    if sock >= 0 {
        // SAFETY: our socket.
        unsafe { libc::close(sock) };
    }
    // SAFETY: the list getifaddrs returned, freed once.
    unsafe { libc::freeifaddrs(head) };
    info
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_counts_mask_bits() {
        assert_eq!(prefix(&[255, 0, 0, 0]), 8);
        assert_eq!(prefix(&[255, 255, 255, 0]), 24);
        assert_eq!(prefix(&[0xff; 16]), 128);
    }

    #[test]
    fn loopback_is_listed() {
        let info = collect();
        let links = &info.link[..info.links as usize];
        let lo = links
            .iter()
            .find(|l| l.flags & IFF_LOOPBACK != 0)
            .expect("a loopback link");
        assert_eq!(&lo.name[..3], b"lo\0");
        assert!(lo.mtu > 0);
        let addrs = &info.addr[..info.addrs as usize];
        assert!(
            addrs
                .iter()
                .any(|a| a.index == lo.index && a.addr[..4] == [127, 0, 0, 1] && a.prefix == 8)
        );
    }
}
