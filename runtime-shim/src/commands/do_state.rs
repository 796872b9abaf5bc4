//! The state directory of a `qrun do` sandbox (swap and REAP files).
//!
//! Without `--state-dir`, `qrun do` keeps it where a later run cleans it:
//! ```text
//! $TMPDIR/qrun-do-<euid>/          0700, owned by the user; kept
//!     <pid>-<start>/               one per `qrun do`: its pid and start
//!                                  time (field 22 of /proc/PID/stat)
//! ```
//! The directory goes when `qrun do` returns. A `qrun do` that is
//! SIGKILLed cannot remove it, so every `qrun do` first removes the
//! directories whose owner is gone: no live process with that pid, or one
//! that started at another time (the pid was reused).
//!
//! With `--state-dir DIR`, DIR is used as it is when it exists; otherwise
//! only its last component is made (a missing parent is an error, nothing
//! is made on the way) and it is kept afterwards, as the user named it.
//! The swap and REAP files have fixed names in it, so one directory serves
//! one sandbox at a time: `qrun do` holds an exclusive `flock` on DIR
//! while it runs, and a second `qrun do` with the same
//! `--state-dir` is refused (it would overwrite the first one's swap file).

use std::io::ErrorKind;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::container::process;

#[derive(Debug, Error)]
pub enum StateDirError {
    #[error("state directory {0}")]
    Io(PathBuf, #[source] std::io::Error),
    #[error("state directory {0}: its parent directory does not exist")]
    NoParent(PathBuf),
    #[error("state directory {0}: not a directory")]
    NotDir(PathBuf),
    #[error("{0}: not a directory of user {1} with mode 0700; refusing to use it")]
    Foreign(PathBuf, u32),
    #[error("cannot read this process's start time from /proc/self/stat")]
    NoStartTime,
    #[error(
        "state directory {0} is in use by another running sandbox; give each sandbox its own --state-dir"
    )]
    InUse(PathBuf),
}

/// A `qrun do` state directory; a temporary one is removed on drop.
pub struct DoState {
    path: PathBuf,
    temporary: bool,
    /// The given directory, opened and `flock`ed while this lives.
    _lock: Option<std::fs::File>,
}

impl DoState {
    /// The directory `--state-dir` names: used if it exists, else made
    /// (its last component only).
    pub fn given(path: &Path) -> Result<Self, StateDirError> {
        match std::fs::DirBuilder::new().mode(0o700).create(path) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                if !path.is_dir() {
                    return Err(StateDirError::NotDir(path.to_owned()));
                }
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return Err(StateDirError::NoParent(path.to_owned()));
            }
            Err(e) => return Err(StateDirError::Io(path.to_owned(), e)),
        }
        // `flock` on the directory itself: nothing is left in it.
        let lock = std::fs::File::open(path).map_err(|e| StateDirError::Io(path.to_owned(), e))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(StateDirError::InUse(path.to_owned()));
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(StateDirError::Io(path.to_owned(), e));
            }
        }
        Ok(Self {
            path: path.to_owned(),
            temporary: false,
            _lock: Some(lock),
        })
    }

    /// A fresh temporary directory under `base()`, after removing the
    /// ones whose `qrun do` is gone.
    pub fn temporary() -> Result<Self, StateDirError> {
        Self::temporary_in(&std::env::temp_dir())
    }

    fn temporary_in(tmp: &Path) -> Result<Self, StateDirError> {
        let base = base(tmp)?;
        sweep(&base);
        let pid = std::process::id();
        let (start, _) = i32::try_from(pid)
            .ok()
            .and_then(process::stat)
            .ok_or(StateDirError::NoStartTime)?;
        let path = base.join(format!("{pid}-{start}"));
        // A directory of ours from an earlier process with this pid and
        // start time cannot exist (the pair is unique); one left by a
        // previous boot with the same pair can: it is stale, reuse it.
        match std::fs::DirBuilder::new().mode(0o700).create(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                let _ = std::fs::remove_dir_all(&path);
                std::fs::DirBuilder::new()
                    .mode(0o700)
                    .create(&path)
                    .map_err(|e| StateDirError::Io(path.clone(), e))?;
            }
            Err(e) => return Err(StateDirError::Io(path, e)),
        }
        Ok(Self {
            path,
            temporary: true,
            _lock: None,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for DoState {
    fn drop(&mut self) {
        if self.temporary {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// `<tmp>/qrun-do-<euid>`, made if missing; an existing one must be a
/// real directory of this user that nobody else can write (the temporary
/// directory is shared, another user could have put it there).
fn base(tmp: &Path) -> Result<PathBuf, StateDirError> {
    let uid = nix::unistd::geteuid().as_raw();
    let base = tmp.join(format!("qrun-do-{uid}"));
    match std::fs::DirBuilder::new().mode(0o700).create(&base) {
        Ok(()) => return Ok(base),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
        Err(e) => return Err(StateDirError::Io(base, e)),
    }
    let meta = std::fs::symlink_metadata(&base).map_err(|e| StateDirError::Io(base.clone(), e))?;
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(StateDirError::Foreign(base, uid));
    }
    Ok(base)
}

/// Removes the directories in `base` whose owner (`<pid>-<start>`) is no
/// longer running. Names of another form are left alone.
fn sweep(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some((pid, start)) = name.to_str().and_then(owner) else {
            continue;
        };
        if !process::alive(pid, start) {
            // Another `qrun do` may be removing it too: errors are fine.
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// The owner pid and start time a directory name records.
fn owner(name: &str) -> Option<(i32, u64)> {
    let (pid, start) = name.split_once('-')?;
    Some((pid.parse().ok()?, start.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("qrun-dostate-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).expect("mkdir");
        dir
    }

    #[test]
    fn stale_directories_go_live_ones_stay() {
        let tmp = scratch("sweep");
        let base = base(&tmp).expect("base");
        let me = i32::try_from(std::process::id()).expect("pid");
        let (start, _) = process::stat(me).expect("stat");
        // Our pid with another start time: a reused pid, so stale.
        let reused = base.join(format!("{me}-{}", start + 1));
        let parent = i32::try_from(std::os::unix::process::parent_id()).expect("pid");
        let (pstart, _) = process::stat(parent).expect("stat");
        let live = base.join(format!("{parent}-{pstart}"));
        let other = base.join("not-ours");
        for d in [&reused, &live, &other] {
            std::fs::create_dir(d).expect("mkdir");
        }
        std::fs::write(reused.join("swap.qswap"), b"x").expect("write");
        let s = DoState::temporary_in(&tmp).expect("temporary");
        assert!(!reused.exists(), "stale directory kept");
        assert!(
            live.exists() && other.exists(),
            "a live owner's or a foreign name removed"
        );
        assert!(s.path().is_dir());
        let path = s.path().to_owned();
        drop(s);
        assert!(!path.exists(), "temporary directory kept");
        let _ = std::fs::remove_dir_all(&tmp);
    }

    #[test]
    fn given_directories_make_only_the_last_component() {
        let tmp = scratch("given");
        let deep = tmp.join("a/b");
        let e = DoState::given(&deep).err().expect("missing parent");
        assert!(e.to_string().contains("parent directory does not exist"));
        assert!(!tmp.join("a").exists());
        let one = tmp.join("a");
        drop(DoState::given(&one).expect("one level"));
        assert!(one.is_dir(), "a given directory is kept");
        let file = tmp.join("f");
        std::fs::write(&file, b"").expect("write");
        assert!(DoState::given(&file).is_err());
        let _ = std::fs::remove_dir_all(&tmp);
    }

    #[test]
    fn a_given_directory_serves_one_sandbox_at_a_time() {
        let tmp = scratch("lock");
        let dir = tmp.join("s");
        let first = DoState::given(&dir).expect("first");
        let e = DoState::given(&dir).err().expect("the second is refused");
        assert!(matches!(e, StateDirError::InUse(_)), "{e}");
        assert!(e.to_string().contains("in use by another running sandbox"));
        drop(first);
        drop(DoState::given(&dir).expect("free again once the first is gone"));
        let _ = std::fs::remove_dir_all(&tmp);
    }

    #[test]
    fn owner_names() {
        assert_eq!(owner("12-345"), Some((12, 345)));
        assert_eq!(owner("12-x"), None);
        assert_eq!(owner("12"), None);
    }
}
