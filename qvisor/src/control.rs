//! Control requests from outside the guest: a signal thread turns signals
//! sent to the sandbox process into requests (no logic runs in a signal
//! handler), posts them in the guest's `ControlPage` and wakes any
//! blocking host call through an eventfd, which then returns
//! `RET_RESTART` so the guest serves the request and retries.
//!
//! SIGUSR1: return free guest memory to the host (reclaim).
//! SIGTERM, SIGINT, SIGHUP, SIGQUIT: forwarded to the program.
//! SIGTSTP, SIGUSR2: hibernate; SIGCONT: wake (`crate::hibernate`).
//! The same thread watches the guest's alarm timerfd and posts
//! `control::ALARM` when it goes off.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use qlib::abi::{CONTROL_SIGNALS_OFFSET, control};
use qlib::layout::CONTROL_GPA;

use crate::guest_mem::GuestRam;
use crate::hibernate::Hibernation;
use crate::kick::Kick;
use crate::slice::Slicer;

/// The wake-up side shared by the signal thread and the host calls.
pub struct ControlChannel {
    /// Readable when a request is pending.
    pub eventfd: OwnedFd,
    /// Tells the signal thread to end.
    stop: AtomicBool,
    stop_fd: OwnedFd,
    /// Kicks the vCPU when it runs guest code.
    pub kick: Kick,
    /// The time-slice watcher's wake-up (`crate::slice`).
    pub slicer: Slicer,
    /// The guest's alarm (`Call::SetAlarm`): a `CLOCK_MONOTONIC` timerfd
    /// the signal thread watches.
    alarm: OwnedFd,
}

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

fn alarm_timerfd() -> std::io::Result<OwnedFd> {
    // SAFETY: timerfd_create has no memory-safety preconditions.
    let fd = unsafe {
        libc::timerfd_create(
            libc::CLOCK_MONOTONIC,
            libc::TFD_CLOEXEC | libc::TFD_NONBLOCK,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Empties an eventfd (or a timerfd); returns whether it was signalled.
pub fn drain(fd: &OwnedFd) -> bool {
    let mut buf = [0u8; 8];
    // SAFETY: reads at most 8 bytes into a valid buffer.
    unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), 8) == 8 }
}

impl ControlChannel {
    /// A channel with nothing pending.
    pub fn new() -> std::io::Result<Arc<Self>> {
        Ok(Arc::new(Self {
            eventfd: eventfd()?,
            stop: AtomicBool::new(false),
            stop_fd: eventfd()?,
            kick: Kick::default(),
            slicer: Slicer::new()?,
            alarm: alarm_timerfd()?,
        }))
    }

    /// Arms the alarm for host `CLOCK_MONOTONIC` `deadline_ns` (0 =
    /// disarm). Returns what `timerfd_settime` returns (errno set on -1).
    pub fn set_alarm(&self, deadline_ns: u64) -> i64 {
        // A deadline already past still fires (timerfd: at once); 0 would
        // disarm, so the earliest deadline is 1 ns.
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (deadline_ns / 1_000_000_000).min(i64::MAX as u64) as i64,
                tv_nsec: (deadline_ns % 1_000_000_000) as i64,
            },
        };
        // SAFETY: a valid timerfd and a valid itimerspec; the old value is
        // not wanted.
        i64::from(unsafe {
            libc::timerfd_settime(
                self.alarm.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        })
    }

    /// Posts `bits` to the guest and wakes a blocked host call, or kicks
    /// the vCPU if it runs guest code.
    pub fn post(&self, ram: &GuestRam, bits: u64) {
        if ram.atomic_or_u64(CONTROL_GPA, bits).is_ok() {
            poke(&self.eventfd);
            self.kick.request();
        }
    }

    /// Posts `bits` and wakes a blocked host call, without a kick.
    pub fn post_quiet(&self, ram: &GuestRam, bits: u64) {
        if ram.atomic_or_u64(CONTROL_GPA, bits).is_ok() {
            poke(&self.eventfd);
        }
    }

    /// Wakes a blocked host call without posting a request (it returns
    /// `RET_RESTART` and the guest reissues it).
    pub fn poke(&self) {
        poke(&self.eventfd);
    }

    /// Posts signal `signo` for the guest's program.
    pub fn post_signal(&self, ram: &GuestRam, signo: i32) {
        let bit = 1u64 << ((signo - 1) & 63);
        if ram
            .atomic_or_u64(CONTROL_GPA + CONTROL_SIGNALS_OFFSET, bit)
            .is_ok()
        {
            self.post(ram, control::SIGNAL);
        }
    }

    /// Whether [`ControlChannel::shutdown`] was called.
    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Waits until one of `fds` is readable (or hung up) or the channel
    /// shuts down (`None`); returns which are.
    pub fn wait_any(&self, fds: &[i32]) -> Option<Vec<bool>> {
        let mut all: Vec<libc::pollfd> = fds
            .iter()
            .chain(std::iter::once(&self.stop_fd.as_raw_fd()))
            .map(|&fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        loop {
            // SAFETY: `all` is a valid array of pollfds.
            let n = unsafe { libc::poll(all.as_mut_ptr(), all.len() as libc::nfds_t, -1) };
            if self.stopping() {
                return None;
            }
            if n > 0 {
                return Some(all[..fds.len()].iter().map(|p| p.revents != 0).collect());
            }
        }
    }

    /// Ends the signal thread.
    pub fn shutdown(&self) {
        self.stop.store(true, Ordering::SeqCst);
        poke(&self.stop_fd);
        self.kick.retry_later();
        self.slicer.shutdown();
    }
}

/// Signals sent to the sandbox process that go on to the guest's program
/// (as `kill` would send them to a process container).
const FORWARDED: &[i32] = &[libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT];

/// Signals that drive hibernation: SIGTSTP and SIGUSR2 hibernate, SIGCONT
/// wakes (SIGSTOP itself cannot be caught).
const HIBERNATION: &[i32] = &[libc::SIGTSTP, libc::SIGUSR2, libc::SIGCONT];

/// Blocks the control signals in the calling thread (and the threads it
/// spawns afterwards), so only the signal thread receives them.
pub fn block_signals() -> libc::sigset_t {
    // SAFETY: sigset manipulation on a local set; pthread_sigmask with a
    // valid set pointer.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in [libc::SIGUSR1].iter().chain(FORWARDED).chain(HIBERNATION) {
            libc::sigaddset(&mut set, *sig);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

/// A signalfd for the control signals `set` (blocked by
/// [`block_signals`]).
pub fn signal_fd(set: &libc::sigset_t) -> std::io::Result<OwnedFd> {
    // SAFETY: set is a valid signal set; -1 asks for a new signalfd.
    let sfd = unsafe { libc::signalfd(-1, set, libc::SFD_CLOEXEC) };
    if sfd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: sfd is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(sfd) })
}

/// The signal thread: waits on the signalfd `sfd` (from [`signal_fd`]) for
/// the control signals, on the alarm timerfd and on the stop eventfd.
pub fn signal_loop(channel: &ControlChannel, ram: &GuestRam, hib: &Hibernation, sfd: OwnedFd) {
    while !channel.stop.load(Ordering::SeqCst) {
        let mut fds = [
            libc::pollfd {
                fd: sfd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: channel.stop_fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: channel.alarm.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: fds is a valid array of three pollfds.
        if unsafe { libc::poll(fds.as_mut_ptr(), 3, -1) } <= 0 {
            continue;
        }
        if fds[2].revents & libc::POLLIN != 0 && drain(&channel.alarm) {
            if hib.holds_guest() {
                // Timers do not wake a hibernated sandbox: the guest finds
                // the alarm when something else wakes it.
                let _ = ram.atomic_or_u64(CONTROL_GPA, control::ALARM);
            } else {
                channel.post(ram, control::ALARM);
            }
        }
        if fds[0].revents & libc::POLLIN != 0 {
            // SAFETY: signalfd_siginfo is plain data; all-zero is valid.
            let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
            let size = size_of::<libc::signalfd_siginfo>();
            // SAFETY: reads one siginfo record into a buffer of its size.
            let n = unsafe { libc::read(sfd.as_raw_fd(), (&raw mut info).cast(), size) };
            if n as usize != size {
                continue;
            }
            let signo = info.ssi_signo as i32;
            if signo == libc::SIGUSR1 && hib.holds_guest() {
                // Its memory is already back with the host; a request
                // would only wake it.
                log::info!("SIGUSR1: the sandbox is hibernated: nothing to reclaim");
            } else if signo == libc::SIGUSR1 {
                log::info!("SIGUSR1: asking the guest to reclaim free memory");
                channel.post(ram, control::RECLAIM);
            } else if signo == libc::SIGCONT {
                if let Err(e) = hib.wake(ram, "SIGCONT") {
                    log::warn!("SIGCONT: {e}");
                }
            } else if HIBERNATION.contains(&signo) {
                if let Err(e) = hib.request(ram, &format!("signal {signo}"), false) {
                    log::warn!("signal {signo}: {e}");
                }
            } else if FORWARDED.contains(&signo) {
                log::info!("signal {signo}: forwarded to the program");
                channel.post_signal(ram, signo);
            }
        }
    }
}
