//! The rootfs: the only filesystem a guest reaches. Every path is resolved
//! under one directory fd with `openat2(RESOLVE_IN_ROOT |
//! RESOLVE_NO_MAGICLINKS)`, so absolute paths, `..` chains and symlinks
//! (absolute or relative) all stay inside it, and `/proc/<pid>/root`-style
//! magic links are refused.
//!
//! Operations that name a final component (mkdir, unlink, rename …) open
//! the parent that way and act on the single name below it; operations on
//! the object itself (chmod, utimes) open it `O_PATH` and use its
//! `/proc/self/fd/N` link, which points at that object and nothing else.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

/// Longest path accepted from a guest (Linux `PATH_MAX`).
pub const PATH_MAX: usize = 4096;

const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
const RESOLVE_NO_XDEV: u64 = 0x01;
const RESOLVE_NO_SYMLINKS: u64 = 0x04;
/// `statx` attribute: the object is the root of a mount.
const STATX_ATTR_MOUNT_ROOT: u64 = 0x2000;
const RESOLVE_IN_ROOT: u64 = 0x10;

#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// An open rootfs directory.
#[derive(Debug)]
pub struct Rootfs {
    dir: OwnedFd,
    /// The root mount is read-only: lookups that stay on it are frozen
    /// (`qlib::io_abi`, "Frozen answers").
    readonly: bool,
}

/// Whether `fd` lies on a read-only mount (`fstatvfs`); `false` if unknown.
pub fn on_readonly_mount(fd: &OwnedFd) -> bool {
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: valid fd and a buffer of the size of `struct statvfs`.
    let rc = unsafe { libc::fstatvfs(fd.as_raw_fd(), st.as_mut_ptr()) };
    // SAFETY: fstatvfs filled the buffer when it returned 0; it was zeroed
    // before, and all-zero is a valid `statvfs` anyway.
    rc == 0 && unsafe { st.assume_init() }.f_flag & libc::ST_RDONLY != 0
}

/// The last component of a path and the directory holding it.
pub struct Parent {
    /// The directory.
    pub dir: OwnedFd,
    /// The single name inside it (never empty, `.` or `..`).
    pub name: CString,
}

/// Why a name cannot be acted on: `.`, `..` or the root itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecialName {
    /// The path ends in `.` (or is the root).
    Dot,
    /// The path ends in `..`.
    DotDot,
}

fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

impl Rootfs {
    /// Opens `path` as the root.
    pub fn open(path: &Path) -> io::Result<Self> {
        let c = CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: c is a valid NUL-terminated string.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor we own.
        let dir = unsafe { OwnedFd::from_raw_fd(fd) };
        let readonly = on_readonly_mount(&dir);
        Ok(Self { dir, readonly })
    }

    /// `openat2` of `path` inside the root; `Err(errno)`.
    pub fn open_at(&self, path: &[u8], flags: i32, mode: u32) -> Result<OwnedFd, i32> {
        self.open_in(path, flags, mode, 0)
    }

    fn open_in(&self, path: &[u8], flags: i32, mode: u32, extra: u64) -> Result<OwnedFd, i32> {
        let dir = &self.dir;
        if path.len() > PATH_MAX {
            return Err(libc::ENAMETOOLONG);
        }
        let path = if path.is_empty() {
            b"/".as_slice()
        } else {
            path
        };
        let c = CString::new(path).map_err(|_| libc::EINVAL)?;
        let how = OpenHow {
            flags: (flags | libc::O_CLOEXEC) as u32 as u64,
            mode: if flags & (libc::O_CREAT | libc::O_TMPFILE) != 0 {
                u64::from(mode & 0o7777)
            } else {
                0
            },
            resolve: RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | extra,
        };
        for _ in 0..16 {
            // SAFETY: valid dirfd, NUL-terminated path and an open_how of
            // the size passed.
            let fd = unsafe {
                libc::syscall(
                    libc::SYS_openat2,
                    dir.as_raw_fd(),
                    c.as_ptr(),
                    &how as *const OpenHow,
                    size_of::<OpenHow>(),
                )
            };
            if fd >= 0 {
                // SAFETY: fd is a fresh descriptor we own.
                return Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) });
            }
            // EAGAIN: a concurrent rename raced the in-root resolution.
            match errno() {
                libc::EAGAIN | libc::EINTR => continue,
                e => return Err(e),
            }
        }
        Err(libc::EAGAIN)
    }

    /// An `O_PATH` fd of the object at `path` (not following a final
    /// symlink when `nofollow`).
    pub fn object(&self, path: &[u8], nofollow: bool) -> Result<OwnedFd, i32> {
        let mut flags = libc::O_PATH;
        if nofollow {
            flags |= libc::O_NOFOLLOW;
        }
        self.open_at(path, flags, 0)
    }

    /// [`Rootfs::object`], and whether the answer is frozen: on a
    /// read-only root, a resolution that never left the root mount
    /// (`RESOLVE_NO_XDEV`) cannot change while the container runs, found
    /// or `ENOENT` (`qlib::io_abi`, "Frozen answers"). `Err((errno,
    /// frozen))`.
    pub fn object_frozen(
        &self,
        path: &[u8],
        nofollow: bool,
    ) -> Result<(OwnedFd, bool), (i32, bool)> {
        let mut flags = libc::O_PATH;
        if nofollow {
            flags |= libc::O_NOFOLLOW;
        }
        if self.readonly {
            match self.open_in(path, flags, 0, RESOLVE_NO_XDEV) {
                Ok(fd) => return Ok((fd, true)),
                Err(libc::ENOENT) => return Err((libc::ENOENT, true)),
                // Another mount was crossed: frozen still when every
                // mount crossed is read-only (below), else answered as
                // usual.
                Err(libc::EXDEV) => {
                    if let Some(fd) = self.through_readonly_mounts(path, flags) {
                        return Ok((fd, true));
                    }
                }
                Err(e) => return Err((e, false)),
            }
        }
        self.open_at(path, flags, 0)
            .map(|fd| (fd, false))
            .map_err(|e| (e, false))
    }

    /// The object at `path` when its resolution crosses only read-only
    /// mounts (a read-only bind such as FunctionBench's `/functionbench`):
    /// the path has no `..` and resolves without any symlink, so it walks
    /// exactly its lexical prefixes, and each prefix that is a mount root
    /// must be on a read-only mount (the final object's own mount too).
    /// `None`: not so (or not found), answer as usual.
    fn through_readonly_mounts(&self, path: &[u8], flags: i32) -> Option<OwnedFd> {
        let parts = || {
            path.split(|&b| b == b'/')
                .filter(|c| !c.is_empty() && *c != b".")
        };
        if parts().any(|c| c == b"..") {
            return None;
        }
        let fd = self.open_in(path, flags, 0, RESOLVE_NO_SYMLINKS).ok()?;
        if !on_readonly_mount(&fd) {
            return None;
        }
        let mut prefix = Vec::with_capacity(path.len());
        for c in parts() {
            prefix.push(b'/');
            prefix.extend_from_slice(c);
            let step = self
                .open_in(
                    &prefix,
                    libc::O_PATH | libc::O_NOFOLLOW,
                    0,
                    RESOLVE_NO_SYMLINKS,
                )
                .ok()?;
            if mount_root(&step)? && !on_readonly_mount(&step) {
                return None;
            }
        }
        Some(fd)
    }

    /// The parent directory of `path` and its last name.
    pub fn parent(&self, path: &[u8]) -> Result<Parent, Result<SpecialName, i32>> {
        let trimmed = trim_trailing_slashes(path);
        let (dir, name) = match trimmed.iter().rposition(|&b| b == b'/') {
            Some(i) => (&trimmed[..i], &trimmed[i + 1..]),
            None => (b"".as_slice(), trimmed),
        };
        match name {
            b"" | b"." => return Err(Ok(SpecialName::Dot)),
            b".." => return Err(Ok(SpecialName::DotDot)),
            _ => {}
        }
        if name.len() > 255 {
            return Err(Err(libc::ENAMETOOLONG));
        }
        let dir = self
            .open_at(dir, libc::O_PATH | libc::O_DIRECTORY, 0)
            .map_err(Err)?;
        let name = CString::new(name).map_err(|_| Err(libc::EINVAL))?;
        Ok(Parent { dir, name })
    }
}

/// Whether `fd` is the root of a mount; `None` if the kernel cannot say.
fn mount_root(fd: &OwnedFd) -> Option<bool> {
    let mut sx = std::mem::MaybeUninit::<libc::statx>::zeroed();
    // SAFETY: valid fd, empty path with AT_EMPTY_PATH, a buffer of the
    // size of `struct statx`.
    let rc = unsafe {
        libc::statx(
            fd.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
            0,
            sx.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return None;
    }
    // SAFETY: statx filled the buffer (it returned 0); it was zeroed before.
    let sx = unsafe { sx.assume_init() };
    (sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT != 0)
        .then_some(sx.stx_attributes & STATX_ATTR_MOUNT_ROOT != 0)
}

/// `/proc/self/fd/N` of `fd`: a path naming exactly the object `fd` holds.
pub fn proc_fd_path(fd: &OwnedFd) -> CString {
    CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).expect("no NUL in a number")
}

fn trim_trailing_slashes(path: &[u8]) -> &[u8] {
    let mut end = path.len();
    while end > 1 && path[end - 1] == b'/' {
        end -= 1;
    }
    &path[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn tree(name: &str) -> (std::path::PathBuf, Rootfs) {
        let base =
            std::env::temp_dir().join(format!("qvisor-rootfs-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&base);
        fs::create_dir_all(base.join("root/dir")).expect("mkdir");
        fs::write(base.join("root/dir/file"), b"inside").expect("write");
        fs::write(base.join("secret"), b"outside").expect("write");
        std::os::unix::fs::symlink("/dir/file", base.join("root/abs")).expect("symlink");
        std::os::unix::fs::symlink("../../../secret", base.join("root/dir/rel")).expect("symlink");
        let root = Rootfs::open(&base.join("root")).expect("open root");
        (base, root)
    }

    fn read(fd: OwnedFd) -> String {
        let mut f = fs::File::from(fd);
        let mut s = String::new();
        std::io::Read::read_to_string(&mut f, &mut s).expect("read");
        s
    }

    #[test]
    fn a_writable_root_is_never_frozen() {
        let (base, root) = tree("frozen");
        assert!(!root.readonly);
        let (fd, frozen) = root.object_frozen(b"/dir/file", false).unwrap();
        assert!(!frozen);
        assert_eq!(
            read(root.open_at(b"/dir/file", libc::O_RDONLY, 0).unwrap()),
            "inside"
        );
        drop(fd);
        assert_eq!(
            root.object_frozen(b"/dir/none", false).unwrap_err(),
            (libc::ENOENT, false)
        );
        let _ = fs::remove_dir_all(base);
    }

    #[test]
    fn paths_stay_inside_the_root() {
        let (base, root) = tree("paths");
        let ro = libc::O_RDONLY;
        assert_eq!(read(root.open_at(b"/dir/file", ro, 0).unwrap()), "inside");
        assert_eq!(
            read(root.open_at(b"/../../dir/file", ro, 0).unwrap()),
            "inside"
        );
        assert_eq!(read(root.open_at(b"/abs", ro, 0).unwrap()), "inside");
        // `../../../secret` from /dir clamps at the root: /secret is absent.
        assert_eq!(root.open_at(b"/dir/rel", ro, 0).unwrap_err(), libc::ENOENT);
        assert_eq!(
            root.open_at(b"/../secret", ro, 0).unwrap_err(),
            libc::ENOENT
        );
        let _ = fs::remove_dir_all(base);
    }

    #[test]
    fn parents_refuse_dot_names() {
        let (base, root) = tree("parents");
        assert!(matches!(root.parent(b"/"), Err(Ok(SpecialName::Dot))));
        assert!(matches!(
            root.parent(b"/dir/.."),
            Err(Ok(SpecialName::DotDot))
        ));
        let Ok(p) = root.parent(b"/dir/file//") else {
            panic!("no parent for /dir/file//");
        };
        assert_eq!(p.name.as_bytes(), b"file");
        let _ = fs::remove_dir_all(base);
    }
}
