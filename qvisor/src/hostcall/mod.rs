//! Serving host calls (`qlib::abi`). Every guest address is checked by
//! `GuestRam` before use; a bad one gets `-EFAULT`, never a VMM panic.
//! Every host fd a call names is checked against the sandbox's own
//! ([`fds::HostFds`]).

mod deferred;
mod fds;
mod fifo;
mod files;
mod msgctl;
mod net;
mod netfile;
mod netifs;
mod sys;
mod unix;
mod unixpeer;
mod wait;
pub use wait::EPOLL_EVENT_SIZE;

#[cfg(test)]
mod fuzz;

pub use unix::AbstractNames;
pub use wait::monotonic_ns;

use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use qlib::abi::{ABI_VERSION, Call, HelloReply, HostCall, RECLAIM_DEFER, RECLAIM_RUNNING};

use qlib::io_abi::io;

use crate::control::ControlChannel;
use crate::exec::{Execs, Taken};
use crate::guest_mem::{BadRange, GuestRam};
use crate::hibernate::{self, Hibernation, Served};
use crate::rootfs::Rootfs;

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
    root: Rootfs,
    fds: fds::HostFds,
    /// `AF_UNIX` paths bound in the rootfs: host name -> the guest's.
    unix_names: std::collections::HashMap<Vec<u8>, qlib::io_abi::SockAddr>,
    /// How the guest's abstract `AF_UNIX` names reach the host.
    abstract_names: AbstractNames,
    hib: &'a Hibernation,
    log_level: u64,
    control: Arc<ControlChannel>,
    stats: bool,
    /// Number of calls served (for the bench).
    pub count: u64,
    /// Bytes of guest memory dropped by reclaim so far.
    pub reclaimed: u64,
    /// Memory the guest handed back on its own while the program ran.
    pub returned: Returned,
    /// Freed memory handed back before a wait, dropped if the wait lasts.
    deferred: deferred::Deferred,
    /// When the reclaim in progress began.
    reclaim_start: Option<(Instant, u64)>,
    /// Files mapped into the file window.
    window: crate::file_window::FileWindow,
    /// The secondary vCPUs (none: one vCPU).
    smp: Option<&'a crate::smp::Smp>,
    /// Processes started from outside (`qrun exec`), when the sandbox
    /// takes them.
    execs: Option<Arc<Execs>>,
}

/// What the guest handed back on its own while the program ran
/// (`Call::Reclaim` with `RECLAIM_RUNNING`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Returned {
    /// `Reclaim` host calls.
    pub calls: u64,
    /// Bytes of guest RAM dropped (a page freed twice between hand-backs,
    /// or already dropped, counts each time).
    pub bytes: u64,
}

const EFAULT: i64 = -(libc::EFAULT as i64);
const EINVAL: i64 = -(libc::EINVAL as i64);
const ENOSYS: i64 = -(libc::ENOSYS as i64);
/// Longest log or panic message accepted from the guest.
const MAX_MESSAGE: u64 = 4096;

impl<'a> HostCalls<'a> {
    /// Host calls over `ram`, printing guest log lines up to `log_level`.
    pub fn new(
        ram: &'a GuestRam,
        hib: &'a Hibernation,
        log_level: u64,
        root: Rootfs,
        control: Arc<ControlChannel>,
        stats: bool,
    ) -> Self {
        Self {
            ram,
            root,
            fds: fds::HostFds::default(),
            unix_names: std::collections::HashMap::new(),
            abstract_names: AbstractNames::private(),
            hib,
            log_level,
            control,
            stats,
            count: 0,
            reclaimed: 0,
            returned: Returned::default(),
            deferred: deferred::Deferred::default(),
            reclaim_start: None,
            window: crate::file_window::FileWindow::default(),
            smp: None,
            execs: None,
        }
    }

    /// Hands over the secondary vCPUs (`StartVcpus`, `WakeVcpu`).
    pub fn set_smp(&mut self, smp: &'a crate::smp::Smp) {
        self.smp = Some(smp);
    }

    /// Shares the sandbox's exec orders with the control thread.
    pub fn set_execs(&mut self, execs: Arc<Execs>) {
        self.execs = Some(execs);
    }

    /// Hands over the file window the boot mapped the program into.
    pub fn set_file_window(&mut self, window: crate::file_window::FileWindow) {
        self.window = window;
    }

    /// What the guest handed back on its own while the program ran, at
    /// once or deferred to a wait.
    pub fn returned(&self) -> Returned {
        let d = self.deferred.returned();
        Returned {
            calls: self.returned.calls + d.calls,
            bytes: self.returned.bytes + d.bytes,
        }
    }

    /// Sets how abstract `AF_UNIX` names are seen (private by default).
    pub fn set_abstract_names(&mut self, names: AbstractNames) {
        self.abstract_names = names;
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
        if !hibernate::keeps_hibernated(call) {
            // The guest runs again only after `on_guest_resume` below.
            let smp = self.smp;
            self.hib.before_wait(self.ram, call, a, || {
                smp.is_none_or(|s| s.quiet(std::time::Duration::from_millis(100)))
            });
        }
        let ret = match call {
            Some(Call::Hello) => self.hello(a[0], a[1]),
            Some(Call::Exit) => {
                if a[2] != 0 {
                    let reason = self.message(a[1], a[2]).replace('\n', " ");
                    let _ = writeln!(std::io::stderr(), "qrun: {reason}");
                }
                return Outcome::Exit(a[0] as i32);
            }
            Some(Call::Writev) => self.io(a[0], a[1], a[2], u64::MAX, io::WRITE | io::BLOCK),
            Some(Call::Readv) => self.io(a[0], a[1], a[2], u64::MAX, io::BLOCK),
            Some(Call::Log) => self.log(a[0], a[1], a[2]),
            Some(Call::Panic) => return Outcome::Panic(self.message(a[1], a[2])),
            Some(Call::BootError) => return Outcome::BootError(self.message(a[1], a[2])),
            Some(Call::Sleep) => self.wait(&mut [], a[0]),
            Some(Call::SetAlarm) => sys::ret(self.control.set_alarm(a[0])),
            Some(Call::StartVcpus) => self.smp.map_or(0, |s| s.start()),
            Some(Call::WakeVcpu) => self.smp.map_or(0, |s| s.wake(a[0], a[1])),
            // vCPU 0 never idles this way (its idle is the idle poll).
            Some(Call::VcpuIdle) => ENOSYS,
            Some(Call::SliceWatch) => {
                self.control.slicer.watch(self.ram);
                0
            }
            Some(Call::Reclaim) => self.reclaim(a[0], a[1], a[2]),
            Some(Call::Poll) => self.poll(a[0], a[1], a[2]),
            Some(Call::Open) => self.open(a),
            Some(Call::Close) => self.close(a[0], a[1], a[2]),
            Some(Call::Io) => self.io(a[0], a[1], a[2], a[3], a[4]),
            Some(Call::Path) => self.path_op(a),
            Some(Call::Fd) => self.fd_op(a),
            Some(Call::Msg) => self.msg(a[0], a[1], a[2], a[3], a[4], a[5]),
            Some(Call::NewFd) => self.new_fd(a),
            Some(Call::EpollWait) => self.epoll_wait(a[0], a[1], a[2], a[3]),
            Some(Call::MapFile) => self.map_file(a[0], a[1]),
            Some(Call::Exec) => self.exec(a),
            // The wake itself is `on_guest_resume` below.
            Some(Call::Wake) => 0,
            Some(Call::WindowGone) => self.window_gone(a[0], a[1]),
            Some(Call::NetIfaces) => self.net_ifaces(a[0]),
            Some(Call::NetFile) => self.net_file(a[0], a[1], a[2]),
            Some(Call::Populate) => populate(self.ram, a[0], a[1]),
            Some(Call::CopyPages) => self.copy_pages(a[0], a[1]),
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
        // The guest runs on: ranges noted for this call are its own again.
        if !matches!(call, Some(Call::Reclaim | Call::Populate)) {
            self.deferred.forget();
        }
        // A hibernated guest comes back (REAP prefetch) before it runs.
        if !hibernate::keeps_hibernated(call)
            && let Err(e) = self
                .hib
                .on_guest_resume(self.ram, || format!("its {call:?} returned {ret}"))
        {
            return Outcome::Fatal(hibernate::report(&e));
        }
        req.ret = ret;
        if self.ram.write(gpa, req).is_err() {
            log::warn!("host call record at {gpa:#x} is outside guest RAM");
        }
        Outcome::Resume
    }

    /// `Exec` (`qlib::exec_order::op`).
    fn exec(&mut self, a: [u64; 6]) -> i64 {
        use qlib::exec_order::op;
        let Some(execs) = self.execs.clone() else {
            return if a[0] == op::TAKE { 0 } else { EINVAL };
        };
        match a[0] {
            op::TAKE => {
                let bytes = match execs.take() {
                    Taken::None => return 0,
                    Taken::Bytes(b) => b,
                    Taken::Spawn { id, spec, fds } => {
                        let mut stdio = [-1i32; 3];
                        for (slot, fd) in stdio.iter_mut().zip(fds) {
                            let n = self.fds.adopt_foreign(fd);
                            if n < 0 {
                                for fd in stdio.into_iter().filter(|&f| f >= 0) {
                                    self.fds.close(fd as u64);
                                }
                                execs.refuse(id, -n as i32);
                                return n;
                            }
                            *slot = n as i32;
                        }
                        let b = Execs::encode(id, &spec, stdio);
                        if b.len() as u64 > a[2] {
                            for fd in stdio.into_iter().filter(|&f| f >= 0) {
                                self.fds.close(fd as u64);
                            }
                            execs.refuse(id, libc::E2BIG);
                            return -(libc::E2BIG as i64);
                        }
                        b
                    }
                };
                if bytes.len() as u64 > a[2] || self.ram.write_bytes(a[1], &bytes).is_err() {
                    return EFAULT;
                }
                bytes.len() as i64
            }
            op::STARTED => {
                execs.started(a[1], a[2] as i64);
                0
            }
            op::EXITED => {
                execs.exited(a[1], a[2] as i32);
                0
            }
            _ => EINVAL,
        }
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

    fn message(&self, gpa: u64, len: u64) -> String {
        let mut buf = vec![0u8; len.min(MAX_MESSAGE) as usize];
        match self.ram.read_bytes(gpa, &mut buf) {
            Ok(()) => String::from_utf8_lossy(&buf).into_owned(),
            Err(BadRange) => format!("(message at {gpa:#x}+{len} is outside guest RAM)"),
        }
    }

    fn log(&self, level: u64, gpa: u64, len: u64) -> i64 {
        if level == qlib::abi::LOG_STATS {
            if self.stats {
                let text = self.message(gpa, len);
                let _ = writeln!(std::io::stderr(), "qrun: guest: {text}");
            }
            return 0;
        }
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
        if flags & RECLAIM_RUNNING != 0 && flags & RECLAIM_DEFER != 0 {
            let Ok(ranges) = self.ram.ranges(iov, count) else {
                return EFAULT;
            };
            if ranges
                .iter()
                .any(|r| !r.gpa.is_multiple_of(4096) || !r.len.is_multiple_of(4096))
            {
                return EINVAL;
            }
            return self.deferred.note(ranges) as i64;
        }
        if flags & RECLAIM_RUNNING != 0 {
            // The guest's own hand-back while the program runs: counted, not
            // reported one by one.
            let Ok(ranges) = self.ram.ranges(iov, count) else {
                return EFAULT;
            };
            let mut total = 0u64;
            for r in ranges {
                if self.ram.discard(r.gpa, r.len).is_err() {
                    return EINVAL;
                }
                total += r.len;
            }
            self.returned.calls += 1;
            self.returned.bytes += total;
            log::debug!("returned {total} bytes freed by the program");
            return total as i64;
        }
        let (start, before) = *self
            .reclaim_start
            .get_or_insert((Instant::now(), self.reclaimed));
        let Ok(ranges) = self.ram.ranges(iov, count) else {
            return EFAULT;
        };
        let mut total = 0i64;
        for r in ranges {
            // A hibernation's reclaim: what was warm comes back at the wake.
            self.hib.note_free_dropped(self.ram, r.gpa, r.len);
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
}

/// `Call::Populate` (from any vCPU): backs a fresh block of guest RAM
/// with host pages before the guest first touches it (docs/coldstart.md,
/// "Fresh memory backed ahead").
pub(crate) fn populate(ram: &GuestRam, gpa: u64, len: u64) -> i64 {
    if len > qlib::abi::POPULATE_MAX {
        return EINVAL;
    }
    match ram.populate(gpa, len) {
        Ok(()) => 0,
        Err(errno) => -i64::from(errno),
    }
}
