//! Path resolution in the guest: a user path (relative to the cwd or to a
//! directory fd) becomes an absolute path, which either names one of the
//! kernel's own files (`/dev`, `/proc`, `/sys`: see `special`) or is sent
//! to the VMM, which resolves it inside the rootfs. `..` and symlinks are
//! left to the VMM's in-root resolution; lexical normalisation is only used
//! to recognise the kernel's own paths and to keep the cwd tidy.

use alloc::string::String;
use alloc::vec::Vec;

use crate::errno::Errno;
use crate::mm::uaccess;
use crate::process::Process;

/// `AT_FDCWD`.
pub const AT_FDCWD: i64 = -100;
/// Linux `PATH_MAX`.
pub const PATH_MAX: usize = 4096;

/// Reads a NUL-terminated user string of at most `PATH_MAX` bytes.
pub fn read_user_path(p: &mut Process, va: u64) -> Result<String, Errno> {
    let mut out = Vec::new();
    let mut chunk = [0u8; 64];
    let mut at = va;
    loop {
        // Read up to the end of the page so a string ending just before an
        // unmapped page is still read.
        let room = (4096 - (at & 0xfff)) as usize;
        let n = room.min(chunk.len());
        uaccess::copy_in(&mut p.mm, at, &mut chunk[..n])?;
        if let Some(end) = chunk[..n].iter().position(|&b| b == 0) {
            out.extend_from_slice(&chunk[..end]);
            break;
        }
        out.extend_from_slice(&chunk[..n]);
        if out.len() >= PATH_MAX {
            return Err(Errno::ENAMETOOLONG);
        }
        at += n as u64;
    }
    Ok(from_bytes(&out))
}

/// First of the 128 private-use characters that stand for the bytes
/// 0x80..=0xff of a name that is not UTF-8 (Linux names are bytes).
const BYTE_CHAR_BASE: u32 = 0x10_ff00;

/// A user path as a `String`, losslessly: bytes that are not UTF-8
/// (always 0x80 or above) become the private-use characters
/// `U+10FF80..=U+10FFFF`; [`to_bytes`] turns them back. A name that
/// holds those characters itself would come back as the raw bytes (a
/// real name never holds them in practice); no `/` or NUL can ever be
/// produced that way.
pub fn from_bytes(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        s.push_str(chunk.valid());
        for &b in chunk.invalid() {
            s.push(char::from_u32(BYTE_CHAR_BASE + u32::from(b)).unwrap_or('?'));
        }
    }
    s
}

/// The bytes a path made by [`from_bytes`] stands for.
pub fn to_bytes(s: &str) -> alloc::borrow::Cow<'_, [u8]> {
    let escaped = |c: char| (BYTE_CHAR_BASE + 0x80..=BYTE_CHAR_BASE + 0xff).contains(&(c as u32));
    if !s.chars().any(escaped) {
        return alloc::borrow::Cow::Borrowed(s.as_bytes());
    }
    let mut out = Vec::with_capacity(s.len());
    for c in s.chars() {
        if escaped(c) {
            out.push((c as u32 - BYTE_CHAR_BASE) as u8);
        } else {
            let mut b = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
        }
    }
    alloc::borrow::Cow::Owned(out)
}

/// The absolute form of `path` seen from `dirfd` (`AT_FDCWD` = the cwd).
pub fn absolute(p: &Process, dirfd: i64, path: &str) -> Result<String, Errno> {
    if path.is_empty() {
        return Err(Errno::ENOENT);
    }
    if path.starts_with('/') {
        return Ok(String::from(path));
    }
    // `dirfd` is a C `int`: only the low 32 bits count.
    let dirfd = i64::from(dirfd as i32);
    let base = if dirfd == AT_FDCWD {
        p.fs.cwd()
    } else {
        let file = p.files.get(dirfd as u64)?;
        if !file.path.starts_with('/') {
            return Err(Errno::ENOTDIR);
        }
        file.path.clone()
    };
    let mut out = String::with_capacity(base.len() + 1 + path.len());
    out.push_str(base.trim_end_matches('/'));
    out.push('/');
    out.push_str(path);
    Ok(out)
}

/// Reads a user path and makes it absolute.
pub fn user_absolute(p: &mut Process, dirfd: i64, va: u64) -> Result<String, Errno> {
    let path = read_user_path(p, va)?;
    absolute(p, dirfd, &path)
}

/// Most symlinks followed by [`canonical`] (Linux's `MAXSYMLINKS`).
const MAX_SYMLINKS: usize = 40;

/// The canonical form of absolute `path`, as Linux shows an executable in
/// `/proc/self/exe`: every symlink resolved (through `readlink`, one host
/// call per component), `..` taken physically. `None` if a component is
/// missing or a symlink loop is found.
pub fn canonical(path: &str, readlink: impl Fn(&str) -> Result<Vec<u8>, Errno>) -> Option<String> {
    let mut done: Vec<String> = Vec::new();
    // Components still to walk, the next one last.
    let mut todo: Vec<String> = path.split('/').rev().map(String::from).collect();
    let mut links = 0;
    while let Some(c) = todo.pop() {
        match c.as_str() {
            "" | "." => continue,
            ".." => {
                done.pop();
                continue;
            }
            _ => {}
        }
        let mut here = String::new();
        for d in &done {
            here.push('/');
            here.push_str(d);
        }
        here.push('/');
        here.push_str(&c);
        match readlink(&here) {
            Ok(target) => {
                links += 1;
                if links > MAX_SYMLINKS {
                    return None;
                }
                let target = String::from_utf8(target).ok()?;
                if target.starts_with('/') {
                    done.clear();
                }
                todo.extend(target.split('/').rev().map(String::from));
            }
            Err(Errno::EINVAL) => done.push(c),
            Err(_) => return None,
        }
    }
    let mut out = String::new();
    for d in &done {
        out.push('/');
        out.push_str(d);
    }
    if out.is_empty() {
        out.push('/');
    }
    Some(out)
}

/// Lexical normal form: no empty, `.` or `..` components (`..` at the
/// root stays at the root).
pub fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    let mut out = String::with_capacity(path.len());
    for c in &parts {
        out.push('/');
        out.push_str(c);
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}
