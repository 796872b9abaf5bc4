//! The kernel log: the `log` facade, forwarded to the VMM (shown with
//! `qrun --debug`). Lines above the level the VMM asked for never leave the
//! guest, so they cost no host call.

use core::fmt::Write;

use qlib::abi::Call;

use crate::hostcall;

struct HostLogger;

static LOGGER: HostLogger = HostLogger;

/// A fixed buffer for formatting one line without the heap (a longer
/// line is cut).
pub struct Line {
    buf: [u8; 512],
    len: usize,
}

impl Line {
    pub const fn new() -> Self {
        Self {
            buf: [0; 512],
            len: 0,
        }
    }

    /// What was written.
    pub fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// Empties the line.
    pub fn clear(&mut self) {
        self.len = 0;
    }
}

impl Write for Line {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

impl log::Log for HostLogger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let mut line = Line::new();
        let _ = write!(line, "{}", record.args());
        let (gpa, len) = hostcall::buf(line.bytes());
        hostcall::call(Call::Log, [record.level() as u64, gpa, len, 0, 0, 0]);
    }

    fn flush(&self) {}
}

/// Installs the logger with the VMM's level (0 off .. 5 trace).
pub fn init(level: u64) {
    let filter = match level {
        0 => log::LevelFilter::Off,
        1 => log::LevelFilter::Error,
        2 => log::LevelFilter::Warn,
        3 => log::LevelFilter::Info,
        4 => log::LevelFilter::Debug,
        _ => log::LevelFilter::Trace,
    };
    let _ = log::set_logger(&LOGGER);
    log::set_max_level(filter);
}

/// Formats a panic message into a fixed buffer and hands it to the VMM.
pub fn report_panic(info: &core::panic::PanicInfo<'_>) -> ! {
    let mut line = Line::new();
    let _ = write!(line, "{info}");
    let (gpa, len) = hostcall::buf(line.bytes());
    hostcall::call(Call::Panic, [0, gpa, len, 0, 0, 0]);
    hostcall::unreachable_halt()
}
