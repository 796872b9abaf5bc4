//! Errors of the VMM.

use thiserror::Error;

/// Everything that can stop a sandbox from being created or run.
#[derive(Debug, Error)]
pub enum VmmError {
    /// `/dev/kvm` could not be used.
    #[error("cannot use /dev/kvm")]
    Kvm(#[source] kvm_ioctls::Error),
    /// Guest RAM could not be mapped.
    #[error("cannot allocate {0} bytes of guest memory")]
    Memory(u64),
    /// The program or its interpreter could not be mapped into the file
    /// window (`crate::file_window`).
    #[error("cannot map the program into the sandbox: {0}")]
    MapProgram(std::io::Error),
    /// The requested memory size is outside what the guest supports.
    #[error("memory size {0} bytes is out of range ({1}..={2})")]
    MemorySize(u64, u64, u64),
    /// The seccomp filter handed to the sandbox is malformed.
    #[error(transparent)]
    Seccomp(qlib::seccomp::FilterError),
    /// Guest RAM too small for the kernel, the program and its arguments.
    #[error(
        "--memory {} MiB is too small: this program needs at least {} MiB (guest kernel, program image, arguments and environment, and 4 MiB to run in)",
        .0 >> 20,
        .1 >> 20
    )]
    MemoryTooSmall(u64, u64),
    /// The embedded guest kernel image is unusable (a build problem).
    #[error("bad guest kernel image: {0}")]
    KernelImage(&'static str),
    /// The program could not be read.
    #[error("{path}: {source}")]
    ProgramIo {
        /// The program path.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The program is not something we can run.
    #[error("{path}: {reason}")]
    BadProgram {
        /// The program path.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The program's interpreter (`PT_INTERP`) could not be read.
    #[error("{path}: interpreter {interp}: {}", interp_io_reason(source))]
    InterpIo {
        /// The program path.
        path: String,
        /// The interpreter path the program names.
        interp: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The program's interpreter is not something we can load.
    #[error("{path}: interpreter {interp}: {reason}")]
    BadInterp {
        /// The program path.
        path: String,
        /// The interpreter path the program names.
        interp: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The boot data (program, argv, env) does not fit guest memory.
    #[error("program, arguments and environment ({0} bytes) do not fit in guest memory")]
    BootDataTooBig(u64),
    /// The guest kernel could not boot.
    #[error("guest kernel failed to boot: {0}")]
    Boot(String),
    /// The guest kernel panicked.
    #[error("guest kernel panic: {0}")]
    GuestPanic(String),
    /// The rootfs directory could not be opened.
    #[error("rootfs {0}")]
    Rootfs(String, #[source] std::io::Error),
    /// The control socket could not be created.
    #[error("control socket {0}")]
    ControlSocket(String, #[source] std::io::Error),
    /// The state directory could not be created.
    #[error("state directory {0}: {1}")]
    StateDir(String, std::io::Error),
    /// A swap or REAP file failed its checks, or could not be read: the
    /// guest's memory cannot be restored.
    #[error("hibernation: {0}")]
    Hibernation(String),
    /// A thread of the VMM could not be started (a pids limit too small).
    #[error("cannot start the VMM's {0} thread: {1}")]
    Thread(&'static str, #[source] std::io::Error),
    /// The vCPU stopped in a way the VMM cannot continue from.
    #[error("--cpus {0} is out of range (1..={1})")]
    Cpus(usize, usize),

    #[error("vCPU failed: {0}")]
    Vcpu(String),
}

impl VmmError {
    /// The exit status a shell would use for this error: 127 for a missing
    /// program, 126 for one that cannot be executed, 1 otherwise.
    pub fn exit_status(&self) -> i32 {
        match self {
            Self::ProgramIo { source, .. } if source.kind() == std::io::ErrorKind::NotFound => 127,
            Self::InterpIo { source, .. } if source.kind() == std::io::ErrorKind::NotFound => 127,
            Self::ProgramIo { .. }
            | Self::BadProgram { .. }
            | Self::InterpIo { .. }
            | Self::BadInterp { .. } => 126,
            _ => 1,
        }
    }
}

/// "not found" for a missing interpreter (what a shell says for it), else
/// the I/O error.
fn interp_io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "not found".into(),
        _ => e.to_string(),
    }
}
