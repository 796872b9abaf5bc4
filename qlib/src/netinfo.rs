//! The sandbox's network interfaces as `Call::NetIfaces` hands them to the
//! guest (which answers `NETLINK_ROUTE` dumps from them): the links and
//! addresses of the network namespace the sandbox's sockets live in.

/// Most links passed (the rest are left out).
pub const MAX_LINKS: usize = 32;
/// Most addresses passed (the rest are left out).
pub const MAX_ADDRS: usize = 64;

/// `IF_OPER_UNKNOWN`, `IF_OPER_DOWN`, `IF_OPER_UP`.
pub const OPER_UNKNOWN: u8 = 0;
pub const OPER_DOWN: u8 = 2;
pub const OPER_UP: u8 = 6;

/// One link (an `RTM_NEWLINK`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Link {
    /// `ifi_index`.
    pub index: u32,
    /// `ifi_flags` (`IFF_*`).
    pub flags: u32,
    pub mtu: u32,
    pub txqlen: u32,
    /// `ifi_type` (`ARPHRD_*`).
    pub hw_type: u16,
    /// Bytes used in `hw` and `brd`.
    pub hw_len: u8,
    /// `IFLA_OPERSTATE`.
    pub operstate: u8,
    /// NUL-terminated name.
    pub name: [u8; 16],
    /// Hardware address and hardware broadcast address.
    pub hw: [u8; 8],
    pub brd: [u8; 8],
}
const _: () = assert!(core::mem::size_of::<Link>() == 52);

/// One address (an `RTM_NEWADDR`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Addr {
    /// The link's `ifi_index`.
    pub index: u32,
    /// `AF_INET` or `AF_INET6`.
    pub family: u8,
    pub prefix: u8,
    /// `RT_SCOPE_*`.
    pub scope: u8,
    /// Whether `brd` holds an IPv4 broadcast address.
    pub has_brd: u8,
    /// The address (4 or 16 bytes used) and IPv4 broadcast.
    pub addr: [u8; 16],
    pub brd: [u8; 4],
    /// NUL-terminated label (IPv4).
    pub label: [u8; 16],
}
const _: () = assert!(core::mem::size_of::<Addr>() == 44);

/// What `Call::NetIfaces` writes.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct NetInfo {
    pub links: u32,
    pub addrs: u32,
    pub link: [Link; MAX_LINKS],
    pub addr: [Addr; MAX_ADDRS],
}

impl Default for NetInfo {
    fn default() -> Self {
        Self {
            links: 0,
            addrs: 0,
            link: [Link::default(); MAX_LINKS],
            addr: [Addr::default(); MAX_ADDRS],
        }
    }
}

/// The `/proc/net` files `Call::NetFile` serves, by index: the host's own
/// for the sandbox's network namespace (the one its sockets live in).
pub const NET_FILES: &[&str] = &[
    "dev", "if_inet6", "route", "tcp", "tcp6", "udp", "udp6", "unix",
];

/// Most bytes of one `/proc/net` file passed to the guest (the rest is cut
/// at a line end).
pub const NET_FILE_MAX: usize = 64 * 1024;

/// The index of `/proc/net` file `name` in [`NET_FILES`].
pub fn net_file(name: &str) -> Option<usize> {
    NET_FILES.iter().position(|f| *f == name)
}
