//! Operation codes and records of the I/O host calls (`abi::Call::Open`
//! .. `abi::Call::EpollWait`).
//!
//! The guest keeps the fd table (numbers, `O_CLOEXEC`, status flags, dup
//! sharing); each open file that the host backs is one host fd that the
//! VMM owns on the sandbox's behalf. The VMM refuses any fd it did not open
//! for this sandbox (`EBADF`), checks every guest range, and resolves every
//! path inside the rootfs with `openat2(RESOLVE_IN_ROOT |
//! RESOLVE_NO_MAGICLINKS)`. Host fds are non-blocking (stdio excepted); a
//! guest call that must block passes [`io::BLOCK`] and the VMM waits for
//! readiness itself (with the control eventfd, so a control request cuts
//! the wait short with `RET_RESTART`). Results are `>= 0` or `-errno`.
//!
//! ## Frozen answers
//! When the rootfs's root mount is read-only (`root.readonly`), the VMM
//! resolves [`path::STATX`] paths with `RESOLVE_NO_XDEV` first: a
//! resolution that never left that mount (no writable bind or tmpfs mount
//! crossed, through `..` or a symlink either) gives an answer that nothing
//! in the sandbox can change. So does one that crosses only read-only
//! mounts, when the path has no `..` and no symlink (it then walks its
//! lexical prefixes: each mount root among them, and the object's own
//! mount, must be read-only); found only. The image is assumed not to change
//! underneath on the host while the container runs (an image layer, as
//! gVisor's default exclusive file access assumes). The guest may cache
//! such answers, found or `ENOENT`; anything else is answered uncached.
//! [`OpenStat::frozen`] says the same of an opened file on any read-only
//! mount: its size, mode and times cannot change.

/// Flags of `Call::Io` and `Call::Msg` (`args[4]`, low 32 bits).
pub mod io {
    /// Write (else read).
    pub const WRITE: u64 = 1 << 0;
    /// Wait for readiness when the fd would block.
    pub const BLOCK: u64 = 1 << 1;
}

/// Results of [`path::STATX`] that may be cached (module doc, "Frozen answers").
pub mod frozen {
    /// Found, and the whole resolution of the path stayed on the read-only
    /// root mount: the guest may keep the record.
    pub const FOUND: u64 = 1;
    /// The path does not exist (the buffer is untouched), and its
    /// resolution stayed on the read-only root mount up to the missing
    /// name: the guest may remember the `ENOENT`.
    pub const MISSING: u64 = 2;
}

/// `Call::Path` ops. The path is `args[1]` (GPA) and `args[2]` (length).
pub mod path {
    /// `statx` of the path into a 256-byte `struct statx` at GPA `args[4]`;
    /// `args[3]` = 1 to not follow a final symlink. Returns 0, or
    /// [`super::frozen::FOUND`] / [`super::frozen::MISSING`] when the
    /// answer can never change (see the module doc, "Frozen answers").
    pub const STATX: u64 = 1;
    /// `mkdir`: `args[3]` = mode.
    pub const MKDIR: u64 = 2;
    /// `unlink`.
    pub const UNLINK: u64 = 3;
    /// `rmdir`.
    pub const RMDIR: u64 = 4;
    /// `rename` to the path at GPA `args[3]`, length `args[4]`;
    /// `args[5]` = `renameat2` flags.
    pub const RENAME: u64 = 5;
    /// `readlink` into the buffer at GPA `args[3]`, length `args[4]`.
    pub const READLINK: u64 = 6;
    /// `access`: `args[3]` = mode.
    pub const ACCESS: u64 = 7;
    /// `symlink`: the path is the new link, the target is at GPA
    /// `args[3]`, length `args[4]`.
    pub const SYMLINK: u64 = 8;
    /// `link` to the new path at GPA `args[3]`, length `args[4]`;
    /// `args[5]` = [`LINK_FOLLOW`] to link what a final symlink leads to.
    pub const LINK: u64 = 9;
    /// `LINK` flag: follow a final symlink (`AT_SYMLINK_FOLLOW`).
    pub const LINK_FOLLOW: u64 = 0x400;
    /// `chmod`: `args[3]` = mode.
    pub const CHMOD: u64 = 10;
    /// `truncate`: `args[3]` = length.
    pub const TRUNCATE: u64 = 11;
    /// `utimensat`: `args[3]` = GPA of two `struct timespec` (0 = now),
    /// `args[4]` = 1 to not follow a final symlink.
    pub const UTIMENS: u64 = 12;
    /// `chown`: `args[3]` = uid, `args[4]` = gid, `args[5]` = 1 to not
    /// follow a final symlink.
    pub const CHOWN: u64 = 13;
    /// `statfs` of the filesystem holding the path (a final symlink
    /// followed) into a 120-byte `struct statfs` at GPA `args[3]`.
    pub const STATFS: u64 = 14;
    /// `syncfs` of the filesystem holding the path (the guest's `sync`
    /// passes `/`: the rootfs).
    pub const SYNCFS: u64 = 15;
    /// `mknod` of a FIFO: `args[3]` = mode (umask applied).
    pub const MKFIFO: u64 = 16;
    /// A bind mount of the path onto the path at GPA `args[3]`, length
    /// `args[4]` (both resolved inside the rootfs); `args[5]` =
    /// `MS_REC` (0x4000) for a recursive one.
    pub const BIND: u64 = 17;
    /// `umount2` of the mount on the path (its last component not
    /// followed): `args[3]` = `MNT_FORCE`/`MNT_DETACH`/`MNT_EXPIRE`.
    pub const UNMOUNT: u64 = 18;
}

/// What `Call::Open` writes at GPA `args[4]` when that is not 0: the
/// opened file's `struct statx` and whether its metadata is frozen (the
/// file lives on a read-only mount: size, mode and times cannot change
/// while the container runs, see the module doc).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct OpenStat {
    /// `struct statx` of the opened file.
    pub statx: [u8; 256],
    /// 1 if frozen, else 0.
    pub frozen: u64,
}
const _: () = assert!(core::mem::size_of::<OpenStat>() == 264);

impl Default for OpenStat {
    fn default() -> Self {
        Self {
            statx: [0; 256],
            frozen: 0,
        }
    }
}

/// Size of the x86-64 `struct statfs` that [`path::STATFS`] and
/// [`fd::FSTATFS`] write.
pub const STATFS_SIZE: usize = 120;

/// `Call::Fd` ops. The fd is `args[1]`.
pub mod fd {
    /// `statx` into a 256-byte `struct statx` at GPA `args[2]`.
    pub const STATX: u64 = 1;
    /// `lseek`: `args[2]` = offset, `args[3]` = whence.
    pub const LSEEK: u64 = 2;
    /// `ftruncate`: `args[2]` = length.
    pub const FTRUNCATE: u64 = 3;
    /// `fsync`.
    pub const FSYNC: u64 = 4;
    /// `fdatasync`.
    pub const FDATASYNC: u64 = 5;
    /// `getdents64` into the [`super::super::abi::IoVec`] list at GPA
    /// `args[2]`, count `args[3]`.
    pub const GETDENTS: u64 = 6;
    /// `fchmod`: `args[2]` = mode.
    pub const FCHMOD: u64 = 7;
    /// `sendfile` to this fd from fd `args[2]`: `args[3]` = count,
    /// `args[4]` = GPA of an `i64` offset (0 = the current offset).
    pub const SENDFILE: u64 = 8;
    /// `epoll_ctl` on this epoll fd: `args[2]` = op, `args[3]` = target
    /// fd, `args[4]` = events, `args[5]` = data.
    pub const EPOLL_CTL: u64 = 9;
    /// `timerfd_settime`: `args[2]` = flags, `args[3]` = GPA of the new
    /// `struct itimerspec`, `args[4]` = GPA for the old one (0 = none).
    pub const TIMERFD_SET: u64 = 10;
    /// `timerfd_gettime` into GPA `args[2]`.
    pub const TIMERFD_GET: u64 = 11;
    /// `listen`: `args[2]` = backlog.
    pub const LISTEN: u64 = 12;
    /// `shutdown`: `args[2]` = how.
    pub const SHUTDOWN: u64 = 13;
    /// `bind` to the [`super::SockAddr`] at GPA `args[2]`.
    pub const BIND: u64 = 14;
    /// `connect` to the [`super::SockAddr`] at GPA `args[2]`; `args[3]` =
    /// [`super::io::BLOCK`] to wait for the connection.
    pub const CONNECT: u64 = 15;
    /// `getsockname` into the [`super::SockAddr`] at GPA `args[2]`.
    pub const GETSOCKNAME: u64 = 16;
    /// `getpeername` into the [`super::SockAddr`] at GPA `args[2]`.
    pub const GETPEERNAME: u64 = 17;
    /// `setsockopt`: `args[2]` = level, `args[3]` = name, `args[4]` = GPA
    /// of the value, `args[5]` = its length (at most 256).
    pub const SETSOCKOPT: u64 = 18;
    /// `getsockopt`: as [`SETSOCKOPT`], the value written back; returns
    /// its length.
    pub const GETSOCKOPT: u64 = 19;
    /// `accept4` into the [`super::SockAddr`] at GPA `args[2]` (0 = none):
    /// `args[3]` = [`super::io::BLOCK`]; returns the new host fd.
    pub const ACCEPT: u64 = 20;
    /// `ioctl(FIONREAD)`: returns the byte count.
    pub const FIONREAD: u64 = 21;
    /// `fchown`: `args[2]` = uid, `args[3]` = gid.
    pub const FCHOWN: u64 = 22;
    /// `fstatfs` into a 120-byte `struct statfs` at GPA `args[2]`.
    pub const FSTATFS: u64 = 23;
    /// `syncfs` of the filesystem holding this fd.
    pub const SYNCFS: u64 = 24;
    /// `fallocate`: `args[2]` = mode, `args[3]` = offset, `args[4]` = length.
    pub const FALLOCATE: u64 = 25;
    /// A pipe's capacity: `args[2]` = 0 to read it (`F_GETPIPE_SZ`), else
    /// the size to set (`F_SETPIPE_SZ`); returns the capacity.
    pub const PIPE_SZ: u64 = 26;
    /// `ioctl(TIOCGWINSZ)` of a terminal: returns rows | columns << 16.
    pub const WINSIZE: u64 = 27;
    /// Who is at the other end of a Unix socket: a [`super::UnixPeer`] at
    /// GPA `args[4]` (`args[5]` = its size).
    pub const UNIX_PEER: u64 = 28;
    /// `ioctl(SIOCBRADDBR)` (`args[2]` = 0) or `SIOCBRDELBR` (1) on a
    /// socket: the bridge's NUL-terminated name at GPA `args[4]` (at
    /// most `args[5]` = 16 bytes).
    pub const BRIDGE: u64 = 29;
}

/// `Call::NewFd` ops. Pairs are written as two `i32` at GPA `args[4]`.
pub mod new {
    /// `pipe2`: `args[1]` = flags (`O_DIRECT` only; the rest are guest
    /// flags).
    pub const PIPE: u64 = 1;
    /// `socketpair`: `args[1..4]` = domain, type, protocol.
    pub const SOCKETPAIR: u64 = 2;
    /// `socket`: `args[1..4]` = domain, type, protocol.
    pub const SOCKET: u64 = 3;
    /// `eventfd2`: `args[1]` = initial value, `args[2]` = `EFD_SEMAPHORE`.
    pub const EVENTFD: u64 = 4;
    /// `timerfd_create`: `args[1]` = clock id.
    pub const TIMERFD: u64 = 5;
    /// `epoll_create1`.
    pub const EPOLL: u64 = 6;
    /// `memfd_create`: an anonymous memory file of the host's (no name,
    /// no flags: the guest keeps both).
    pub const MEMFD: u64 = 7;
}

/// Most fds one `SCM_RIGHTS` message passes (Linux's `SCM_MAX_FD`).
pub const MSG_MAX_FDS: usize = 253;

/// Longest control buffer a `Msg` call passes, either way.
pub const MSG_CONTROL_MAX: u64 = 64 << 10;

/// The control data of a `Msg` call (`args[5]` = its GPA, 0 for none):
/// `struct cmsghdr` messages as Linux lays them out (`qlib::cmsg`).
///
/// Sending: `len` bytes at `buf`, each message checked by the VMM
/// (`qlib::cmsg::verdict`); the ints of an `SCM_RIGHTS` message are host
/// fds of the sandbox, which the VMM translates to its own.
///
/// Receiving: `len` is the room at `buf` (at most [`MSG_CONTROL_MAX`]);
/// the VMM receives with that much room, so the host kernel lays the
/// messages out and truncates them (`MSG_CTRUNC`) exactly as for the
/// program, and writes back the bytes used in `len`. The ints of an
/// `SCM_RIGHTS` message are then fds the VMM adopted for the sandbox (-1
/// where it could not), `fds` of them in all, each with its host status
/// flags (`F_GETFL`) and `st_mode`; an `SCM_PIDFD`'s fd is closed and
/// reads -1.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MsgCtl {
    pub buf: u64,
    pub len: u64,
    pub fds: u32,
    pub pad: u32,
    pub flags: [u32; MSG_MAX_FDS],
    pub modes: [u32; MSG_MAX_FDS],
}
const _: () = assert!(core::mem::size_of::<MsgCtl>() == 24 + 8 * MSG_MAX_FDS);

impl Default for MsgCtl {
    fn default() -> Self {
        Self {
            buf: 0,
            len: 0,
            fds: 0,
            pad: 0,
            flags: [0; MSG_MAX_FDS],
            modes: [0; MSG_MAX_FDS],
        }
    }
}

/// A Unix socket and its peer as the host sees them (`fd::UNIX_PEER`):
/// both sockets' inode numbers (`peer_ino` 0: not connected), whether the
/// peer was made by the VMM itself (so by a process of this sandbox), and
/// the peer's credentials as the host reports them (`SO_PEERCRED`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct UnixPeer {
    pub ino: u32,
    pub peer_ino: u32,
    /// 1: the peer socket is the VMM's own.
    pub inside: u32,
    pub uid: u32,
    pub gid: u32,
    pub pad: u32,
}

/// A socket address as it crosses the ABI: the Linux `sockaddr` bytes and
/// their length (in: given; out: the full length the kernel reported).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct SockAddr {
    /// Bytes used in `bytes`.
    pub len: u32,
    /// In: for an `AF_UNIX` path the guest made absolute, how many bytes
    /// (the cwd and a `/`) it put before the path the program gave, which
    /// is the name the program bound. Out (`Msg`): the `msg_flags`.
    pub pad: u32,
    /// `struct sockaddr_storage`.
    pub bytes: [u8; 128],
}
const _: () = assert!(core::mem::size_of::<SockAddr>() == 136);

impl Default for SockAddr {
    fn default() -> Self {
        Self {
            len: 0,
            pad: 0,
            bytes: [0; 128],
        }
    }
}
