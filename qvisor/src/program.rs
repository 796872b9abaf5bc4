//! Reading and vetting the program (and, for a dynamically linked one, its
//! interpreter) before a VM is created, so that a bad program gets a clear
//! one-line error and the exit status a shell uses.

use crate::error::VmmError;
use crate::rootfs::Rootfs;

/// Largest program or interpreter image accepted.
const MAX_PROGRAM: u64 = 64 << 20;

/// The images the guest loads.
pub struct Images {
    /// The program's ELF image.
    pub program: Vec<u8>,
    /// Its interpreter's ELF image (`PT_INTERP`), for a dynamic program.
    pub interp: Option<Vec<u8>>,
}

/// Reads the program at host path `path` and checks it is an x86-64 ELF
/// executable (static or dynamic; a dynamic one's interpreter is not read).
pub fn read_program(path: &str) -> Result<Vec<u8>, VmmError> {
    let io = |source| VmmError::ProgramIo {
        path: path.to_string(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let bad = |reason| VmmError::BadProgram {
        path: path.to_string(),
        reason,
    };
    let image = read_capped(file).map_err(|e| e.into_error(io, bad))?;
    qlib::elf::parse(&image).map_err(|e| bad(e.to_string()))?;
    Ok(image)
}

/// Reads the program at `path` inside `root` (relative paths against the
/// guest working directory `cwd`), checks it is an x86-64 ELF executable,
/// and when it names an interpreter, reads and checks that too (inside
/// `root`, as Linux resolves `PT_INTERP` in the caller's root).
pub fn read_program_in(root: &Rootfs, path: &str, cwd: &str) -> Result<Images, VmmError> {
    let io = |source| VmmError::ProgramIo {
        path: path.to_string(),
        source,
    };
    let bad = |reason| VmmError::BadProgram {
        path: path.to_string(),
        reason,
    };
    let file = open_in(root, path.as_bytes(), cwd).map_err(io)?;
    let program = read_capped(file).map_err(|e| e.into_error(io, bad))?;
    let info = qlib::elf::parse(&program).map_err(|e| bad(e.to_string()))?;
    let Some(interp_path) = info.interp_bytes(&program) else {
        return Ok(Images {
            program,
            interp: None,
        });
    };
    let interp_name = String::from_utf8_lossy(interp_path).into_owned();
    let interp_io = |source| VmmError::InterpIo {
        path: path.to_string(),
        interp: interp_name.clone(),
        source,
    };
    let interp_bad = |reason| VmmError::BadInterp {
        path: path.to_string(),
        interp: interp_name.clone(),
        reason,
    };
    let file = open_in(root, interp_path, cwd).map_err(interp_io)?;
    let interp = read_capped(file).map_err(|e| e.into_error(interp_io, interp_bad))?;
    let iinfo = qlib::elf::parse(&interp).map_err(|e| interp_bad(e.to_string()))?;
    if iinfo.interp.is_some() {
        return Err(interp_bad("names an interpreter of its own".into()));
    }
    Ok(Images {
        program,
        interp: Some(interp),
    })
}

/// Opens `path` (absolute, or relative to `cwd`) read-only inside `root`.
fn open_in(root: &Rootfs, path: &[u8], cwd: &str) -> Result<std::fs::File, std::io::Error> {
    let full = if path.first() == Some(&b'/') {
        path.to_vec()
    } else {
        let mut full = cwd.trim_end_matches('/').as_bytes().to_vec();
        full.push(b'/');
        full.extend_from_slice(path);
        full
    };
    root.open_at(&full, libc::O_RDONLY, 0)
        .map(std::fs::File::from)
        .map_err(std::io::Error::from_raw_os_error)
}

/// Why [`read_capped`] failed.
enum ReadError {
    Io(std::io::Error),
    Bad(String),
}

impl ReadError {
    fn into_error(
        self,
        io: impl FnOnce(std::io::Error) -> VmmError,
        bad: impl FnOnce(String) -> VmmError,
    ) -> VmmError {
        match self {
            Self::Io(e) => io(e),
            Self::Bad(reason) => bad(reason),
        }
    }
}

/// Reads a whole regular file of at most [`MAX_PROGRAM`] bytes.
fn read_capped(mut file: std::fs::File) -> Result<Vec<u8>, ReadError> {
    use std::io::Read;
    let meta = file.metadata().map_err(ReadError::Io)?;
    if meta.is_dir() {
        return Err(ReadError::Bad("is a directory".into()));
    }
    if meta.len() > MAX_PROGRAM {
        return Err(ReadError::Bad(format!("too large ({} bytes)", meta.len())));
    }
    let mut image = Vec::with_capacity(meta.len() as usize);
    // `take` caps a file that grows while it is read.
    (&mut file)
        .take(MAX_PROGRAM + 1)
        .read_to_end(&mut image)
        .map_err(ReadError::Io)?;
    if image.len() as u64 > MAX_PROGRAM {
        return Err(ReadError::Bad("too large".into()));
    }
    Ok(image)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A scratch rootfs holding the host's dynamic `/bin/true` as `/true`
    /// and `interp` (if any) as its glibc interpreter.
    fn rootfs(name: &str, interp: Option<&[u8]>) -> (PathBuf, Rootfs) {
        let dir =
            std::env::temp_dir().join(format!("qvisor-program-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("lib64")).expect("mkdir in the temp dir");
        std::fs::copy("/bin/true", dir.join("true")).expect("copying /bin/true");
        if let Some(bytes) = interp {
            std::fs::write(dir.join("lib64/ld-linux-x86-64.so.2"), bytes).expect("write");
        }
        let root = Rootfs::open(&dir).expect("opening the scratch rootfs");
        (dir, root)
    }

    fn refusal(name: &str, interp: Option<&[u8]>) -> (i32, String) {
        let (dir, root) = rootfs(name, interp);
        let err = read_program_in(&root, "/true", "/")
            .err()
            .expect("the interpreter is refused");
        let _ = std::fs::remove_dir_all(dir);
        (err.exit_status(), err.to_string())
    }

    #[test]
    fn dynamic_program_comes_with_its_interpreter() {
        let real = std::fs::read("/lib64/ld-linux-x86-64.so.2").expect("host glibc loader");
        let (dir, root) = rootfs("ok", Some(&real));
        let images = read_program_in(&root, "true", "/").expect("loads");
        let _ = std::fs::remove_dir_all(dir);
        assert_eq!(images.interp.as_deref(), Some(&real[..]));
    }

    #[test]
    fn bad_interpreters_are_refused_clearly() {
        let (status, msg) = refusal("missing", None);
        assert_eq!(status, 127);
        assert_eq!(
            msg,
            "/true: interpreter /lib64/ld-linux-x86-64.so.2: not found"
        );
        let (status, msg) = refusal("text", Some(b"hello\n"));
        assert_eq!((status, msg.contains("not an ELF")), (126, true), "{msg}");
        let (status, msg) = refusal("empty", Some(b""));
        assert_eq!(status, 126, "{msg}");
        let real = std::fs::read("/lib64/ld-linux-x86-64.so.2").expect("host glibc loader");
        let (status, msg) = refusal("cut", Some(&real[..100]));
        assert_eq!((status, msg.contains("truncated")), (126, true), "{msg}");
        // An interpreter that is itself dynamic.
        let dynamic = std::fs::read("/bin/true").expect("reading /bin/true");
        let (status, msg) = refusal("dyn", Some(&dynamic));
        assert_eq!(status, 126, "{msg}");
        assert!(msg.contains("interpreter of its own"), "{msg}");
    }
}
