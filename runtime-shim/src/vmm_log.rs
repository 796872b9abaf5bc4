//! Where the VMM's own log lines go (`log` records from qvisor: hibernation
//! transitions, reclaim, control requests, warnings). With `--log FILE`
//! (as containerd's shim passes it) every record from `info` up is appended
//! there in the `--log-format`; the file is opened once, at start, so the
//! sandbox process keeps it after `pivot_root`. Without `--log`, warnings
//! and errors go to stderr as `qrun: LEVEL: msg`. `--debug` adds `debug`.

use std::fs::File;
use std::io::Write;

use log::{Level, Metadata, Record};

use crate::oci_log::Log;

enum Sink {
    Stderr,
    File(std::sync::Mutex<File>),
}

struct VmmLogger {
    log: Log,
    sink: Sink,
}

impl log::Log for VmmLogger {
    fn enabled(&self, m: &Metadata) -> bool {
        m.level() <= log::max_level()
    }

    fn log(&self, r: &Record) {
        if !self.enabled(r.metadata()) {
            return;
        }
        let level = r.level().as_str().to_ascii_lowercase();
        match &self.sink {
            Sink::Stderr => eprintln!("qrun: {level}: {}", r.args()),
            Sink::File(f) => {
                let line = self.log.line(&level, &r.args().to_string());
                // A log that cannot be written must not stop the sandbox.
                if let Ok(mut f) = f.lock() {
                    let _ = writeln!(f, "{line}");
                }
            }
        }
    }

    fn flush(&self) {}
}

/// Installs the logger for this process (once; later calls do nothing).
pub fn install(log: &Log, debug: bool) {
    let file = log.path.as_ref().and_then(|p| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .ok()
    });
    let (sink, level) = match file {
        Some(f) => (Sink::File(std::sync::Mutex::new(f)), Level::Info),
        None => (Sink::Stderr, Level::Warn),
    };
    let level = if debug { Level::Debug } else { level };
    let logger = Box::new(VmmLogger {
        log: log.clone(),
        sink,
    });
    if log::set_logger(Box::leak(logger)).is_ok() {
        log::set_max_level(level.to_level_filter());
    }
}
