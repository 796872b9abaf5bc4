//! Reading and vetting the program before a VM is created, so that a bad
//! program gets a clear one-line error and the exit status a shell uses.

use crate::error::VmmError;
use crate::rootfs::Rootfs;

/// Largest program image accepted.
const MAX_PROGRAM: u64 = 64 << 20;

/// Reads the program at host path `path` and checks it is a static x86-64
/// ELF.
pub fn read_program(path: &str) -> Result<Vec<u8>, VmmError> {
    let io = |source| VmmError::ProgramIo {
        path: path.to_string(),
        source,
    };
    vet(path, std::fs::File::open(path).map_err(io)?)
}

/// Reads the program at `path` inside `root` (relative paths against the
/// guest working directory `cwd`) and checks it is a static x86-64 ELF.
pub fn read_program_in(root: &Rootfs, path: &str, cwd: &str) -> Result<Vec<u8>, VmmError> {
    let full = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("{}/{path}", cwd.trim_end_matches('/'))
    };
    let fd = root
        .open_at(full.as_bytes(), libc::O_RDONLY, 0)
        .map_err(|e| VmmError::ProgramIo {
            path: path.to_string(),
            source: std::io::Error::from_raw_os_error(e),
        })?;
    vet(path, std::fs::File::from(fd))
}

fn vet(path: &str, mut file: std::fs::File) -> Result<Vec<u8>, VmmError> {
    use std::io::Read;
    let io = |source| VmmError::ProgramIo {
        path: path.to_string(),
        source,
    };
    let meta = file.metadata().map_err(io)?;
    let bad = |reason: String| VmmError::BadProgram {
        path: path.to_string(),
        reason,
    };
    if meta.is_dir() {
        return Err(bad("is a directory".into()));
    }
    if meta.len() > MAX_PROGRAM {
        return Err(bad(format!("too large ({} bytes)", meta.len())));
    }
    let mut image = Vec::with_capacity(meta.len() as usize);
    file.read_to_end(&mut image).map_err(io)?;
    let info = qlib::elf::parse(&image).map_err(|e| bad(e.to_string()))?;
    info.require_static().map_err(|e| bad(e.to_string()))?;
    Ok(image)
}
