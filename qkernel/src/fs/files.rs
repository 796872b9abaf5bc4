//! The fd table as an object processes can share: `clone(CLONE_FILES)`
//! gives the child the same [`Files`], `fork` a copy, `unshare(CLONE_FILES)`
//! and `execve` make the caller's private (docs/processes.md, "Shared
//! process objects").
//!
//! The lock is a leaf: every method takes it and lets go before it
//! returns, and nothing else is locked under it. Files a method replaces
//! or closes are dropped after the lock is released, so the host `close`
//! of a file's last reference never runs under it.

use alloc::sync::Arc;
use alloc::vec::Vec;

use spin::Mutex;

use super::{FdTable, File};
use crate::errno::Errno;

/// A shareable fd table.
#[derive(Debug, Default)]
pub struct Files(Mutex<FdTable>);

impl Files {
    /// A table of its own over `t`.
    pub fn new(t: FdTable) -> Arc<Files> {
        Arc::new(Files(Mutex::new(t)))
    }

    /// A private copy (the same open files, as `fork` gives a child).
    pub fn copy(&self) -> Arc<Files> {
        Files::new(self.0.lock().clone())
    }

    /// The file at `fd`, or `EBADF`.
    pub fn get(&self, fd: u64) -> Result<Arc<File>, Errno> {
        self.0.lock().get(fd).cloned()
    }

    /// `FD_CLOEXEC` of `fd`, or `EBADF`.
    pub fn cloexec(&self, fd: u64) -> Result<bool, Errno> {
        self.0.lock().entry(fd).map(|e| e.cloexec)
    }

    /// Sets `FD_CLOEXEC` of `fd`, or `EBADF`.
    pub fn set_cloexec(&self, fd: u64, on: bool) -> Result<(), Errno> {
        self.0.lock().entry_mut(fd)?.cloexec = on;
        Ok(())
    }

    /// Installs `file` at the lowest free fd >= `min`.
    pub fn insert_from(&self, min: usize, file: Arc<File>, cloexec: bool) -> Result<usize, Errno> {
        self.0.lock().insert_from(min, file, cloexec)
    }

    /// Installs `file` at the lowest free fd.
    pub fn insert(&self, file: Arc<File>, cloexec: bool) -> Result<usize, Errno> {
        self.insert_from(0, file, cloexec)
    }

    /// Puts `file` at exactly `fd`; what was there closes after the lock
    /// is released.
    pub fn insert_at(&self, fd: u64, file: Arc<File>, cloexec: bool) -> Result<(), Errno> {
        let old = self.0.lock().insert_at(fd, file, cloexec)?;
        drop(old);
        Ok(())
    }

    /// Removes `fd`; the caller drops the file (outside the lock).
    pub fn remove(&self, fd: u64) -> Result<Arc<File>, Errno> {
        self.0.lock().remove(fd)
    }

    /// Closes every fd marked `FD_CLOEXEC` (`execve`, on a private table).
    pub fn close_on_exec(&self) {
        let closed = self.0.lock().take_cloexec();
        drop(closed);
    }

    /// Open fd numbers, ascending.
    pub fn numbers(&self) -> Vec<usize> {
        self.0.lock().numbers().collect()
    }

    /// How many fds are open.
    pub fn count(&self) -> usize {
        self.0.lock().numbers().count()
    }
}

/// Makes `files` private: a copy when another process shares it
/// (`unshare(CLONE_FILES)`, `execve`). The old reference drops after the
/// new table is in place.
pub fn unshare(files: &mut Arc<Files>) {
    if Arc::strong_count(files) > 1 {
        let private = files.copy();
        drop(core::mem::replace(files, private));
    }
}
