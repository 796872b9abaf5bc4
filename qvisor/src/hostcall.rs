//! Serving host calls (`qlib::abi`). Every guest address is checked by
//! `GuestRam` before use; a bad one gets `-EFAULT`, never a VMM panic.

use std::io::Write;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Instant;

use qlib::abi::{ABI_VERSION, Call, HelloReply, HostCall, PollFd, RET_RESTART};

use crate::control::{ControlChannel, drain};
use crate::guest_mem::{BadRange, GuestRam};
use crate::hibernate::{self, Hibernation, Served};

/// What the vCPU loop does after a host call.
#[derive(Debug)]
pub enum Outcome {
    /// Resume the guest.
    Resume,
    /// The program exited with this status.
    Exit(i32),
    /// The guest kernel panicked.
    Panic(String),
    /// The guest kernel could not boot.
    BootError(String),
    /// The guest's memory cannot be restored (hibernation).
    Fatal(String),
}

/// Host-call state of one sandbox.
pub struct HostCalls<'a> {
    ram: &'a GuestRam,
    hib: &'a Hibernation,
    log_level: u64,
    control: Arc<ControlChannel>,
    stats: bool,
    /// Number of calls served (for the bench).
    pub count: u64,
    /// Bytes of guest memory dropped by reclaim so far.
    pub reclaimed: u64,
    /// When the reclaim in progress began.
    reclaim_start: Option<(Instant, u64)>,
}

const EFAULT: i64 = -(libc::EFAULT as i64);
const EINVAL: i64 = -(libc::EINVAL as i64);
const EBADF: i64 = -(libc::EBADF as i64);
const ENOSYS: i64 = -(libc::ENOSYS as i64);
/// Longest log or panic message accepted from the guest.
const MAX_MESSAGE: u64 = 4096;

impl<'a> HostCalls<'a> {
    /// Host calls over `ram`, printing guest log lines up to `log_level`.
    pub fn new(
        ram: &'a GuestRam,
        hib: &'a Hibernation,
        log_level: u64,
        control: Arc<ControlChannel>,
        stats: bool,
    ) -> Self {
        Self {
            ram,
            hib,
            log_level,
            control,
            stats,
            count: 0,
            reclaimed: 0,
            reclaim_start: None,
        }
    }

    /// Serves the call whose record is at `gpa`.
    pub fn serve(&mut self, gpa: u64) -> Outcome {
        self.count += 1;
        let Ok(mut req) = self.ram.read::<HostCall>(gpa) else {
            log::warn!("host call record at {gpa:#x} is outside guest RAM");
            return Outcome::Resume;
        };
        let a = req.args;
        let call = Call::from_u64(req.call);
        let ret = match call {
            Some(Call::Hello) => self.hello(a[0], a[1]),
            Some(Call::Exit) => return Outcome::Exit(a[0] as i32),
            Some(Call::Writev) => self.stdio(a[0], a[1], a[2], true),
            Some(Call::Readv) => self.stdio(a[0], a[1], a[2], false),
            Some(Call::Log) => self.log(a[0], a[1], a[2]),
            Some(Call::Panic) => return Outcome::Panic(self.message(a[1], a[2])),
            Some(Call::BootError) => return Outcome::BootError(self.message(a[1], a[2])),
            Some(Call::Sleep) => self.wait(&mut [], a[0]),
            Some(Call::Reclaim) => self.reclaim(a[0], a[1], a[2]),
            Some(Call::Poll) => self.poll(a[0], a[1], a[2]),
            Some(
                c @ (Call::HibernateBegin
                | Call::SwapOut
                | Call::ReapOut
                | Call::HibernatePrepare
                | Call::HibernateCommit
                | Call::HibernateAbort
                | Call::SwapIn),
            ) => match hibernate::serve(self.hib, self.ram, c, a) {
                Some(Served::Ret(r)) => r,
                Some(Served::Fatal(e)) => return Outcome::Fatal(hibernate::report(&e)),
                None => ENOSYS,
            },
            None => ENOSYS,
        };
        // A hibernated guest comes back (REAP prefetch) before it runs.
        if !hibernate::keeps_hibernated(call)
            && let Err(e) = self.hib.on_guest_resume(self.ram)
        {
            return Outcome::Fatal(hibernate::report(&e));
        }
        req.ret = ret;
        if self.ram.write(gpa, req).is_err() {
            log::warn!("host call record at {gpa:#x} is outside guest RAM");
        }
        Outcome::Resume
    }

    fn hello(&self, version: u64, reply: u64) -> i64 {
        if version != ABI_VERSION {
            return -(libc::EPROTO as i64);
        }
        let r = HelloReply {
            realtime_ns: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0),
            monotonic_ns: monotonic_ns(),
        };
        match self.ram.write(reply, r) {
            Ok(()) => 0,
            Err(BadRange) => EFAULT,
        }
    }

    fn stdio(&self, fd: u64, iov: u64, count: u64, write: bool) -> i64 {
        let allowed = if write { fd == 1 || fd == 2 } else { fd == 0 };
        if !allowed {
            return EBADF;
        }
        let Ok(iovecs) = self.ram.host_iovecs(iov, count) else {
            return EFAULT;
        };
        if !write {
            // Block in poll, not in read, so that a control request can
            // cut the wait short.
            let mut fds = [libc::pollfd {
                fd: fd as i32,
                events: libc::POLLIN,
                revents: 0,
            }];
            let rc = self.wait(&mut fds, u64::MAX);
            if rc < 0 {
                return rc;
            }
        }
        // SAFETY: every iovec was checked to lie inside guest RAM, which stays
        // mapped for the life of `self.ram`; the guest may race on the bytes,
        // which only affects what is read or written.
        let n = unsafe {
            if write {
                libc::writev(fd as i32, iovecs.as_ptr(), iovecs.len() as i32)
            } else {
                libc::readv(fd as i32, iovecs.as_ptr(), iovecs.len() as i32)
            }
        };
        if n < 0 { -(errno() as i64) } else { n as i64 }
    }

    fn message(&self, gpa: u64, len: u64) -> String {
        let mut buf = vec![0u8; len.min(MAX_MESSAGE) as usize];
        match self.ram.read_bytes(gpa, &mut buf) {
            Ok(()) => String::from_utf8_lossy(&buf).into_owned(),
            Err(BadRange) => format!("(message at {gpa:#x}+{len} is outside guest RAM)"),
        }
    }

    fn log(&self, level: u64, gpa: u64, len: u64) -> i64 {
        if level == 0 || level > self.log_level {
            return 0;
        }
        let text = self.message(gpa, len);
        let name = ["", "ERROR", "WARN", "INFO", "DEBUG", "TRACE"]
            .get(level as usize)
            .unwrap_or(&"TRACE");
        let _ = writeln!(std::io::stderr(), "[qkernel {name}] {text}");
        0
    }

    /// `flags` bit 0: the last batch of this reclaim.
    fn reclaim(&mut self, iov: u64, count: u64, flags: u64) -> i64 {
        let (start, before) = *self
            .reclaim_start
            .get_or_insert((Instant::now(), self.reclaimed));
        let Ok(ranges) = self.ram.ranges(iov, count) else {
            return EFAULT;
        };
        let mut total = 0i64;
        for r in ranges {
            if self.ram.discard(r.gpa, r.len).is_err() {
                return EINVAL;
            }
            total += r.len as i64;
        }
        self.reclaimed += total as u64;
        if flags & 1 != 0 {
            self.reclaim_start = None;
            let bytes = self.reclaimed - before;
            let ms = start.elapsed().as_secs_f64() * 1e3;
            log::info!("reclaimed {bytes} bytes in {ms:.3} ms");
            if self.stats {
                let _ = writeln!(
                    std::io::stderr(),
                    "qrun: reclaimed {bytes} bytes in {ms:.3} ms"
                );
            }
        }
        total
    }

    /// Waits until one of `fds` is ready or the host monotonic clock
    /// reaches `deadline_ns` (`u64::MAX`: no deadline), or a control
    /// request arrives (`RET_RESTART`). Returns the number of ready fds.
    fn wait(&self, fds: &mut [libc::pollfd], deadline_ns: u64) -> i64 {
        let mut all: Vec<libc::pollfd> = fds.to_vec();
        all.push(libc::pollfd {
            fd: self.control.eventfd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        loop {
            let timeout = if deadline_ns == u64::MAX {
                -1
            } else {
                let now = monotonic_ns();
                if now >= deadline_ns {
                    0
                } else {
                    ((deadline_ns - now).div_ceil(1_000_000)).min(i32::MAX as u64) as i32
                }
            };
            // SAFETY: `all` is a valid array of pollfds.
            let n = unsafe { libc::poll(all.as_mut_ptr(), all.len() as libc::nfds_t, timeout) };
            if n < 0 {
                let e = errno();
                if e == libc::EINTR {
                    continue;
                }
                return -(e as i64);
            }
            let (user, ctl) = all.split_at(fds.len());
            if ctl[0].revents != 0 && drain(&self.control.eventfd) {
                return RET_RESTART;
            }
            let ready = user.iter().filter(|p| p.revents != 0).count();
            if ready > 0 || timeout == 0 {
                fds.copy_from_slice(user);
                return ready as i64;
            }
        }
    }

    /// `deadline_ns`: host monotonic deadline, `u64::MAX` = none, 0 = now.
    fn poll(&self, gpa: u64, count: u64, deadline_ns: u64) -> i64 {
        if count > 3 {
            return EINVAL;
        }
        let mut fds = Vec::with_capacity(count as usize);
        for i in 0..count {
            let Ok(p) = self.ram.read::<PollFd>(gpa + i * 8) else {
                return EFAULT;
            };
            if !(0..=2).contains(&p.fd) {
                return EBADF;
            }
            fds.push(libc::pollfd {
                fd: p.fd,
                events: p.events,
                revents: 0,
            });
        }
        let n = self.wait(&mut fds, deadline_ns);
        if n < 0 {
            return n;
        }
        for (i, p) in fds.iter().enumerate() {
            let out = PollFd {
                fd: p.fd,
                events: p.events,
                revents: p.revents,
            };
            if self.ram.write(gpa + i as u64 * 8, out).is_err() {
                return EFAULT;
            }
        }
        n
    }
}

/// Host `CLOCK_MONOTONIC` in ns (the guest's monotonic clock).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec for clock_gettime to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}
