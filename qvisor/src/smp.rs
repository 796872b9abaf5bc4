//! Secondary vCPUs (docs/smp.md). vCPU 0 runs on the sandbox's main
//! thread (`vcpu::run`); vCPUs 1..N each get a host thread of their own,
//! a [`Kick`] and a wake eventfd. They are created and their threads
//! started before the guest runs (a failure is an error at start); they
//! enter the guest only once vCPU 0 asks for them (`Call::StartVcpus`),
//! boot into native mode (`qkernel/src/arch/boot.rs`, `smp_start`) and
//! then wait in the host (`Call::VcpuIdle`: a blocking `poll` on their
//! wake eventfd, no CPU used) until `Call::WakeVcpu` names them.
//!
//! A secondary serves its own few host calls here: `VcpuIdle`,
//! `WakeVcpu`, `Log`, `Panic`, `BootError`; anything else is `ENOSYS`:
//! a secondary runs tasks' user mode only, vCPU 0 does their kernel
//! work (`qkernel/src/task/offload.rs`). A secondary that fails (a guest panic, a
//! triple fault) records the error and wakes vCPU 0, which stops the
//! sandbox with it.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering, fence};
use std::sync::{Condvar, Mutex};

use kvm_ioctls::{VcpuExit, VcpuFd};
use qlib::abi::{Call, HOSTCALL_PORT, HostCall, MAX_VCPUS, WAKE_KICK};

use crate::control::ControlChannel;
use crate::error::VmmError;
use crate::guest_mem::GuestRam;
use crate::hibernate::Hibernation;
use crate::kick::Kick;

const ENOSYS: i64 = -(libc::ENOSYS as i64);
/// How long `StartVcpus` waits for every secondary to boot.
const ONLINE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// What one secondary vCPU shares with the others.
pub struct Secondary {
    /// Readable when the vCPU should leave `VcpuIdle`.
    wake: OwnedFd,
    /// Kicks the vCPU out of `KVM_RUN` (to stop it).
    kick: Kick,
    /// The vCPU runs no guest code: not started yet, or blocked in
    /// `VcpuIdle` ([`Smp::quiet`]).
    idle: AtomicBool,
}

/// The sandbox's secondary vCPUs.
pub struct Smp {
    /// vCPUs 1..N (index k - 1).
    cpus: Vec<Secondary>,
    /// vCPU 0 asked for the secondaries (`StartVcpus`).
    started: Mutex<bool>,
    started_cv: Condvar,
    /// The sandbox is ending: every secondary leaves.
    stop: AtomicBool,
    stop_fd: OwnedFd,
    /// The first error of a secondary; vCPU 0 stops the sandbox with it.
    failure: Mutex<Option<VmmError>>,
    /// Secondaries that made their first host call (booted into native
    /// mode).
    pub online: AtomicUsize,
    /// Robustness testing only ([`IDLE_DELAY_ENV`]): how long a secondary
    /// woken in `VcpuIdle` lingers before it leaves the wait.
    idle_delay: Option<std::time::Duration>,
}

/// Robustness testing only: set to a number of milliseconds, every
/// secondary woken in `VcpuIdle` waits that long before it leaves the
/// wait (still counted idle), as a host thread that is not scheduled at
/// once does: the race between a stale wake and a hibernation
/// (`Smp::idle`) then happens at every hibernation that follows a recall.
pub const IDLE_DELAY_ENV: &str = "QVISOR_IDLE_DELAY_MS";

fn eventfd() -> std::io::Result<OwnedFd> {
    // SAFETY: eventfd has no memory-safety preconditions.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn poke(fd: &OwnedFd) {
    let one = 1u64.to_ne_bytes();
    // SAFETY: writes 8 bytes from a valid buffer to our eventfd.
    unsafe { libc::write(fd.as_raw_fd(), one.as_ptr().cast(), 8) };
}

impl Smp {
    /// State for `cpus` vCPUs in all (vCPU 0 included).
    pub fn new(cpus: usize) -> std::io::Result<Self> {
        let cpus = (1..cpus.clamp(1, MAX_VCPUS))
            .map(|_| {
                Ok(Secondary {
                    wake: eventfd()?,
                    kick: Kick::default(),
                    idle: AtomicBool::new(true),
                })
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(Self {
            cpus,
            started: Mutex::new(false),
            started_cv: Condvar::new(),
            stop: AtomicBool::new(false),
            stop_fd: eventfd()?,
            failure: Mutex::new(None),
            online: AtomicUsize::new(0),
            idle_delay: std::env::var(IDLE_DELAY_ENV)
                .ok()
                .and_then(|v| v.parse().ok())
                .map(std::time::Duration::from_millis),
        })
    }

    /// `Call::StartVcpus`: lets the secondaries enter the guest.
    /// Returns once every secondary has booted (made and finished its
    /// first host call), so the program starts on a complete machine;
    /// `-EIO` when one failed or did not come up within
    /// [`ONLINE_TIMEOUT`] (vCPU 0 then stops the sandbox at boot).
    pub fn start(&self) -> i64 {
        *self.started.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.started_cv.notify_all();
        let deadline = std::time::Instant::now() + ONLINE_TIMEOUT;
        while self.online.load(Ordering::SeqCst) < self.cpus.len() {
            let failed = self
                .failure
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_some();
            if failed || self.stopping() || std::time::Instant::now() >= deadline {
                return -(libc::EIO as i64);
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        self.cpus.len() as i64
    }

    /// `Call::WakeVcpu`: wakes the vCPUs of `mask` (bit k = vCPU k; vCPU
    /// 0, served by the caller, and vCPUs that do not exist are ignored);
    /// with `flags` = `WAKE_KICK` also kicks those that run guest code
    /// (the guest recalls a task from a secondary's user mode).
    pub fn wake(&self, mask: u64, flags: u64) -> i64 {
        for (i, c) in self.cpus.iter().enumerate() {
            if mask & (1 << (i + 1)) != 0 {
                poke(&c.wake);
                if flags & WAKE_KICK != 0 {
                    c.kick.request();
                }
            }
        }
        0
    }

    /// Ends every secondary (the sandbox is ending).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        poke(&self.stop_fd);
        self.started_cv.notify_all();
        for c in &self.cpus {
            c.kick.request();
        }
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Whether a secondary stopped with an error (not taken yet).
    /// Whether every secondary is idle in the host (or not started), so
    /// that no guest code runs but vCPU 0's: waits for it up to
    /// `timeout` (a secondary that handed its task back is on its way to
    /// `VcpuIdle`). A hibernated sandbox drops guest memory only then
    /// (`Hibernation::before_wait`): a secondary still in guest code
    /// would run on dropped kernel pages.
    pub fn quiet(&self, timeout: std::time::Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            // Pairs with `idle`'s: a secondary that leaves its wait after
            // this saw it idle sees the hold the caller set before.
            fence(Ordering::SeqCst);
            if self.cpus.iter().all(|c| c.idle.load(Ordering::SeqCst)) {
                return true;
            }
            if self.stopping() || std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }

    pub fn has_failure(&self) -> bool {
        self.failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// The error a secondary stopped with, if any (vCPU 0 checks after
    /// every exit).
    pub fn take_failure(&self) -> Option<VmmError> {
        self.failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    fn fail(&self, channel: &ControlChannel, ram: &GuestRam, e: VmmError) {
        self.failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(e);
        // Makes vCPU 0 leave a blocking host call or the guest: it then
        // finds the failure.
        channel.post(ram, 0);
    }

    /// Waits until vCPU 0 asks for the secondaries; false if the sandbox
    /// ends first.
    fn wait_start(&self) -> bool {
        let mut started = self.started.lock().unwrap_or_else(|e| e.into_inner());
        while !*started && !self.stopping() {
            started = self
                .started_cv
                .wait(started)
                .unwrap_or_else(|e| e.into_inner());
        }
        !self.stopping()
    }

    /// `Call::VcpuIdle` of vCPU `k`: blocks until its wake eventfd or the
    /// stop eventfd is readable, and the guest is not held by a
    /// hibernation. False when the sandbox ends.
    ///
    /// The hold matters because the wake eventfd can be readable with no
    /// work for the vCPU: vCPU 0 pokes it at every try of a recall and
    /// when it assigns a task it may take back before the secondary runs
    /// (`qkernel::task::offload`), so a secondary may leave this wait
    /// after vCPU 0 committed a hibernation. `quiet` counted it idle
    /// until then, so `Hibernation::before_wait` may already have dropped
    /// the kernel's code and parked its pages: a secondary entering the
    /// guest then ran zeros (a triple fault, "unexpected exit Shutdown")
    /// or wrote pages the wake then overwrote (docs/smp.md, "The
    /// secondary that ran on dropped memory"). So a secondary announces
    /// that it leaves (`idle` false) *before* it looks at the hold (with
    /// `quiet`'s fence, one of the two sees the other), and while the
    /// guest is held it stays idle until the wake has read everything
    /// back.
    fn idle(&self, k: usize, hib: &Hibernation) -> bool {
        let me = &self.cpus[k - 1];
        me.idle.store(true, Ordering::SeqCst);
        if !self.idle_wait(k) {
            return false;
        }
        loop {
            me.idle.store(false, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            if !hib.holds_guest() {
                return true;
            }
            me.idle.store(true, Ordering::SeqCst);
            if !hib.wait_released(|| self.stopping()) {
                // The sandbox ends (or failed while hibernated).
                return false;
            }
        }
    }

    /// [`Smp::idle`]'s wait.
    fn idle_wait(&self, k: usize) -> bool {
        let wake = &self.cpus[k - 1].wake;
        let mut fds = [
            libc::pollfd {
                fd: wake.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: self.stop_fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        while !self.stopping() {
            // SAFETY: two valid pollfds.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
            if n > 0 && fds[0].revents != 0 {
                if let Some(d) = self.idle_delay {
                    std::thread::sleep(d);
                }
                crate::control::drain(wake);
                return true;
            }
        }
        false
    }
}

/// The thread of secondary vCPU `k`: waits for `StartVcpus`, runs the
/// guest, serves its host calls; ends when the sandbox stops.
pub fn run_secondary(
    mut vcpu: VcpuFd,
    k: usize,
    smp: &Smp,
    ram: &GuestRam,
    channel: &ControlChannel,
    hib: &Hibernation,
    log_level: u64,
) {
    if !smp.wait_start() {
        return;
    }
    smp.cpus[k - 1].idle.store(false, Ordering::SeqCst);
    let kick = &smp.cpus[k - 1].kick;
    let exit_flag: *mut u8 = &raw mut vcpu.get_kvm_run().immediate_exit;
    kick.attach(exit_flag);
    let cpu = Cpu {
        k,
        smp,
        ram,
        channel,
        hib,
        log_level,
    };
    if let Err(e) = run_loop(&mut vcpu, &cpu, kick, exit_flag) {
        smp.fail(channel, ram, e);
    }
    kick.detach();
}

/// What a secondary's loop serves its calls with.
struct Cpu<'a> {
    k: usize,
    smp: &'a Smp,
    ram: &'a GuestRam,
    channel: &'a ControlChannel,
    /// Holds the vCPU in `VcpuIdle` while the guest is hibernated.
    hib: &'a Hibernation,
    log_level: u64,
}

fn run_loop(
    vcpu: &mut VcpuFd,
    cpu: &Cpu<'_>,
    kick: &Kick,
    exit_flag: *mut u8,
) -> Result<(), VmmError> {
    let Cpu {
        k,
        smp,
        ram,
        channel,
        hib,
        log_level,
    } = *cpu;
    let err = |m: String| VmmError::Vcpu(format!("vCPU {k}: {m}"));
    let mut first = true;
    while !smp.stopping() {
        if kick.entering() {
            // SAFETY: exit_flag points into this vCPU's kvm_run mapping.
            unsafe { exit_flag.write_volatile(1) };
        }
        let r = vcpu.run();
        kick.left();
        let gpa = match r {
            Ok(VcpuExit::IoOut(HOSTCALL_PORT, data)) if data.len() == 4 => {
                u64::from(u32::from_le_bytes(data.try_into().expect("4 bytes")))
            }
            Ok(other) => {
                let what = format!("{other:?}");
                return Err(err(format!(
                    "unexpected exit {what}: {}",
                    crate::vcpu::describe(vcpu)
                )));
            }
            Err(e) if e.errno() == libc::EINTR || e.errno() == libc::EAGAIN => {
                // Kicked: to stop, or (`WAKE_KICK`) to recall the task
                // it runs. The interrupt goes in only at a user-mode RIP;
                // in guest kernel code the guest reads its recall flag
                // before it returns to user mode, and the recalling vCPU
                // kicks again while it waits (`task::offload`).
                // SAFETY: as above.
                unsafe { exit_flag.write_volatile(0) };
                if kick.take() && !smp.stopping() {
                    crate::kick_inject::try_inject(vcpu)?;
                }
                continue;
            }
            Err(e) => return Err(err(format!("KVM_RUN: {e}"))),
        };
        let Ok(mut req) = ram.read::<HostCall>(gpa) else {
            return Err(err(format!("host call record at {gpa:#x} outside RAM")));
        };
        let a = req.args;
        let message = |gpa: u64, len: u64| {
            let mut buf = vec![0u8; len.min(4096) as usize];
            match ram.read_bytes(gpa, &mut buf) {
                Ok(()) => String::from_utf8_lossy(&buf).into_owned(),
                Err(_) => format!("(message at {gpa:#x}+{len} is outside guest RAM)"),
            }
        };
        if first && Call::from_u64(req.call) == Some(Call::VcpuIdle) {
            // Booted, and about to wait (no log line came first).
            first = false;
            smp.online.fetch_add(1, Ordering::SeqCst);
        }
        let ret = match Call::from_u64(req.call) {
            Some(Call::VcpuIdle) => {
                if !smp.idle(k, hib) {
                    return Ok(());
                }
                0
            }
            Some(Call::WakeVcpu) => {
                if a[0] & 1 != 0 {
                    // A task came back from this vCPU: vCPU 0 serves it.
                    channel.post(ram, 0);
                }
                smp.wake(a[0], a[1])
            }
            Some(Call::Log) => {
                if a[0] != 0 && a[0] <= log_level {
                    let name = ["", "ERROR", "WARN", "INFO", "DEBUG", "TRACE"]
                        .get(a[0] as usize)
                        .unwrap_or(&"TRACE");
                    eprintln!("[qkernel {name}] {}", message(a[1], a[2]));
                }
                0
            }
            // Named, so that a panic is not taken for vCPU 0's.
            Some(Call::Panic) => {
                return Err(VmmError::GuestPanic(format!(
                    "vCPU {k}: {}",
                    message(a[1], a[2])
                )));
            }
            Some(Call::BootError) => return Err(VmmError::Boot(message(a[1], a[2]))),
            Some(Call::Populate) => crate::hostcall::populate(ram, a[0], a[1]),
            _ => ENOSYS,
        };
        if first {
            // Booted: its first host call (its "online" log line) is
            // done.
            first = false;
            smp.online.fetch_add(1, Ordering::SeqCst);
        }
        req.ret = ret;
        ram.write(gpa, req)
            .map_err(|_| err("host call record outside RAM".into()))?;
    }
    Ok(())
}
