//! Reading and vetting the program before a VM is created, so that a bad
//! program gets a clear one-line error and the exit status a shell uses.

use crate::error::VmmError;

/// Largest program image accepted.
const MAX_PROGRAM: u64 = 64 << 20;

/// Reads the program at `path` and checks it is a static x86-64 ELF.
pub fn read_program(path: &str) -> Result<Vec<u8>, VmmError> {
    let io = |source| VmmError::ProgramIo {
        path: path.to_string(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(io)?;
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
    let image = std::fs::read(path).map_err(io)?;
    let info = qlib::elf::parse(&image).map_err(|e| bad(e.to_string()))?;
    info.require_static().map_err(|e| bad(e.to_string()))?;
    Ok(image)
}
