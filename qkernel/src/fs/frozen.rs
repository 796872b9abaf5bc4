//! Frozen rootfs metadata, kept in the guest so that it costs no host call
//! the second time (docs/coldstart.md).
//!
//! The VMM says which answers can never change while the container runs
//! (`qlib::io_abi`, "Frozen answers"): a `statx` of a path whose whole
//! resolution stayed on the read-only root mount, found or `ENOENT`, and
//! the statx of a file opened on a read-only mount. Only those are kept;
//! a writable rootfs, a writable bind or tmpfs mount, or a path that
//! crosses into one is asked of the host every time, so changes made on the
//! host side are seen there as before.
//!
//! - **Lookups** ([`statx`]): path (as sent to the VMM) and follow mode ->
//!   statx record or `ENOENT`. Python's importer stats the same directories
//!   and modules again and again. Capped at [`MAX_ENTRIES`] (then emptied
//!   and refilled). Every guest operation that changes the namespace or
//!   metadata through a path (create, unlink, rename, mkdir, rmdir, link,
//!   symlink, chmod, chown, utimes, truncate, mknod) empties it: nothing the
//!   guest can do changes a frozen answer (the mount is read-only: such a
//!   call fails with `EROFS`), so this only guards against a VMM rule that
//!   was too generous.
//! - **Open files** ([`FrozenFile`]): the statx the VMM returned with the
//!   open answers `fstat`; for a regular file the guest follows the host
//!   fd's offset (0 at open; reads and `lseek` move it; anything it cannot
//!   follow — `sendfile` from it, passing it out with `SCM_RIGHTS` —
//!   forgets it), so `lseek(fd, 0, SEEK_CUR)` and a read at the end of the
//!   file (CPython reads a module with `read(size + 1)` then `read(1)`)
//!   need no host call.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::string::String;
use core::fmt::Write;
use core::sync::atomic::{AtomicU64, Ordering};

use spin::Mutex;

use super::stat::{S_IFMT, S_IFREG, STATX_SIZE, statx_mode, statx_size};
use crate::errno::Errno;
use crate::mm::filemap::Mapped;

/// Most cached lookups (about 300 bytes each).
pub const MAX_ENTRIES: usize = 4096;

/// A cached lookup.
enum Entry {
    Found(Box<[u8; STATX_SIZE]>),
    Missing,
}

/// Lookups following a final symlink ([0]) and not ([1]).
static LOOKUPS: Mutex<[BTreeMap<String, Entry>; 2]> =
    Mutex::new([BTreeMap::new(), BTreeMap::new()]);

/// What the cache answered, for `qrun do --stats`.
#[derive(Clone, Copy)]
pub enum Hit {
    /// A path's statx.
    Stat = 0,
    /// A path's `ENOENT` (stat or open).
    Missing,
    /// `fstat` of an open file.
    Fstat,
    /// `lseek(fd, 0, SEEK_CUR)`.
    Tell,
    /// A read at the end of the file.
    Eof,
    /// An `mmap` of an open file mapped into the file window before.
    Map,
}

static HITS: [AtomicU64; 6] = [const { AtomicU64::new(0) }; 6];

fn count(h: Hit) {
    HITS[h as usize].fetch_add(1, Ordering::Relaxed);
}

/// The cached answer for `path`, if any.
pub fn cached(path: &str, nofollow: bool) -> Option<Result<[u8; STATX_SIZE], Errno>> {
    let maps = LOOKUPS.lock();
    match maps[usize::from(nofollow)].get(path)? {
        Entry::Found(sx) => {
            count(Hit::Stat);
            Some(Ok(**sx))
        }
        Entry::Missing => {
            count(Hit::Missing);
            Some(Err(Errno::ENOENT))
        }
    }
}

/// Whether `path` is known not to exist.
pub fn missing(path: &str, nofollow: bool) -> bool {
    let maps = LOOKUPS.lock();
    let known = matches!(maps[usize::from(nofollow)].get(path), Some(Entry::Missing));
    if known {
        count(Hit::Missing);
    }
    known
}

/// Remembers a frozen answer (`None`: `ENOENT`).
pub fn remember(path: &str, nofollow: bool, statx: Option<&[u8; STATX_SIZE]>) {
    let mut maps = LOOKUPS.lock();
    if maps[0].len() + maps[1].len() >= MAX_ENTRIES {
        maps.iter_mut().for_each(BTreeMap::clear);
    }
    let e = match statx {
        Some(sx) => Entry::Found(Box::new(*sx)),
        None => Entry::Missing,
    };
    maps[usize::from(nofollow)].insert(String::from(path), e);
}

/// Forgets every cached lookup: the guest changed something through a path.
pub fn forget_all() {
    let mut maps = LOOKUPS.lock();
    if !maps[0].is_empty() || !maps[1].is_empty() {
        maps.iter_mut().for_each(BTreeMap::clear);
    }
}

/// The frozen metadata of an open file.
#[derive(Debug)]
pub struct FrozenFile {
    statx: Box<[u8; STATX_SIZE]>,
    /// The host fd's offset is followed: a regular file not opened
    /// `O_APPEND` (or `O_PATH`).
    follow: bool,
    /// The host fd's offset, when followed and known.
    pos: Mutex<Option<u64>>,
    /// Where the file lies in the file window, once an `mmap` asked
    /// (`Call::MapFile`): its bytes cannot change, so the range stays the
    /// same, and `ld.so`'s several `mmap`s of a library ask the VMM once.
    mapped: Mutex<Option<Mapped>>,
}

impl FrozenFile {
    /// From the statx the VMM returned with the open and the open flags.
    pub fn new(statx: &[u8; STATX_SIZE], flags: u32) -> Self {
        let regular = statx_mode(statx) & S_IFMT == S_IFREG;
        let follow = regular && flags & (super::O_APPEND | super::O_PATH) == 0;
        Self {
            statx: Box::new(*statx),
            follow,
            pos: Mutex::new(follow.then_some(0)),
            mapped: Mutex::new(None),
        }
    }

    /// The file's window range, if an `mmap` asked for it before.
    pub fn mapped(&self) -> Option<Mapped> {
        let m = *self.mapped.lock();
        if m.is_some() {
            count(Hit::Map);
        }
        m
    }

    /// Remembers the file's window range.
    pub fn set_mapped(&self, m: Mapped) {
        *self.mapped.lock() = Some(m);
    }

    /// The statx, for `fstat`.
    pub fn statx(&self) -> [u8; STATX_SIZE] {
        count(Hit::Fstat);
        *self.statx
    }

    /// The offset, if known (`lseek(fd, 0, SEEK_CUR)`).
    pub fn tell(&self) -> Option<u64> {
        let pos = *self.pos.lock();
        if pos.is_some() {
            count(Hit::Tell);
        }
        pos
    }

    /// Whether a read at the current offset is known to read nothing.
    pub fn at_eof(&self) -> bool {
        let eof = self
            .pos
            .lock()
            .is_some_and(|p| p >= statx_size(&self.statx));
        if eof {
            count(Hit::Eof);
        }
        eof
    }

    /// The host fd's offset moved by `n` bytes (a read at the offset).
    pub fn advanced(&self, n: u64) {
        let mut pos = self.pos.lock();
        *pos = pos.map(|p| p + n);
    }

    /// The host fd's offset is now `at` (`lseek` returned it), or unknown.
    pub fn set(&self, at: Option<u64>) {
        if self.follow {
            *self.pos.lock() = at;
        }
    }
}

/// Appends the counters to a `--stats` line.
pub fn report(line: &mut impl Write) {
    let n = |h: Hit| HITS[h as usize].load(Ordering::Relaxed);
    let entries = {
        let maps = LOOKUPS.lock();
        maps[0].len() + maps[1].len()
    };
    let _ = write!(
        line,
        "frozen metadata: {} stats, {} ENOENTs, {} fstats, {} lseeks, {} EOF reads, {} mmaps answered in the guest; {entries} lookups kept",
        n(Hit::Stat),
        n(Hit::Missing),
        n(Hit::Fstat),
        n(Hit::Tell),
        n(Hit::Eof),
        n(Hit::Map),
    );
}
