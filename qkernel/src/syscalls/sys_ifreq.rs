//! The interface ioctls of sockets (`SIOCGIF*`: name, index, flags, MTU,
//! queue length, hardware and IPv4 addresses, `SIOCGIFCONF`), answered in
//! the guest from the sandbox's interfaces (`fs::netlink::fetch`), as
//! `if_nametoindex`, `if_indextoname` and `ifconfig` ask them.

use qlib::netinfo::{Addr, Link, NetInfo};

use crate::errno::{Errno, SysResult};
use crate::mm::uaccess;
use crate::process::Process;

const SIOCGIFNAME: u64 = 0x8910;
const SIOCGIFCONF: u64 = 0x8912;
const SIOCGIFFLAGS: u64 = 0x8913;
const SIOCGIFADDR: u64 = 0x8915;
const SIOCGIFBRDADDR: u64 = 0x8919;
const SIOCGIFNETMASK: u64 = 0x891b;
const SIOCGIFMTU: u64 = 0x8921;
const SIOCGIFHWADDR: u64 = 0x8927;
const SIOCGIFINDEX: u64 = 0x8933;
const SIOCGIFTXQLEN: u64 = 0x8942;

/// `sizeof(struct ifreq)`.
const IFREQ: usize = 40;
const AF_INET: u16 = 2;

/// Whether `req` is one of the ioctls served here.
pub fn is_ifreq(req: u64) -> bool {
    matches!(
        req,
        SIOCGIFNAME
            | SIOCGIFCONF
            | SIOCGIFFLAGS
            | SIOCGIFADDR
            | SIOCGIFBRDADDR
            | SIOCGIFNETMASK
            | SIOCGIFMTU
            | SIOCGIFHWADDR
            | SIOCGIFINDEX
            | SIOCGIFTXQLEN
    )
}

/// A `sockaddr_in` for IPv4 address `ip` in an ifreq's union.
fn sin(r: &mut [u8; IFREQ], ip: &[u8]) {
    r[16..18].copy_from_slice(&AF_INET.to_ne_bytes());
    r[18..20].fill(0);
    r[20..24].copy_from_slice(&ip[..4]);
    r[24..32].fill(0);
}

/// The prefix length as an IPv4 netmask.
fn mask(prefix: u8) -> [u8; 4] {
    let bits = u32::MAX
        .checked_shl(32 - u32::from(prefix.min(32)))
        .unwrap_or(0);
    bits.to_be_bytes()
}

/// Link `name` (the ifreq's NUL-terminated name field).
fn link_named<'a>(info: &'a NetInfo, name: &[u8]) -> Option<&'a Link> {
    let n = name
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(name.len().min(16));
    info.link[..info.links as usize].iter().find(|l| {
        let m = l.name.iter().position(|&b| b == 0).unwrap_or(16);
        l.name[..m] == name[..n]
    })
}

/// The first IPv4 address of link `index`.
fn v4_of(info: &NetInfo, index: u32) -> Option<&Addr> {
    info.addr[..info.addrs as usize]
        .iter()
        .find(|a| a.index == index && a.family == AF_INET as u8)
}

/// `SIOCGIFCONF`: one ifreq per IPv4 address (name and address); a null
/// buffer asks for the length.
fn ifconf(p: &mut Process, info: &NetInfo, arg: u64) -> SysResult {
    let len: i32 = uaccess::read(&mut p.mm, arg)?;
    let buf: u64 = uaccess::read(&mut p.mm, arg + 8)?;
    let addrs = info.addr[..info.addrs as usize]
        .iter()
        .filter(|a| a.family == AF_INET as u8);
    let mut done = 0usize;
    for a in addrs {
        if buf != 0 && done + IFREQ > len.max(0) as usize {
            break;
        }
        if buf != 0 {
            let mut r = [0u8; IFREQ];
            let mut label = a.label;
            label[15] = 0;
            r[..16].copy_from_slice(&label);
            sin(&mut r, &a.addr);
            uaccess::copy_out(&mut p.mm, buf + done as u64, &r)?;
        }
        done += IFREQ;
    }
    uaccess::write(&mut p.mm, arg, &(done as i32))?;
    Ok(0)
}

/// Serves interface ioctl `req` with argument `arg`.
pub fn ioctl(p: &mut Process, req: u64, arg: u64) -> SysResult {
    let info = crate::fs::netlink::fetch();
    if req == SIOCGIFCONF {
        return ifconf(p, &info, arg);
    }
    let mut r = [0u8; IFREQ];
    uaccess::copy_in(&mut p.mm, arg, &mut r)?;
    if req == SIOCGIFNAME {
        let index = u32::from_ne_bytes([r[16], r[17], r[18], r[19]]);
        let l = info.link[..info.links as usize]
            .iter()
            .find(|l| l.index == index)
            .ok_or(Errno::ENODEV)?;
        r[..16].copy_from_slice(&l.name);
        r[15] = 0;
        uaccess::copy_out(&mut p.mm, arg, &r)?;
        return Ok(0);
    }
    let l = *link_named(&info, &r[..16]).ok_or(Errno::ENODEV)?;
    match req {
        SIOCGIFFLAGS => r[16..18].copy_from_slice(&(l.flags as u16).to_ne_bytes()),
        SIOCGIFMTU => r[16..20].copy_from_slice(&l.mtu.to_ne_bytes()),
        SIOCGIFINDEX => r[16..20].copy_from_slice(&l.index.to_ne_bytes()),
        SIOCGIFTXQLEN => r[16..20].copy_from_slice(&l.txqlen.to_ne_bytes()),
        SIOCGIFHWADDR => {
            r[16..18].copy_from_slice(&l.hw_type.to_ne_bytes());
            r[18..32].fill(0);
            let n = usize::from(l.hw_len.min(8));
            r[18..18 + n].copy_from_slice(&l.hw[..n]);
        }
        _ => {
            let a = v4_of(&info, l.index).ok_or(Errno::EADDRNOTAVAIL)?;
            match req {
                SIOCGIFADDR => sin(&mut r, &a.addr),
                SIOCGIFNETMASK => sin(&mut r, &mask(a.prefix)),
                _ if a.has_brd != 0 => sin(&mut r, &a.brd),
                _ => return Err(Errno::EADDRNOTAVAIL),
            }
        }
    }
    uaccess::copy_out(&mut p.mm, arg, &r)?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks() {
        assert_eq!(mask(8), [255, 0, 0, 0]);
        assert_eq!(mask(24), [255, 255, 255, 0]);
        assert_eq!(mask(0), [0, 0, 0, 0]);
        assert_eq!(mask(32), [255; 4]);
    }
}
