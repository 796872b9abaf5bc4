//! Waiting in the host: `Poll`, `EpollWait`, and blocking I/O. A wait
//! always includes the control eventfd, so a control request (reclaim,
//! signal, hibernate) cuts it short with `RET_RESTART`; the guest serves
//! the request and makes the same call again. A waiting guest costs no CPU.

use std::os::fd::AsRawFd;
use std::time::Duration;

use qlib::abi::{MAX_POLL_FDS, PollFd, RET_RESTART, control};
use qlib::layout::CONTROL_GPA;

use super::HostCalls;
use super::sys::{err, errno, ret};
use crate::control::drain;

const EFAULT: i64 = err(libc::EFAULT);
/// Most events one `EpollWait` returns.
const MAX_EVENTS: u64 = qlib::abi::MAX_POLL_FDS;
/// Size of the packed `struct epoll_event` on x86-64.
pub const EPOLL_EVENT_SIZE: u64 = 12;

impl HostCalls<'_> {
    /// Runs `op`; when `block` and it would block (`-EAGAIN`), waits for
    /// `events` on `fd` and tries again. A blocking read or accept waits
    /// first, so a blocking host fd (stdio) never blocks the vCPU thread
    /// outside a wait that a control request can interrupt.
    pub(super) fn blocking(
        &self,
        fd: i32,
        events: i16,
        block: bool,
        mut op: impl FnMut() -> i64,
    ) -> i64 {
        let mut wait_first = block && events == libc::POLLIN;
        if !block && self.fds.is_foreign(fd) {
            // A blocking fd of `qrun exec`'s caller: not ready = EAGAIN.
            let mut p = [libc::pollfd {
                fd,
                events,
                revents: 0,
            }];
            // SAFETY: one valid pollfd; no wait.
            if unsafe { libc::poll(p.as_mut_ptr(), 1, 0) } == 0 {
                return err(libc::EAGAIN);
            }
        }
        loop {
            if wait_first {
                let mut fds = [libc::pollfd {
                    fd,
                    events,
                    revents: 0,
                }];
                let w = self.wait(&mut fds, u64::MAX);
                if w < 0 {
                    return w;
                }
            }
            let rc = op();
            if rc != err(libc::EAGAIN) || !block {
                return rc;
            }
            wait_first = true;
        }
    }

    /// Drops the all-zero pages of the memory backed ahead for the guest
    /// since the last trim (`GuestRam::trim_backed`; docs/coldstart.md,
    /// "Fresh memory backed ahead"): pages the guest mapped ahead that the
    /// program never wrote. vCPU 0 waits here; only when no secondary runs
    /// guest code either, which could write a page between the check and
    /// the drop (else they are trimmed at a later wait), and only in a
    /// sandbox that is not hibernated: only then can no wake write the
    /// pages back from another thread meanwhile (a wake needs a
    /// hibernated sandbox, and a hibernation needs the guest to run).
    fn trim_backed(&self) {
        if !self.ram.has_backed()
            || self.hib.holds_guest()
            || !self.smp.is_none_or(|s| s.quiet(Duration::ZERO))
        {
            return;
        }
        let pages = self.ram.trim_backed();
        log::debug!("dropped {pages} untouched pages of the memory backed ahead");
    }

    /// Waits until one of `fds` is ready or the host monotonic clock
    /// reaches `deadline_ns` (`u64::MAX`: no deadline), or a control
    /// request arrives (`RET_RESTART`). Returns the number of ready fds.
    ///
    /// The wait has the deadline to the nanosecond (`ppoll`) and returns
    /// when `ppoll` times out at it, with no second look. While it
    /// blocks, no slice runs (`Slicer::pause`): an idle guest's wake-ups
    /// cost the slice watcher nothing.
    pub(super) fn wait(&self, fds: &mut [libc::pollfd], deadline_ns: u64) -> i64 {
        let mut all: Vec<libc::pollfd> = fds.to_vec();
        all.push(libc::pollfd {
            fd: self.control.eventfd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        // Freed memory noted before this wait, and the untouched part of
        // memory backed ahead since the last such wait, go once it lasted
        // a while.
        let mut drop_at = (self.deferred.pending() || self.ram.has_backed())
            .then(|| monotonic_ns() + super::deferred::DEFER_NS);
        let mut paused = None;
        loop {
            let now = monotonic_ns();
            // None: no deadline.
            let timeout = (deadline_ns != u64::MAX).then(|| deadline_ns.saturating_sub(now));
            let mut poll_timeout = timeout;
            if let Some(at) = drop_at {
                if now >= at {
                    self.deferred.drop_now(self.ram);
                    self.trim_backed();
                    drop_at = None;
                } else if timeout.is_none_or(|t| at - now < t) {
                    poll_timeout = Some(at - now);
                }
            }
            if poll_timeout != Some(0) && paused.is_none() {
                paused = Some(Paused::new(&self.control.slicer));
            }
            let ts = poll_timeout.map(|ns| libc::timespec {
                tv_sec: (ns / 1_000_000_000).min(i32::MAX as u64) as libc::time_t,
                tv_nsec: (ns % 1_000_000_000) as libc::c_long,
            });
            let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |t| t as *const _);
            // SAFETY: `all` is a valid array of pollfds, `ts_ptr` null or
            // a valid timespec; no signal mask.
            let n = unsafe {
                libc::ppoll(
                    all.as_mut_ptr(),
                    all.len() as libc::nfds_t,
                    ts_ptr,
                    std::ptr::null(),
                )
            };
            if n < 0 {
                let e = errno();
                if e == libc::EINTR {
                    continue;
                }
                return err(e);
            }
            let (user, ctl) = all.split_at(fds.len());
            if ctl[0].revents != 0 && drain(&self.control.eventfd) && !self.stale_poke() {
                return RET_RESTART;
            }
            let ready = user.iter().filter(|p| p.revents != 0).count();
            // `ppoll` timed out at the deadline itself: it has passed.
            if ready > 0 || timeout == Some(0) || (n == 0 && poll_timeout == timeout) {
                fds.copy_from_slice(user);
                return ready as i64;
            }
        }
    }

    /// Whether a control-eventfd wake-up found by a wait of a hibernated
    /// guest is stale: posted before the commit (an alarm that ran out, a
    /// signal's request already served) with nothing the guest must serve
    /// now. Returning for it would wake the sandbox (`on_guest_resume`)
    /// with nothing to do: the wait goes on. A wake clears the hold before
    /// it pokes, and a posted signal, exec order, reclaim or shrunk file
    /// sets its bit, so those still end the wait. A quiet alarm or
    /// preemption bit waits for the wake (issue 13).
    fn stale_poke(&self) -> bool {
        if !self.hib.holds_guest() || self.hib.failed() || self.smp.is_some_and(|s| s.has_failure())
        {
            return false;
        }
        let quiet = control::ALARM | control::PREEMPT;
        match self.ram.atomic_load_u64(CONTROL_GPA) {
            Ok(word) if word & !quiet == 0 => {
                log::debug!("hibernated: stale control wake-up ignored (word {word:#x})");
                true
            }
            _ => false,
        }
    }

    /// `Poll`: `deadline_ns` is a host monotonic deadline, `u64::MAX` =
    /// none, 0 = now.
    pub(super) fn poll(&self, gpa: u64, count: u64, deadline_ns: u64) -> i64 {
        if count > MAX_POLL_FDS {
            return err(libc::EINVAL);
        }
        let mut fds = Vec::with_capacity(count as usize);
        for i in 0..count {
            let Ok(p) = self.ram.read::<PollFd>(gpa + i * 8) else {
                return EFAULT;
            };
            if let Err(e) = self.fds.check(p.fd as u64) {
                return e;
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

    /// `EpollWait`: waits for the epoll fd to be readable, then collects
    /// its events into the guest's array.
    pub(super) fn epoll_wait(&self, epfd: u64, gpa: u64, max: u64, deadline_ns: u64) -> i64 {
        let epfd = match self.fds.check(epfd) {
            Ok(fd) => fd,
            Err(e) => return e,
        };
        if max == 0 || max > MAX_EVENTS {
            return err(libc::EINVAL);
        }
        if self.ram.check_range(gpa, max * EPOLL_EVENT_SIZE).is_err() {
            return EFAULT;
        }
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; max as usize];
        loop {
            // SAFETY: valid epoll fd and an array of `max` events.
            let n = unsafe { libc::epoll_wait(epfd, events.as_mut_ptr(), max as i32, 0) };
            if n != 0 {
                if n < 0 {
                    return ret(n as i64);
                }
                for (i, e) in events[..n as usize].iter().enumerate() {
                    let at = gpa + i as u64 * EPOLL_EVENT_SIZE;
                    let (ev, data) = (e.events, e.u64);
                    if self.ram.write(at, ev).is_err() || self.ram.write(at + 4, data).is_err() {
                        return EFAULT;
                    }
                }
                return i64::from(n);
            }
            let mut fds = [libc::pollfd {
                fd: epfd,
                events: libc::POLLIN,
                revents: 0,
            }];
            let w = self.wait(&mut fds, deadline_ns);
            if w <= 0 {
                return w; // timeout (0), error or RET_RESTART
            }
        }
    }
}

/// vCPU 0 blocks in a host wait: no time slice runs meanwhile.
struct Paused<'a>(&'a crate::slice::Slicer);

impl<'a> Paused<'a> {
    fn new(slicer: &'a crate::slice::Slicer) -> Self {
        slicer.pause();
        Self(slicer)
    }
}

impl Drop for Paused<'_> {
    fn drop(&mut self) {
        self.0.resume();
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
