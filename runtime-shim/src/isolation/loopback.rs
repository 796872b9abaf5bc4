//! Bringing up `lo` in a new network namespace, with one rtnetlink
//! request (`RTM_NEWLINK`, `IFF_UP` on interface index 1, which is always
//! `lo` in a fresh namespace) and its acknowledgement.

use nix::sys::socket::{
    AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType, recv, sendto, socket,
};

use super::IsolationError;

const RTM_NEWLINK: u16 = 16;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLMSG_ERROR: u16 = 2;
const IFF_UP: u32 = 1;
const LO_INDEX: i32 = 1;

/// `struct nlmsghdr` + `struct ifinfomsg`, little-endian.
fn request() -> Vec<u8> {
    let mut m = Vec::with_capacity(32);
    m.extend_from_slice(&32u32.to_le_bytes()); // nlmsg_len
    m.extend_from_slice(&RTM_NEWLINK.to_le_bytes());
    m.extend_from_slice(&(NLM_F_REQUEST | NLM_F_ACK).to_le_bytes());
    m.extend_from_slice(&1u32.to_le_bytes()); // seq
    m.extend_from_slice(&0u32.to_le_bytes()); // pid
    m.extend_from_slice(&[0, 0]); // ifi_family (AF_UNSPEC), pad
    m.extend_from_slice(&0u16.to_le_bytes()); // ifi_type
    m.extend_from_slice(&LO_INDEX.to_le_bytes());
    m.extend_from_slice(&IFF_UP.to_le_bytes()); // ifi_flags
    m.extend_from_slice(&IFF_UP.to_le_bytes()); // ifi_change
    m
}

pub fn up() -> Result<(), IsolationError> {
    let sock = socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkRoute,
    )
    .map_err(IsolationError::sys("netlink socket"))?;
    let kernel = NetlinkAddr::new(0, 0);
    use std::os::fd::AsRawFd;
    sendto(sock.as_raw_fd(), &request(), &kernel, MsgFlags::empty())
        .map_err(IsolationError::sys("netlink send"))?;
    let mut buf = [0u8; 256];
    let n = recv(sock.as_raw_fd(), &mut buf, MsgFlags::empty())
        .map_err(IsolationError::sys("netlink receive"))?;
    // nlmsghdr (16 bytes) of type NLMSG_ERROR, then the errno (0 = ack).
    let ack = buf.get(..n).filter(|b| b.len() >= 20);
    let Some(ack) = ack else {
        return Err(IsolationError::Setup("netlink: short answer".into()));
    };
    let typ = u16::from_le_bytes([ack[4], ack[5]]);
    let err = i32::from_le_bytes([ack[16], ack[17], ack[18], ack[19]]);
    if typ != NLMSG_ERROR || err != 0 {
        return Err(IsolationError::Setup(format!(
            "bringing up lo: netlink error {}",
            -err
        )));
    }
    Ok(())
}
