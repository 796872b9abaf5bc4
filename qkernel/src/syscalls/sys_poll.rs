//! Readiness and event fds: poll/ppoll, select/pselect6, epoll, eventfd,
//! timerfd, and pipes. Waiting happens in the VMM (host poll/epoll on the
//! sandbox's host fds), so a blocked program costs no CPU. Guest pipes
//! (`fs::pipe`) are checked in the guest first; a wait that involves one
//! always parks (on the host fds, the pipes' wait queues and the
//! deadline), since only another task can make a pipe ready.

use alloc::vec::Vec;

use qlib::abi::{Call, PollFd};
use qlib::io_abi::{fd as fdop, new};

use crate::errno::{Errno, SysResult, host_result};
use crate::fs::{Backing, File, HostKind, O_CLOEXEC, O_NONBLOCK, O_RDONLY, O_RDWR, O_WRONLY, host};
use crate::hostcall;
use crate::mm::uaccess;
use crate::process::Process;
use crate::task::park;

const POLLIN: i16 = 0x1;
const POLLPRI: i16 = 0x2;
const POLLOUT: i16 = 0x4;
const POLLERR: i16 = 0x8;
const POLLHUP: i16 = 0x10;
const POLLNVAL: i16 = 0x20;
const POLLRDNORM: i16 = 0x40;
const POLLWRNORM: i16 = 0x100;

/// A host monotonic deadline `ns` from now (`None`: no deadline); when
/// the syscall runs again after its task parked, the first run's.
fn deadline_in(ns: Option<u64>) -> u64 {
    match ns {
        Some(0) => 0,
        ns => park::deadline(ns),
    }
}

/// The handler's result while its task parks (dropped: the handler runs
/// again once the task wakes).
const PARKED: Errno = Errno::EAGAIN;

/// One poll entry: (fd, events, revents).
type Entry = (i32, i16, i16);

/// Polls `entries` until one is ready or `deadline` (host monotonic ns).
fn poll_entries(p: &Process, entries: &mut [Entry], mut deadline: u64) -> SysResult {
    let mut host_fds: Vec<PollFd> = Vec::new();
    let mut which: Vec<usize> = Vec::new();
    let mut queues: Vec<u64> = Vec::new();
    let mut ready = 0;
    for (i, e) in entries.iter_mut().enumerate() {
        e.2 = 0;
        if e.0 < 0 {
            continue;
        }
        let file = p.files.get(e.0 as u64);
        match file.map(|f| (f.host_fd(), f.guest_poll())) {
            Err(_) => e.2 = POLLNVAL,
            Ok((None, Some((revents, queue, _)))) => {
                e.2 = revents & (e.1 | POLLERR | POLLHUP);
                queues.push(queue);
            }
            Ok((None, None)) => e.2 = e.1 & (POLLIN | POLLOUT | POLLRDNORM | POLLWRNORM),
            Ok((Some(fd), _)) => {
                host_fds.push(PollFd {
                    fd,
                    events: e.1,
                    revents: 0,
                });
                which.push(i);
            }
        }
        if e.2 != 0 {
            ready += 1;
        }
    }
    if ready > 0 || park::expired(deadline) {
        deadline = 0;
    }
    // With other tasks around, a wait parks this one (the vCPU polls for
    // every parked task at once when nothing can run); so does a wait on
    // a guest pipe.
    let park = deadline != 0 && (!queues.is_empty() || park::worthwhile());
    if host_fds.is_empty() {
        if park {
            park::wait_on_queues(&[], &queues, deadline, 0)?;
            return Err(PARKED);
        }
        if deadline != 0 && !hostcall::sleep_until(deadline) {
            return Err(Errno::ERESTARTNOHAND);
        }
        return Ok(ready);
    }
    let gpa = crate::mm::kva_to_gpa(host_fds.as_ptr() as u64);
    let host_deadline = if park {
        0
    } else {
        hostcall::host_deadline(deadline)
    };
    host_result(hostcall::call(
        Call::Poll,
        [gpa, host_fds.len() as u64, host_deadline, 0, 0, 0],
    ))?;
    for (k, &i) in which.iter().enumerate() {
        // SAFETY: the VMM wrote `revents` in place.
        let h = unsafe { core::ptr::read_volatile(&host_fds[k]) };
        entries[i].2 = h.revents;
        if h.revents != 0 {
            ready += 1;
        }
    }
    if park && ready == 0 {
        let fds: Vec<(i32, i16)> = host_fds.iter().map(|f| (f.fd, f.events)).collect();
        park::wait_on_queues(&fds, &queues, deadline, 0)?;
        return Err(PARKED);
    }
    Ok(ready)
}

fn read_pollfds(p: &mut Process, va: u64, n: u64) -> Result<Vec<Entry>, Errno> {
    // Linux takes up to RLIMIT_NOFILE entries; one host call takes at
    // most MAX_POLL_FDS.
    if n > super::nofile() as u64 || n > qlib::abi::MAX_POLL_FDS {
        return Err(Errno::EINVAL);
    }
    (0..n)
        .map(|i| {
            let fd: i32 = uaccess::read(&mut p.mm, va + i * 8)?;
            let ev: u32 = uaccess::read(&mut p.mm, va + i * 8 + 4)?;
            Ok((fd, ev as i16, 0))
        })
        .collect()
}

fn write_revents(p: &mut Process, va: u64, entries: &[Entry]) -> Result<(), Errno> {
    for (i, e) in entries.iter().enumerate() {
        uaccess::copy_out(
            &mut p.mm,
            va + i as u64 * 8 + 6,
            &(e.2 as u16).to_le_bytes(),
        )?;
    }
    Ok(())
}

/// `poll(fds, nfds, timeout_ms)`.
pub fn poll(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let mut entries = read_pollfds(p, a[0], a[1])?;
    let t = a[2] as i32;
    let deadline = deadline_in((t >= 0).then_some(t as u64 * 1_000_000));
    let n = poll_entries(p, &mut entries, deadline)?;
    write_revents(p, a[0], &entries)?;
    Ok(n)
}

/// A `timespec` at `va` in ns (`None` for a null pointer; `EINVAL` out of
/// range).
pub(super) fn read_timespec(p: &mut Process, va: u64) -> Result<Option<u64>, Errno> {
    if va == 0 {
        return Ok(None);
    }
    let s: u64 = uaccess::read(&mut p.mm, va)?;
    let ns: u64 = uaccess::read(&mut p.mm, va + 8)?;
    if (s as i64) < 0 || ns >= 1_000_000_000 {
        return Err(Errno::EINVAL);
    }
    Ok(Some(s.saturating_mul(1_000_000_000).saturating_add(ns)))
}

/// `ppoll(fds, nfds, timeout, sigmask, size)`.
pub fn ppoll(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let mut entries = read_pollfds(p, a[0], a[1])?;
    let deadline = deadline_in(read_timespec(p, a[2])?);
    super::sys_kill::wait_mask(p, a[3], a[4])?;
    let n = poll_entries(p, &mut entries, deadline)?;
    write_revents(p, a[0], &entries)?;
    Ok(n)
}

/// select over fd sets; `timeout_ns` None = forever.
fn select_core(p: &mut Process, nfds: u64, sets: [u64; 3], timeout_ns: Option<u64>) -> SysResult {
    if nfds > 1024 {
        return Err(Errno::EINVAL);
    }
    let words = nfds.div_ceil(64) as usize;
    let mut bits = [[0u64; 16]; 3];
    for (k, &va) in sets.iter().enumerate() {
        if va != 0 {
            for (w, word) in bits[k].iter_mut().enumerate().take(words) {
                *word = uaccess::read(&mut p.mm, va + w as u64 * 8)?;
            }
        }
    }
    let mut entries: Vec<Entry> = Vec::new();
    for fd in 0..nfds as usize {
        let has = |k: usize| bits[k][fd / 64] & (1 << (fd % 64)) != 0;
        let ev = if has(0) { POLLIN } else { 0 }
            | if has(1) { POLLOUT } else { 0 }
            | if has(2) { POLLPRI } else { 0 };
        if ev != 0 {
            entries.push((fd as i32, ev, 0));
        }
    }
    poll_entries(p, &mut entries, deadline_in(timeout_ns))?;
    let mut out = [[0u64; 16]; 3];
    let mut count = 0;
    for &(fd, ev, rev) in &entries {
        if rev & POLLNVAL != 0 {
            return Err(Errno::EBADF);
        }
        let (w, b) = (fd as usize / 64, 1u64 << (fd % 64));
        let hits = [
            ev & POLLIN != 0 && rev & (POLLIN | POLLHUP | POLLERR) != 0,
            ev & POLLOUT != 0 && rev & (POLLOUT | POLLERR) != 0,
            ev & POLLPRI != 0 && rev & POLLPRI != 0,
        ];
        for (k, hit) in hits.iter().enumerate() {
            if *hit {
                out[k][w] |= b;
                count += 1;
            }
        }
    }
    for (k, &va) in sets.iter().enumerate() {
        if va != 0 {
            for (w, word) in out[k].iter().enumerate().take(words) {
                uaccess::write(&mut p.mm, va + w as u64 * 8, word)?;
            }
        }
    }
    Ok(count)
}

/// `select(nfds, readfds, writefds, exceptfds, timeval)`.
pub fn select(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let timeout = if a[4] == 0 {
        None
    } else {
        let s: u64 = uaccess::read(&mut p.mm, a[4])?;
        let us: u64 = uaccess::read(&mut p.mm, a[4] + 8)?;
        if (s as i64) < 0 || us >= 1_000_000 {
            return Err(Errno::EINVAL);
        }
        Some(s.saturating_mul(1_000_000_000).saturating_add(us * 1000))
    };
    select_core(p, a[0], [a[1], a[2], a[3]], timeout)
}

/// `pselect6(nfds, readfds, writefds, exceptfds, timespec, sigmask)`.
pub fn pselect6(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let timeout = read_timespec(p, a[4])?;
    if a[5] != 0 {
        // struct { const sigset_t *ss; size_t ss_len; }
        let ss: u64 = uaccess::read(&mut p.mm, a[5])?;
        let len: u64 = uaccess::read(&mut p.mm, a[5] + 8)?;
        super::sys_kill::wait_mask(p, ss, len)?;
    }
    select_core(p, a[0], [a[1], a[2], a[3]], timeout)
}

fn install(
    p: &mut Process,
    fd: i32,
    kind: HostKind,
    status: u32,
    cloexec: bool,
    name: &str,
) -> SysResult {
    let backing = Backing::Host { fd, kind };
    let file = File::new(backing, status, alloc::format!("anon_inode:[{name}]"));
    p.files.insert(file, cloexec)
}

/// `epoll_create1(flags)`.
pub fn epoll_create1(p: &mut Process, a: &[u64; 6]) -> SysResult {
    if a[0] as u32 & !O_CLOEXEC != 0 {
        return Err(Errno::EINVAL);
    }
    let fd = host::new_fd(new::EPOLL, 0, 0, 0)?;
    install(
        p,
        fd,
        HostKind::Epoll,
        O_RDWR,
        a[0] as u32 & O_CLOEXEC != 0,
        "eventpoll",
    )
}

/// `epoll_create(size)`.
pub fn epoll_create(p: &mut Process, a: &[u64; 6]) -> SysResult {
    if (a[0] as i32) <= 0 {
        return Err(Errno::EINVAL);
    }
    epoll_create1(p, &[0; 6])
}

fn epoll_fd(p: &Process, fd: u64) -> Result<i32, Errno> {
    match p.files.get(fd)?.backing {
        Backing::Host {
            fd,
            kind: HostKind::Epoll,
        } => Ok(fd),
        _ => Err(Errno::EINVAL),
    }
}

/// `epoll_ctl(epfd, op, fd, event)`.
pub fn epoll_ctl(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let ep = epoll_fd(p, a[0])?;
    if a[0] == a[2] {
        return Err(Errno::EINVAL);
    }
    let file = p.files.get(a[2])?;
    let (events, data) = if a[1] == 2 {
        (0u32, 0u64) // EPOLL_CTL_DEL ignores the event
    } else {
        let mut raw = [0u8; 12];
        uaccess::copy_in(&mut p.mm, a[3], &mut raw)?;
        let ev = u32::from_le_bytes(raw[0..4].try_into().expect("4 bytes"));
        let data = u64::from_le_bytes(raw[4..12].try_into().expect("8 bytes"));
        (ev, data)
    };
    if file.guest_poll().is_some() {
        return super::epoll_guest::ctl(ep, a[1], a[2] as i32, &file, events, data);
    }
    let target = file.host_fd().ok_or(Errno::EPERM)?;
    host::fd_op(
        fdop::EPOLL_CTL,
        ep,
        a[1],
        target as u64,
        u64::from(events),
        data,
    )
}

fn epoll_wait_core(p: &mut Process, a: &[u64; 6], timeout_ns: Option<u64>) -> SysResult {
    let ep = epoll_fd(p, a[0])?;
    let max = a[2] as i32;
    if max <= 0 {
        return Err(Errno::EINVAL);
    }
    // As Linux's access_ok: the whole array must be user addresses.
    let end = a[1].checked_add(max as u64 * 12).ok_or(Errno::EFAULT)?;
    if end > qlib::layout::USER_END {
        return Err(Errno::EFAULT);
    }
    // Linux returns as many as are ready, up to `max`.
    let max = (max as usize).min(qlib::abi::MAX_POLL_FDS as usize);
    let mut deadline = deadline_in(timeout_ns);
    // Guest files in the set first; the host's fill the rest.
    let (guest, queues) = super::epoll_guest::ready(ep, max);
    if park::expired(deadline) || !guest.is_empty() {
        deadline = 0;
    }
    let mut buf = alloc::vec![0u8; max * 12];
    for (i, (ev, data)) in guest.iter().enumerate() {
        buf[i * 12..i * 12 + 4].copy_from_slice(&ev.to_le_bytes());
        buf[i * 12 + 4..i * 12 + 12].copy_from_slice(&data.to_le_bytes());
    }
    let park = deadline != 0 && (!queues.is_empty() || park::worthwhile());
    // Woken by its timeout just after the idle `Poll` found the epoll fd
    // not ready: a timeout, without another host call.
    let quiet = guest.is_empty() && park::timed_out_quietly();
    let n = guest.len()
        + if guest.len() < max && !quiet {
            let rest = &mut buf[guest.len() * 12..];
            match host::epoll_wait(ep, rest, if park { 0 } else { deadline }) {
                Ok(n) => n,
                // The guest events are reported (and consumed) anyway.
                Err(_) if !guest.is_empty() => 0,
                Err(e) => return Err(e),
            }
        } else {
            0
        };
    if park && n == 0 {
        park::wait_on_queues(&[(ep, POLLIN)], &queues, deadline, 0)?;
        return Err(PARKED);
    }
    uaccess::copy_out(&mut p.mm, a[1], &buf[..n * 12])?;
    Ok(n)
}

fn ms(t: u64) -> Option<u64> {
    let t = t as i32;
    (t >= 0).then_some(t as u64 * 1_000_000)
}

/// `epoll_wait(epfd, events, maxevents, timeout_ms)`.
pub fn epoll_wait(p: &mut Process, a: &[u64; 6]) -> SysResult {
    epoll_wait_core(p, a, ms(a[3]))
}

/// `epoll_pwait(epfd, events, maxevents, timeout_ms, sigmask, size)`; the
/// mask is not applied.
pub fn epoll_pwait(p: &mut Process, a: &[u64; 6]) -> SysResult {
    super::sys_kill::wait_mask(p, a[4], a[5])?;
    epoll_wait_core(p, a, ms(a[3]))
}

/// `eventfd2(initval, flags)`.
pub fn eventfd2(p: &mut Process, a: &[u64; 6]) -> SysResult {
    const EFD_SEMAPHORE: u64 = 1;
    if a[1] & !(EFD_SEMAPHORE | u64::from(O_NONBLOCK | O_CLOEXEC)) != 0 {
        return Err(Errno::EINVAL);
    }
    let fd = host::new_fd(new::EVENTFD, a[0] & 0xffff_ffff, a[1] & EFD_SEMAPHORE, 0)?;
    let status = O_RDWR | (a[1] as u32 & O_NONBLOCK);
    install(
        p,
        fd,
        HostKind::EventFd,
        status,
        a[1] as u32 & O_CLOEXEC != 0,
        "eventfd",
    )
}

/// `eventfd(initval)`.
pub fn eventfd(p: &mut Process, a: &[u64; 6]) -> SysResult {
    eventfd2(p, &[a[0], 0, 0, 0, 0, 0])
}

/// `timerfd_create(clockid, flags)`.
pub fn timerfd_create(p: &mut Process, a: &[u64; 6]) -> SysResult {
    if a[1] as u32 & !(O_NONBLOCK | O_CLOEXEC) != 0 {
        return Err(Errno::EINVAL);
    }
    let fd = host::new_fd(new::TIMERFD, a[0], 0, 0)?;
    let status = O_RDWR | (a[1] as u32 & O_NONBLOCK);
    install(
        p,
        fd,
        HostKind::TimerFd,
        status,
        a[1] as u32 & O_CLOEXEC != 0,
        "timerfd",
    )
}

fn timer_fd(p: &Process, fd: u64) -> Result<i32, Errno> {
    match p.files.get(fd)?.backing {
        Backing::Host {
            fd,
            kind: HostKind::TimerFd,
        } => Ok(fd),
        _ => Err(Errno::EINVAL),
    }
}

/// `timerfd_settime(fd, flags, new, old)`.
pub fn timerfd_settime(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let fd = timer_fd(p, a[0])?;
    let mut spec = [0u8; 32];
    uaccess::copy_in(&mut p.mm, a[2], &mut spec)?;
    let old = [0u8; 32];
    let old_gpa = crate::mm::kva_to_gpa(old.as_ptr() as u64);
    let (gpa, _) = hostcall::buf(&spec);
    host::fd_op(fdop::TIMERFD_SET, fd, a[1], gpa, old_gpa, 0)?;
    if a[3] != 0 {
        // SAFETY: the VMM wrote the old value in place.
        let old = unsafe { core::ptr::read_volatile(&old) };
        uaccess::copy_out(&mut p.mm, a[3], &old)?;
    }
    Ok(0)
}

/// `timerfd_gettime(fd, cur)`.
pub fn timerfd_gettime(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let fd = timer_fd(p, a[0])?;
    let cur = [0u8; 32];
    let gpa = crate::mm::kva_to_gpa(cur.as_ptr() as u64);
    host::fd_op(fdop::TIMERFD_GET, fd, gpa, 0, 0, 0)?;
    // SAFETY: the VMM wrote the value in place.
    let cur = unsafe { core::ptr::read_volatile(&cur) };
    uaccess::copy_out(&mut p.mm, a[1], &cur)?;
    Ok(0)
}

/// `pipe2(fds, flags)`.
pub fn pipe2(p: &mut Process, a: &[u64; 6]) -> SysResult {
    const O_DIRECT: u32 = 0o40000;
    let flags = a[1] as u32;
    if flags & !(O_NONBLOCK | O_CLOEXEC | O_DIRECT) != 0 {
        return Err(Errno::EINVAL);
    }
    let cloexec = flags & O_CLOEXEC != 0;
    let nb = flags & O_NONBLOCK;
    let (r, w) = if flags & O_DIRECT != 0 {
        // Packet mode stays a host pipe (guest pipes are byte streams).
        let pair = host::new_pair(new::PIPE, u64::from(O_DIRECT), 0, 0)?;
        park::add_peers(pair[0], pair[1]);
        let mk = |fd: i32, acc: u32| {
            let backing = Backing::Host {
                fd,
                kind: HostKind::Pipe,
            };
            File::new(backing, acc | nb, alloc::format!("pipe:[{}]", pair[0]))
        };
        (mk(pair[0], O_RDONLY), mk(pair[1], O_WRONLY))
    } else {
        let (re, we) = crate::fs::pipe::new_pair();
        let name = alloc::format!("pipe:[{}]", re.pipe.ino());
        let mk = |end, acc: u32| File::new(Backing::Pipe(end), acc | nb, name.clone());
        (mk(re, O_RDONLY), mk(we, O_WRONLY))
    };
    let rfd = p.files.insert(r, cloexec)?;
    let wfd = match p.files.insert(w, cloexec) {
        Ok(fd) => fd,
        Err(e) => {
            let _ = p.files.remove(rfd as u64);
            return Err(e);
        }
    };
    let out = [rfd as i32, wfd as i32];
    if let Err(e) = uaccess::write(&mut p.mm, a[0], &out[0])
        .and_then(|()| uaccess::write(&mut p.mm, a[0] + 4, &out[1]))
    {
        let _ = p.files.remove(rfd as u64);
        let _ = p.files.remove(wfd as u64);
        return Err(e);
    }
    Ok(0)
}

/// `pipe(fds)`.
pub fn pipe(p: &mut Process, a: &[u64; 6]) -> SysResult {
    pipe2(p, &[a[0], 0, 0, 0, 0, 0])
}
