//! `qvisor`: the VMM. One host process per sandbox: the KVM VM, guest RAM,
//! the vCPU thread and the host calls of the guest kernel (`qkernel`).
//!
//! `qrun` runs a sandbox with [`Sandbox::run`].

mod boot;
mod control;
pub mod ctl;
mod error;
pub mod exec;
mod file_window;
mod guest_mem;
mod hibernate;
mod hostcall;
mod kernel_text;
mod kick;
mod kick_inject;
mod program;
mod rootfs;
mod slice;
mod smp;
mod stdio;
mod vcpu;

use std::path::PathBuf;

use kvm_bindings::kvm_userspace_memory_region;
use kvm_ioctls::Kvm;

use qlib::abi::IoVec;

use crate::boot::Program;
use crate::control::ControlChannel;
pub use crate::error::VmmError;
use crate::guest_mem::GuestRam;
use crate::hibernate::{Hibernation, StateDir};
use crate::hostcall::HostCalls;
pub use crate::hostcall::Returned;
pub use crate::program::read_program;

/// `T` at a page boundary.
#[repr(C, align(4096))]
struct PageAligned<T: ?Sized>(T);

/// The guest kernel, built by `build.rs` for `x86_64-unknown-none`; page
/// aligned in the binary, so its read-only pages can be mapped from it
/// (`kernel_text`).
static KERNEL_ALIGNED: &PageAligned<[u8]> = &PageAligned(*include_bytes!(env!("QKERNEL_IMAGE")));
static KERNEL_IMAGE: &[u8] = &KERNEL_ALIGNED.0;

/// Default guest RAM of `qrun do`: 256 MiB.
pub const DEFAULT_MEMORY: u64 = 256 << 20;

/// Guest RAM of an OCI container whose bundle sets no memory limit: the
/// most the guest supports (2 GiB), as a runc container without a limit
/// may use the host's memory. Guest RAM is `MAP_NORESERVE` and the guest
/// touches only what it uses, so the size costs host memory only through
/// KVM's per-memslot metadata (~2 MiB of kernel memory per GiB with
/// shadow paging). Real functions (FunctionBench's video processing) are
/// OOM-killed in 256 MiB.
pub const DEFAULT_OCI_MEMORY: u64 = qlib::layout::MAX_MEM;

/// What to run and how.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// Bytes of guest RAM.
    pub memory: u64,
    /// Raise `memory` to the least this program boots in instead of
    /// refusing to start (an OCI memory limit: runc runs a container
    /// under a limit as small as critest's 15 MiB, and a program that
    /// outgrows the sandbox is killed as the OOM killer kills).
    pub memory_at_least_minimum: bool,
    /// The program path, resolved inside `rootfs` (relative paths against
    /// `cwd`).
    pub program: String,
    /// The only filesystem the guest can reach; `/` for `qrun do`.
    pub rootfs: PathBuf,
    /// The program's working directory, a path inside `rootfs`.
    pub cwd: String,
    /// The hostname `uname` reports.
    pub hostname: String,
    /// Where the sandbox listens for control requests ([`ctl`]); none when
    /// `None`.
    pub control_socket: Option<PathBuf>,
    /// Directory for the sandbox's private files (swap and REAP files);
    /// a fresh directory under the system temporary directory when `None`.
    pub state_dir: Option<PathBuf>,
    /// argv, `argv[0]` included.
    pub argv: Vec<String>,
    /// `KEY=VALUE` strings.
    pub env: Vec<String>,
    /// Guest kernel log level forwarded to stderr (0 off .. 5 trace).
    pub log_level: u64,
    /// Print measurements (reclaim) to stderr.
    pub stats: bool,
    /// The container's seccomp filter for the program's syscalls
    /// (`qlib::seccomp` format, checked at start); empty for none.
    pub seccomp: Vec<u8>,
    /// Give the guest an abstract `AF_UNIX` namespace of its own (its
    /// names tagged): for a sandbox in the host's network namespace.
    /// `false` when the sandbox has a network namespace of its own, whose
    /// abstract names are already private (and shared with whoever joined
    /// it, as in a pod).
    pub private_abstract: bool,
    /// An open `/dev/kvm` to use instead of opening it: a sandbox process
    /// that gives up its privileges (a non-root `process.user`) opens it
    /// before.
    pub kvm: Option<std::sync::Arc<std::fs::File>>,
    /// vCPUs (1..=[`MAX_CPUS`]). Tasks run on vCPU 0 only for now; the
    /// others boot and wait in the host (docs/smp.md).
    pub cpus: usize,
    /// Give the program Linux's pid-namespace init semantics for signals
    /// (an OCI container's pid 1): signals it has no handler for are
    /// dropped, except SIGKILL from the host (`qlib::abi::BOOT_INIT`).
    /// `false` for `qrun do`, whose program is an ordinary process.
    pub init: bool,
    /// The host's stdio is the container's terminal (OCI
    /// `process.terminal`, the slave of the pty whose master went to the
    /// console socket): the VMM puts it in raw mode and the guest gives
    /// the program a guest pty relayed to it (`qlib::abi::BOOT_CONSOLE`,
    /// docs/terminal.md).
    pub console: bool,
    /// The OCI process's capability sets, supplementary groups and
    /// resource limits for the guest (`qlib::abi::Creds`); `None` for
    /// `qrun do` (root gets runc's default capabilities).
    pub creds: Option<qlib::abi::Creds>,
    /// Start the program with `no_new_privs` (`process.noNewPrivileges`;
    /// `qlib::abi::BOOT_NO_NEW_PRIVS`).
    pub no_new_privs: bool,
    /// `linux.sysctl` entries the guest shows under `/proc/sys`, as
    /// `sys/a/b=value` (paths under `/proc/`).
    pub sysctl: Vec<String>,
    /// Mountinfo records of the mounts the runtime made inside the rootfs
    /// (`qlib::abi::BootInfo::mounts`), shown in the guest's mountinfo.
    pub mounts: Vec<String>,
    /// `linux.devices` records the guest serves under `/dev`
    /// (`qlib::abi::BootInfo::devices`).
    pub devices: Vec<String>,
    /// A user namespace's `uid_map` and `gid_map` texts (empty: the
    /// identity map), `qlib::abi::BootInfo::id_maps`.
    pub id_maps: Vec<String>,
}

/// Most vCPUs a sandbox has.
pub const MAX_CPUS: usize = qlib::abi::MAX_VCPUS;

impl SandboxConfig {
    /// A config running `argv` (`argv[0]` is the program) with defaults:
    /// 256 MiB, the host `/` as rootfs, cwd `/`, no control socket.
    pub fn new(argv: Vec<String>) -> Self {
        Self {
            memory: DEFAULT_MEMORY,
            memory_at_least_minimum: false,
            program: argv.first().cloned().unwrap_or_default(),
            rootfs: PathBuf::from("/"),
            cwd: "/".into(),
            hostname: "qrun".into(),
            control_socket: None,
            state_dir: None,
            argv,
            env: Vec::new(),
            log_level: 0,
            stats: false,
            seccomp: Vec::new(),
            private_abstract: true,
            kvm: None,
            cpus: 1,
            init: false,
            console: false,
            creds: None,
            no_new_privs: false,
            sysctl: Vec::new(),
            mounts: Vec::new(),
            devices: Vec::new(),
            id_maps: Vec::new(),
        }
    }
}

/// What a finished sandbox reports.
#[derive(Debug, Clone, Copy)]
pub struct RunReport {
    /// The program's exit status as a shell reports it.
    pub status: i32,
    /// Host calls the guest made.
    pub host_calls: u64,
    /// Bytes of guest memory returned to the host by reclaim.
    pub reclaimed: u64,
    /// Time slices the VMM ended (`control::PREEMPT` posts, `crate::slice`).
    pub preemptions: u64,
    /// What the guest handed back on its own while the program ran.
    pub returned: Returned,
}

/// A sandbox: a VM running one program.
pub struct Sandbox;

impl Sandbox {
    /// Boots a sandbox for `config` and runs it to completion.
    pub fn run(config: &SandboxConfig) -> Result<RunReport, VmmError> {
        use qlib::layout::{MAX_MEM, MIN_MEM};
        if !(MIN_MEM..=MAX_MEM).contains(&config.memory) {
            return Err(VmmError::MemorySize(config.memory, MIN_MEM, MAX_MEM));
        }
        if !(1..=MAX_CPUS).contains(&config.cpus) {
            return Err(VmmError::Cpus(config.cpus, MAX_CPUS));
        }
        if !config.seccomp.is_empty() {
            qlib::seccomp::Filter::parse(&config.seccomp).map_err(VmmError::Seccomp)?;
        }
        let root = rootfs::Rootfs::open(&config.rootfs)
            .map_err(|e| VmmError::Rootfs(config.rootfs.display().to_string(), e))?;
        let launch = program::launch_in(&root, &config.program, &config.argv, &config.cwd)?;
        // The images are mapped into the file window once the VM exists.
        let program = Program {
            image: IoVec::default(),
            interp: IoVec::default(),
            argv: &launch.argv,
            envp: &config.env,
            execfn: &config.program,
            exe: &launch.exe,
            cwd: &config.cwd,
            hostname: &config.hostname,
            seccomp: &config.seccomp,
            cpus: config.cpus as u64,
            flags: if config.init { qlib::abi::BOOT_INIT } else { 0 }
                | if config.console && stdio::raw_terminal() {
                    qlib::abi::BOOT_CONSOLE
                } else {
                    0
                }
                | if config.no_new_privs {
                    qlib::abi::BOOT_NO_NEW_PRIVS
                } else {
                    0
                },
            creds: config.creds.as_ref().map(qlib::abi::Creds::to_bytes),
            sysctl: &config.sysctl,
            mounts: &config.mounts,
            devices: &config.devices,
            id_maps: &config.id_maps,
        };
        let min = boot::min_memory(KERNEL_IMAGE, &program)?;
        let memory = if config.memory_at_least_minimum {
            config.memory.max(min).min(qlib::layout::MAX_MEM)
        } else {
            config.memory
        };
        if memory < min {
            return Err(VmmError::MemoryTooSmall(memory, min));
        }
        ignore_sigpipe_and_umask();
        let kvm = match &config.kvm {
            Some(file) => {
                use std::os::fd::{FromRawFd, IntoRawFd};
                let own = file.try_clone().map_err(|e| {
                    VmmError::Kvm(kvm_ioctls::Error::new(
                        e.raw_os_error().unwrap_or(libc::EBADF),
                    ))
                })?;
                // SAFETY: `own` is a descriptor of /dev/kvm that nothing
                // else holds; `Kvm` takes it over and closes it.
                unsafe { Kvm::from_raw_fd(own.into_raw_fd()) }
            }
            None => Kvm::new().map_err(VmmError::Kvm)?,
        };
        let vm = kvm.create_vm().map_err(VmmError::Kvm)?;
        let ram = GuestRam::new(memory)?;
        let region = kvm_userspace_memory_region {
            slot: 0,
            flags: 0,
            guest_phys_addr: 0,
            memory_size: ram.size(),
            userspace_addr: ram.host_base(),
        };
        // SAFETY: the region is our own guest-RAM mapping, which outlives the
        // VM (both live until this function returns, `vm` dropped first).
        unsafe { vm.set_user_memory_region(region) }.map_err(VmmError::Kvm)?;
        let readonly = kvm.check_extension(kvm_ioctls::Cap::ReadonlyMem);
        let window_region = kvm_userspace_memory_region {
            slot: 1,
            flags: if readonly {
                kvm_bindings::KVM_MEM_READONLY
            } else {
                0
            },
            guest_phys_addr: qlib::layout::FILE_WINDOW_GPA,
            memory_size: qlib::layout::FILE_WINDOW_SIZE,
            userspace_addr: ram.window_host_base(),
        };
        // SAFETY: the region is the file-window reservation `ram` owns,
        // which outlives the VM as guest RAM does.
        unsafe { vm.set_user_memory_region(window_region) }.map_err(VmmError::Kvm)?;
        // The program and its interpreter: read from the page cache through
        // the window (`file_window`), not copied into guest RAM.
        let mut window = file_window::FileWindow::default();
        let mut map_image = |img: &program::Image| -> Result<IoVec, VmmError> {
            let (gpa, len) = window.map(&ram, &img.file).map_err(|e| {
                let errno = i32::try_from(-e.errno()).unwrap_or(libc::EINVAL);
                VmmError::MapProgram(std::io::Error::from_raw_os_error(errno))
            })?;
            Ok(IoVec { gpa, len })
        };
        let program = Program {
            image: map_image(&launch.images.program)?,
            interp: match &launch.images.interp {
                Some(i) => map_image(i)?,
                None => IoVec::default(),
            },
            ..program
        };

        let (entry, kernel_text) = boot::load_kernel(&ram, KERNEL_IMAGE)?;
        let cr3 = boot::build_page_tables(&ram)?;
        let boot_level = if config.stats {
            config.log_level | qlib::abi::LOG_STATS_FLAG
        } else {
            config.log_level
        };
        boot::write_boot_info(&ram, &program, boot_level, host_ids())?;
        // The images are mapped now: the files can close.
        drop(launch);

        let cpuid = kvm
            .get_supported_cpuid(kvm_bindings::KVM_MAX_CPUID_ENTRIES)
            .ok();
        let new_vcpu = |id: usize| -> Result<kvm_ioctls::VcpuFd, VmmError> {
            let vcpu = vm.create_vcpu(id as u64).map_err(|e| {
                VmmError::Vcpu(format!("cannot create vCPU {id} of {}: {e}", config.cpus))
            })?;
            if let Some(cpuid) = &cpuid {
                // Optional on this hypervisor (PLATFORM.md); ignore a refusal.
                let _ = vcpu.set_cpuid2(cpuid);
            }
            vcpu::set_boot_state(&vcpu, entry, cr3, id as u64)?;
            Ok(vcpu)
        };
        let mut vcpu = new_vcpu(0)?;
        let secondaries = (1..config.cpus)
            .map(new_vcpu)
            .collect::<Result<Vec<_>, _>>()?;
        let smp = smp::Smp::new(config.cpus)
            .map_err(|e| VmmError::Vcpu(format!("vCPU wake eventfd: {e}")))?;
        let channel = ControlChannel::new().map_err(|e| VmmError::Vcpu(format!("eventfd: {e}")))?;
        let state_dir = StateDir::new(config.state_dir.as_deref()).map_err(|e| {
            let dir = config
                .state_dir
                .as_deref()
                .unwrap_or(&std::env::temp_dir())
                .display()
                .to_string();
            VmmError::StateDir(dir, e)
        })?;
        let mut hib = Hibernation::new(state_dir.path().to_path_buf(), channel.clone());
        hib.set_kernel_text(kernel_text);
        let mut calls = HostCalls::new(
            &ram,
            &hib,
            config.log_level,
            root,
            channel.clone(),
            config.stats,
        );
        calls.set_file_window(window);
        calls.set_smp(&smp);
        if !config.private_abstract {
            calls.set_abstract_names(hostcall::AbstractNames::Shared);
        }
        let execs = std::sync::Arc::new(
            exec::Execs::new().map_err(|e| VmmError::Vcpu(format!("socketpair: {e}")))?,
        );
        calls.set_execs(execs.clone());
        // Control signals go to the signal thread only; the vCPU runs on a
        // thread of its own.
        let sigset = control::block_signals();
        kick::install_handler().map_err(|e| VmmError::Vcpu(format!("kick signal: {e}")))?;
        let listener = match &config.control_socket {
            Some(path) => Some(
                std::os::unix::net::UnixListener::bind(path)
                    .map_err(|e| VmmError::ControlSocket(path.display().to_string(), e))?,
            ),
            None => None,
        };
        let status = std::thread::scope(|s| {
            let started = start_threads(
                s,
                Shared {
                    channel: &channel,
                    ram: &ram,
                    hib: &hib,
                    execs: &execs,
                },
                sigset,
                &listener,
                config,
            )
            .and_then(|()| start_vcpus(s, secondaries, &smp, (&ram, &channel, &hib), config));
            // The vCPU runs on this thread: one host task fewer under the
            // container's pids limit (`HOST_THREADS`).
            let result = started.and_then(|()| {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    vcpu::run(&mut vcpu, &mut calls, &channel.kick, &smp)
                }))
                .map_err(|_| VmmError::Vcpu("vCPU thread panicked".into()))?
            });
            // Nothing moves the guest any more: requests waiting for it
            // get an answer, and every thread ends.
            hib.close();
            channel.shutdown();
            smp.stop();
            execs.close_all();
            result
        })?;
        Ok(RunReport {
            status,
            host_calls: calls.count,
            reclaimed: calls.reclaimed,
            preemptions: channel
                .slicer
                .preempts
                .load(std::sync::atomic::Ordering::Relaxed),
            returned: calls.returned(),
        })
    }
}

/// Host threads (tasks) of one sandbox process at most: this one (vCPU
/// 0), the signal, kick-retry, slice and control-socket threads, the REAP
/// read-back helper while a wake runs (`hibernate::reap`; a wake goes on
/// without it if it cannot start), and one thread per secondary vCPU (at
/// most [`MAX_CPUS`] - 1). The OCI runtime adds them to the container's
/// pids limit.
pub const HOST_THREADS: u32 = 6 + MAX_CPUS as u32 - 1;

/// Starts one host thread per secondary vCPU (`smp`); they wait until the
/// guest asks for them. An error (a thread cannot start) fails the start.
fn start_vcpus<'scope, 'env>(
    s: &'scope std::thread::Scope<'scope, 'env>,
    vcpus: Vec<kvm_ioctls::VcpuFd>,
    smp: &'env smp::Smp,
    (ram, channel, hib): (&'env GuestRam, &'env ControlChannel, &'env Hibernation),
    config: &'env SandboxConfig,
) -> Result<(), VmmError> {
    const NAMES: [&str; MAX_CPUS] = [
        "vcpu0", "vcpu1", "vcpu2", "vcpu3", "vcpu4", "vcpu5", "vcpu6", "vcpu7",
    ];
    let log_level = config.log_level;
    for (i, vcpu) in vcpus.into_iter().enumerate() {
        let k = i + 1;
        std::thread::Builder::new()
            .name(NAMES[k].into())
            .spawn_scoped(s, move || {
                smp::run_secondary(vcpu, k, smp, ram, channel, hib, log_level)
            })
            .map_err(|e| VmmError::Thread(NAMES[k], e))?;
    }
    Ok(())
}

/// What the service threads share with the vCPU.
#[derive(Clone, Copy)]
struct Shared<'env> {
    channel: &'env ControlChannel,
    ram: &'env GuestRam,
    hib: &'env Hibernation,
    execs: &'env exec::Execs,
}

/// Starts the sandbox's service threads in `s`. An error (no thread can be
/// started: a pids limit) leaves the started ones to end when the channel
/// shuts down.
fn start_threads<'scope, 'env>(
    s: &'scope std::thread::Scope<'scope, 'env>,
    shared: Shared<'env>,
    sigset: libc::sigset_t,
    listener: &'env Option<std::os::unix::net::UnixListener>,
    config: &'env SandboxConfig,
) -> Result<(), VmmError> {
    let Shared {
        channel,
        ram,
        hib,
        execs,
    } = shared;
    let spawn = |name: &'static str, f: Box<dyn FnOnce() + Send + 'env>| {
        std::thread::Builder::new()
            .name(name.into())
            .spawn_scoped(s, f)
            .map(drop)
            .map_err(|e| VmmError::Thread(name, e))
    };
    // Made here, before the guest runs, so that a guest holding every fd
    // it may open cannot keep the signal thread from starting.
    let sfd = control::signal_fd(&sigset).map_err(|e| VmmError::Vcpu(format!("signalfd: {e}")))?;
    spawn(
        "signals",
        Box::new(move || control::signal_loop(channel, ram, hib, sfd)),
    )?;
    spawn("kick-retry", Box::new(move || kick::retry_loop(channel)))?;
    spawn(
        "slice",
        Box::new(move || slice::watch_loop(channel, ram, hib)),
    )?;
    if std::env::var_os("QVISOR_KICK_STORM").is_some() {
        spawn("kick-storm", Box::new(move || kick::storm(channel)))?;
    }
    if let (Some(listener), Some(path)) = (listener, &config.control_socket) {
        spawn(
            "control",
            Box::new(move || {
                let post = || {
                    // Exec into a hibernated sandbox wakes it first.
                    if hib.status().state == "hibernated"
                        && let Err(e) = hib.wake(ram, "exec")
                    {
                        log::warn!("exec: wake: {}", hibernate::report(&e));
                    }
                    channel.post(ram, qlib::abi::control::EXEC);
                };
                let exec = ctl::ExecHandler { execs, post: &post };
                ctl::serve(
                    listener,
                    path,
                    channel,
                    &mut |req| control_request(channel, ram, hib, req),
                    &exec,
                    // A hibernated sandbox gives back what answering took.
                    &|| hib.settle(),
                )
            }),
        )?;
    }
    Ok(())
}

/// Answers one control-socket request.
fn control_request(
    channel: &ControlChannel,
    ram: &GuestRam,
    hib: &Hibernation,
    req: ctl::Request,
) -> Result<ctl::Status, String> {
    let e = |e: hibernate::SwapError| hibernate::report(&e);
    match req {
        ctl::Request::Status => Ok(hib.status()),
        ctl::Request::Signal(n) => {
            channel.post_signal(ram, n);
            Ok(hib.status())
        }
        ctl::Request::Hibernate => hib.request(ram, "control socket", true).map_err(e),
        ctl::Request::Wake => hib.wake(ram, "control socket").map_err(e),
    }
}

/// A guest writing to a closed pipe or socket gets `EPIPE` rather than
/// killing the VMM; modes the guest passes apply as given (the guest
/// applies its own umask).
fn ignore_sigpipe_and_umask() {
    // SAFETY: setting a signal disposition to SIG_IGN and the umask have no
    // memory-safety preconditions.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        libc::umask(0);
    }
}

fn host_ids() -> [u32; 4] {
    // SAFETY: these getters have no preconditions and cannot fail.
    unsafe {
        [
            libc::getuid(),
            libc::geteuid(),
            libc::getgid(),
            libc::getegid(),
        ]
    }
}
