//! The config's `linux.devices` (`BootInfo::devices`), which the guest
//! serves under its own `/dev` as runc makes them in a container's: the
//! node's type, number, permissions and owner are the config's. No host
//! device is behind them (the sandbox reaches none), so opening one
//! fails with `ENXIO`, as a node whose driver is absent does on Linux.
//! The kernel's own nodes (`/dev/null` …) keep their names.

use super::stat::{S_IFCHR, S_IFIFO};

/// `S_IFBLK`.
const S_IFBLK: u32 = 0o060000;

/// One `linux.devices` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Device {
    /// Absolute path under `/dev`.
    pub path: &'static str,
    /// `S_IFCHR`, `S_IFBLK` or `S_IFIFO`.
    pub kind: u32,
    /// Major and minor number.
    pub rdev: (u32, u32),
    /// Permission bits.
    pub perm: u32,
    /// Owner uid and gid.
    pub owner: (u32, u32),
}

impl Device {
    /// Its `DT_*` directory-entry type.
    pub fn dirent_type(&self) -> u8 {
        match self.kind {
            S_IFBLK => 6,
            S_IFIFO => 1,
            _ => 2,
        }
    }
}

/// Parses one `path type major minor mode uid gid` record.
fn parse(rec: &'static str) -> Option<Device> {
    let mut f = rec.split(' ');
    let path = f.next()?;
    let kind = match f.next()? {
        "c" | "u" => S_IFCHR,
        "b" => S_IFBLK,
        "p" => S_IFIFO,
        _ => return None,
    };
    let mut num = || f.next().and_then(|n| n.parse::<u32>().ok());
    let rdev = (num()?, num()?);
    let perm = u32::from_str_radix(f.next()?, 8).ok()? & 0o7777;
    let uid = f.next()?.parse().ok()?;
    let gid = f.next()?.parse().ok()?;
    path.starts_with("/dev/").then_some(Device {
        path,
        kind,
        rdev,
        perm,
        owner: (uid, gid),
    })
}

/// The config's devices, in its order.
pub fn all() -> impl Iterator<Item = Device> {
    crate::boot_slice(crate::boot_info().devices)
        .split(|&c| c == 0)
        .filter_map(|r| core::str::from_utf8(r).ok())
        .filter_map(parse)
}

/// The device at normalised absolute `path`, by its index in [`all`].
pub fn find(path: &str) -> Option<u16> {
    all()
        .position(|d| d.path == path)
        .and_then(|i| u16::try_from(i).ok())
}

/// Device `i` of [`all`].
pub fn get(i: u16) -> Option<Device> {
    all().nth(usize::from(i))
}

/// The directory `path` (normalised, absolute, under `/dev`) when a
/// config device lies below it (`/dev/net` for `/dev/net/tun`), as the
/// `Node::Dir` name (`dev/net`).
pub fn dir(path: &str) -> Option<&'static str> {
    all().find_map(|d| {
        let rest = d.path.strip_prefix(path)?;
        rest.starts_with('/').then(|| &d.path[1..path.len()])
    })
}

/// The entries the config's devices make in directory `which` (`dev`,
/// `dev/net` …): (name, `DT_*` type), a directory once.
pub fn children(which: &str) -> alloc::vec::Vec<(alloc::string::String, u8)> {
    let mut v: alloc::vec::Vec<(alloc::string::String, u8)> = alloc::vec::Vec::new();
    for d in all() {
        let Some(rest) = d.path[1..]
            .strip_prefix(which)
            .and_then(|r| r.strip_prefix('/'))
        else {
            continue;
        };
        let entry = match rest.split_once('/') {
            Some((sub, _)) => (sub.into(), 4),
            None => (rest.into(), d.dirent_type()),
        };
        if !v.contains(&entry) {
            v.push(entry);
        }
    }
    v
}
