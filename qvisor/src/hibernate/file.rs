//! A page file of the state directory: the data area through an
//! `O_DIRECT` descriptor when the filesystem allows it (writes from guest
//! RAM without going through the page cache run ~7x faster here), the
//! header and table through an ordinary one. The two never touch the same
//! blocks. The file is private (mode 0600) and removed on drop.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use qlib::swapfile::{self, Entry, FormatError, Header, Kind};

use super::SwapError;

/// Most iovecs one `preadv`/`pwritev` takes (`IOV_MAX`).
const IOV_MAX: usize = 1024;

/// One swap or REAP file.
pub struct PageFile {
    path: PathBuf,
    kind: Kind,
    data: File,
    meta: File,
    /// Whether `data` bypasses the page cache.
    pub direct: bool,
}

fn open(path: &Path, flags: i32, truncate: bool) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(truncate)
        .mode(0o600)
        .custom_flags(flags | libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(path)
}

impl PageFile {
    /// Creates (or truncates) the file at `path`.
    pub fn create(path: PathBuf, kind: Kind) -> Result<Self, SwapError> {
        let io = |source| SwapError::Io {
            what: "creating",
            path: path.display().to_string(),
            source,
        };
        let meta = open(&path, 0, true).map_err(io)?;
        let (data, direct) = match open(&path, libc::O_DIRECT, false) {
            Ok(f) => (f, true),
            // Filesystems without O_DIRECT refuse it with EINVAL.
            Err(_) => (open(&path, 0, false).map_err(io)?, false),
        };
        Ok(Self {
            path,
            kind,
            data,
            meta,
            direct,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn io(&self, what: &'static str) -> impl Fn(std::io::Error) -> SwapError + '_ {
        move |source| SwapError::Io {
            what,
            path: self.path.display().to_string(),
            source,
        }
    }

    /// Writes `iov` (checked host ranges of guest RAM, page multiples) at
    /// `offset`, all of it or an error.
    pub fn write_at(&self, offset: u64, iov: &[libc::iovec]) -> Result<(), SwapError> {
        self.vectored(offset, iov, true).map_err(self.io("writing"))
    }

    /// Reads exactly `iov` from `offset`; a short file is [`SwapError::Format`]
    /// (truncated).
    pub fn read_at(&self, offset: u64, iov: &[libc::iovec]) -> Result<(), SwapError> {
        match self.vectored(offset, iov, false) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(SwapError::Format(
                self.path_string(),
                FormatError::Truncated,
            )),
            Err(e) => Err(self.io("reading")(e)),
        }
    }

    fn path_string(&self) -> String {
        self.path.display().to_string()
    }

    fn vectored(&self, mut offset: u64, iov: &[libc::iovec], write: bool) -> std::io::Result<()> {
        let mut iov: Vec<libc::iovec> = iov.to_vec();
        let mut at = 0;
        while at < iov.len() {
            let n = (iov.len() - at).min(IOV_MAX);
            let part = &iov[at..at + n];
            let off = i64::try_from(offset).map_err(|_| std::io::ErrorKind::InvalidInput)?;
            // SAFETY: every iovec names a range of guest RAM checked by
            // `GuestRam` (mapped for the life of the sandbox); the kernel
            // reads from or writes into it, touching no Rust object.
            let rc = unsafe {
                if write {
                    libc::pwritev(self.data.as_raw_fd(), part.as_ptr(), n as i32, off)
                } else {
                    libc::preadv(self.data.as_raw_fd(), part.as_ptr(), n as i32, off)
                }
            };
            if rc < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if rc == 0 {
                return Err(if write {
                    std::io::Error::from_raw_os_error(libc::ENOSPC)
                } else {
                    std::io::ErrorKind::UnexpectedEof.into()
                });
            }
            // Skip what was transferred (a short transfer resumes mid-list).
            let mut done = rc as usize;
            offset += done as u64;
            while done > 0 {
                let v = &mut iov[at];
                if done >= v.iov_len {
                    done -= v.iov_len;
                    at += 1;
                } else {
                    v.iov_base = v.iov_base.wrapping_byte_add(done);
                    v.iov_len -= done;
                    done = 0;
                }
            }
        }
        Ok(())
    }

    /// Writes the table of `entries` and then the header: the file is
    /// valid only once this returned. Returns the table's checksum.
    pub fn write_meta(&self, entries: &[Entry]) -> Result<u32, SwapError> {
        let n = entries.len() as u64;
        let table: Vec<u8> = entries.iter().flat_map(|e| e.encode()).collect();
        let header = Header {
            kind: self.kind,
            page_count: n,
            table_crc: swapfile::checksum(&table),
        };
        let mut block = vec![0u8; swapfile::PAGE as usize];
        block[..swapfile::HEADER_LEN].copy_from_slice(&header.encode());
        self.meta
            .write_all_at(&table, swapfile::table_offset(n))
            .and_then(|()| self.meta.set_len(swapfile::file_len(n)))
            .and_then(|()| self.meta.write_all_at(&block, 0))
            .map_err(self.io("writing"))?;
        Ok(header.table_crc)
    }

    /// Reads and checks the header and table, refusing more than `cap`
    /// pages and any table but `expect` (page count, table checksum: what
    /// this sandbox wrote).
    pub fn read_meta(&self, cap: u64, expect: (u64, u32)) -> Result<Vec<Entry>, SwapError> {
        let bad = |e| SwapError::Format(self.path_string(), e);
        let mut head = [0u8; swapfile::HEADER_LEN];
        self.meta
            .read_exact_at(&mut head, 0)
            .map_err(|_| bad(FormatError::Truncated))?;
        let header = Header::decode(&head, self.kind, cap).map_err(bad)?;
        if (header.page_count, header.table_crc) != expect {
            return Err(bad(FormatError::TableChecksum));
        }
        let len = self.meta.metadata().map_err(self.io("reading"))?.len();
        if len < swapfile::file_len(header.page_count) {
            return Err(bad(FormatError::Truncated));
        }
        let mut table = vec![0u8; swapfile::table_len(header.page_count) as usize];
        self.meta
            .read_exact_at(&mut table, swapfile::table_offset(header.page_count))
            .map_err(|_| bad(FormatError::Truncated))?;
        let mut entries = Vec::with_capacity(header.page_count as usize);
        swapfile::decode_table(&header, &table, |_, e| entries.push(e)).map_err(bad)?;
        Ok(entries)
    }

    /// Makes the file invalid (its pages are back in guest RAM): zeroes
    /// the header, which no reader accepts. The data blocks stay allocated,
    /// to be rewritten by the next hibernation (and freed with the file):
    /// truncating 64 MiB took ~9 ms here, on the wake's critical path.
    pub fn invalidate(&self) -> Result<(), SwapError> {
        self.meta
            .write_all_at(&[0u8; swapfile::HEADER_LEN], 0)
            .map_err(self.io("writing"))
    }
}

impl Drop for PageFile {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_file(&self.path) {
            log::warn!("removing {}: {e}", self.path.display());
        }
    }
}
