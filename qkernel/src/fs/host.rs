//! Host calls of the I/O ABI (`qlib::io_abi`), wrapped for the kernel:
//! paths and small records live in kernel buffers (physically contiguous,
//! so one GPA names them); user data moves in place as iovecs.

use alloc::vec::Vec;

use qlib::abi::{Call, IoVec};
use qlib::io_abi::{OpenStat, SockAddr, fd as fdop, frozen as frozen_rc, path as pathop};

use crate::fs::frozen::{self, FrozenFile};

use crate::errno::{Errno, SysResult, host_result};
use crate::hostcall;
use crate::mm::kva_to_gpa;

const O_CREAT: u32 = 0o100;
const O_TRUNC: u32 = 0o1000;
const O_TMPFILE: u32 = 0o20000000;

fn gpa_of<T>(v: &T) -> u64 {
    kva_to_gpa(v as *const T as u64)
}

/// Opens the absolute rootfs `path`; returns the host fd.
pub fn open(path: &str, flags: u32, mode: u32) -> Result<i32, Errno> {
    open_with(path, flags, mode, 0)
}

fn open_with(path: &str, flags: u32, mode: u32, stat_gpa: u64) -> Result<i32, Errno> {
    let path = crate::fs::path::to_bytes(path);
    let (gpa, len) = hostcall::buf(&path);
    let rc = hostcall::call(
        Call::Open,
        [gpa, len, u64::from(flags), u64::from(mode), stat_gpa, 0],
    );
    let r = host_result(rc);
    if flags & (O_CREAT | O_TRUNC | O_TMPFILE) != 0 {
        changed(&r);
    }
    r.map(|fd| fd as i32)
}

/// [`open`], with the frozen metadata of the file when it has some
/// (`qlib::io_abi`, "Frozen answers").
pub fn open_stat(path: &str, flags: u32, mode: u32) -> Result<(i32, Option<FrozenFile>), Errno> {
    let st = OpenStat::default();
    let fd = open_with(path, flags, mode, gpa_of(&st))?;
    // SAFETY: the VMM wrote the record behind the compiler's back.
    let st = unsafe { core::ptr::read_volatile(&st) };
    Ok((
        fd,
        (st.frozen == 1).then(|| FrozenFile::new(&st.statx, flags)),
    ))
}

/// Closes a host fd.
pub fn close(fd: i32) {
    crate::task::park::fd_closed(fd);
    crate::syscalls::unix_closed(fd);
    hostcall::call(Call::Close, [fd as u64, 0, 0, 0, 0, 0]);
}

/// Host fds whose close is put off ([`close_later`]).
static LATER: spin::Mutex<([i32; CLOSE_BATCH], usize)> = spin::Mutex::new(([0; CLOSE_BATCH], 0));
/// How many closes [`close_later`] gathers into one host call.
const CLOSE_BATCH: usize = 16;

/// Closes a host fd that nothing outside the guest can tell is still open
/// (a read-only open of a frozen file: no writes to flush, no host lock —
/// the guest grants record locks and `flock` itself): the close is put off
/// and done with the next [`CLOSE_BATCH`] - 1 others in one host call.
/// The fd number is never reused meanwhile (the VMM still holds it).
pub fn close_later(fd: i32) {
    crate::task::park::fd_closed(fd);
    // A copy on the stack (physically contiguous, as every host-call
    // buffer), taken without holding the lock across the call.
    let batch = {
        let mut later = LATER.lock();
        let (fds, n) = &mut *later;
        if *n < CLOSE_BATCH {
            fds[*n] = fd;
            *n += 1;
            return;
        }
        *n = 0;
        *fds
    };
    let gpa = gpa_of(&batch);
    hostcall::call(Call::Close, [fd as u64, gpa, CLOSE_BATCH as u64, 0, 0, 0]);
}

/// Reads or writes host fd `fd` with guest-physical iovecs.
pub fn io(fd: i32, iov: &[IoVec], offset: Option<u64>, flags: u64) -> SysResult {
    let (gpa, n) = hostcall::iovecs(iov);
    let off = offset.unwrap_or(u64::MAX);
    host_result(hostcall::call(Call::Io, [fd as u64, gpa, n, off, flags, 0]))
}

/// A `Path` op on `path` with extra arguments `a3..a5`.
pub fn path_op(op: u64, path: &str, a3: u64, a4: u64, a5: u64) -> SysResult {
    let bytes = crate::fs::path::to_bytes(path);
    let (gpa, len) = hostcall::buf(&bytes);
    let r = host_result(hostcall::call(Call::Path, [op, gpa, len, a3, a4, a5]));
    if !matches!(
        op,
        pathop::STATX | pathop::READLINK | pathop::ACCESS | pathop::STATFS | pathop::SYNCFS
    ) {
        changed(&r);
    }
    r
}

/// After a call that may have changed the namespace or metadata: the
/// frozen lookups are forgotten, unless it was refused with `EROFS`
/// (Python tries to write `__pycache__` on a read-only image at every
/// import of a module without one).
fn changed(r: &SysResult) {
    if *r != Err(Errno::EROFS) {
        frozen::forget_all();
    }
}

/// A `Path` op naming a second path (rename, link, symlink).
pub fn path_op2(op: u64, path: &str, other: &str, a5: u64) -> SysResult {
    let other = crate::fs::path::to_bytes(other);
    let (gpa, len) = hostcall::buf(&other);
    path_op(op, path, gpa, len, a5)
}

/// `statx` of a path into a kernel buffer; a frozen answer is kept and
/// given again without a host call (`frozen`).
pub fn statx_path(path: &str, nofollow: bool) -> Result<[u8; 256], Errno> {
    if let Some(answer) = frozen::cached(path, nofollow) {
        return answer;
    }
    let buf = [0u8; 256];
    let rc = path_op(pathop::STATX, path, u64::from(nofollow), gpa_of(&buf), 0)?;
    // SAFETY: the VMM wrote the buffer behind the compiler's back.
    let sx = unsafe { core::ptr::read_volatile(&buf) };
    match rc as u64 {
        frozen_rc::FOUND => frozen::remember(path, nofollow, Some(&sx)),
        frozen_rc::MISSING => {
            frozen::remember(path, nofollow, None);
            return Err(Errno::ENOENT);
        }
        _ => {}
    }
    Ok(sx)
}

/// The VMM may have written `buf` in place: one volatile read of its first
/// byte keeps the compiler from assuming it unchanged. An empty buffer
/// (a zero option length) is not read: its pointer dangles.
fn written_by_vmm(buf: &[u8]) {
    if let Some(first) = buf.first() {
        // SAFETY: `first` is a valid reference into `buf`.
        unsafe { core::ptr::read_volatile(first) };
    }
}

/// `readlink` of a path.
pub fn readlink(path: &str) -> Result<Vec<u8>, Errno> {
    let mut buf = alloc::vec![0u8; 4096];
    let (gpa, len) = hostcall::buf(&buf);
    let n = path_op(pathop::READLINK, path, gpa, len, 0)?;
    written_by_vmm(&buf);
    buf.truncate(n);
    Ok(buf)
}

/// An `Fd` op.
pub fn fd_op(op: u64, fd: i32, a2: u64, a3: u64, a4: u64, a5: u64) -> SysResult {
    host_result(hostcall::call(Call::Fd, [op, fd as u64, a2, a3, a4, a5]))
}

/// `statx` of a host fd.
pub fn statx_fd(fd: i32) -> Result<[u8; 256], Errno> {
    let buf = [0u8; 256];
    fd_op(fdop::STATX, fd, gpa_of(&buf), 0, 0, 0)?;
    // SAFETY: the VMM wrote the buffer behind the compiler's back.
    Ok(unsafe { core::ptr::read_volatile(&buf) })
}

/// An `Fd` op passing a [`SockAddr`] in and getting it back.
pub fn fd_op_addr(op: u64, fd: i32, addr: &mut SockAddr, a3: u64) -> SysResult {
    let gpa = gpa_of(addr);
    let rc = fd_op(op, fd, gpa, a3, 0, 0);
    // SAFETY: the VMM may have written the address in place.
    *addr = unsafe { core::ptr::read_volatile(addr) };
    rc
}

/// An `Fd` op passing a kernel buffer (socket options, timer specs).
pub fn fd_op_buf(op: u64, fd: i32, a2: u64, a3: u64, buf: &mut [u8]) -> SysResult {
    let (gpa, len) = hostcall::buf(buf);
    let rc = fd_op(op, fd, a2, a3, gpa, len);
    written_by_vmm(buf);
    rc
}

/// `Msg`: send or receive with guest-physical iovecs.
pub fn msg(fd: i32, iov: &[IoVec], addr: Option<&mut SockAddr>, flags: u64) -> SysResult {
    msg_ctl(fd, iov, addr, flags, None)
}

/// `Msg` with control data (`io_abi::MsgCtl`: the messages to send, or
/// room for the ones received, which the VMM fills in with the record).
pub fn msg_ctl(
    fd: i32,
    iov: &[IoVec],
    addr: Option<&mut SockAddr>,
    flags: u64,
    ctl: Option<&mut qlib::io_abi::MsgCtl>,
) -> SysResult {
    let (gpa, n) = hostcall::iovecs(iov);
    let agpa = addr.as_ref().map_or(0, |a| gpa_of(&**a));
    let cgpa = ctl.as_ref().map_or(0, |c| gpa_of(&**c));
    let rc = hostcall::call(Call::Msg, [fd as u64, gpa, n, agpa, flags, cgpa]);
    if let Some(a) = addr {
        // SAFETY: the VMM may have written the address in place.
        *a = unsafe { core::ptr::read_volatile(a) };
    }
    if let Some(c) = ctl {
        // SAFETY: the VMM may have written the record in place.
        *c = unsafe { core::ptr::read_volatile(c) };
    }
    host_result(rc)
}

/// The GPA of a kernel buffer, for a record that names it.
pub fn buf_gpa(buf: &[u8]) -> u64 {
    hostcall::buf(buf).0
}

/// `NewFd` returning one fd.
pub fn new_fd(op: u64, a1: u64, a2: u64, a3: u64) -> Result<i32, Errno> {
    host_result(hostcall::call(Call::NewFd, [op, a1, a2, a3, 0, 0])).map(|fd| fd as i32)
}

/// `NewFd` returning a pair.
pub fn new_pair(op: u64, a1: u64, a2: u64, a3: u64) -> Result<[i32; 2], Errno> {
    let pair = [-1i32; 2];
    host_result(hostcall::call(
        Call::NewFd,
        [op, a1, a2, a3, gpa_of(&pair), 0],
    ))?;
    // SAFETY: the VMM wrote both ints.
    Ok(unsafe { core::ptr::read_volatile(&pair) })
}

/// `EpollWait` into a kernel buffer of packed 12-byte events.
pub fn epoll_wait(epfd: i32, buf: &mut [u8], deadline_ns: u64) -> SysResult {
    let (gpa, len) = hostcall::buf(buf);
    let max = len / 12;
    let deadline_ns = hostcall::host_deadline(deadline_ns);
    let rc = hostcall::call(Call::EpollWait, [epfd as u64, gpa, max, deadline_ns, 0, 0]);
    written_by_vmm(buf);
    host_result(rc)
}
