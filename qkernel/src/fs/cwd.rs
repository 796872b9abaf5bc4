//! A process's fs state (working directory and umask) as an object
//! processes can share: `clone(CLONE_FS)` gives the child the same [`Fs`],
//! `fork` a copy, `unshare(CLONE_FS)` makes the caller's private. `execve`
//! keeps it shared, as Linux does. A leaf lock, taken and released inside
//! each method.

use alloc::string::String;
use alloc::sync::Arc;

use spin::Mutex;

#[derive(Debug, Clone)]
struct Inner {
    /// A normalised absolute path in the rootfs.
    cwd: String,
    /// File mode creation mask.
    umask: u32,
}

/// Working directory and umask.
#[derive(Debug)]
pub struct Fs(Mutex<Inner>);

impl Fs {
    /// A state of its own.
    pub fn new(cwd: String, umask: u32) -> Arc<Fs> {
        Arc::new(Fs(Mutex::new(Inner { cwd, umask })))
    }

    /// A private copy (`fork`).
    pub fn copy(&self) -> Arc<Fs> {
        Arc::new(Fs(Mutex::new(self.0.lock().clone())))
    }

    /// The working directory.
    pub fn cwd(&self) -> String {
        self.0.lock().cwd.clone()
    }

    /// Changes the working directory (a normalised absolute path).
    pub fn set_cwd(&self, cwd: String) {
        let old = core::mem::replace(&mut self.0.lock().cwd, cwd);
        drop(old);
    }

    /// The umask.
    pub fn umask(&self) -> u32 {
        self.0.lock().umask
    }

    /// Sets the umask; returns the old one.
    pub fn set_umask(&self, mask: u32) -> u32 {
        core::mem::replace(&mut self.0.lock().umask, mask)
    }
}

/// Makes `fs` private: a copy when another process shares it
/// (`unshare(CLONE_FS)`).
pub fn unshare(fs: &mut Arc<Fs>) {
    if Arc::strong_count(fs) > 1 {
        let private = fs.copy();
        *fs = private;
    }
}
