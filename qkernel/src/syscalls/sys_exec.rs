//! `execve` and `execveat`: everything before the point of no return, in
//! Linux's order, so that a failure leaves the old program running with
//! Linux's errno:
//!
//! 1. the path is read and the file opened (`ENOENT`, `ENOTDIR`, `ELOOP`
//!    …), and it must be executable (`EACCES`: see `exec::image`);
//! 2. argv and envp are copied in (`EFAULT`; `E2BIG` past 32 pages for one
//!    string or a quarter of the stack for all, pointers included);
//! 3. a `#!` script is replaced by its interpreter (argv becomes interp,
//!    [arg], the script path, argv[1..]), at most [`MAX_REWRITES`] times
//!    (`ELOOP`); anything else must be an x86-64 ELF (`ENOEXEC`) whose
//!    `PT_INTERP` loader, resolved from the cwd, is opened the same way
//!    (`ENOENT`, `EACCES`) and must be a static ELF itself (`ELIBBAD`).
//!
//! Then `exec::commit` replaces the program. Set-user-ID bits are not
//! honoured (the ids stay).

use alloc::format;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;

use qlib::elf;
use qlib::shebang;

use super::sys_file::open_path;
use crate::errno::{Errno, SysResult};
use crate::exec::{self, Program, image};
use crate::fs::path::{self, AT_FDCWD};
use crate::fs::{File, O_CLOEXEC, O_NONBLOCK, O_RDONLY};
use crate::mm::addr_space::STACK_SIZE;
use crate::mm::uaccess;
use crate::process::Process;

const AT_SYMLINK_NOFOLLOW: u64 = 0x100;
const AT_EMPTY_PATH: u64 = 0x1000;
const O_NOFOLLOW: u32 = 0o400000;
/// Longest argument or environment string, NUL included
/// (`MAX_ARG_STRLEN`).
const MAX_ARG_STRLEN: usize = 32 * 4096;
/// Room for argv and envp: strings and pointers (Linux: a quarter of the
/// stack limit).
const ARG_LIMIT: usize = (STACK_SIZE / 4) as usize;
/// Linux's `exec_binprm` runs the format handlers at most six times: five
/// `#!` rewrites, then the ELF.
const MAX_REWRITES: usize = shebang::MAX_NESTING;

/// `execve(path, argv, envp)`.
pub fn execve(p: &mut Process, a: &[u64; 6]) -> SysResult {
    exec_at(p, AT_FDCWD, a[0], a[1], a[2], 0)
}

/// `execveat(dirfd, path, argv, envp, flags)`.
pub fn execveat(p: &mut Process, a: &[u64; 6]) -> SysResult {
    exec_at(p, a[0] as i64, a[1], a[2], a[3], a[4])
}

/// Opens the file to run: `path` from `dirfd`, or `dirfd` itself with
/// `AT_EMPTY_PATH` and an empty path.
fn open_exec(p: &mut Process, dirfd: i64, path: &str, flags: u64) -> Result<Arc<File>, Errno> {
    if path.is_empty() && flags & AT_EMPTY_PATH != 0 {
        return p.files.get(dirfd as u64);
    }
    let abs = path::absolute(p, dirfd, path)?;
    // O_NONBLOCK: a FIFO opens at once and `image::read` refuses it
    // (EACCES, as Linux does without waiting for a writer).
    let mut oflags = O_RDONLY | O_CLOEXEC | O_NONBLOCK;
    if flags & AT_SYMLINK_NOFOLLOW != 0 {
        oflags |= O_NOFOLLOW;
    }
    open_path(p, abs, oflags, 0)
}

/// What argv and envp may still take.
struct Budget(usize);

impl Budget {
    fn take(&mut self, n: usize) -> Result<(), Errno> {
        self.0 = self.0.checked_sub(n).ok_or(Errno::E2BIG)?;
        Ok(())
    }
}

/// Reads a NUL-terminated user string of at most [`MAX_ARG_STRLEN`]
/// bytes (NUL included).
fn read_string(p: &mut Process, va: u64) -> Result<Vec<u8>, Errno> {
    let mut out = Vec::new();
    let mut chunk = [0u8; 256];
    let mut at = va;
    loop {
        let n = ((4096 - (at & 0xfff)) as usize).min(chunk.len());
        uaccess::copy_in(&mut p.mm, at, &mut chunk[..n])?;
        let end = chunk[..n].iter().position(|&b| b == 0);
        out.extend_from_slice(&chunk[..end.unwrap_or(n)]);
        if out.len() >= MAX_ARG_STRLEN {
            return Err(Errno::E2BIG);
        }
        if end.is_some() {
            return Ok(out);
        }
        at = at.checked_add(n as u64).ok_or(Errno::EFAULT)?;
    }
}

/// The pointers of a NULL-terminated user array (`NULL` = empty).
fn read_pointers(p: &mut Process, va: u64) -> Result<Vec<u64>, Errno> {
    let mut out = Vec::new();
    if va == 0 {
        return Ok(out);
    }
    loop {
        let at = va.checked_add(8 * out.len() as u64).ok_or(Errno::EFAULT)?;
        match uaccess::read::<u64>(&mut p.mm, at)? {
            0 => return Ok(out),
            ptr => out.push(ptr),
        }
        if out.len() > ARG_LIMIT / 8 {
            return Err(Errno::E2BIG);
        }
    }
}

/// Copies in the strings of `ptrs`, charging `budget`.
fn read_strings(p: &mut Process, ptrs: &[u64], budget: &mut Budget) -> Result<Vec<Vec<u8>>, Errno> {
    let mut out = Vec::with_capacity(ptrs.len());
    for &ptr in ptrs {
        let s = read_string(p, ptr)?;
        budget.take(s.len() + 1)?;
        out.push(s);
    }
    Ok(out)
}

fn exec_at(
    p: &mut Process,
    dirfd: i64,
    path_va: u64,
    argv_va: u64,
    envp_va: u64,
    flags: u64,
) -> SysResult {
    if flags & !(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) != 0 {
        return Err(Errno::EINVAL);
    }
    let path = path::read_user_path(p, path_va)?;
    let file = open_exec(p, dirfd, &path, flags)?;
    let argv_ptrs = read_pointers(p, argv_va)?;
    let envp_ptrs = read_pointers(p, envp_va)?;
    let mut budget = Budget(ARG_LIMIT);
    budget.take(8 * (argv_ptrs.len() + envp_ptrs.len()))?;
    let argv = read_strings(p, &argv_ptrs, &mut budget)?;
    let envp = read_strings(p, &envp_ptrs, &mut budget)?;
    let prog = prepare(p, file, dirfd, &path, argv, envp, budget.0)?;

    // The point of no return.
    crate::task::exec_single_thread();
    let argv: Vec<&[u8]> = prog.argv.iter().map(Vec::as_slice).collect();
    let envp: Vec<&[u8]> = prog.envp.iter().map(Vec::as_slice).collect();
    exec::commit(
        p,
        Program {
            image: &prog.image,
            interp: prog.interp.as_deref(),
            argv: &argv,
            envp: &envp,
            execfn: &prog.filename,
            exe: prog.exe,
        },
    );
    Ok(0)
}

/// A program ready to load: what the checks before the point of no
/// return produced.
pub struct Prepared {
    pub image: image::Image,
    pub interp: Option<image::Image>,
    /// argv after `#!` rewriting.
    pub argv: Vec<Vec<u8>>,
    pub envp: Vec<Vec<u8>>,
    /// `AT_EXECFN`.
    pub filename: Vec<u8>,
    /// `/proc/self/exe`.
    pub exe: String,
}

/// Arguments and environment within Linux's limits, for a program started
/// from outside (`task::spawn`): `E2BIG` otherwise.
pub fn arg_budget(argv: &[Vec<u8>], envp: &[Vec<u8>]) -> Result<usize, Errno> {
    let mut budget = Budget(ARG_LIMIT);
    budget.take(8 * (argv.len() + envp.len()))?;
    for s in argv.iter().chain(envp) {
        if s.len() >= MAX_ARG_STRLEN {
            return Err(Errno::E2BIG);
        }
        budget.take(s.len() + 1)?;
    }
    Ok(budget.0)
}

/// Opens `path` to run it, as `execve` does (`ENOENT`, `EACCES` …).
pub fn open_program(p: &mut Process, path: &str) -> Result<Arc<File>, Errno> {
    open_exec(p, AT_FDCWD, path, 0)
}

/// Everything `execve` checks before its point of no return, for `file`
/// (opened from `path` and `dirfd`) with `argv` and `envp` already copied
/// in; `budget` is what argv and envp may still take.
pub fn prepare(
    p: &mut Process,
    mut file: Arc<File>,
    dirfd: i64,
    path: &str,
    mut argv: Vec<Vec<u8>>,
    envp: Vec<Vec<u8>>,
    budget: usize,
) -> Result<Prepared, Errno> {
    let mut budget = Budget(budget);
    let path = String::from(path);
    // The name the program is known by (`AT_EXECFN`, a script's argument).
    let dirfd32 = i64::from(dirfd as i32);
    let filename: Vec<u8> = if path.starts_with('/') || dirfd32 == AT_FDCWD {
        path.into_bytes()
    } else if path.is_empty() {
        format!("/dev/fd/{dirfd32}").into_bytes()
    } else {
        format!("/dev/fd/{dirfd32}/{path}").into_bytes()
    };

    if argv.is_empty() {
        // Linux (5.18+) gives a program started without argv an empty
        // argv[0].
        budget.take(1 + 8)?;
        argv.push(Vec::new());
    }

    let mut name = filename.clone();
    let mut rewrites = 0;
    let (image, exe) = loop {
        let image = image::read(&file, p.ids)?;
        let Some(sb) = shebang::parse(&image) else {
            break (image, file.path.clone());
        };
        rewrites += 1;
        if rewrites > MAX_REWRITES {
            return Err(Errno::ELOOP);
        }
        if sb.interp.is_empty() {
            // `#!` then a NUL: Linux opens "" (the cwd, a directory): EACCES.
            return Err(Errno::EACCES);
        }
        let interp = core::str::from_utf8(sb.interp).map_err(|_| Errno::ENOEXEC)?;
        let mut head = Vec::with_capacity(3);
        head.push(sb.interp.to_vec());
        if let Some(arg) = sb.arg {
            head.push(arg.to_vec());
        }
        head.push(name);
        for s in &head {
            budget.take(s.len() + 1 + 8)?;
        }
        // The script's argv[0] goes: the script path takes its place.
        argv.splice(..1.min(argv.len()), head);
        name = sb.interp.to_vec();
        file = open_exec(p, AT_FDCWD, interp, 0)?;
    };
    drop(file);

    let info = elf::parse(&image).map_err(|_| Errno::ENOEXEC)?;
    let interp = match info.interp_bytes(&image) {
        None => None,
        Some(ipath) => {
            let ipath = core::str::from_utf8(ipath).map_err(|_| Errno::ENOEXEC)?;
            let ifile = open_exec(p, AT_FDCWD, ipath, 0)?;
            let interp = image::read(&ifile, p.ids)?;
            let iinfo = elf::parse(&interp).map_err(|_| Errno::ELIBBAD)?;
            iinfo.require_static().map_err(|_| Errno::ELIBBAD)?;
            Some(interp)
        }
    };
    crate::loader::vet(&image, interp.as_deref()).map_err(|_| Errno::ENOEXEC)?;
    Ok(Prepared {
        image,
        interp,
        argv,
        envp,
        filename,
        exe: String::from(exe.as_str()),
    })
}
