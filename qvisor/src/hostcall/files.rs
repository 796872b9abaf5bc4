//! File host calls: `Open`, `Close`, `Io`, `Path` and the file ops of `Fd`.
//! Paths resolve inside the rootfs (`crate::rootfs`); buffers are checked
//! guest ranges used in place.

use std::os::fd::{AsRawFd, OwnedFd};

use qlib::io_abi::{OpenStat, fd as fdop, frozen, io, path as pathop};

use super::sys::{err, ret};
use super::{HostCalls, fifo};
use crate::rootfs::{PATH_MAX, SpecialName};

const EFAULT: i64 = err(libc::EFAULT);
const EINVAL: i64 = err(libc::EINVAL);

/// Size of `struct statx`.
const STATX_SIZE: usize = 256;
const STATX_MASK: u32 = libc::STATX_BASIC_STATS | libc::STATX_BTIME;

impl HostCalls<'_> {
    /// Reads a guest path (GPA, length).
    pub(super) fn path(&self, gpa: u64, len: u64) -> Result<Vec<u8>, i64> {
        if len as usize > PATH_MAX {
            return Err(err(libc::ENAMETOOLONG));
        }
        let mut buf = vec![0u8; len as usize];
        self.ram.read_bytes(gpa, &mut buf).map_err(|_| EFAULT)?;
        if buf.is_empty() {
            return Err(err(libc::ENOENT));
        }
        Ok(buf)
    }

    /// `Open`; with `stat_out` != 0, the opened file's [`OpenStat`] is
    /// written there (checked before anything is opened).
    pub(super) fn open(&mut self, a: [u64; 6]) -> i64 {
        let (gpa, len, flags, mode, stat_out) = (a[0], a[1], a[2], a[3], a[4]);
        let path = match self.path(gpa, len) {
            Ok(p) => p,
            Err(e) => return e,
        };
        let size = size_of::<OpenStat>() as u64;
        if stat_out != 0 && self.ram.check_range(stat_out, size).is_err() {
            return EFAULT;
        }
        let fd = match self.open_inner(&path, flags as i32, mode as u32) {
            Ok(fd) => fd,
            Err(e) => return e,
        };
        if stat_out != 0 {
            // `OpenStat`: the statx record, then `frozen` as a u64.
            let mut statx = [0u8; STATX_SIZE];
            let rc = statx_raw(fd.as_raw_fd(), &mut statx);
            if rc < 0 {
                return ret(rc);
            }
            let frozen = u64::from(crate::rootfs::on_readonly_mount(&fd));
            let wrote = self.ram.write_bytes(stat_out, &statx).is_ok()
                && self.ram.write(stat_out + STATX_SIZE as u64, frozen).is_ok();
            if !wrote {
                return EFAULT;
            }
        }
        self.fds.adopt(fd)
    }

    /// Opens `path` for the guest without ever waiting in the host's
    /// `open`: always `O_NONBLOCK` first. A FIFO keeps it (the guest's
    /// blocking I/O waits in `blocking`) and, unless the guest asked for
    /// `O_NONBLOCK` or `O_RDWR`, waits for its other end as Linux does,
    /// interruptibly (`fifo`); anything else gets its blocking mode back.
    fn open_inner(&mut self, path: &[u8], guest: i32, mode: u32) -> Result<OwnedFd, i64> {
        let guest_nonblock = guest & libc::O_NONBLOCK != 0;
        // Status flags the guest keeps (O_NONBLOCK) or that would hand the
        // host's terminal to the guest (O_NOCTTY is implied) are dropped.
        let flags = if guest & libc::O_PATH != 0 {
            // openat2 takes only these with O_PATH.
            guest & (libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW)
        } else {
            (guest & !(libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_ASYNC)) | libc::O_NOCTTY
        };
        let accmode = flags & libc::O_ACCMODE;
        let nonblock = if flags & libc::O_PATH != 0 {
            0
        } else {
            libc::O_NONBLOCK
        };
        let fd = match self.root.open_at(path, flags | nonblock, mode) {
            Ok(fd) => fd,
            // A FIFO without a reader; a socket file says ENXIO too.
            Err(libc::ENXIO) if accmode == libc::O_WRONLY && !guest_nonblock => {
                let obj = self
                    .root
                    .object(path, flags & libc::O_NOFOLLOW != 0)
                    .map_err(err)?;
                if !fifo::is_fifo(&obj) {
                    return Err(err(libc::ENXIO));
                }
                let fd = self
                    .wait_fifo_peer(&obj, libc::O_WRONLY, None)?
                    .ok_or(err(libc::EIO))?;
                set_nonblock(&fd, true)?;
                return Ok(fd);
            }
            Err(e) => return Err(err(e)),
        };
        if flags & libc::O_PATH != 0 {
            return Ok(fd);
        }
        if !fifo::is_fifo(&fd) {
            set_nonblock(&fd, false)?;
            return Ok(fd);
        }
        if accmode == libc::O_RDONLY && !guest_nonblock {
            // The helper's end only tells a writer came; ours stays.
            let _ = self.wait_fifo_peer(&fd, libc::O_RDONLY, Some(&fd))?;
        }
        Ok(fd)
    }

    /// `MapFile`: maps the regular file `fd` into the file window; writes
    /// its size to the `u64` at `size_out`. Host stdio is never mapped.
    pub(super) fn map_file(&mut self, fd: u64, size_out: u64) -> i64 {
        let fd = match self.fds.check(fd) {
            Ok(fd) if fd > 2 => fd,
            Ok(_) => return -(libc::ENODEV as i64),
            Err(e) => return e,
        };
        if self.ram.check_range(size_out, 8).is_err() {
            return EFAULT;
        }
        match self.window.map(self.ram, &fd) {
            Ok((gpa, size)) => match self.ram.write::<u64>(size_out, size) {
                Ok(()) => gpa as i64,
                Err(_) => EFAULT,
            },
            Err(e) => e.errno(),
        }
    }

    /// `CopyPages`: the guest's private copies of file-window pages, made
    /// here (`FileWindow::copy_pages`).
    pub(super) fn copy_pages(&mut self, list: u64, count: u64) -> i64 {
        if count == 0 || count > qlib::abi::COPY_PAGES_MAX {
            return -(libc::EINVAL as i64);
        }
        let mut raw = vec![0u8; count as usize * 16];
        if self.ram.read_bytes(list, &mut raw).is_err() {
            return EFAULT;
        }
        let pairs: Vec<[u64; 2]> = raw
            .chunks_exact(16)
            .map(|c| {
                let word = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or([0; 8]));
                [word(&c[..8]), word(&c[8..])]
            })
            .collect();
        match self.window.copy_pages(self.ram, &pairs) {
            Ok(()) => 0,
            Err(errno) => -i64::from(errno),
        }
    }

    /// `KVM_RUN` failed with `EFAULT`: files in the window that shrank on
    /// the host (then their pages past the new end read as zero and the
    /// guest is told, `control::WINDOW_GONE`); `false` when none did: the
    /// fault is something else, which stops the sandbox.
    pub fn files_shrank(&mut self) -> bool {
        let n = self.window.shrunk(self.ram);
        if n > 0 {
            log::debug!("file window: {n} mapped files shrank on the host");
            self.control.post(self.ram, qlib::abi::control::WINDOW_GONE);
        }
        n > 0
    }

    /// `WindowGone`: writes up to `cap` ranges into the guest's `IoVec`
    /// array at `list`; returns how many.
    pub(super) fn window_gone(&mut self, list: u64, cap: u64) -> i64 {
        let cap = cap.min(qlib::abi::MAX_IOVECS);
        let size = std::mem::size_of::<qlib::abi::IoVec>() as u64;
        if cap == 0 || self.ram.check_range(list, cap * size).is_err() {
            return EFAULT;
        }
        let ranges = self.window.take_gone(cap as usize);
        for (i, &(gpa, len)) in ranges.iter().enumerate() {
            let v = qlib::abi::IoVec { gpa, len };
            if self.ram.write(list + i as u64 * size, v).is_err() {
                return EFAULT;
            }
        }
        ranges.len() as i64
    }

    /// `Close`: `fd`, then the `count` fds of the `i32` array at `list`.
    pub(super) fn close(&mut self, fd: u64, list: u64, count: u64) -> i64 {
        let mut first = self.fds.close(fd);
        if count == 0 {
            return first;
        }
        if count > qlib::abi::MAX_CLOSE_BATCH || self.ram.check_range(list, count * 4).is_err() {
            return if first < 0 { first } else { EFAULT };
        }
        for i in 0..count {
            let r = match self.ram.read::<i32>(list + i * 4) {
                Ok(more) => self.fds.close(more as u32 as u64),
                Err(_) => EFAULT,
            };
            if first == 0 {
                first = r;
            }
        }
        first
    }

    /// `Io`: read or write `fd` with the guest iovec list.
    pub(super) fn io(&mut self, fd: u64, iov: u64, count: u64, offset: u64, flags: u64) -> i64 {
        let fd = match self.fds.check(fd) {
            Ok(fd) => fd,
            Err(e) => return e,
        };
        let Ok(iovecs) = self.ram.host_iovecs(iov, count) else {
            return EFAULT;
        };
        let write = flags & io::WRITE != 0;
        let events = if write { libc::POLLOUT } else { libc::POLLIN };
        self.blocking(fd, events, flags & io::BLOCK != 0, || {
            let n = iovecs.len() as i32;
            // SAFETY: every iovec was checked to lie inside guest RAM, which
            // stays mapped for the life of `self.ram`; the guest may race on
            // the bytes, which only affects what is read or written.
            let rc = unsafe {
                match (write, offset) {
                    (true, u64::MAX) => libc::writev(fd, iovecs.as_ptr(), n),
                    (false, u64::MAX) => libc::readv(fd, iovecs.as_ptr(), n),
                    (true, off) => libc::pwritev(fd, iovecs.as_ptr(), n, off as i64),
                    (false, off) => libc::preadv(fd, iovecs.as_ptr(), n, off as i64),
                }
            };
            ret(rc as i64)
        })
    }

    /// `Path`: an operation on a path inside the rootfs.
    pub(super) fn path_op(&mut self, a: [u64; 6]) -> i64 {
        let path = match self.path(a[1], a[2]) {
            Ok(p) => p,
            Err(e) => return e,
        };
        match self.path_op_inner(a[0], &path, a) {
            Ok(v) => v,
            Err(e) => e,
        }
    }

    fn path_op_inner(&mut self, op: u64, path: &[u8], a: [u64; 6]) -> Result<i64, i64> {
        let special = |s: SpecialName, dot: i32, dotdot: i32| {
            err(if s == SpecialName::Dot { dot } else { dotdot })
        };
        let parent = |p: &[u8], dot: i32, dotdot: i32| {
            self.root.parent(p).map_err(|e| match e {
                Ok(s) => special(s, dot, dotdot),
                Err(e) => err(e),
            })
        };
        Ok(match op {
            pathop::STATX => match self.root.object_frozen(path, a[3] == 1) {
                Ok((fd, frozen)) => match self.statx_into(fd.as_raw_fd(), a[4]) {
                    0 if frozen => frozen::FOUND as i64,
                    r => r,
                },
                Err((libc::ENOENT, true)) => frozen::MISSING as i64,
                Err((e, _)) => return Err(err(e)),
            },
            pathop::MKDIR => {
                let p = parent(path, libc::EEXIST, libc::EEXIST)?;
                // SAFETY: valid dirfd and NUL-terminated name.
                ret(
                    unsafe { libc::mkdirat(p.dir.as_raw_fd(), p.name.as_ptr(), a[3] as u32) }
                        as i64,
                )
            }
            pathop::UNLINK | pathop::RMDIR => {
                let (flags, dot, dotdot) = if op == pathop::RMDIR {
                    (libc::AT_REMOVEDIR, libc::EINVAL, libc::ENOTEMPTY)
                } else {
                    (0, libc::EISDIR, libc::EISDIR)
                };
                let p = parent(path, dot, dotdot)?;
                // SAFETY: valid dirfd and NUL-terminated name.
                ret(unsafe { libc::unlinkat(p.dir.as_raw_fd(), p.name.as_ptr(), flags) } as i64)
            }
            pathop::LINK if a[5] & pathop::LINK_FOLLOW != 0 => {
                // The object a final symlink leads to, resolved in-root,
                // linked through its /proc link (AT_EMPTY_PATH would need
                // CAP_DAC_READ_SEARCH).
                let to = self.path(a[3], a[4])?;
                let from = self.root.object(path, false).map_err(err)?;
                let to = parent(&to, libc::EEXIST, libc::EEXIST)?;
                let p = crate::rootfs::proc_fd_path(&from);
                // SAFETY: NUL-terminated path naming exactly our fd's
                // object, a valid dirfd and a NUL-terminated name.
                ret(unsafe {
                    libc::linkat(
                        libc::AT_FDCWD,
                        p.as_ptr(),
                        to.dir.as_raw_fd(),
                        to.name.as_ptr(),
                        libc::AT_SYMLINK_FOLLOW,
                    )
                } as i64)
            }
            pathop::RENAME | pathop::LINK => {
                let to = self.path(a[3], a[4])?;
                let from = parent(path, libc::EBUSY, libc::EBUSY)?;
                let to = parent(&to, libc::EBUSY, libc::EBUSY)?;
                let (f, t) = (from.dir.as_raw_fd(), to.dir.as_raw_fd());
                // SAFETY: valid dirfds and NUL-terminated names.
                ret(unsafe {
                    if op == pathop::RENAME {
                        libc::renameat2(f, from.name.as_ptr(), t, to.name.as_ptr(), a[5] as u32)
                    } else {
                        libc::linkat(f, from.name.as_ptr(), t, to.name.as_ptr(), 0)
                    }
                } as i64)
            }
            pathop::BIND => {
                // Both ends resolved inside the root, then bound through
                // their /proc links (the objects those fds hold). The
                // VMM can mount only with CAP_SYS_ADMIN, which it keeps
                // when the config grants it, and its seccomp filter
                // allows `mount` only then.
                let to = self.path(a[3], a[4])?;
                let from = self.root.object(path, false).map_err(err)?;
                let to = self.root.object(&to, false).map_err(err)?;
                let (f, t) = (
                    crate::rootfs::proc_fd_path(&from),
                    crate::rootfs::proc_fd_path(&to),
                );
                let flags = libc::MS_BIND | if a[5] & 0x4000 != 0 { libc::MS_REC } else { 0 };
                // SAFETY: NUL-terminated paths naming exactly our fds'
                // objects; no file system type or data.
                ret(unsafe {
                    libc::mount(
                        f.as_ptr(),
                        t.as_ptr(),
                        std::ptr::null(),
                        flags,
                        std::ptr::null(),
                    )
                } as i64)
            }
            pathop::UNMOUNT => {
                // Through the parent's /proc link and the last name, so
                // that no fd of ours holds the mount (it would be busy);
                // UMOUNT_NOFOLLOW keeps the last name from leading out of
                // the root.
                let p = parent(path, libc::EINVAL, libc::EINVAL)?;
                let mut at = crate::rootfs::proc_fd_path(&p.dir).into_bytes();
                at.push(b'/');
                at.extend_from_slice(p.name.as_bytes());
                let at = std::ffi::CString::new(at).map_err(|_| EINVAL)?;
                let flags = (a[3] & 0x7) as i32 | libc::UMOUNT_NOFOLLOW;
                // SAFETY: a NUL-terminated path; integer flags.
                ret(unsafe { libc::umount2(at.as_ptr(), flags) } as i64)
            }
            pathop::SYMLINK => {
                let target = self.path(a[3], a[4])?;
                let target = std::ffi::CString::new(target).map_err(|_| EINVAL)?;
                let p = parent(path, libc::EEXIST, libc::EEXIST)?;
                // SAFETY: valid dirfd and NUL-terminated strings. The target
                // is stored as text; it is resolved inside the root later.
                ret(
                    unsafe { libc::symlinkat(target.as_ptr(), p.dir.as_raw_fd(), p.name.as_ptr()) }
                        as i64,
                )
            }
            pathop::READLINK => {
                let fd = self.root.object(path, true).map_err(err)?;
                let mut buf = vec![0u8; (a[4] as usize).min(PATH_MAX)];
                // SAFETY: valid fd, empty NUL-terminated path, buffer of the
                // length passed.
                let n = unsafe {
                    libc::readlinkat(
                        fd.as_raw_fd(),
                        c"".as_ptr(),
                        buf.as_mut_ptr().cast(),
                        buf.len(),
                    )
                };
                if n < 0 {
                    // An empty path on a non-link says ENOENT; readlink says EINVAL.
                    return Err(err(libc::EINVAL));
                }
                self.ram
                    .write_bytes(a[3], &buf[..n as usize])
                    .map_err(|_| EFAULT)?;
                n as i64
            }
            pathop::ACCESS => {
                let fd = self.root.object(path, false).map_err(err)?;
                // SAFETY: faccessat2 with a valid fd, an empty path and
                // AT_EMPTY_PATH checks that object.
                ret(unsafe {
                    libc::syscall(
                        libc::SYS_faccessat2,
                        fd.as_raw_fd(),
                        c"".as_ptr(),
                        a[3] as i32,
                        libc::AT_EMPTY_PATH,
                    )
                })
            }
            pathop::CHMOD => {
                let fd = self.root.object(path, false).map_err(err)?;
                let p = crate::rootfs::proc_fd_path(&fd);
                // SAFETY: NUL-terminated path naming exactly our fd's object.
                ret(unsafe { libc::fchmodat(libc::AT_FDCWD, p.as_ptr(), a[3] as u32, 0) } as i64)
            }
            pathop::CHOWN => {
                let (uid, gid) = (a[3] as u32, a[4] as u32);
                if a[5] == 1 {
                    let p = parent(path, libc::EINVAL, libc::EINVAL)?;
                    // SAFETY: valid dirfd and name; the final name is not
                    // followed.
                    ret(unsafe {
                        libc::fchownat(
                            p.dir.as_raw_fd(),
                            p.name.as_ptr(),
                            uid,
                            gid,
                            libc::AT_SYMLINK_NOFOLLOW,
                        )
                    } as i64)
                } else {
                    let fd = self.root.object(path, false).map_err(err)?;
                    let p = crate::rootfs::proc_fd_path(&fd);
                    // SAFETY: NUL-terminated path naming exactly our fd's object.
                    ret(unsafe { libc::fchownat(libc::AT_FDCWD, p.as_ptr(), uid, gid, 0) } as i64)
                }
            }
            pathop::TRUNCATE => {
                // Linux truncates regular files only, without opening
                // them: a FIFO must not block here nor see a writer come
                // and go. O_NONBLOCK covers one swapped in meanwhile.
                let obj = self.root.object(path, false).map_err(err)?;
                // SAFETY: `stat` is plain data; fstat fills it.
                let mut st: libc::stat = unsafe { std::mem::zeroed() };
                // SAFETY: valid O_PATH fd and a stat buffer of ours.
                if unsafe { libc::fstat(obj.as_raw_fd(), &mut st) } < 0 {
                    return Err(err(libc::EIO));
                }
                match st.st_mode & libc::S_IFMT {
                    libc::S_IFREG => {}
                    libc::S_IFDIR => return Err(err(libc::EISDIR)),
                    _ => return Err(err(libc::EINVAL)),
                }
                let flags = libc::O_WRONLY | libc::O_NONBLOCK | libc::O_NOCTTY;
                let fd = self.root.open_at(path, flags, 0).map_err(|e| match e {
                    libc::ENXIO => err(libc::EINVAL),
                    e => err(e),
                })?;
                // SAFETY: valid fd.
                ret(unsafe { libc::ftruncate(fd.as_raw_fd(), a[3] as i64) } as i64)
            }
            pathop::UTIMENS => {
                let times = self.timespecs(a[3])?;
                let tp = times.as_ref().map_or(std::ptr::null(), |t| t.as_ptr());
                if a[4] == 1 {
                    let p = parent(path, libc::EINVAL, libc::EINVAL)?;
                    // SAFETY: valid dirfd, name, and null or two timespecs;
                    // the final name is not followed.
                    ret(unsafe {
                        libc::utimensat(
                            p.dir.as_raw_fd(),
                            p.name.as_ptr(),
                            tp,
                            libc::AT_SYMLINK_NOFOLLOW,
                        )
                    } as i64)
                } else {
                    let fd = self.root.object(path, false).map_err(err)?;
                    let p = crate::rootfs::proc_fd_path(&fd);
                    // SAFETY: as above, through our fd's /proc link.
                    ret(unsafe { libc::utimensat(libc::AT_FDCWD, p.as_ptr(), tp, 0) } as i64)
                }
            }
            pathop::STATFS => {
                let fd = self.root.object(path, false).map_err(err)?;
                self.statfs_into(fd.as_raw_fd(), a[3])
            }
            pathop::MKFIFO => {
                let p = parent(path, libc::EEXIST, libc::EEXIST)?;
                let mode = libc::S_IFIFO | (a[3] as u32 & 0o7777);
                // SAFETY: valid dirfd and NUL-terminated name.
                ret(unsafe { libc::mknodat(p.dir.as_raw_fd(), p.name.as_ptr(), mode, 0) } as i64)
            }
            pathop::SYNCFS => {
                // syncfs needs an fd opened for I/O, not an O_PATH one;
                // O_NONBLOCK so a FIFO does not wait for a writer.
                let fd = self
                    .root
                    .open_at(path, libc::O_RDONLY | libc::O_NONBLOCK, 0)
                    .map_err(err)?;
                // SAFETY: `fd` is a valid fd of ours.
                ret(unsafe { libc::syncfs(fd.as_raw_fd()) } as i64)
            }
            _ => err(libc::ENOSYS),
        })
    }

    /// `fstatfs` of `fd` into the guest's 120 bytes at `out`.
    fn statfs_into(&self, fd: i32, out: u64) -> i64 {
        // SAFETY: all-zero bytes are a valid `struct statfs`.
        let mut st: libc::statfs = unsafe { std::mem::zeroed() };
        // SAFETY: valid fd (O_PATH is fine for fstatfs) and a buffer of the
        // right type.
        let rc = unsafe { libc::fstatfs(fd, &mut st) };
        if rc < 0 {
            return ret(rc as i64);
        }
        const _: () = assert!(size_of::<libc::statfs>() == qlib::io_abi::STATFS_SIZE);
        // SAFETY: `statfs` is plain data of STATFS_SIZE bytes.
        let bytes = unsafe {
            std::slice::from_raw_parts((&raw const st).cast::<u8>(), qlib::io_abi::STATFS_SIZE)
        };
        match self.ram.write_bytes(out, bytes) {
            Ok(()) => 0,
            Err(_) => EFAULT,
        }
    }

    fn timespecs(&self, gpa: u64) -> Result<Option<[libc::timespec; 2]>, i64> {
        if gpa == 0 {
            return Ok(None);
        }
        let mut raw = [0u64; 4];
        for (i, v) in raw.iter_mut().enumerate() {
            *v = self.ram.read(gpa + i as u64 * 8).map_err(|_| EFAULT)?;
        }
        let ts = |s: u64, ns: u64| libc::timespec {
            tv_sec: s as i64,
            tv_nsec: ns as i64,
        };
        Ok(Some([ts(raw[0], raw[1]), ts(raw[2], raw[3])]))
    }

    /// `statx` of `fd` into the guest's 256 bytes at `out`.
    fn statx_into(&self, fd: i32, out: u64) -> i64 {
        let mut buf = [0u8; STATX_SIZE];
        let rc = statx_raw(fd, &mut buf);
        if rc < 0 {
            return ret(rc);
        }
        match self.ram.write_bytes(out, &buf) {
            Ok(()) => 0,
            Err(_) => EFAULT,
        }
    }

    /// The file ops of `Fd`; socket ops go to `net`.
    pub(super) fn fd_op(&mut self, a: [u64; 6]) -> i64 {
        let fd = match self.fds.check(a[1]) {
            Ok(fd) => fd,
            Err(e) => return e,
        };
        match a[0] {
            fdop::STATX => self.statx_into(fd, a[2]),
            // SAFETY: `fd` is a valid fd of ours; the rest are integers.
            fdop::LSEEK => ret(unsafe { libc::lseek(fd, a[2] as i64, a[3] as i32) }),
            // SAFETY: `fd` is a valid fd of ours; the rest are integers.
            fdop::FTRUNCATE => ret(unsafe { libc::ftruncate(fd, a[2] as i64) } as i64),
            // SAFETY: `fd` is a valid fd of ours; the rest are integers.
            fdop::FSYNC => ret(unsafe { libc::fsync(fd) } as i64),
            // SAFETY: `fd` is a valid fd of ours; the rest are integers.
            fdop::FDATASYNC => ret(unsafe { libc::fdatasync(fd) } as i64),
            // SAFETY: `fd` is a valid fd of ours; the rest are integers.
            fdop::FCHMOD => ret(unsafe { libc::fchmod(fd, a[2] as u32) } as i64),
            // SAFETY: `fd` is a valid fd of ours; the rest are integers.
            fdop::FCHOWN => ret(unsafe { libc::fchown(fd, a[2] as u32, a[3] as u32) } as i64),
            fdop::FSTATFS => self.statfs_into(fd, a[2]),
            // SAFETY: `fd` is a valid fd of ours.
            fdop::SYNCFS => ret(unsafe { libc::syncfs(fd) } as i64),
            fdop::FALLOCATE => {
                // SAFETY: `fd` is a valid fd of ours; the rest are integers.
                let rc = unsafe { libc::fallocate(fd, a[2] as i32, a[3] as i64, a[4] as i64) };
                ret(rc as i64)
            }
            fdop::PIPE_SZ => {
                // SAFETY: `fd` is a valid fd of ours; the rest are integers.
                ret(unsafe {
                    if a[2] == 0 {
                        libc::fcntl(fd, libc::F_GETPIPE_SZ)
                    } else {
                        libc::fcntl(fd, libc::F_SETPIPE_SZ, a[2].min(i32::MAX as u64) as i32)
                    }
                } as i64)
            }
            fdop::GETDENTS => self.getdents(fd, a[2], a[3]),
            fdop::SENDFILE => self.sendfile(fd, a[2], a[3], a[4], a[5]),
            fdop::EPOLL_CTL => self.epoll_ctl(fd, a),
            fdop::TIMERFD_SET | fdop::TIMERFD_GET => self.timerfd(fd, a),
            _ => self.sock_op(fd, a),
        }
    }

    fn getdents(&self, fd: i32, iov: u64, count: u64) -> i64 {
        let Ok(ranges) = self.ram.ranges(iov, count) else {
            return EFAULT;
        };
        let total: u64 = ranges.iter().map(|r| r.len).sum();
        let mut buf = vec![0u8; total.min(1 << 20) as usize];
        // SAFETY: valid fd and a buffer of the length passed.
        let n = unsafe { libc::syscall(libc::SYS_getdents64, fd, buf.as_mut_ptr(), buf.len()) };
        if n < 0 {
            return ret(n);
        }
        let mut done = 0usize;
        for r in ranges {
            if done >= n as usize {
                break;
            }
            let k = (r.len as usize).min(n as usize - done);
            if self.ram.write_bytes(r.gpa, &buf[done..done + k]).is_err() {
                return EFAULT;
            }
            done += k;
        }
        n
    }

    fn sendfile(&mut self, out: i32, input: u64, count: u64, off_gpa: u64, flags: u64) -> i64 {
        let input = match self.fds.check(input) {
            Ok(fd) => fd,
            Err(e) => return e,
        };
        let mut off: i64 = 0;
        if off_gpa != 0 {
            match self.ram.read::<u64>(off_gpa) {
                Ok(v) => off = v as i64,
                Err(_) => return EFAULT,
            }
        }
        let n = self.blocking(out, libc::POLLOUT, flags & io::BLOCK != 0, || {
            let p = if off_gpa != 0 {
                &raw mut off
            } else {
                std::ptr::null_mut()
            };
            // SAFETY: valid fds; `p` is null or points at our local offset.
            ret(unsafe { libc::sendfile(out, input, p, count as usize) } as i64)
        });
        if n >= 0 && off_gpa != 0 && self.ram.write(off_gpa, off as u64).is_err() {
            return EFAULT;
        }
        n
    }
}

/// Sets or clears `O_NONBLOCK` on `fd`.
fn set_nonblock(fd: &OwnedFd, on: bool) -> Result<(), i64> {
    // SAFETY: fcntl on a valid fd with integer arguments.
    let fl = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    if fl < 0 {
        return Err(ret(-1));
    }
    let want = if on {
        fl | libc::O_NONBLOCK
    } else {
        fl & !libc::O_NONBLOCK
    };
    // SAFETY: as above.
    if want != fl && unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, want) } < 0 {
        return Err(ret(-1));
    }
    Ok(())
}

/// `statx` of `fd` into `buf`; the raw syscall result.
fn statx_raw(fd: i32, buf: &mut [u8; STATX_SIZE]) -> i64 {
    // SAFETY: valid fd, empty path with AT_EMPTY_PATH, and a buffer of
    // the size of `struct statx`.
    unsafe {
        libc::syscall(
            libc::SYS_statx,
            fd,
            c"".as_ptr(),
            libc::AT_EMPTY_PATH | libc::AT_STATX_SYNC_AS_STAT,
            STATX_MASK,
            buf.as_mut_ptr(),
        )
    }
}
