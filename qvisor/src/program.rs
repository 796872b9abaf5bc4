//! Reading and vetting the program (and, for a dynamically linked one, its
//! interpreter) before a VM is created, so that a bad program gets a clear
//! one-line error and the exit status a shell uses.

use crate::error::VmmError;
use crate::rootfs::Rootfs;

/// Largest program or interpreter image accepted: what the file window
/// holds (the guest maps the images from it, `crate::file_window`).
const MAX_PROGRAM: u64 = qlib::layout::FILE_WINDOW_SIZE;

/// Bytes of a program read for its checks: the ELF header, the
/// program-header table and the `PT_INTERP` string lie there in every
/// ELF linker output; the rest of the file is never read by the VMM.
const HEAD_MAX: u64 = 64 << 10;

/// An opened program or interpreter file and its first bytes.
pub struct Image {
    /// The first bytes of the file (at most [`HEAD_MAX`]).
    pub head: Vec<u8>,
    /// The file's size.
    pub len: u64,
    /// The file, for mapping into the file window.
    pub file: std::fs::File,
}

/// The images the guest loads.
pub struct Images {
    /// The program's ELF image.
    pub program: Image,
    /// Its interpreter's ELF image (`PT_INTERP`), for a dynamic program.
    pub interp: Option<Image>,
}

/// Reads the program at host path `path` and checks it is an x86-64 ELF
/// executable (static or dynamic; a dynamic one's interpreter is not read).
pub fn read_program(path: &str) -> Result<Image, VmmError> {
    let io = |source| VmmError::ProgramIo {
        path: path.to_string(),
        source,
    };
    let file = {
        use std::os::unix::fs::OpenOptionsExt;
        // O_NONBLOCK: opening a FIFO must not wait for a writer.
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .map_err(io)?
    };
    let bad = |reason| VmmError::BadProgram {
        path: path.to_string(),
        reason,
    };
    let image = read_capped(file).map_err(|e| e.into_error(io, bad))?;
    qlib::elf::parse_head(&image.head, image.len).map_err(|e| bad(e.to_string()))?;
    Ok(image)
}

/// What the VMM starts: the images, argv after `#!` rewriting, and the
/// path of the ELF file run.
pub struct Launch {
    /// The ELF images.
    pub images: Images,
    /// argv as the ELF program sees it.
    pub argv: Vec<String>,
    /// The ELF file's path (`/proc/self/exe`), relative to the guest cwd
    /// when not absolute.
    pub exe: String,
}

/// Whose file is being read, for errors naming it.
#[derive(Clone, Copy)]
enum Who<'a> {
    /// The program itself.
    Program(&'a str),
    /// The interpreter `interp` a `#!` script `script` names.
    Interp { script: &'a str, interp: &'a str },
}

impl Who<'_> {
    fn io(self, source: std::io::Error) -> VmmError {
        match self {
            Self::Program(path) => VmmError::ProgramIo {
                path: path.into(),
                source,
            },
            Self::Interp { script, interp } => VmmError::InterpIo {
                path: script.into(),
                interp: interp.into(),
                source,
            },
        }
    }

    fn bad(self, reason: String) -> VmmError {
        match self {
            Self::Program(path) => VmmError::BadProgram {
                path: path.into(),
                reason,
            },
            Self::Interp { script, interp } => VmmError::BadInterp {
                path: script.into(),
                interp: interp.into(),
                reason,
            },
        }
    }
}

/// Resolves what running `argv` with the program at `path` inside `root`
/// starts, as Linux's `execve` does: a `#!` script runs its interpreter
/// (resolved inside `root`, relative paths against `cwd`) with argv
/// `[interp, optional arg, path, argv[1..]]`, up to
/// [`qlib::shebang::MAX_NESTING`] times. The ELF finally reached must be an
/// x86-64 executable; its `PT_INTERP` interpreter, if any, is read and
/// checked too (inside `root`, as Linux resolves it in the caller's root).
pub fn launch_in(
    root: &Rootfs,
    path: &str,
    argv: &[String],
    cwd: &str,
) -> Result<Launch, VmmError> {
    use qlib::shebang::{self, MAX_NESTING};
    let mut argv = argv.to_vec();
    let mut name = path.to_string();
    let mut script: Option<String> = None;
    for _ in 0..=MAX_NESTING {
        let who = match &script {
            None => Who::Program(path),
            Some(s) => Who::Interp {
                script: s,
                interp: &name,
            },
        };
        let file = open_in(root, name.as_bytes(), cwd).map_err(|e| who.io(e))?;
        let image = read_capped(file).map_err(|e| e.into_error(|e| who.io(e), |r| who.bad(r)))?;
        let Some(sb) = shebang::parse(&image.head) else {
            if let Some(reason) = bad_shebang(&image.head) {
                return Err(who.bad(reason.into()));
            }
            let images = elf_images(root, &name, image, cwd, who)?;
            return Ok(Launch {
                images,
                argv,
                exe: name,
            });
        };
        let text = |b: &[u8]| {
            String::from_utf8(b.to_vec()).map_err(|_| who.bad("#! line is not UTF-8".into()))
        };
        if sb.interp.is_empty() {
            // `#!` then a NUL: Linux opens "" (the cwd, a directory) and
            // fails with EACCES.
            return Err(who.bad("#! line names an empty interpreter (Permission denied)".into()));
        }
        let interp = text(sb.interp)?;
        let mut head = vec![interp.clone()];
        if let Some(arg) = sb.arg {
            head.push(text(arg)?);
        }
        head.push(name.clone());
        // The script's argv[0] goes: the script path takes its place.
        argv.splice(..1.min(argv.len()), head);
        script = Some(std::mem::replace(&mut name, interp));
    }
    Err(VmmError::BadProgram {
        path: path.into(),
        reason: format!("more than {MAX_NESTING} levels of #! interpreters (ELOOP)"),
    })
}

/// Why a file starting with `#!` is not a script [`qlib::shebang::parse`]
/// takes; `None` if it does not start with `#!`.
fn bad_shebang(image: &[u8]) -> Option<&'static str> {
    use qlib::shebang::HEAD_SIZE;
    if !image.starts_with(b"#!") {
        return None;
    }
    let head = &image[..image.len().min(HEAD_SIZE - 1)];
    Some(if head.contains(&b'\n') || image.len() < HEAD_SIZE {
        "#! line names no interpreter"
    } else {
        "#! line too long (the interpreter path must end within 255 bytes)"
    })
}

/// Checks `program` (the file at `path`, read as `who`) is an x86-64 ELF
/// executable and reads and checks its `PT_INTERP` interpreter, if any.
fn elf_images(
    root: &Rootfs,
    path: &str,
    program: Image,
    cwd: &str,
    who: Who<'_>,
) -> Result<Images, VmmError> {
    let info =
        qlib::elf::parse_head(&program.head, program.len).map_err(|e| who.bad(e.to_string()))?;
    let Some(interp_path) = info.interp_bytes(&program.head) else {
        return Ok(Images {
            program,
            interp: None,
        });
    };
    let interp_name = String::from_utf8_lossy(interp_path).into_owned();
    let iwho = Who::Interp {
        script: path,
        interp: &interp_name,
    };
    let file = open_in(root, interp_path, cwd).map_err(|e| iwho.io(e))?;
    let interp = read_capped(file).map_err(|e| e.into_error(|e| iwho.io(e), |r| iwho.bad(r)))?;
    let iinfo =
        qlib::elf::parse_head(&interp.head, interp.len).map_err(|e| iwho.bad(e.to_string()))?;
    if iinfo.interp.is_some() {
        return Err(iwho.bad("names an interpreter of its own".into()));
    }
    Ok(Images {
        program,
        interp: Some(interp),
    })
}

/// Opens `path` (absolute, or relative to `cwd`) read-only inside `root`,
/// without waiting: a FIFO opens at once ([`read_capped`] refuses it).
fn open_in(root: &Rootfs, path: &[u8], cwd: &str) -> Result<std::fs::File, std::io::Error> {
    let full = if path.first() == Some(&b'/') {
        path.to_vec()
    } else {
        let mut full = cwd.trim_end_matches('/').as_bytes().to_vec();
        full.push(b'/');
        full.extend_from_slice(path);
        full
    };
    root.open_at(&full, libc::O_RDONLY | libc::O_NONBLOCK, 0)
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

/// Reads the head of a regular file of at most [`MAX_PROGRAM`] bytes that
/// the program's user may execute (`EACCES` as from Linux's `execve`
/// otherwise: the guest runs with the VMM's ids).
fn read_capped(mut file: std::fs::File) -> Result<Image, ReadError> {
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;
    let meta = file.metadata().map_err(ReadError::Io)?;
    if meta.is_dir() {
        return Err(ReadError::Bad("is a directory".into()));
    }
    if !meta.is_file() {
        // Linux's execve: EACCES for anything but a regular file.
        return Err(ReadError::Bad(format!(
            "is {}, not a regular file (Permission denied)",
            file_kind(meta.mode())
        )));
    }
    // SAFETY: these getters have no preconditions and cannot fail.
    let (euid, egid) = unsafe { (libc::geteuid(), libc::getegid()) };
    if !qlib::exec_perm::may_exec(meta.mode(), (meta.uid(), meta.gid()), euid, egid) {
        return Err(ReadError::Io(std::io::Error::from_raw_os_error(
            libc::EACCES,
        )));
    }
    if meta.len() > MAX_PROGRAM {
        return Err(ReadError::Bad(format!("too large ({} bytes)", meta.len())));
    }
    let mut head = Vec::with_capacity(meta.len().min(HEAD_MAX) as usize);
    (&mut file)
        .take(HEAD_MAX)
        .read_to_end(&mut head)
        .map_err(ReadError::Io)?;
    Ok(Image {
        head,
        len: meta.len(),
        file,
    })
}

/// "a FIFO", "a socket" … for the file type bits of `mode`.
fn file_kind(mode: u32) -> &'static str {
    match mode & libc::S_IFMT {
        libc::S_IFIFO => "a FIFO",
        libc::S_IFSOCK => "a socket",
        libc::S_IFCHR => "a character device",
        libc::S_IFBLK => "a block device",
        libc::S_IFDIR => "a directory",
        _ => "a special file",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// Writes an executable file (mode 0755).
    fn write_exec(path: &std::path::Path, bytes: &[u8]) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(path, bytes).expect("write");
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }

    /// A scratch rootfs holding the host's dynamic `/bin/true` as `/true`
    /// and `interp` (if any) as its glibc interpreter.
    fn rootfs(name: &str, interp: Option<&[u8]>) -> (PathBuf, Rootfs) {
        let dir =
            std::env::temp_dir().join(format!("qvisor-program-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("lib64")).expect("mkdir in the temp dir");
        std::fs::copy("/bin/true", dir.join("true")).expect("copying /bin/true");
        if let Some(bytes) = interp {
            write_exec(&dir.join("lib64/ld-linux-x86-64.so.2"), bytes);
        }
        let root = Rootfs::open(&dir).expect("opening the scratch rootfs");
        (dir, root)
    }

    fn refusal(name: &str, interp: Option<&[u8]>) -> (i32, String) {
        let (dir, root) = rootfs(name, interp);
        let err = launch_in(&root, "/true", &[], "/")
            .err()
            .expect("the interpreter is refused");
        let _ = std::fs::remove_dir_all(dir);
        (err.exit_status(), err.to_string())
    }

    #[test]
    fn dynamic_program_comes_with_its_interpreter() {
        let real = std::fs::read("/lib64/ld-linux-x86-64.so.2").expect("host glibc loader");
        let (dir, root) = rootfs("ok", Some(&real));
        let launch = launch_in(&root, "true", &[], "/").expect("loads");
        let _ = std::fs::remove_dir_all(dir);
        let interp = launch.images.interp.expect("an interpreter");
        assert_eq!(interp.len, real.len() as u64);
        assert_eq!(interp.head[..], real[..interp.head.len()]);
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

    #[test]
    fn files_without_execute_permission_are_refused() {
        use std::os::unix::fs::PermissionsExt;
        let real = std::fs::read("/lib64/ld-linux-x86-64.so.2").expect("host glibc loader");
        let (dir, root) = rootfs("noexec", Some(&real));
        let mode = |path: &str, m: u32| {
            std::fs::set_permissions(dir.join(path), std::fs::Permissions::from_mode(m))
                .expect("chmod");
        };
        let status = |p: &str| {
            launch_in(&root, p, &[], "/")
                .err()
                .map(|e| (e.exit_status(), e.to_string()))
        };
        mode("true", 0o644);
        let (code, msg) = status("/true").expect("refused");
        assert_eq!(code, 126);
        assert!(msg.contains("Permission denied"), "{msg}");
        // Its interpreter needs the x bit too (Linux opens it for exec).
        mode("true", 0o755);
        mode("lib64/ld-linux-x86-64.so.2", 0o644);
        let (code, msg) = status("/true").expect("refused");
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(code, 126, "{msg}");
        assert!(msg.contains("Permission denied"), "{msg}");
    }

    fn argv(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn scripts_run_their_interpreter() {
        let (dir, root) = rootfs("script", None);
        std::fs::create_dir_all(dir.join("bin")).expect("mkdir");
        std::fs::copy("/bin/busybox", dir.join("bin/sh")).expect("copying busybox");
        let write = |name: &str, text: &[u8]| write_exec(&dir.join(name), text);
        write("a", b"#! /bin/sh -eu \necho\n");
        write("b", b"#!a x\n");
        write("loop", b"#!/loop\n");
        write("gone", b"#!/nope/sh\n");
        write("text", b"echo hi\n");
        write("empty", b"#!  \n");
        let mut long = b"#!/".to_vec();
        long.resize(300, b'a');
        write("long", &long);
        let ok = launch_in(&root, "b", &argv(&["zero", "1"]), "/").expect("runs");
        assert_eq!(ok.argv, argv(&["/bin/sh", "-eu", "a", "x", "b", "1"]));
        assert_eq!(ok.exe, "/bin/sh");
        assert!(ok.images.interp.is_none());
        let err = |p: &str| {
            let e = launch_in(&root, p, &argv(&[p]), "/")
                .err()
                .expect("refused");
            (e.exit_status(), e.to_string())
        };
        let (loop_, gone, text) = (err("/loop"), err("gone"), err("text"));
        let (empty, long) = (err("empty"), err("long"));
        let _ = std::fs::remove_dir_all(dir);
        assert_eq!(loop_.0, 126);
        assert!(loop_.1.contains("ELOOP"), "{}", loop_.1);
        assert_eq!(gone, (127, "gone: interpreter /nope/sh: not found".into()));
        assert_eq!(text.0, 126);
        assert!(text.1.contains("ELF"), "{}", text.1);
        assert_eq!(empty.0, 126);
        assert!(empty.1.contains("no interpreter"), "{}", empty.1);
        assert_eq!(long.0, 126);
        assert!(long.1.contains("too long"), "{}", long.1);
    }

    use qlib::test_rng::Rng;

    /// (offset, size) of the first program header of type `t`.
    fn phdr_of(f: &[u8], t: u32) -> Option<usize> {
        let phoff = u64::from_le_bytes(f.get(32..40)?.try_into().ok()?) as usize;
        let phnum = u16::from_le_bytes(f.get(56..58)?.try_into().ok()?) as usize;
        (0..phnum)
            .map(|i| phoff + 56 * i)
            .find(|&p| f.get(p..p + 4) == Some(&t.to_le_bytes()[..]))
    }

    /// `f` with a header field, a program-header field or the `PT_INTERP`
    /// path changed: the path to a FIFO, a directory, something missing,
    /// the program itself or a relative name.
    fn mutate(f: &[u8], rng: &mut Rng) -> Vec<u8> {
        let mut f = f.to_vec();
        let interp = phdr_of(&f, 3).expect("/bin/true is dynamic");
        match rng.below(3) {
            0 => {
                let paths: [&[u8]; 6] = [b"/fifo", b"/dir", b"/missing", b"/prog", b"fifo", b""];
                let path = paths[rng.below(paths.len() as u64) as usize];
                let off = u64::from_le_bytes(f[interp + 8..interp + 16].try_into().expect("8"));
                let off = off as usize;
                f[off..off + path.len()].copy_from_slice(path);
                f[off + path.len()] = 0;
                let n = (path.len() + 1) as u64;
                f[interp + 32..interp + 40].copy_from_slice(&n.to_le_bytes());
            }
            _ => {
                let ph = 64 + 56 * rng.below(u64::from(f[56]).max(1)) as usize;
                let fields = [
                    16,
                    24,
                    32,
                    56,
                    ph,
                    ph + 8,
                    ph + 16,
                    ph + 32,
                    ph + 40,
                    ph + 48,
                ];
                let at = fields[rng.below(fields.len() as u64) as usize];
                let width = match at {
                    16 | 56 => 2,
                    a if a == ph => 4,
                    _ => 8,
                };
                let value: u64 = match rng.below(5) {
                    0 => 0,
                    1 => u64::MAX,
                    2 => 1 << rng.below(64),
                    3 => 0x7fff_ffff_f000,
                    _ => rng.below(0x10_0000),
                };
                f[at..at + width].copy_from_slice(&value.to_le_bytes()[..width]);
            }
        }
        if rng.below(5) == 0 {
            f.truncate(rng.below(f.len() as u64) as usize);
        }
        f
    }

    /// Mutated dynamic programs are launched or refused with one line and
    /// 126/127, never hang (a FIFO interpreter) and never panic.
    #[test]
    fn mutated_programs_are_vetted_in_one_line() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let real = std::fs::read("/lib64/ld-linux-x86-64.so.2").expect("host glibc loader");
            let (dir, root) = rootfs("fuzz", Some(&real));
            std::fs::create_dir(dir.join("dir")).expect("mkdir");
            let fifo =
                std::ffi::CString::new(dir.join("fifo").into_os_string().into_encoded_bytes())
                    .expect("no NUL");
            // SAFETY: a NUL-terminated path.
            assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o755) }, 0);
            let seed = std::fs::read("/bin/true").expect("/bin/true");
            let mut rng = Rng(0xf1f0_0dd5_eed5_0002);
            let (mut ok, mut refused) = (0, 0);
            for case in 0..1500 {
                write_exec(&dir.join("prog"), &mutate(&seed, &mut rng));
                match launch_in(&root, "/prog", &argv(&["prog"]), "/") {
                    Ok(_) => ok += 1,
                    Err(e) => {
                        let msg = e.to_string();
                        assert!(
                            !msg.is_empty() && !msg.contains('\n'),
                            "case {case}: {msg:?}"
                        );
                        assert!(matches!(e.exit_status(), 126 | 127), "case {case}: {msg}");
                        refused += 1;
                    }
                }
            }
            let _ = std::fs::remove_dir_all(dir);
            let _ = tx.send((ok, refused));
        });
        let (ok, refused) = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("1500 launches within 20 s (a FIFO must not block)");
        assert!(ok > 100 && refused > 100, "ok {ok}, refused {refused}");
    }
}
