//! The file window: host files mapped into a guest-physical range above
//! guest RAM ([`FILE_WINDOW_GPA`], [`FILE_WINDOW_SIZE`]), so that the
//! guest's program, library and file-mapping pages are the host's
//! page-cache pages, shared by every sandbox that maps the same file.
//!
//! The window is one KVM memslot over one host reservation (anonymous,
//! `PROT_READ`, `MAP_NORESERVE`: untouched parts cost nothing). Mapping a
//! file replaces a piece of the reservation with `mmap(MAP_FIXED |
//! MAP_PRIVATE, PROT_READ)` of the whole file; KVM's MMU notifier drops any
//! stale translation. A file is mapped once per sandbox: the same device,
//! inode, size and mtime get the same window range (a file replaced or
//! changed on the host gets a new one). Window space is never given back
//! during the sandbox's life: a full window makes the guest copy files
//! into its RAM instead (`-ENOMEM`).
//!
//! The guest maps window pages into user page tables read-only; a write to
//! a `MAP_PRIVATE` page is copied into guest RAM by the guest kernel. The
//! VMM itself never reads window memory (`GuestRam` accepts window ranges
//! only as host-I/O iovecs, where a page beyond a truncated file's end is
//! an `EFAULT` from the host kernel, not a `SIGBUS`).

use std::collections::HashMap;
use std::os::fd::AsRawFd;

use qlib::layout::{FILE_WINDOW_GPA, FILE_WINDOW_SIZE, PAGE_SIZE};

use crate::guest_mem::GuestRam;

/// What identifies one version of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct FileKey {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
}

/// The files mapped into one sandbox's window.
#[derive(Debug, Default)]
pub struct FileWindow {
    /// Bytes of the window handed out (from its start).
    used: u64,
    /// Mapped files: window offset of byte 0, and the size mapped.
    files: HashMap<FileKey, (u64, u64)>,
}

/// Why a file could not be mapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapError {
    /// Not a regular file (or `fstat` failed).
    NotRegular,
    /// The window has no room left for it.
    Full,
    /// The host `mmap` failed with this errno.
    Mmap(i32),
}

impl MapError {
    /// The negated errno the guest gets.
    pub fn errno(self) -> i64 {
        -i64::from(match self {
            Self::NotRegular => libc::ENODEV,
            Self::Full => libc::ENOMEM,
            Self::Mmap(e) => e,
        })
    }
}

impl FileWindow {
    /// Maps the regular file `fd` (whole) into the window of `ram`, or
    /// finds it mapped already; returns the window GPA of its byte 0 and
    /// its size.
    pub fn map(&mut self, ram: &GuestRam, fd: &impl AsRawFd) -> Result<(u64, u64), MapError> {
        // SAFETY: an all-zero `stat` is a valid value for fstat to fill.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fstat writes one `stat` into a valid pointer.
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0
            || st.st_mode & libc::S_IFMT != libc::S_IFREG
        {
            return Err(MapError::NotRegular);
        }
        let key = FileKey {
            dev: st.st_dev,
            ino: st.st_ino,
            size: st.st_size as u64,
            mtime: (st.st_mtime, st.st_mtime_nsec),
        };
        if let Some(&(off, size)) = self.files.get(&key) {
            return Ok((FILE_WINDOW_GPA + off, size));
        }
        let size = key.size;
        let len = size.next_multiple_of(PAGE_SIZE);
        if len == 0 {
            // Nothing to map: an empty file reads as zero pages anyway.
            return Ok((FILE_WINDOW_GPA + self.used, 0));
        }
        if len > FILE_WINDOW_SIZE - self.used {
            return Err(MapError::Full);
        }
        let off = self.used;
        let at = ram.window_host_base() + off;
        // SAFETY: `[at, at + len)` lies inside the window reservation that
        // `ram` owns and no Rust object lives in; MAP_FIXED replaces
        // reservation pages only. The mapping is read-only and private.
        let p = unsafe {
            libc::mmap(
                at as *mut libc::c_void,
                len as usize,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_FIXED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(MapError::Mmap(
                std::io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::ENOMEM),
            ));
        }
        self.used += len;
        self.files.insert(key, (off, size));
        Ok((FILE_WINDOW_GPA + off, size))
    }

    /// Bytes of the window in use.
    #[cfg(test)]
    pub fn used(&self) -> u64 {
        self.used
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn ram() -> GuestRam {
        GuestRam::new(16 << 20).expect("guest RAM")
    }

    fn temp_file(bytes: &[u8]) -> (tempfile_path::Guard, std::fs::File) {
        let g = tempfile_path::Guard::new();
        let mut f = std::fs::File::create(&g.0).expect("create");
        f.write_all(bytes).expect("write");
        let f = std::fs::File::open(&g.0).expect("open");
        (g, f)
    }

    mod tempfile_path {
        /// A temporary path removed on drop.
        pub struct Guard(pub std::path::PathBuf);
        impl Guard {
            pub fn new() -> Self {
                use std::sync::atomic::{AtomicU32, Ordering};
                static N: AtomicU32 = AtomicU32::new(0);
                let n = N.fetch_add(1, Ordering::Relaxed);
                Self(std::env::temp_dir().join(format!("qvisor-window-{}-{n}", std::process::id())))
            }
        }
        impl Drop for Guard {
            fn drop(&mut self) {
                let _ = std::fs::remove_file(&self.0);
            }
        }
    }

    #[test]
    fn a_file_is_mapped_once_and_reads_through_the_window() {
        let ram = ram();
        let mut w = FileWindow::default();
        let (g, f) = temp_file(b"hello window");
        let (gpa, size) = w.map(&ram, &f).expect("map");
        assert_eq!((gpa, size), (FILE_WINDOW_GPA, 12));
        let again = std::fs::File::open(&g.0).expect("open");
        assert_eq!(w.map(&ram, &again), Ok((gpa, 12)), "same file, same range");
        assert_eq!(w.used(), PAGE_SIZE);
        let iov = ram.host_iovecs_checked(&[qlib::abi::IoVec { gpa, len: 12 }]);
        let iov = iov.expect("window ranges are host-I/O iovecs");
        // SAFETY: the iovec names 12 readable bytes of the window mapping.
        let bytes = unsafe { std::slice::from_raw_parts(iov[0].iov_base as *const u8, 12) };
        assert_eq!(bytes, b"hello window");
        let (_g2, other) = temp_file(b"x");
        assert_eq!(w.map(&ram, &other), Ok((FILE_WINDOW_GPA + PAGE_SIZE, 1)));
    }

    #[test]
    fn non_regular_files_and_a_full_window_are_refused() {
        let ram = ram();
        let mut w = FileWindow::default();
        let dir = std::fs::File::open("/").expect("open /");
        assert_eq!(w.map(&ram, &dir), Err(MapError::NotRegular));
        w.used = FILE_WINDOW_SIZE;
        let (_g, f) = temp_file(b"abc");
        assert_eq!(w.map(&ram, &f), Err(MapError::Full));
        assert_eq!(MapError::Full.errno(), -i64::from(libc::ENOMEM));
    }
}
