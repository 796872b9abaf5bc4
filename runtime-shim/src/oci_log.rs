//! The runtime's log, where containerd's shim looks for the reason of a
//! failure: `--log FILE` with `--log-format text|json`. JSON lines are
//! logrus-style, as runc writes them: `{"level":"error","msg":…,"time":…}`.

use std::io::Write;
use std::path::PathBuf;

use serde_json::json;

use crate::timefmt;

#[derive(Debug, Clone, Default)]
pub struct Log {
    pub path: Option<PathBuf>,
    pub json: bool,
}

impl Log {
    /// One line of the log in its format (no newline).
    pub fn line(&self, level: &str, msg: &str) -> String {
        let time = timefmt::rfc3339_now();
        if self.json {
            json!({"level": level, "msg": msg, "time": time}).to_string()
        } else {
            format!("time=\"{time}\" level={level} msg={msg:?}")
        }
    }

    /// Appends one line at `level`; a log that cannot be written is not an
    /// error of the operation (stderr has the message too).
    pub fn write(&self, level: &str, msg: &str) {
        let Some(path) = &self.path else {
            return;
        };
        let line = self.line(level, msg);
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(f, "{line}");
        }
    }
}
