//! Linux error numbers. Syscall handlers return `Result<usize, Errno>`;
//! `syscalls::dispatch` alone turns an `Errno` into `-errno`. Errors the
//! VMM reports from host syscalls keep their Linux value, so `Errno` is a
//! number with names for the values the kernel itself uses.

/// A Linux errno value (1..=4095).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Errno(pub i32);

#[allow(dead_code, reason = "the set a syscall may return; not all used yet")]
impl Errno {
    pub const EPERM: Errno = Errno(1);
    pub const ENOENT: Errno = Errno(2);
    pub const ESRCH: Errno = Errno(3);
    pub const EINTR: Errno = Errno(4);
    /// Internal (`signal::deliver` turns them into EINTR or a restart).
    pub const ERESTARTSYS: Errno = Errno(512);
    pub const ERESTARTNOINTR: Errno = Errno(513);
    pub const ERESTARTNOHAND: Errno = Errno(514);
    pub const EIO: Errno = Errno(5);
    pub const ENXIO: Errno = Errno(6);
    pub const E2BIG: Errno = Errno(7);
    pub const ENOEXEC: Errno = Errno(8);
    pub const EBADF: Errno = Errno(9);
    pub const ECHILD: Errno = Errno(10);
    pub const EAGAIN: Errno = Errno(11);
    pub const ENOMEM: Errno = Errno(12);
    pub const EACCES: Errno = Errno(13);
    pub const EFAULT: Errno = Errno(14);
    pub const EBUSY: Errno = Errno(16);
    pub const EEXIST: Errno = Errno(17);
    pub const EXDEV: Errno = Errno(18);
    pub const ENODEV: Errno = Errno(19);
    pub const ENOTDIR: Errno = Errno(20);
    pub const EISDIR: Errno = Errno(21);
    pub const EINVAL: Errno = Errno(22);
    pub const ENFILE: Errno = Errno(23);
    pub const EMFILE: Errno = Errno(24);
    pub const ENOTTY: Errno = Errno(25);
    pub const EFBIG: Errno = Errno(27);
    pub const ENOSPC: Errno = Errno(28);
    pub const ESPIPE: Errno = Errno(29);
    pub const EROFS: Errno = Errno(30);
    pub const EMLINK: Errno = Errno(31);
    pub const EPIPE: Errno = Errno(32);
    pub const ERANGE: Errno = Errno(34);
    pub const ENAMETOOLONG: Errno = Errno(36);
    pub const ENOSYS: Errno = Errno(38);
    pub const ENOTEMPTY: Errno = Errno(39);
    pub const ELOOP: Errno = Errno(40);
    pub const ELIBBAD: Errno = Errno(80);
    pub const ENOTSOCK: Errno = Errno(88);
    pub const EPROTOTYPE: Errno = Errno(91);
    pub const ENOPROTOOPT: Errno = Errno(92);
    pub const EPROTONOSUPPORT: Errno = Errno(93);
    pub const ESOCKTNOSUPPORT: Errno = Errno(94);
    pub const EMSGSIZE: Errno = Errno(90);
    pub const EOPNOTSUPP: Errno = Errno(95);
    pub const EAFNOSUPPORT: Errno = Errno(97);
    pub const EADDRINUSE: Errno = Errno(98);
    pub const ENOTCONN: Errno = Errno(107);
    pub const ETIMEDOUT: Errno = Errno(110);
    pub const ECONNREFUSED: Errno = Errno(111);
    pub const ENOBUFS: Errno = Errno(105);
    pub const EADDRNOTAVAIL: Errno = Errno(99);
    pub const EINPROGRESS: Errno = Errno(115);
    pub const EALREADY: Errno = Errno(114);
    pub const EISCONN: Errno = Errno(106);

    /// The error of a host call's negative result `rc`; anything outside
    /// the errno range becomes `EIO`.
    pub fn from_host(rc: i64) -> Errno {
        match -rc {
            e @ 1..=4095 => Errno(e as i32),
            _ => Errno::EIO,
        }
    }
}

/// The result of a syscall handler.
pub type SysResult = Result<usize, Errno>;

/// A host call's result as a syscall result.
pub fn host_result(rc: i64) -> SysResult {
    if rc < 0 {
        Err(Errno::from_host(rc))
    } else {
        Ok(rc as usize)
    }
}
