//! Scratch directories that remove themselves.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// A fresh directory under the system temporary directory, removed with
/// everything in it when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// Creates `$TMPDIR/qrun-<tag>-<pid>-<n>`, with symlinks in the
    /// temporary directory's own path resolved, so that the path a test
    /// passes and the path a program's `getcwd` reports agree.
    pub fn new(tag: &str) -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let base = std::env::temp_dir()
            .canonicalize()
            .expect("the temporary directory exists");
        loop {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let dir = base.join(format!("qrun-{tag}-{}-{n}", std::process::id()));
            match std::fs::create_dir(&dir) {
                Ok(()) => return Self(dir),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => panic!("creating {}: {e}", dir.display()),
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// The path as a `&str` (temporary directories here are UTF-8).
    pub fn str(&self) -> &str {
        self.0.to_str().expect("a UTF-8 temporary path")
    }

    pub fn join(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.0.join(rel)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // Best effort: a failure leaves a directory in /tmp, nothing worse.
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
