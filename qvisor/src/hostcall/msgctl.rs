//! The control data of `Msg` (`io_abi::MsgCtl`, docs/ancillary-data.md):
//! what a sandbox sends is copied out of guest RAM, walked with Linux's
//! `sendmsg` rules and checked message by message (`qlib::cmsg::verdict`)
//! before the host sees it, with `SCM_RIGHTS` fds translated from the
//! sandbox's numbers to the VMM's own; what the host's `recvmsg` returns
//! goes back byte for byte, with every fd it carried adopted for the
//! sandbox (or closed) first, so no host fd number the VMM did not hand
//! out reaches the guest.

use std::os::fd::{FromRawFd, OwnedFd};

use qlib::cmsg::{self, SCM_PIDFD, SCM_RIGHTS, SOL_SOCKET, Verdict, Walk};
use qlib::io_abi::{MSG_CONTROL_MAX, MSG_MAX_FDS, MsgCtl};

use super::HostCalls;
use super::sys::err;

const EFAULT: i64 = err(libc::EFAULT);

impl HostCalls<'_> {
    /// The control bytes to send for the `MsgCtl` at `gpa`, checked and
    /// with `SCM_RIGHTS` fds translated; `-errno` as Linux's `sendmsg`
    /// would say it (`ENOBUFS` when longer than [`MSG_CONTROL_MAX`]).
    pub(super) fn control_to_send(&self, gpa: u64) -> Result<Vec<u8>, i64> {
        let (buf, len) = self.record(gpa)?;
        if len > MSG_CONTROL_MAX {
            return Err(err(libc::ENOBUFS));
        }
        let mut bytes = vec![0u8; len as usize];
        self.ram.read_bytes(buf, &mut bytes).map_err(|_| EFAULT)?;
        let mut headers = Vec::new();
        for h in Walk::send(&bytes) {
            headers.push(h.map_err(|_| err(libc::EINVAL))?);
        }
        for h in headers {
            let data = h.data(bytes.len());
            match cmsg::verdict(h.level, h.kind, &bytes[data.clone()]) {
                Ok(Verdict::Forward) => {}
                Ok(Verdict::Rights) => {
                    for c in bytes[data].chunks_exact_mut(4) {
                        let g = i32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                        let real = self.fds.check(g as u32 as u64)?;
                        c.copy_from_slice(&real.to_le_bytes());
                    }
                }
                Err(r) => return Err(err(r.errno())),
            }
        }
        Ok(bytes)
    }

    /// The buffer and length of the `MsgCtl` at `gpa`.
    fn record(&self, gpa: u64) -> Result<(u64, u64), i64> {
        let len_at = gpa.checked_add(8).ok_or(EFAULT)?;
        let buf: u64 = self.ram.read(gpa).map_err(|_| EFAULT)?;
        let len: u64 = self.ram.read(len_at).map_err(|_| EFAULT)?;
        Ok((buf, len))
    }

    /// Room for the control data the `MsgCtl` at `gpa` asks to receive.
    pub(super) fn control_room(&self, gpa: u64) -> Result<Vec<u8>, i64> {
        let (_, len) = self.record(gpa)?;
        Ok(vec![0u8; len.min(MSG_CONTROL_MAX) as usize])
    }

    /// Takes the fds in the `used` bytes the host's `recvmsg` wrote to
    /// `bytes`, and tells the guest (the `MsgCtl` at `gpa` and its buffer).
    /// The fds are the VMM's whatever happens: adopted, or closed.
    pub(super) fn control_received(
        &mut self,
        bytes: &mut [u8],
        used: usize,
        gpa: u64,
    ) -> Result<(), ()> {
        let used = used.min(bytes.len());
        let bytes = &mut bytes[..used];
        let mut out = MsgCtl::default();
        let headers: Vec<_> = Walk::received(bytes).filter_map(Result::ok).collect();
        let mut adopted = Vec::new();
        for h in headers {
            if h.level != SOL_SOCKET || !matches!(h.kind, SCM_RIGHTS | SCM_PIDFD) {
                continue;
            }
            let data = h.data(bytes.len());
            for c in bytes[data].chunks_exact_mut(4) {
                let raw = i32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                let n = self.adopt_received(raw, h.kind == SCM_RIGHTS, &mut out);
                if n >= 0 {
                    adopted.push(n);
                }
                c.copy_from_slice(&n.to_le_bytes());
            }
        }
        let buf = self.ram.read::<u64>(gpa).unwrap_or(u64::MAX);
        out.buf = buf;
        out.len = used as u64;
        if self.ram.write_bytes(buf, bytes).is_ok() && self.ram.write(gpa, out).is_ok() {
            return Ok(());
        }
        // The guest will never learn of them: let them go.
        for n in adopted {
            self.fds.close(n as u32 as u64);
        }
        Err(())
    }

    /// One fd the host's `recvmsg` put in our table: adopted (its sandbox
    /// number, its flags and mode noted in `out`) when `keep`, else closed;
    /// -1 when not kept.
    fn adopt_received(&mut self, raw: i32, keep: bool, out: &mut MsgCtl) -> i32 {
        if raw < 0 {
            return -1;
        }
        // SAFETY: the host kernel just installed `raw` in our table for
        // this message (MSG_CMSG_CLOEXEC); nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let i = out.fds as usize;
        if !keep || i >= MSG_MAX_FDS {
            return -1; // dropped: closed
        }
        // SAFETY: valid fd; integer command.
        let fl = unsafe { libc::fcntl(raw, libc::F_GETFL) };
        // SAFETY: `stat` is plain data; fstat fills it.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid fd and a stat buffer of ours.
        unsafe { libc::fstat(raw, &mut st) };
        let n = self.fds.adopt(fd);
        if n < 0 {
            return -1;
        }
        out.flags[i] = fl as u32;
        out.modes[i] = st.st_mode;
        out.fds += 1;
        n as i32
    }
}
