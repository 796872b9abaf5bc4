//! Files and the fd table. Most open files are host fds the VMM owns for
//! the sandbox (regular files and directories of the rootfs, pipes,
//! sockets, epoll instances, eventfds, timerfds); a few are the kernel's
//! own (`/dev/null`, `/dev/zero`, `/proc` files). The table keeps what
//! Linux keeps per fd (the number, `FD_CLOEXEC`) and per open file (status
//! flags, shared by `dup`); closing the last fd of a host file closes the
//! host fd.

pub mod config_dev;
pub mod console;
pub mod cwd;
pub mod files;
pub mod frozen;
pub mod host;
pub mod ldisc;
pub mod mqueue;
pub mod netlink;
pub mod path;
pub mod pipe;
pub mod procfs;
pub mod procpid;
pub mod special;
pub mod stat;
pub mod tty;
pub mod tty_ioctl;

pub use cwd::Fs;
pub use files::Files;

use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;

use spin::Mutex;

use crate::errno::Errno;

/// `O_*` flags the kernel keeps as file status.
pub const O_ACCMODE: u32 = 0o3;
/// Read only.
pub const O_RDONLY: u32 = 0;
/// Write only.
pub const O_WRONLY: u32 = 0o1;
/// Read and write.
pub const O_RDWR: u32 = 0o2;
/// Append.
pub const O_APPEND: u32 = 0o2000;
/// Non-blocking.
pub const O_NONBLOCK: u32 = 0o4000;
/// Close on exec (an fd flag, not a status flag).
pub const O_CLOEXEC: u32 = 0o2000000;
/// `O_PATH`.
pub const O_PATH: u32 = 0o10000000;
/// Status flags `F_SETFL` may change.
pub const SETFL_MASK: u32 = O_APPEND | O_NONBLOCK | 0o20000 /* O_ASYNC */ | 0o40000 /* O_DIRECT */ | 0o1000000 /* O_NOATIME */;

/// What kind of host object a host fd is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostKind {
    /// A regular file or directory of the rootfs.
    File,
    /// The sandbox's stdio (the host's fds 0-2).
    Stdio,
    /// A pipe end.
    Pipe,
    /// A socket.
    Socket,
    /// An epoll instance.
    Epoll,
    /// An eventfd.
    EventFd,
    /// A timerfd.
    TimerFd,
}

/// What backs an open file.
#[derive(Debug)]
pub enum Backing {
    /// A host fd of the sandbox.
    Host {
        /// The host fd number.
        fd: i32,
        /// What it is.
        kind: HostKind,
    },
    /// A device or `/proc` file of the kernel's own.
    Special(special::Special),
    /// One end of a pipe kept in the guest kernel.
    Pipe(pipe::PipeEnd),
    /// A `NETLINK_ROUTE` socket kept in the guest kernel.
    Netlink(netlink::Netlink),
    /// One end of a pseudo-terminal kept in the guest kernel.
    Tty(tty::TtyEnd),
    /// A POSIX message queue kept in the guest kernel.
    MQueue(alloc::sync::Arc<mqueue::MQueue>),
}

/// An open file description.
#[derive(Debug)]
pub struct File {
    /// What backs it.
    pub backing: Backing,
    /// Status flags (`O_ACCMODE`, `O_APPEND`, `O_NONBLOCK` …).
    pub flags: Mutex<u32>,
    /// The absolute path it was opened by (for `*at` calls, `fchdir` and
    /// `/proc/self/fd`), or a description such as `pipe:[3]`.
    pub path: String,
    /// A rootfs file whose metadata cannot change (`frozen`): its statx
    /// from the open, and the host fd's offset as far as the guest knows.
    pub frozen: Option<frozen::FrozenFile>,
}

impl File {
    /// A new open file.
    pub fn new(backing: Backing, flags: u32, path: String) -> Arc<File> {
        Self::with_frozen(backing, flags, path, None)
    }

    /// A new open file with frozen metadata (or none).
    pub fn with_frozen(
        backing: Backing,
        flags: u32,
        path: String,
        frozen: Option<frozen::FrozenFile>,
    ) -> Arc<File> {
        Arc::new(File {
            backing,
            flags: Mutex::new(flags & !O_CLOEXEC),
            path,
            frozen,
        })
    }

    /// The host fd, if the host backs this file.
    pub fn host_fd(&self) -> Option<i32> {
        match self.backing {
            Backing::Host { fd, .. } => Some(fd),
            Backing::Special(_)
            | Backing::Pipe(_)
            | Backing::Netlink(_)
            | Backing::Tty(_)
            | Backing::MQueue(_) => None,
        }
    }

    /// The host kind, if the host backs this file.
    pub fn host_kind(&self) -> Option<HostKind> {
        match self.backing {
            Backing::Host { kind, .. } => Some(kind),
            Backing::Special(_)
            | Backing::Pipe(_)
            | Backing::Netlink(_)
            | Backing::Tty(_)
            | Backing::MQueue(_) => None,
        }
    }

    /// The netlink socket, if this is one.
    pub fn netlink(&self) -> Option<&netlink::Netlink> {
        match &self.backing {
            Backing::Netlink(n) => Some(n),
            _ => None,
        }
    }

    /// The pipe end, if this is a guest pipe.
    pub fn pipe(&self) -> Option<&pipe::PipeEnd> {
        match &self.backing {
            Backing::Pipe(e) => Some(e),
            _ => None,
        }
    }

    /// For a file only the guest kernel can make ready (a guest pipe or
    /// pty end): its `poll` events, the wait queue a poll parks on, and
    /// its state-change counter (edge-triggered epoll).
    pub fn guest_poll(&self) -> Option<(i16, u64, u64)> {
        match &self.backing {
            Backing::Pipe(e) => Some((
                e.pipe.poll(e.write),
                e.pipe.queue(e.write),
                e.pipe.generation(),
            )),
            Backing::Tty(e) => Some((
                e.pty.poll(e.master),
                e.pty.queue(e.master),
                e.pty.generation(),
            )),
            Backing::MQueue(q) => Some((q.poll(), q.queue(), q.generation())),
            _ => None,
        }
    }

    /// Whether operations may block.
    pub fn nonblocking(&self) -> bool {
        *self.flags.lock() & O_NONBLOCK != 0
    }

    /// Whether the access mode allows reading.
    pub fn readable(&self) -> bool {
        let f = *self.flags.lock();
        f & O_PATH == 0 && f & O_ACCMODE != O_WRONLY
    }

    /// Whether the access mode allows writing.
    pub fn writable(&self) -> bool {
        let f = *self.flags.lock();
        f & O_PATH == 0 && f & O_ACCMODE != O_RDONLY
    }
}

impl Drop for File {
    fn drop(&mut self) {
        if let Backing::Host { fd, kind } = self.backing {
            if kind == HostKind::Epoll {
                crate::syscalls::epoll_guest::epoll_closed(fd);
            }
            let read_only = *self.flags.lock() & O_ACCMODE == O_RDONLY;
            if kind == HostKind::File && self.frozen.is_some() && read_only {
                host::close_later(fd);
            } else {
                host::close(fd);
            }
        }
    }
}

/// One fd slot.
#[derive(Debug, Clone)]
pub struct FdEntry {
    /// The open file.
    pub file: Arc<File>,
    /// `FD_CLOEXEC`.
    pub cloexec: bool,
}

/// The slot index of an fd argument: syscalls take fds as C `int`, so
/// only the low 32 bits count (a negative fd indexes nothing).
fn fd_index(fd: u64) -> usize {
    fd as u32 as usize
}

/// Most fds a process may hold whatever its `RLIMIT_NOFILE` (Linux's
/// `fs.nr_open`); the soft limit applies below it.
pub const MAX_FDS: usize = 1 << 20;

/// The fd table.
#[derive(Debug, Default, Clone)]
pub struct FdTable {
    slots: Vec<Option<FdEntry>>,
}

impl FdTable {
    /// The file at `fd`, or `EBADF`.
    pub fn get(&self, fd: u64) -> Result<&Arc<File>, Errno> {
        self.entry(fd).map(|e| &e.file)
    }

    /// The slot at `fd`, or `EBADF`.
    pub fn entry(&self, fd: u64) -> Result<&FdEntry, Errno> {
        self.slots
            .get(fd_index(fd))
            .and_then(Option::as_ref)
            .ok_or(Errno::EBADF)
    }

    /// Mutable slot at `fd`, or `EBADF`.
    pub fn entry_mut(&mut self, fd: u64) -> Result<&mut FdEntry, Errno> {
        self.slots
            .get_mut(fd_index(fd))
            .and_then(Option::as_mut)
            .ok_or(Errno::EBADF)
    }

    /// Installs `file` at the lowest free fd >= `min`.
    pub fn insert_from(
        &mut self,
        min: usize,
        file: Arc<File>,
        cloexec: bool,
    ) -> Result<usize, Errno> {
        let limit = crate::syscalls::nofile().min(MAX_FDS);
        let free = (min..limit).find(|&i| self.slots.get(i).is_none_or(Option::is_none));
        let fd = free.ok_or(Errno::EMFILE)?;
        if self.slots.len() <= fd {
            self.slots.resize(fd + 1, None);
        }
        self.slots[fd] = Some(FdEntry { file, cloexec });
        Ok(fd)
    }

    /// Puts `file` at exactly `fd`; returns what was there.
    pub fn insert_at(
        &mut self,
        fd: u64,
        file: Arc<File>,
        cloexec: bool,
    ) -> Result<Option<FdEntry>, Errno> {
        let limit = crate::syscalls::nofile().min(MAX_FDS);
        let fd = Some(fd_index(fd))
            .filter(|&f| f < limit)
            .ok_or(Errno::EBADF)?;
        if self.slots.len() <= fd {
            self.slots.resize(fd + 1, None);
        }
        Ok(self.slots[fd].replace(FdEntry { file, cloexec }))
    }

    /// Removes `fd`.
    pub fn remove(&mut self, fd: u64) -> Result<Arc<File>, Errno> {
        let slot = self.slots.get_mut(fd_index(fd)).ok_or(Errno::EBADF)?;
        slot.take().map(|e| e.file).ok_or(Errno::EBADF)
    }

    /// Takes every fd marked `FD_CLOEXEC` out (`execve`); the caller
    /// drops them.
    pub fn take_cloexec(&mut self) -> Vec<FdEntry> {
        let mut out = Vec::new();
        for slot in &mut self.slots {
            if slot.as_ref().is_some_and(|e| e.cloexec) {
                out.extend(slot.take());
            }
        }
        out
    }

    /// Open fd numbers, ascending.
    pub fn numbers(&self) -> impl Iterator<Item = usize> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.as_ref().map(|_| i))
    }
}

/// The table a program starts with: fds 0-2 are the host's stdio where the
/// host has them open (`stdio_mode` non-zero).
pub fn stdio_table(stdio_mode: &[u32; 4]) -> FdTable {
    let mut t = FdTable::default();
    for fd in 0..3 {
        if stdio_mode[fd] == 0 {
            continue;
        }
        let flags = if fd == 0 { O_RDONLY } else { O_WRONLY };
        let backing = Backing::Host {
            fd: fd as i32,
            kind: HostKind::Stdio,
        };
        let name = ["/dev/stdin", "/dev/stdout", "/dev/stderr"][fd];
        let _ = t.insert_at(fd as u64, File::new(backing, flags, name.into()), false);
    }
    t
}
