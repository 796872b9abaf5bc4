//! The guest/VMM host-call ABI, version [`ABI_VERSION`].
//!
//! A host call is a [`HostCall`] record in guest memory followed by a
//! doorbell: a 32-bit `out` to [`HOSTCALL_PORT`] whose value is the
//! guest-physical address of the record. The VMM reads the record, checks
//! every guest range it names against guest RAM, performs the call, writes
//! `ret` (a value >= 0, or `-errno`) and resumes the vCPU. An exit costs
//! ~30 µs on our hosts, so calls carry iovec lists ([`IoVec`]) and data stays
//! in place: the VMM reads and writes guest buffers directly.
//!
//! All pointers in arguments are guest-physical addresses.

/// Bumped on any incompatible change; checked by [`Call::Hello`] at boot.
pub const ABI_VERSION: u64 = 20;

/// Most extra fds one `Call::Close` closes.
pub const MAX_CLOSE_BATCH: u64 = 64;
/// Most page pairs one [`Call::CopyPages`] takes.
pub const COPY_PAGES_MAX: u64 = 64;
/// Most bytes one [`Call::Populate`] may ask for (one allocator chunk).
pub const POPULATE_MAX: u64 = 4 << 20;

/// Most vCPUs a sandbox has (docs/smp.md).
pub const MAX_VCPUS: usize = 8;

/// `Call::WakeVcpu` `args[1]`: kick the vCPUs that run guest code too.
pub const WAKE_KICK: u64 = 1;

/// The doorbell port. `out dx, eax` with `eax` = GPA of a [`HostCall`].
pub const HOSTCALL_PORT: u16 = 0x5150;

/// The interrupt vector the VMM injects to make a running guest look at
/// its control page (the vCPU kick, `qvisor::kick`).
pub const KICK_VECTOR: u8 = 0x20;

/// Returned by a blocking host call that the VMM cut short because a
/// control request is pending (see [`ControlPage`]): the guest serves the
/// request and makes the same call again.
pub const RET_RESTART: i64 = -512;

/// Control requests the VMM posts in [`ControlPage::pending`].
pub mod control {
    /// Return free guest memory to the host ([`super::Call::Reclaim`]).
    pub const RECLAIM: u64 = 1 << 0;
    /// Signals for the program are pending in [`super::ControlPage::signals`].
    pub const SIGNAL: u64 = 1 << 1;
    /// Hibernate: deflate the guest (see [`super::Call::HibernateBegin`]).
    pub const HIBERNATE: u64 = 1 << 2;
    /// The alarm set with [`super::Call::SetAlarm`] went off.
    pub const ALARM: u64 = 1 << 3;
    /// Orders for processes started from outside (`qrun exec`) are
    /// waiting: take them with [`super::Call::Exec`]'s `TAKE` op.
    pub const EXEC: u64 = 1 << 4;
    /// A file mapped in the file window shrank on the host and the guest
    /// touched a page past its end: take the ranges with
    /// [`super::Call::WindowGone`].
    pub const WINDOW_GONE: u64 = 1 << 5;
    /// The running task's time slice is over while other tasks want the
    /// vCPU ([`super::ControlPage::slice`]): the guest switches at its next
    /// return to user mode (posted with a kick, never cutting a blocking
    /// host call short).
    pub const PREEMPT: u64 = 1 << 8;
}

/// A page the VMM writes and the guest polls, at
/// [`crate::layout::CONTROL_GPA`]: pending control requests (bits of
/// [`control`]), set by the VMM with an atomic OR and taken by the guest
/// with an atomic swap. The guest looks at it after every host call and
/// on every syscall, so a request waits at most until the program's next
/// syscall or until a blocking host call is cut short.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ControlPage {
    /// Pending request bits.
    pub pending: u64,
    /// Pending signals for the program: bit `n - 1` = signal `n`, set with
    /// an atomic OR before [`control::SIGNAL`].
    pub signals: u64,
    /// Written by the guest on its way to user mode: bit 0
    /// ([`SLICE_WANTED`]) = other tasks want the vCPU (runnable, parked on
    /// host fds or on a deadline), bit 1 ([`SLICE_QUICK`]) = a task waits
    /// in the run queue while a secondary vCPU is idle, bits 63:2 = a
    /// counter the guest bumps at every task switch and idle wait. The
    /// VMM's slice watcher (`qvisor::slice`) posts [`control::PREEMPT`]
    /// when it sees bit 0 set and the same counter one slice apart (one
    /// short slice apart with bit 1: docs/smp.md, "Who goes to a
    /// secondary").
    pub slice: u64,
    /// Written by the VMM: 1 while its slice watcher samples [`Self::slice`],
    /// 0 when it sleeps; the guest that sets bit 0 of `slice` and reads 0
    /// here wakes it with [`Call::SliceWatch`].
    pub slice_watch: u64,
}

/// Offset of [`ControlPage::signals`] in the control page.
pub const CONTROL_SIGNALS_OFFSET: u64 = 8;
const _: () = assert!(core::mem::offset_of!(ControlPage, signals) == 8);
/// Offset of [`ControlPage::slice`] in the control page.
pub const CONTROL_SLICE_OFFSET: u64 = 16;
const _: () = assert!(core::mem::offset_of!(ControlPage, slice) == 16);
/// [`ControlPage::slice`] bit: other tasks want vCPU 0.
pub const SLICE_WANTED: u64 = 1;
/// [`ControlPage::slice`] bit: a runnable task waits while a secondary
/// vCPU is idle (the watcher samples with a short slice, so that a task
/// that computes on vCPU 0 shows it soon and moves to the secondary).
pub const SLICE_QUICK: u64 = 2;
/// Bits of [`ControlPage::slice`] below its switch counter.
pub const SLICE_COUNTER_SHIFT: u32 = 2;
/// Offset of [`ControlPage::slice_watch`] in the control page.
pub const CONTROL_SLICE_WATCH_OFFSET: u64 = 24;
const _: () = assert!(core::mem::offset_of!(ControlPage, slice_watch) == 24);

/// `BootInfo::log_level` bit: `qrun --stats` asked for the kernel's
/// counters; the kernel sends them at exit as `Log` lines of level
/// [`LOG_STATS`]. The level itself is the low byte.
pub const LOG_STATS_FLAG: u64 = 1 << 8;
/// The `Log` level of a counters line (printed only with `--stats`).
pub const LOG_STATS: u64 = 6;

/// Host-call numbers.
#[repr(u64)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// `args[0]` = ABI version of the guest, `args[1]` = GPA of a [`HelloReply`].
    Hello = 1,
    /// The program ended. `args[0]` = exit status as a shell reports it;
    /// `args[1]`, `args[2]` = GPA and length of a one-line reason the
    /// program could not start, which the VMM prints (length 0: none).
    Exit = 2,
    /// `writev` to a host stdio fd: `args[0]` = fd (1 or 2), `args[1]` = GPA
    /// of an [`IoVec`] array, `args[2]` = its length.
    Writev = 3,
    /// `readv` from host stdin: same arguments as [`Call::Writev`], fd 0.
    Readv = 4,
    /// A kernel log line: `args[0]` = level (1 error .. 5 trace),
    /// `args[1]` = GPA of UTF-8 text, `args[2]` = its length.
    Log = 5,
    /// A guest kernel panic: `args[1]` = GPA of the message, `args[2]` = length.
    Panic = 6,
    /// Block the vCPU until host `CLOCK_MONOTONIC` reaches `args[0]` ns
    /// (restartable: see [`RET_RESTART`]).
    Sleep = 7,
    /// Drop guest memory: `args[0]` = GPA of an [`IoVec`] array of
    /// page-aligned guest-physical ranges, `args[1]` = its length,
    /// `args[2]` bit 0 ([`RECLAIM_LAST`]) = the last batch of this reclaim,
    /// bit 1 ([`RECLAIM_RUNNING`]) = pages the running program freed (the
    /// guest's automatic return, not a requested reclaim).
    Reclaim = 8,
    /// `poll` on host fds of the sandbox: `args[0]` = GPA of [`PollFd`]
    /// array, `args[1]` = count (at most [`MAX_POLL_FDS`]), `args[2]` = host `CLOCK_MONOTONIC` deadline in
    /// ns (`u64::MAX` = none, 0 = do not wait).
    Poll = 9,
    /// A fatal boot error before the kernel could run a program:
    /// `args[1]` = GPA of the message, `args[2]` = its length.
    BootError = 10,
    /// Arm the sandbox's one alarm for host `CLOCK_MONOTONIC` `args[0]` ns
    /// (0 = disarm; a new deadline replaces the old one). When it goes
    /// off the VMM posts [`control::ALARM`], waking a blocked host call or
    /// kicking the running vCPU (the guest's `setitimer`/`alarm`).
    SetAlarm = 11,
    /// The boot vCPU is ready for the others: the VMM lets the secondary
    /// vCPUs (`BootInfo::cpus` - 1) enter the guest. Returns how many.
    StartVcpus = 12,
    /// A secondary vCPU with nothing to do waits in the host, at no CPU
    /// cost, until [`Call::WakeVcpu`] names it (or the sandbox ends).
    /// Returns 0.
    VcpuIdle = 13,
    /// Wakes the idle vCPUs in the mask `args[0]` (bit k = vCPU k). Bit
    /// 0 (vCPU 0, from a secondary) makes vCPU 0 leave a blocking host
    /// call or user mode (a kick), as a posted control request does. With
    /// `args[1]` = [`WAKE_KICK`], the secondaries of the mask that run
    /// guest code are kicked too (the kick interrupt at a user-mode RIP).
    /// Returns 0.
    WakeVcpu = 14,
    /// Wake the VMM's slice watcher: the guest has tasks competing for the
    /// vCPU and read [`ControlPage::slice_watch`] = 0. No arguments.
    SliceWatch = 15,
    /// Open a path inside the rootfs: `args[0..2]` = GPA and length of an
    /// absolute path, `args[2]` = Linux open flags, `args[3]` = mode,
    /// `args[4]` = GPA of a [`crate::io_abi::OpenStat`] to fill (0 = none).
    /// Returns a host fd owned by the sandbox. See [`crate::io_abi`].
    Open = 16,
    /// Close a host fd of the sandbox: `args[0]` = fd; `args[1..3]` = GPA
    /// and count (at most [`MAX_CLOSE_BATCH`]) of an `i32` array of more
    /// fds to close with it (count 0: none). Returns 0 or the first error.
    Close = 17,
    /// Read or write a host fd: `args[0]` = fd, `args[1..3]` = [`IoVec`]
    /// list, `args[3]` = file offset or `u64::MAX` for the current one,
    /// `args[4]` = [`crate::io_abi::io`] flags.
    Io = 18,
    /// A path operation inside the rootfs: `args[0]` =
    /// [`crate::io_abi::path`] op, `args[1..3]` = the path, rest per op.
    Path = 19,
    /// An operation on a host fd: `args[0]` = [`crate::io_abi::fd`] op,
    /// `args[1]` = fd, rest per op.
    Fd = 20,
    /// Send or receive a message on a socket: `args[0]` = fd, `args[1..3]`
    /// = [`IoVec`] list, `args[3]` = GPA of a [`crate::io_abi::SockAddr`]
    /// (0 = none), `args[4]` = [`crate::io_abi::io`] flags | Linux
    /// `MSG_*` flags << 32, `args[5]` = GPA of a
    /// [`crate::io_abi::MsgCtl`] (0 = no control data). Version 19: the
    /// control data is Linux's raw `cmsghdr` list, any level.
    Msg = 21,
    /// Create host fds: `args[0]` = [`crate::io_abi::new`] op, rest per op.
    NewFd = 22,
    /// Wait on an epoll fd: `args[0]` = epoll fd, `args[1]` = GPA of
    /// `struct epoll_event` array, `args[2]` = its length, `args[3]` = host
    /// `CLOCK_MONOTONIC` deadline (as [`Call::Poll`]). Restartable.
    EpollWait = 23,
    /// Map a regular host file into the file window
    /// ([`crate::layout::FILE_WINDOW_GPA`]): `args[0]` = host fd, `args[1]`
    /// = GPA of a `u64` the VMM sets to the file's size as mapped. The VMM
    /// maps the whole file once per sandbox (same device, inode, size and
    /// mtime: the same window range) and returns the window GPA of its
    /// byte 0; the file's pages read-only from there, its size rounded up to
    /// a page. `-ENOMEM` when the window is full, `-ENODEV` for anything
    /// but a regular file.
    MapFile = 24,
    /// Processes started from outside the guest (`qrun exec`):
    /// `args[0]` = a [`crate::exec_order::op`], rest per op.
    Exec = 25,
    /// Take the file-window ranges whose files shrank on the host
    /// ([`control::WINDOW_GONE`]): `args[0]` = GPA of an [`IoVec`] array,
    /// `args[1]` = its capacity. Returns how many ranges the VMM wrote
    /// (they now read as zero pages; the guest unmaps them and answers
    /// accesses with `SIGBUS`).
    WindowGone = 26,
    /// The network interfaces of the sandbox's network namespace:
    /// `args[0]` = GPA of a [`crate::netinfo::NetInfo`] the VMM fills.
    /// Returns 0.
    NetIfaces = 27,
    /// A `/proc/net` file of the sandbox's network namespace: `args[0]` =
    /// its index in [`crate::netinfo::NET_FILES`], `args[1]` = GPA of a
    /// buffer, `args[2]` = its length (at most
    /// [`crate::netinfo::NET_FILE_MAX`] is used). Returns the bytes written
    /// (whole lines), or `-ENOENT` for a file the host lacks. `AF_UNIX`
    /// sockets named outside the sandbox are left out of `unix`.
    NetFile = 28,
    /// Back a fresh block of guest RAM with host pages before the guest
    /// first uses it (`MADV_POPULATE_WRITE`): `args[0]` = GPA, `args[1]` =
    /// length, both page aligned, at most [`POPULATE_MAX`]. The bytes stay
    /// what they were (zero for memory never touched). Returns 0 or
    /// `-errno` (`-EINVAL` where the host kernel cannot populate: the
    /// guest stops asking). A hint: the guest does not wait on anything
    /// but the exit, and the call leaves a hibernated sandbox hibernated.
    Populate = 29,
    /// Private copies of file-window pages: `args[0]` = GPA of an array
    /// of `[dst, src]` pairs (`[u64; 2]`: a page of guest RAM, a page of
    /// the file window, both page aligned), `args[1]` = its length (at
    /// most [`COPY_PAGES_MAX`]). The VMM copies each source page into its
    /// destination with the host kernel (a source past a shrunk file's
    /// end is `-EFAULT`, not a crash), so the guest never reads the window
    /// pages itself: on this hypervisor each window page the guest touches
    /// costs a shadow-MMU fault that cannot be prefetched. Returns 0 or
    /// `-errno` (then the destinations hold garbage: the guest copies
    /// them itself).
    CopyPages = 30,
    // 16..=63: files, pipes, sockets (the I/O work). 64..=95: hibernation,
    // in the order a hibernation uses them (DESIGN.md "Hibernation";
    // qvisor/src/hibernate, qkernel/src/mm/swap.rs).
    /// The guest starts serving [`control::HIBERNATE`]: 0, or `-EINVAL`
    /// when the VMM is not hibernating (a stale request).
    HibernateBegin = 64,
    /// Write pages to the swap file (kept in guest RAM until commit):
    /// `args[0]` = GPA of a [`SwapPage`] array, `args[1]` = its length.
    /// Returns the bytes written or `-errno` (`-ENOSPC`: abort).
    SwapOut = 65,
    /// Append pages to the REAP file: `args[0]` = GPA of an [`IoVec`] array
    /// of page-aligned guest ranges, `args[1]` = its length. The pages stay
    /// mapped in the guest; the VMM drops them at commit and reads them back
    /// before the guest runs again.
    ReapOut = 66,
    /// Write the files' tables and headers: 0 or `-errno` (then abort).
    HibernatePrepare = 67,
    /// The deflate is done (PTEs updated, swapped frames freed and
    /// reclaimed): the VMM drops the REAP pages and is now hibernated.
    /// `args[0]` = pages swapped out, `args[1]` = pages in the REAP file.
    HibernateCommit = 68,
    /// The deflate failed and was rolled back: `args[0]` = the `-errno`.
    HibernateAbort = 69,
    /// Read swapped pages back: same arguments as [`Call::SwapOut`].
    /// Every page is checked against its checksum; a mismatch stops the
    /// sandbox (the call never returns).
    SwapIn = 70,
    /// The guest is about to run the program (or touch its memory) after
    /// a committed hibernation that nothing has woken yet (an exec order,
    /// a signal or a timer seen on the way out of the deflate): the VMM
    /// wakes the sandbox (reads the REAP file back) before it returns 0.
    /// A no-op when the sandbox is awake.
    Wake = 71,
}

impl Call {
    /// Whether returning from this call leaves a hibernated sandbox
    /// hibernated (the guest touches no user memory after it): the calls
    /// that deflate, logging, reclaim and the final calls. Every other
    /// call (a swap fault too, any wait) makes the VMM wake the sandbox
    /// (read the REAP file back) before it returns.
    pub fn keeps_hibernated(self) -> bool {
        matches!(
            self,
            Self::Log
                | Self::Reclaim
                | Self::Populate
                | Self::Exit
                | Self::Panic
                | Self::BootError
                | Self::HibernateBegin
                | Self::SwapOut
                | Self::ReapOut
                | Self::HibernatePrepare
                | Self::HibernateCommit
                | Self::HibernateAbort
        )
    }

    /// Decodes a call number coming from the guest.
    pub fn from_u64(n: u64) -> Option<Self> {
        Some(match n {
            1 => Self::Hello,
            2 => Self::Exit,
            3 => Self::Writev,
            4 => Self::Readv,
            5 => Self::Log,
            6 => Self::Panic,
            7 => Self::Sleep,
            8 => Self::Reclaim,
            9 => Self::Poll,
            10 => Self::BootError,
            11 => Self::SetAlarm,
            12 => Self::StartVcpus,
            13 => Self::VcpuIdle,
            14 => Self::WakeVcpu,
            15 => Self::SliceWatch,
            16 => Self::Open,
            17 => Self::Close,
            18 => Self::Io,
            19 => Self::Path,
            20 => Self::Fd,
            21 => Self::Msg,
            22 => Self::NewFd,
            23 => Self::EpollWait,
            24 => Self::MapFile,
            25 => Self::Exec,
            26 => Self::WindowGone,
            27 => Self::NetIfaces,
            28 => Self::NetFile,
            29 => Self::Populate,
            30 => Self::CopyPages,
            64 => Self::HibernateBegin,
            65 => Self::SwapOut,
            66 => Self::ReapOut,
            67 => Self::HibernatePrepare,
            68 => Self::HibernateCommit,
            69 => Self::HibernateAbort,
            70 => Self::SwapIn,
            71 => Self::Wake,
            _ => return None,
        })
    }
}

/// The host-call record the doorbell points at.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct HostCall {
    /// A [`Call`] number.
    pub call: u64,
    /// Call-specific arguments.
    pub args: [u64; 6],
    /// Written by the VMM: result >= 0, or a negated Linux errno.
    pub ret: i64,
}
const _: () = assert!(core::mem::size_of::<HostCall>() == 64);

/// A guest-physical buffer.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IoVec {
    /// Guest-physical address.
    pub gpa: u64,
    /// Length in bytes.
    pub len: u64,
}
const _: () = assert!(core::mem::size_of::<IoVec>() == 16);

/// Upper bound on the fds of one [`Call::Poll`].
pub const MAX_POLL_FDS: u64 = 65536;
/// One page moved between guest RAM and the swap file.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SwapPage {
    /// Guest-physical address of the page (page aligned).
    pub gpa: u64,
    /// Swap slot (page index in the swap file's data area).
    pub slot: u64,
}
const _: () = assert!(core::mem::size_of::<SwapPage>() == 16);

/// Upper bound on the iovec count of one call; longer lists are refused.
pub const MAX_IOVECS: u64 = 1024;

/// [`Call::Reclaim`] flag: the last batch of this reclaim.
pub const RECLAIM_LAST: u64 = 1 << 0;
/// [`Call::Reclaim`] flag: pages freed while the program runs, handed back
/// by the guest on its own once enough have gathered.
pub const RECLAIM_RUNNING: u64 = 1 << 1;
/// [`Call::Reclaim`] flag, with [`RECLAIM_RUNNING`]: the guest makes a
/// blocking host call next and leaves the pages free until that call
/// returns; the VMM may drop them while that call waits (it does once the
/// wait lasted a while) and forgets them when it returns.
pub const RECLAIM_DEFER: u64 = 1 << 2;

/// Written by the VMM in answer to [`Call::Hello`].
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct HelloReply {
    /// Host `CLOCK_REALTIME` in ns when the call was served.
    pub realtime_ns: u64,
    /// Host `CLOCK_MONOTONIC` in ns when the call was served.
    pub monotonic_ns: u64,
}
const _: () = assert!(core::mem::size_of::<HelloReply>() == 16);

/// One entry of a [`Call::Poll`] request; same meaning as `struct pollfd`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct PollFd {
    /// Host fd of the sandbox.
    pub fd: i32,
    /// Requested events.
    pub events: i16,
    /// Returned events.
    pub revents: i16,
}
const _: () = assert!(core::mem::size_of::<PollFd>() == 8);

/// Boot information the VMM writes at [`crate::layout::BOOT_INFO_GPA`]
/// before the first instruction. Strings and the program image live in the
/// boot-data area it describes; all addresses are guest-physical.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct BootInfo {
    /// [`BOOT_MAGIC`].
    pub magic: u64,
    /// The VMM's [`ABI_VERSION`].
    pub abi_version: u64,
    /// Bytes of guest RAM (starting at GPA 0).
    pub mem_size: u64,
    /// GPA where the boot-data area begins; RAM from here up is in use
    /// until the kernel has consumed it.
    pub boot_data_gpa: u64,
    /// The program's ELF image.
    pub program: IoVec,
    /// NUL-separated argv strings.
    pub argv: IoVec,
    /// Number of argv strings.
    pub argc: u64,
    /// NUL-separated `KEY=VALUE` strings.
    pub envp: IoVec,
    /// Number of env strings.
    pub envc: u64,
    /// The program path as given (for `AT_EXECFN` and `/proc/self/exe`).
    pub execfn: IoVec,
    /// 0 off, 1 error .. 5 trace: the kernel forwards log lines up to this.
    pub log_level: u64,
    /// Seed for the kernel's random generator (with RDRAND when present).
    pub seed: [u64; 4],
    /// uid, euid, gid, egid the program sees.
    pub ids: [u32; 4],
    /// `st_mode` of host fds 0, 1, 2 (0 = closed), and 0 as padding.
    pub stdio_mode: [u32; 4],
    /// Bit n set: host fd n is a terminal.
    pub tty_mask: u64,
    /// The terminal's `struct winsize` (rows, cols, xpixel, ypixel).
    pub winsize: [u16; 4],
    /// The terminal's kernel `struct termios` (36 bytes, zero padded).
    pub termios: [u8; 40],
    /// The program's working directory (an absolute path in the rootfs).
    pub cwd: IoVec,
    /// The hostname `uname` reports.
    pub hostname: IoVec,
    /// The ELF image of the program's interpreter (its `PT_INTERP`, read
    /// inside the rootfs and vetted by the VMM); `len` 0 for a static
    /// program. Added in ABI version 3.
    pub interp: IoVec,
    /// The path of the ELF file run (for `/proc/self/exe`; relative paths
    /// against `cwd`): the program, or for a `#!` script the interpreter
    /// finally run, while `execfn` stays the script. Added in ABI version 4.
    pub exe: IoVec,
    /// The container's seccomp filter (`crate::seccomp` format), `len` 0
    /// for none. Added in ABI version 6.
    pub seccomp: IoVec,
    /// vCPUs the VMM created (1..=[`MAX_VCPUS`]); vCPU k > 0 boots with
    /// RDI = k.
    pub cpus: u64,
    /// [`BOOT_INIT`] and future option bits. Added in ABI version 11.
    pub flags: u64,
    /// The OCI process's credentials and limits, one [`Creds`]; `len` 0
    /// for none (`qrun do`: root has runc's default capabilities, no
    /// supplementary groups, Linux's default limits). Added in ABI
    /// version 15.
    pub creds: IoVec,
    /// The config's `linux.sysctl` the guest shows under `/proc/sys`:
    /// NUL-terminated `sys/a/b=value` strings (the key's dots made
    /// slashes, under `/proc/`). Added in ABI version 15.
    pub sysctl: IoVec,
    /// Mounts the runtime made inside the rootfs (the config's tmpfs and
    /// bind mounts, masked and read-only paths) as `/proc/self/mountinfo`
    /// shows them: NUL-terminated `mountpoint root fstype source options
    /// super-options major:minor` records, fields octal-escaped as in
    /// mountinfo, in mount order. Added in ABI version 19.
    pub mounts: IoVec,
    /// The config's `linux.devices`, which the guest serves under its own
    /// `/dev`: NUL-terminated `path type major minor mode uid gid`
    /// records (`type` one of `c`, `b`, `p`; `mode` the permission bits in
    /// octal). Added in ABI version 19.
    pub devices: IoVec,
    /// A user namespace's mappings as `/proc/PID/uid_map` and `gid_map`
    /// show them: two NUL-terminated texts (uid then gid); `len` 0 for
    /// the initial namespace's identity map. Added in ABI version 19.
    pub id_maps: IoVec,
}

const _: () = assert!(core::mem::size_of::<BootInfo>() == 416);

/// Most supplementary groups [`Creds`] carries.
pub const CREDS_MAX_GROUPS: usize = 64;

/// Resource limits [`Creds`] carries (`RLIMIT_CPU` 0 .. `RLIMIT_RTTIME` 15).
pub const CREDS_RLIMITS: usize = 16;

/// An OCI process's credentials and limits, as its config gives them
/// before the program is executed (the guest applies `execve`'s
/// capability rules to them, as Linux does after runc's exec).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Creds {
    /// Capability sets, bit n = capability n: bounding, effective,
    /// permitted, inheritable, ambient.
    pub caps: [u64; 5],
    /// Bit r set: `rlimits[r]` is (soft, hard) from the config; the
    /// others keep the guest's defaults.
    pub rlimit_mask: u64,
    /// `process.rlimits` by resource number.
    pub rlimits: [[u64; 2]; CREDS_RLIMITS],
    /// Supplementary groups used (at most [`CREDS_MAX_GROUPS`]).
    pub ngroups: u64,
    /// `process.user.additionalGids`.
    pub groups: [u32; CREDS_MAX_GROUPS],
}

const _: () = assert!(core::mem::size_of::<Creds>() == 568);

impl Creds {
    /// No capabilities, limits or groups.
    pub const EMPTY: Creds = Creds {
        caps: [0; 5],
        rlimit_mask: 0,
        rlimits: [[0; 2]; CREDS_RLIMITS],
        ngroups: 0,
        groups: [0; CREDS_MAX_GROUPS],
    };

    /// The bytes the VMM places in guest memory.
    pub fn to_bytes(&self) -> [u8; core::mem::size_of::<Creds>()] {
        let mut out = [0u8; core::mem::size_of::<Creds>()];
        let mut at = 0;
        let mut put = |b: &[u8]| {
            out[at..at + b.len()].copy_from_slice(b);
            at += b.len();
        };
        for c in self.caps {
            put(&c.to_le_bytes());
        }
        put(&self.rlimit_mask.to_le_bytes());
        for [s, h] in self.rlimits {
            put(&s.to_le_bytes());
            put(&h.to_le_bytes());
        }
        put(&self.ngroups.to_le_bytes());
        for g in self.groups {
            put(&g.to_le_bytes());
        }
        out
    }

    /// Parses [`Creds::to_bytes`]' output; `None` if `b` is not one.
    pub fn from_bytes(b: &[u8]) -> Option<Creds> {
        if b.len() != core::mem::size_of::<Creds>() {
            return None;
        }
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"));
        let mut c = Creds::EMPTY;
        for (i, v) in c.caps.iter_mut().enumerate() {
            *v = u64_at(8 * i);
        }
        c.rlimit_mask = u64_at(40);
        for (i, r) in c.rlimits.iter_mut().enumerate() {
            *r = [u64_at(48 + 16 * i), u64_at(56 + 16 * i)];
        }
        c.ngroups = u64_at(304).min(CREDS_MAX_GROUPS as u64);
        for (i, g) in c.groups.iter_mut().enumerate() {
            let o = 312 + 4 * i;
            *g = u32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes"));
        }
        Some(c)
    }
}

/// [`BootInfo::flags`] bit: the program is an OCI container's pid 1 and
/// gets Linux's init semantics for signals (pid_namespaces(7)): a signal
/// whose action is the default is dropped, unless it is SIGKILL from the
/// host; faults still end it.
pub const BOOT_INIT: u64 = 1;

/// [`BootInfo::flags`] bit: the host's stdio is the container's terminal
/// (OCI `process.terminal`; the VMM put it in raw mode): pid 1 gets a
/// guest pty relayed to it as its stdio and controlling terminal.
pub const BOOT_CONSOLE: u64 = 2;
/// [`BootInfo::flags`] bit: the program starts with `no_new_privs` set
/// (`process.noNewPrivileges`). Added in ABI version 15.
pub const BOOT_NO_NEW_PRIVS: u64 = 4;

/// `"QBOOTINF"` as a little-endian u64.
pub const BOOT_MAGIC: u64 = u64::from_le_bytes(*b"QBOOTINF");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creds_round_trip() {
        let mut c = Creds::EMPTY;
        c.caps = [1, 2, 3, 4, 5];
        c.rlimit_mask = 1 << 7;
        c.rlimits[7] = [100, 200];
        c.ngroups = 2;
        c.groups[..2].copy_from_slice(&[10, 20]);
        assert_eq!(Creds::from_bytes(&c.to_bytes()), Some(c));
        assert_eq!(Creds::from_bytes(&[0; 12]), None);
        let mut b = c.to_bytes();
        b[304..312].copy_from_slice(&u64::MAX.to_le_bytes());
        let d = Creds::from_bytes(&b).expect("right size");
        assert_eq!(d.ngroups, CREDS_MAX_GROUPS as u64);
    }
}
