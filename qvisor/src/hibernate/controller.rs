//! The hibernate controller: one state machine per sandbox, shared by the
//! vCPU thread (the guest's hibernation host calls, and every return to
//! the guest), the control-socket thread and the signal thread.
//!
//! ```text
//!            request (ctl / SIGTSTP / SIGUSR2): post HIBERNATE to the guest
//!   Running ------------------------------------------------> Hibernating
//!      ^  ^                                                    |     |
//!      |  +------ HibernateAbort (disk full ...): error kept ---+     |
//!      |                                                             | HibernateCommit
//!      |  WakeDone: REAP file read back, checked                     v
//!      +---------------------------- Waking <------------------ Hibernated
//!                                      |   wake: ctl / SIGCONT / a guest wait
//!                                      |   returning (connection, data)
//!                                      +--> Failed (REAP or swap file corrupt:
//!                                           the sandbox stops)
//! ```
//! Every transition goes through [`Inner::transition`], which logs it and
//! refuses illegal moves. The wake runs under the lock, so whichever thread
//! starts it, no other thread (and no guest code) proceeds until the REAP
//! pages are back.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use qlib::abi::{IoVec, SwapPage, control};

use super::SwapError;
use super::reap::ReapFile;
use super::swap::SwapFile;
use super::warm::{Repopulate, WarmFree};
use crate::boot::KernelText;
use crate::control::ControlChannel;
use crate::ctl::Status;
use crate::guest_mem::GuestRam;

/// Hibernation states (DESIGN.md "Hibernation").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// The guest runs normally.
    Running,
    /// The guest was asked to deflate and is doing so.
    Hibernating,
    /// Deflated: the guest waits in a host call, using no CPU.
    Hibernated,
    /// Coming back: the REAP file is being read.
    Waking,
    /// A swap or REAP file failed its checks: the sandbox must stop.
    Failed,
}

impl State {
    fn name(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Hibernating => "hibernating",
            Self::Hibernated => "hibernated",
            Self::Waking => "waking",
            Self::Failed => "failed",
        }
    }
}

/// What moves the state machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Event {
    Request,
    Commit,
    Abort,
    WakeStart,
    WakeDone,
    Fail,
}

/// Counters for `qrun state`, the control socket and the bench.
#[derive(Debug, Default, Clone)]
struct Stats {
    hibernations: u64,
    swapped_out_bytes: u64,
    read_back_bytes: u64,
    swap_faults: u64,
    hibernate_us: u64,
    wake_us: u64,
    reap_bytes: u64,
    /// Free memory the last wake faulted back in ([`WarmFree`]).
    warm_bytes: u64,
}

struct Inner {
    state: State,
    dir: PathBuf,
    swap: Option<SwapFile>,
    reap: Option<ReapFile>,
    /// The guest kernel's own pages while hibernated ([`park_kernel`]).
    kernel: Option<ReapFile>,
    stats: Stats,
    /// When the hibernation in progress was requested.
    started: Option<Instant>,
    /// Why the last hibernation was aborted.
    aborted: Option<String>,
    /// Why the sandbox failed.
    failure: Option<String>,
    /// The guest started deflating (a request can no longer be cancelled).
    begun: bool,
    /// The vCPU stopped: nothing will move the state any more.
    closed: bool,
    /// The kernel's code pages were dropped ([`Hibernation::before_wait`]).
    text_dropped: bool,
    /// The status at the commit of the hibernation requested last: its
    /// answer, even if the sandbox woke again before the requester ran.
    committed: Option<Status>,
    /// Free memory the hibernation dropped while it was resident.
    warm: WarmFree,
    /// The thread faulting it back in after the last wake.
    repopulate: Option<Repopulate>,
}

/// The controller of one sandbox.
pub struct Hibernation {
    inner: Mutex<Inner>,
    changed: Condvar,
    /// True while the guest must not run before a wake (Hibernated, or
    /// Failed): the fast path of [`Hibernation::on_guest_resume`].
    hold: AtomicBool,
    channel: Arc<ControlChannel>,
    /// The guest kernel's code pages and their bytes in the image.
    kernel_text: KernelText,
}

/// How long a hibernate request lets a running program reach a blocking
/// call before the vCPU is kicked.
const KICK_GRACE: Duration = Duration::from_millis(100);

/// How long a control-socket hibernate request waits for the guest to
/// start deflating (it does when the program next waits in a blocking
/// call); then the request is cancelled.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// How long [`Hibernation::settle`] waits for the vCPU thread to reach its
/// wait, and then for it to be in it.
const SETTLE_WAIT: Duration = Duration::from_millis(100);
const SETTLE_DELAY: Duration = Duration::from_millis(5);

/// How often [`Hibernation::wait_released`] looks at its `stop` test
/// (the wake and the sandbox's end notify it at once).
const RELEASE_POLL: Duration = Duration::from_millis(20);

/// File name, in the state directory, of the parked kernel pages.
const KERNEL_FILE: &str = "kernel.qreap";

/// The guest ranges a wait reads its arguments from and writes its
/// results to while the vCPU thread serves it, `(gpa, len)`: `Poll`'s
/// pollfd array, `EpollWait`'s event array, a blocking read's or write's
/// iovec array and the buffers it names; none for `Sleep`. `None` for a
/// wait whose buffers are not known here (its pages are not parked).
fn wait_buffers(ram: &GuestRam, call: qlib::abi::Call, a: [u64; 6]) -> Option<Vec<(u64, u64)>> {
    use crate::hostcall::EPOLL_EVENT_SIZE;
    use qlib::abi::{Call, PollFd};
    const POLLFD_SIZE: u64 = size_of::<PollFd>() as u64;
    const IOVEC_SIZE: u64 = size_of::<IoVec>() as u64;
    match call {
        Call::Sleep => Some(Vec::new()),
        Call::Poll => Some(vec![(a[0], a[1].saturating_mul(POLLFD_SIZE))]),
        Call::EpollWait => Some(vec![(a[1], a[2].saturating_mul(EPOLL_EVENT_SIZE))]),
        Call::Io | Call::Readv | Call::Writev => {
            // A list the VMM cannot read is refused by the call itself.
            let list = ram.ranges(a[1], a[2]).ok()?;
            let mut v = vec![(a[1], a[2].saturating_mul(IOVEC_SIZE))];
            v.extend(list.iter().map(|r| (r.gpa, r.len)));
            Some(v)
        }
        _ => None,
    }
}

/// Kernel pages (issue 16): what is left of guest RAM once a hibernated
/// guest waits (its kernel heap with the user page tables that hold the
/// swap entries, kernel data and stacks; ~400 KiB for a Python function)
/// goes to a file of the REAP format in the state directory and is
/// dropped; the wake reads it back, checked, before anything else
/// (`wake_locked`). Left in RAM: the low pages other threads write
/// (control, PV and boot pages, below `BOOT_PGD_GPA`) and the pages of
/// the wait's own buffers (`keep`, [`wait_buffers`]), which the vCPU
/// thread reads now and writes when the wait ends, before the wake. A
/// failure to write keeps the pages in RAM (a full disk costs memory,
/// never data).
fn park_kernel(i: &mut Inner, ram: &GuestRam, keep: &[(u64, u64)]) {
    let kept = |gpa: u64| {
        keep.iter().any(|&(start, len)| {
            len != 0
                && gpa >= start & !0xfff
                && gpa < start.saturating_add(len).next_multiple_of(4096)
        })
    };
    let mut ranges: Vec<IoVec> = Vec::new();
    for gpa in ram.resident_pages(qlib::layout::BOOT_PGD_GPA) {
        if kept(gpa) {
            continue;
        }
        match ranges.last_mut() {
            Some(r) if r.gpa + r.len == gpa => r.len += 4096,
            _ => ranges.push(IoVec { gpa, len: 4096 }),
        }
    }
    if ranges.is_empty() {
        return;
    }
    if i.kernel.is_none() {
        match ReapFile::create_named(&i.dir, KERNEL_FILE) {
            Ok(f) => i.kernel = Some(f),
            Err(e) => {
                log::warn!("hibernated: kernel pages kept: {}", super::report(&e));
                return;
            }
        }
    }
    let Some(f) = i.kernel.as_mut() else { return };
    f.reset();
    match f
        .append(ram, &ranges)
        .and_then(|bytes| f.finish().map(|()| bytes))
    {
        Ok(bytes) => {
            f.drop_pages(ram);
            log::debug!("hibernated: {} KiB of kernel pages parked", bytes >> 10);
        }
        Err(e) => log::warn!("hibernated: kernel pages kept: {}", super::report(&e)),
    }
}

/// Gives the VMM's freed heap (file tables, iovec lists) back to the host,
/// so that a hibernated sandbox's PSS is not kept up by malloc's caches.
fn trim_heap() {
    // SAFETY: malloc_trim has no preconditions; it only returns free
    // memory of malloc's arenas to the kernel.
    unsafe { libc::malloc_trim(0) };
    drop_text();
}

/// Unmaps this process's view of the read-only segments (code, constants)
/// of the qrun binary and its shared libraries, ~3 MiB once touched: the
/// pages stay in the page cache, shared with every other process that maps
/// them, and come back by minor faults as the VMM runs again. A single
/// hibernated sandbox would otherwise keep them in its PSS, as no other
/// process shares them. Writable segments (and RELRO, which lies in them)
/// are left alone: dropping them would lose their private contents.
fn drop_text() {
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        _data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: the loader passes a valid `dl_phdr_info` whose program
        // headers stay mapped for the call.
        let (base, phdrs) = unsafe {
            let info = &*info;
            (
                info.dlpi_addr as usize,
                std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)),
            )
        };
        for ph in phdrs {
            if ph.p_type != libc::PT_LOAD || ph.p_flags & libc::PF_W != 0 {
                continue;
            }
            let start = (base + ph.p_vaddr as usize).next_multiple_of(4096);
            let end = (base + (ph.p_vaddr + ph.p_memsz) as usize) & !4095;
            if end > start {
                // SAFETY: a read-only segment of a loaded object, a private
                // file mapping that is never written: dropping its pages
                // only makes the next use of each fault it back in from the
                // page cache (the same bytes).
                unsafe {
                    libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED)
                };
            }
        }
        0
    }
    // SAFETY: `each` only reads what the loader hands it.
    unsafe { libc::dl_iterate_phdr(Some(each), std::ptr::null_mut()) };
}

/// Drops this process's view of the whole pages of `bytes`, part of a
/// read-only segment of the qrun binary (as [`drop_text`] does).
fn drop_file_pages(bytes: &'static [u8]) {
    let start = (bytes.as_ptr() as usize).next_multiple_of(4096);
    let end = (bytes.as_ptr() as usize + bytes.len()) & !4095;
    if end > start {
        // SAFETY: `bytes` lies in a read-only segment of the binary (the
        // kernel image, a `static`), a private file mapping never written:
        // its pages fault back in from the page cache with the same bytes.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) };
    }
}

/// Whether guest RAM at `gpa` holds `bytes`.
fn same_bytes(ram: &GuestRam, gpa: u64, bytes: &[u8]) -> bool {
    let mut buf = [0u8; 4096];
    bytes.chunks(buf.len()).enumerate().all(|(n, want)| {
        let got = &mut buf[..want.len()];
        ram.read_bytes(gpa + (n * 4096) as u64, got).is_ok() && got == want
    })
}

fn errno_text(rc: i64) -> String {
    std::io::Error::from_raw_os_error((-rc) as i32).to_string()
}

impl Inner {
    /// The one place the state changes.
    fn transition(&mut self, event: Event, why: &str) -> Result<(), SwapError> {
        use State::*;
        let next = match (self.state, event) {
            (Running, Event::Request) => Hibernating,
            (Hibernating, Event::Commit) => Hibernated,
            (Hibernating, Event::Abort) => Running,
            (Hibernated, Event::WakeStart) => Waking,
            (Waking, Event::WakeDone) => Running,
            (_, Event::Fail) => Failed,
            (s, e) => return Err(SwapError::State(s.name(), format!("{e:?}"))),
        };
        log::info!(
            "hibernation: {} -> {} ({why})",
            self.state.name(),
            next.name()
        );
        self.state = next;
        Ok(())
    }

    fn swap(&mut self) -> Result<&mut SwapFile, SwapError> {
        if self.swap.is_none() {
            let f = SwapFile::create(&self.dir)?;
            log::info!("swap file created (O_DIRECT: {})", f.direct());
            self.swap = Some(f);
        }
        Ok(self.swap.as_mut().expect("just created"))
    }

    fn reap(&mut self) -> Result<&mut ReapFile, SwapError> {
        if self.reap.is_none() {
            self.reap = Some(ReapFile::create(&self.dir)?);
        }
        Ok(self.reap.as_mut().expect("just created"))
    }
}

impl Hibernation {
    /// A controller whose files go in `dir` (created lazily).
    pub fn new(dir: PathBuf, channel: Arc<ControlChannel>) -> Self {
        // Large buffers (file tables, iovec lists) get their own mappings and
        // go back to the host when freed: a fixed threshold stops glibc
        // from raising it after the first free and keeping them in an arena.
        // SAFETY: mallopt only tunes the allocator; called before any of
        // those buffers exist.
        unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, 128 << 10) };
        Self {
            inner: Mutex::new(Inner {
                state: State::Running,
                dir,
                swap: None,
                reap: None,
                kernel: None,
                stats: Stats::default(),
                started: None,
                aborted: None,
                failure: None,
                begun: false,
                closed: false,
                text_dropped: false,
                committed: None,
                warm: WarmFree::default(),
                repopulate: None,
            }),
            changed: Condvar::new(),
            hold: AtomicBool::new(false),
            channel,
            kernel_text: Vec::new(),
        }
    }

    /// The guest kernel's code pages ([`crate::boot::load_kernel`]),
    /// dropped while the sandbox sleeps hibernated.
    pub fn set_kernel_text(&mut self, text: KernelText) {
        self.kernel_text = text;
    }

    /// Called by the vCPU thread when the guest makes a host call after
    /// which it runs again only through [`Self::on_guest_resume`] (a
    /// blocking wait): if the sandbox is hibernated, the guest kernel's
    /// code pages (~490 KiB, identical to the image, which lies in the qrun
    /// binary's page cache), its constants (~56 KiB, when the wait is one
    /// whose buffers are on the kernel heap), the guest's all-zero pages
    /// and the file window's pages go back to the host. Host-call
    /// arguments never point into code. Pages that differ from the image
    /// are kept.
    /// `quiet`: whether no other vCPU runs guest code (asked only when
    /// something would be dropped; else nothing is).
    pub fn before_wait(
        &self,
        ram: &GuestRam,
        call: Option<qlib::abi::Call>,
        args: [u64; 6],
        quiet: impl FnOnce() -> bool,
    ) {
        if !self.hold.load(Ordering::Acquire) || self.kernel_text.is_empty() {
            return;
        }
        let mut i = self.lock();
        if i.state != State::Hibernated || i.text_dropped {
            return;
        }
        if !quiet() {
            log::warn!("hibernated: a secondary vCPU still runs guest code: guest memory kept");
            return;
        }
        // Clean file pages are not swapped: they come back from the host's
        // page cache when the guest touches them (`crate::file_window`).
        ram.drop_window_pages();
        let unchanged = self
            .kernel_text
            .iter()
            .all(|t| same_bytes(ram, t.gpa, t.bytes));
        if !unchanged {
            log::warn!("guest kernel code differs from its image: kept");
            return;
        }
        i.text_dropped = true;
        self.changed.notify_all();
        // The wait's own buffers may be kernel constants (a path or a
        // message literal passed by address): constants go only for the
        // waits whose buffers are kernel heap (poll sets, epoll events).
        let constants = matches!(
            call,
            Some(qlib::abi::Call::Sleep | qlib::abi::Call::Poll | qlib::abi::Call::EpollWait)
        );
        // Pages mapped from the binary always go: read again, even by
        // this wait, they come back from the page cache as they were.
        for t in self
            .kernel_text
            .iter()
            .filter(|t| t.exec || constants || t.from_file)
        {
            // Page-aligned and inside guest RAM (`load_kernel`).
            let _ = ram.discard(t.gpa, t.bytes.len() as u64);
            // The comparison faulted the image's pages into this process.
            drop_file_pages(t.bytes);
        }
        // All-zero guest pages (zeroed kernel data, bss, stacks) read back
        // as zero once dropped. The guest does not run until the wake, and
        // the low pages the other threads write (control and PV pages)
        // are left out.
        let zero = ram.discard_zero_pages(qlib::layout::BOOT_PGD_GPA);
        log::debug!("hibernated: {zero} zero guest pages dropped; waits in {call:?}");
        if let Some(keep) = call.and_then(|c| wait_buffers(ram, c, args)) {
            park_kernel(&mut i, ram, &keep);
        }
        // The code this thread and the control thread ran since the
        // commit came back in (with the host's fault-around): drop it
        // again now that the guest waits.
        trim_heap();
    }

    /// Called by the control thread once it answered a request: in a
    /// hibernated sandbox, the code and heap it used to answer go back
    /// (see [`trim_heap`]).
    pub fn settle(&self) {
        if !self.hold.load(Ordering::Acquire) {
            return;
        }
        let i = self.lock();
        if i.state != State::Hibernated {
            return;
        }
        // Last after the vCPU thread (which drops the code at the start
        // of its wait, then runs on into it): what stays is only what this
        // thread runs from here to its own wait.
        let (i, _) = self
            .changed
            .wait_timeout_while(i, SETTLE_WAIT, |i| {
                i.state == State::Hibernated && !i.text_dropped
            })
            .unwrap_or_else(|e| e.into_inner());
        drop(i);
        std::thread::sleep(SETTLE_DELAY);
        trim_heap();
    }

    /// Copies the kernel's code pages back if [`Self::before_wait`]
    /// dropped them.
    fn restore_text(&self, i: &mut Inner, ram: &GuestRam) -> Result<(), SwapError> {
        if !i.text_dropped {
            return Ok(());
        }
        // Pages mapped from the binary come back from the page cache by
        // themselves: written, they would become private copies.
        for t in self.kernel_text.iter().filter(|t| !t.from_file) {
            ram.write_bytes(t.gpa, t.bytes)
                .map_err(|_| SwapError::BadPage(t.gpa))?;
        }
        i.text_dropped = false;
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves consistent enough data (the
        // state is written last); keep going rather than cascade.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the guest is held until a wake (hibernated, or failed).
    pub fn holds_guest(&self) -> bool {
        self.hold.load(Ordering::Acquire)
    }

    /// Blocks a secondary vCPU's thread while the guest is held
    /// (hibernated, or failed), until the wake has read every page back
    /// (true), or the sandbox ends or `stop()` says so (false): a
    /// secondary must not enter the guest while [`Self::before_wait`] may
    /// have dropped its memory (`crate::smp::Smp::idle`).
    pub fn wait_released(&self, stop: impl Fn() -> bool) -> bool {
        let mut i = self.lock();
        loop {
            if i.closed || stop() {
                return false;
            }
            if !self.hold.load(Ordering::SeqCst) {
                return true;
            }
            i = self
                .changed
                .wait_timeout(i, RELEASE_POLL)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Whether the sandbox failed (it must stop, not wait on).
    pub fn failed(&self) -> bool {
        self.lock().state == State::Failed
    }

    /// The status for the control socket.
    pub fn status(&self) -> Status {
        Self::status_of(&self.lock())
    }

    fn status_of(i: &Inner) -> Status {
        Status {
            state: i.state.name().into(),
            swapped_out_bytes: i.stats.swapped_out_bytes,
            read_back_bytes: i.stats.read_back_bytes,
            swap_faults: i.stats.swap_faults,
            hibernations: i.stats.hibernations,
            hibernate_us: i.stats.hibernate_us,
            wake_us: i.stats.wake_us,
            reap_bytes: i.stats.reap_bytes,
            warm_free_bytes: i.stats.warm_bytes,
        }
    }

    /// Asks the guest to hibernate. With `wait`, waits until it has
    /// (or aborted, which is an error).
    pub fn request(&self, ram: &GuestRam, why: &str, wait: bool) -> Result<Status, SwapError> {
        let mut i = self.lock();
        i.transition(Event::Request, why)?;
        i.started = Some(Instant::now());
        i.aborted = None;
        i.committed = None;
        i.begun = false;
        // No kick at once: a program that waits in a blocking call soon
        // deflates there, so that what it waits on (a connection) wakes it.
        // One that keeps running is kicked after a grace period and
        // deflates from the kick interrupt, parked until woken.
        self.channel.post_quiet(ram, control::HIBERNATE);
        // The retry thread kicks later: no thread per request (a thread
        // could not be started under a tight pids limit).
        self.channel.kick.request_after(KICK_GRACE);
        if !wait {
            drop(i);
            return Ok(self.status());
        }
        let (mut i, _) = self
            .changed
            .wait_timeout_while(i, REQUEST_TIMEOUT, |i| {
                i.state == State::Hibernating && !i.begun && !i.closed
            })
            .unwrap_or_else(|e| e.into_inner());
        if i.closed {
            return Err(SwapError::Failed("the sandbox stopped".into()));
        }
        if i.state == State::Hibernating && !i.begun {
            // The program never waited: take the request back.
            let _ = ram.atomic_and_u64(qlib::layout::CONTROL_GPA, !control::HIBERNATE);
            i.aborted = Some(SwapError::NoAnswer.to_string());
            let _ = i.transition(Event::Abort, "cancelled: the guest did not wait");
            return Err(SwapError::NoAnswer);
        }
        // Deflating: it ends one way or the other.
        let i = self
            .changed
            .wait_while(i, |i| i.state == State::Hibernating && !i.closed)
            .unwrap_or_else(|e| e.into_inner());
        let result = match (i.state, &i.committed) {
            (State::Hibernated, _) => Ok(Self::status_of(&i)),
            (State::Hibernating, _) => Err(SwapError::Failed("the sandbox stopped".into())),
            // Committed, and woken again (by what its program waits on,
            // or a wake) before this thread ran: the hibernation was
            // done, its answer is the status it reached.
            (_, Some(at_commit)) => {
                log::info!(
                    "hibernation committed, the sandbox is {} again",
                    i.state.name()
                );
                Ok(at_commit.clone())
            }
            (state, None) => Err(SwapError::Aborted(i.aborted.clone().unwrap_or_else(|| {
                format!("neither committed nor aborted (state {})", state.name())
            }))),
        };
        drop(i);
        result
    }

    /// The vCPU stopped: wakes every request waiting for the guest, which
    /// will never answer now.
    pub fn close(&self) {
        let job = {
            let mut i = self.lock();
            i.closed = true;
            i.repopulate.take()
        };
        if let Some(job) = job {
            job.finish();
        }
        self.changed.notify_all();
    }

    /// Wakes a hibernated sandbox (control socket, SIGCONT).
    pub fn wake(&self, ram: &GuestRam, why: &str) -> Result<Status, SwapError> {
        let mut i = self.lock();
        if i.state != State::Hibernated {
            return Err(SwapError::State(i.state.name(), "Wake".into()));
        }
        self.wake_locked(&mut i, ram, why)?;
        drop(i);
        // A guest parked after a hibernation from the kick interrupt waits
        // on nothing but the eventfd (`qkernel::mm::swap::park`).
        self.channel.poke();
        Ok(self.status())
    }

    /// Call before the guest runs again after a host call that may let it
    /// touch its memory (every blocking wait returning: a connection, data,
    /// a timer, a signal). Wakes a hibernated sandbox first: reads the
    /// REAP file back. An error means the sandbox must stop.
    /// `why`: what returned, for the log.
    pub fn on_guest_resume(
        &self,
        ram: &GuestRam,
        why: impl FnOnce() -> String,
    ) -> Result<(), SwapError> {
        if !self.hold.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut i = self.lock();
        match i.state {
            State::Hibernated => {
                let why = format!("the guest's wait returned: {}", why());
                self.wake_locked(&mut i, ram, &why)
            }
            State::Failed => Err(SwapError::Failed(i.failure.clone().unwrap_or_default())),
            _ => Ok(()),
        }
    }

    fn wake_locked(&self, i: &mut Inner, ram: &GuestRam, why: &str) -> Result<(), SwapError> {
        let t0 = Instant::now();
        i.transition(Event::WakeStart, why)?;
        let result = (|| {
            // The kernel's pages first: nothing else of the guest is
            // valid without them.
            if let Some(k) = i.kernel.as_mut() {
                k.read_back(ram)?;
            }
            self.restore_text(i, ram)?;
            if let Some(s) = i.swap.as_mut() {
                s.reload(ram)?;
            }
            match i.reap.as_mut() {
                Some(r) => r.read_back(ram),
                None => Ok(0),
            }
        })();
        let (job, bytes) = i.warm.start(ram);
        i.repopulate = job;
        i.stats.warm_bytes = bytes;
        match result {
            Ok(bytes) => {
                i.stats.read_back_bytes = bytes;
                i.stats.swap_faults = 0;
                i.stats.wake_us = t0.elapsed().as_micros() as u64;
                i.transition(Event::WakeDone, "REAP pages back")?;
                log::info!("woken in {} us, {bytes} bytes read back", i.stats.wake_us);
                self.hold.store(false, Ordering::Release);
                self.changed.notify_all();
                Ok(())
            }
            Err(e) => {
                log::error!("wake failed: {}", super::report(&e));
                i.failure = Some(super::report(&e));
                i.transition(Event::Fail, "wake failed")?;
                // Unblock the guest's wait so the vCPU thread stops it.
                self.channel.poke();
                self.changed.notify_all();
                Err(e)
            }
        }
    }

    /// Marks the sandbox failed (the vCPU loop stops it).
    fn fail(&self, i: &mut Inner, e: &SwapError) {
        i.failure = Some(super::report(e));
        let _ = i.transition(Event::Fail, "swap-in failed");
        self.hold.store(true, Ordering::Release);
        self.changed.notify_all();
    }

    /// `HibernateBegin`.
    /// `interrupted`: the guest serves the request from the kick interrupt,
    /// not from a wait the eventfd cut short, so the eventfd still holds
    /// the request's wake-up: drop it, or the guest's park after the
    /// commit would return (and wake the sandbox) at once.
    pub fn begin(&self, interrupted: bool) -> i64 {
        let mut i = self.lock();
        if i.state != State::Hibernating {
            return -(libc::EINVAL as i64);
        }
        if interrupted {
            crate::control::drain(&self.channel.eventfd);
        }
        i.begun = true;
        // Nothing brought back may outlive this hibernation's drops.
        if let Some(job) = i.repopulate.take() {
            job.finish();
        }
        i.warm.clear();
        match i.reap() {
            Ok(r) => {
                r.reset();
                0
            }
            Err(e) => {
                // The guest takes a refused begin as a stale request and
                // goes on (it has changed nothing, and sends no
                // `HibernateAbort`): the abort happens here, or the
                // requester would wait for it forever.
                let why = super::report(&e);
                log::error!("hibernation: {why}");
                i.aborted = Some(why.clone());
                let _ = i.transition(Event::Abort, &format!("aborted: {why}"));
                self.changed.notify_all();
                -(libc::EIO as i64)
            }
        }
    }

    /// A reclaim drops `[gpa, gpa + len)` of free guest memory: during a
    /// hibernation its resident runs are noted, to be faulted back in at
    /// the wake ([`WarmFree`]).
    pub fn note_free_dropped(&self, ram: &GuestRam, gpa: u64, len: u64) {
        let mut i = self.lock();
        if i.state == State::Hibernating && i.begun {
            i.warm.note(ram, gpa, len);
        }
    }

    /// `SwapOut`.
    pub fn swap_out(&self, ram: &GuestRam, pages: &[SwapPage]) -> i64 {
        let mut i = self.lock();
        if i.state != State::Hibernating {
            return -(libc::EINVAL as i64);
        }
        let r = i.swap().and_then(|s| s.write(ram, pages));
        Self::answer(&mut i, r)
    }

    /// `ReapOut`.
    pub fn reap_out(&self, ram: &GuestRam, ranges: &[IoVec]) -> i64 {
        let mut i = self.lock();
        if i.state != State::Hibernating {
            return -(libc::EINVAL as i64);
        }
        let r = i.reap().and_then(|f| f.append(ram, ranges));
        Self::answer(&mut i, r)
    }

    /// `HibernatePrepare`.
    pub fn prepare(&self) -> i64 {
        let mut i = self.lock();
        if i.state != State::Hibernating {
            return -(libc::EINVAL as i64);
        }
        let mut r = Ok(0);
        if let Some(s) = i.swap.as_mut() {
            r = s.finish().map(|()| 0);
        }
        if r.is_ok()
            && let Some(f) = i.reap.as_mut()
        {
            r = f.finish().map(|()| 0);
        }
        Self::answer(&mut i, r)
    }

    fn answer(i: &mut Inner, r: Result<u64, SwapError>) -> i64 {
        match r {
            Ok(n) => n as i64,
            Err(e) => {
                log::error!("hibernation: {}", super::report(&e));
                i.aborted = Some(super::report(&e));
                -(e.errno() as i64)
            }
        }
    }

    /// `HibernateCommit`: drops the REAP pages; hibernated.
    pub fn commit(&self, ram: &GuestRam, swapped: u64, reap_pages: u64) -> i64 {
        let mut i = self.lock();
        if i.state != State::Hibernating {
            return -(libc::EINVAL as i64);
        }
        if let Some(r) = i.reap.as_mut()
            && r.pages() > 0
        {
            r.drop_pages(ram);
        }
        if let Some(s) = i.swap.as_mut() {
            s.release_table();
        }
        let us = i.started.map_or(0, |t| t.elapsed().as_micros() as u64);
        i.stats.hibernations += 1;
        i.stats.swapped_out_bytes = (swapped + reap_pages) * 4096;
        i.stats.reap_bytes = reap_pages * 4096;
        i.stats.hibernate_us = us;
        i.stats.read_back_bytes = 0;
        i.stats.swap_faults = 0;
        let why = format!("{swapped} pages swapped, {reap_pages} in the REAP file, {us} us");
        if i.transition(Event::Commit, &why).is_err() {
            return -(libc::EINVAL as i64);
        }
        i.committed = Some(Self::status_of(&i));
        self.hold.store(true, Ordering::Release);
        self.changed.notify_all();
        // The kick for a program that would not wait is moot now.
        self.channel.kick.cancel_request_after();
        trim_heap();
        0
    }

    /// `HibernateAbort`: the guest rolled back.
    pub fn abort(&self, rc: i64) -> i64 {
        let mut i = self.lock();
        if i.aborted.is_none() {
            i.aborted = Some(errno_text(rc));
        }
        let why = format!("aborted: {}", i.aborted.clone().unwrap_or_default());
        log::warn!("hibernation {why}");
        let r = i.transition(Event::Abort, &why);
        self.changed.notify_all();
        if r.is_ok() { 0 } else { -(libc::EINVAL as i64) }
    }

    /// `SwapIn`: a swap fault. `Err`: the sandbox must stop.
    /// A fault while hibernated (the guest ran before anything woke it)
    /// wakes the sandbox first: the swap table is only in the file then,
    /// and the REAP pages must be back before the guest sees memory.
    pub fn swap_in(&self, ram: &GuestRam, pages: &[SwapPage]) -> Result<i64, SwapError> {
        let mut i = self.lock();
        if i.state == State::Hibernated {
            log::warn!("swap fault while hibernated: waking first");
            self.wake_locked(&mut i, ram, "a swap fault")?;
        }
        let r = match i.swap.as_mut() {
            Some(s) => s.read(ram, pages),
            None => Err(SwapError::BadSlot(pages.first().map_or(0, |p| p.slot))),
        };
        match r {
            Ok(bytes) => {
                i.stats.swap_faults += 1;
                i.stats.read_back_bytes += bytes;
                Ok(bytes as i64)
            }
            Err(e) => {
                log::error!("swap-in failed: {}", super::report(&e));
                self.fail(&mut i, &e);
                Err(e)
            }
        }
    }
}
