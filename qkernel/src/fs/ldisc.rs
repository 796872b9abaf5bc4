//! The line discipline of guest ptys (`fs::tty`): the subset of Linux's
//! `n_tty` programs rely on. Input (what the master writes) goes through
//! `ISTRIP`, `IGNCR`/`ICRNL`/`INLCR`, `ISIG` (INTR, QUIT, SUSP become
//! signals for the foreground group, flushing both queues unless
//! `NOFLSH`), canonical editing (ERASE, WERASE, KILL, EOF, EOL, with
//! `ECHOE`/`ECHOK`/`ECHOKE`) and echo (`ECHO`, `ECHOCTL`, `ECHONL`);
//! output (what the slave writes, and echo) through `OPOST` with
//! `ONLCR`/`OCRNL`. Non-canonical reads follow VMIN and VTIME
//! (`fs::tty::read_slave`). Not done: IXON flow control (START/STOP are
//! dropped), LNEXT, REPRINT, `TOSTOP`, parity and baud rates (stored,
//! without effect).

use alloc::collections::VecDeque;
use alloc::vec::Vec;

use super::tty::CAPACITY;

/// `c_cc` indices.
pub const VINTR: usize = 0;
pub const VQUIT: usize = 1;
pub const VERASE: usize = 2;
pub const VKILL: usize = 3;
pub const VEOF: usize = 4;
pub const VTIME: usize = 5;
pub const VMIN: usize = 6;
pub const VSTART: usize = 8;
pub const VSTOP: usize = 9;
pub const VSUSP: usize = 10;
pub const VEOL: usize = 11;
pub const VWERASE: usize = 14;
pub const VEOL2: usize = 16;

/// `c_iflag` bits.
const ISTRIP: u32 = 0o40;
const INLCR: u32 = 0o100;
const IGNCR: u32 = 0o200;
const ICRNL: u32 = 0o400;
const IXON: u32 = 0o2000;
/// `c_oflag` bits.
const OPOST: u32 = 0o1;
const ONLCR: u32 = 0o4;
const OCRNL: u32 = 0o10;
/// `c_lflag` bits.
const ISIG: u32 = 0o1;
const ICANON: u32 = 0o2;
const ECHO: u32 = 0o10;
const ECHOE: u32 = 0o20;
const ECHOK: u32 = 0o40;
const ECHONL: u32 = 0o100;
const NOFLSH: u32 = 0o200;
const TOSTOP: u32 = 0o400;
const ECHOCTL: u32 = 0o1000;
const ECHOKE: u32 = 0o4000;
const IEXTEN: u32 = 0o100000;

/// Longest canonical line (Linux's `N_TTY_BUF_SIZE` - 1).
const MAX_LINE: usize = 4095;

const SIGINT: u32 = 2;
const SIGQUIT: u32 = 3;
const SIGTSTP: u32 = 20;

/// The kernel's `struct termios2` (`struct termios` is its first 36
/// bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Termios {
    pub iflag: u32,
    pub oflag: u32,
    pub cflag: u32,
    pub lflag: u32,
    pub line: u8,
    pub cc: [u8; 19],
    pub ispeed: u32,
    pub ospeed: u32,
}

impl Default for Termios {
    /// A new pty's, as Linux's (`stty -a` of a fresh pts): `icrnl ixon`,
    /// `opost onlcr`, `cs8 cread` at 38400 baud, `isig icanon echo echoe
    /// echok echoctl echoke iexten`.
    fn default() -> Termios {
        Termios {
            iflag: ICRNL | IXON,
            oflag: OPOST | ONLCR,
            cflag: 0o277,
            lflag: ISIG | ICANON | ECHO | ECHOE | ECHOK | ECHOCTL | ECHOKE | IEXTEN,
            line: 0,
            cc: [
                3, 0x1c, 0x7f, 0x15, 4, 0, 1, 0, 0x11, 0x13, 0x1a, 0, 0x12, 0x0f, 0x17, 0x16, 0, 0,
                0,
            ],
            ispeed: 38400,
            ospeed: 38400,
        }
    }
}

impl Termios {
    /// The 44 bytes of `struct termios2` (the first 36: `struct termios`).
    pub fn to_bytes(self) -> [u8; 44] {
        let mut b = [0u8; 44];
        for (k, v) in [self.iflag, self.oflag, self.cflag, self.lflag]
            .iter()
            .enumerate()
        {
            b[k * 4..k * 4 + 4].copy_from_slice(&v.to_le_bytes());
        }
        b[16] = self.line;
        b[17..36].copy_from_slice(&self.cc);
        b[36..40].copy_from_slice(&self.ispeed.to_le_bytes());
        b[40..44].copy_from_slice(&self.ospeed.to_le_bytes());
        b
    }

    /// This termios changed to `struct termios` `b` (36 bytes: the
    /// speeds stay) or `termios2` (44).
    pub fn updated(&self, b: &[u8]) -> Termios {
        let word = |k: usize| u32::from_le_bytes([b[k], b[k + 1], b[k + 2], b[k + 3]]);
        let mut t = *self;
        if b.len() < 36 {
            return t;
        }
        t.iflag = word(0);
        t.oflag = word(4);
        t.cflag = word(8);
        t.lflag = word(12);
        t.line = b[16];
        t.cc.copy_from_slice(&b[17..36]);
        if b.len() >= 44 {
            t.ispeed = word(36);
            t.ospeed = word(40);
        }
        t
    }
}

/// The line discipline's state.
#[derive(Debug)]
pub struct Ldisc {
    pub termios: Termios,
    /// What the slave can read: in canonical mode only completed lines.
    input: VecDeque<u8>,
    /// Canonical mode: the lengths of the lines in `input`, in order (0:
    /// an EOF at the start of a line, read as end of file).
    lines: VecDeque<usize>,
    /// Canonical mode: the line being edited.
    edit: Vec<u8>,
    /// What the master can read.
    pub output: VecDeque<u8>,
}

impl Ldisc {
    /// Empty buffers with `termios`.
    pub fn new(termios: Termios) -> Ldisc {
        Ldisc {
            termios,
            input: VecDeque::new(),
            lines: VecDeque::new(),
            edit: Vec::new(),
            output: VecDeque::new(),
        }
    }

    fn l(&self, flag: u32) -> bool {
        self.termios.lflag & flag != 0
    }

    /// Whether a background group's writes get SIGTTOU (`TOSTOP`).
    pub fn tostop(&self) -> bool {
        self.l(TOSTOP)
    }

    /// Whether reads are canonical (line by line).
    pub fn canonical(&self) -> bool {
        self.l(ICANON)
    }

    /// `VMIN`, `VTIME`.
    pub fn min_time(&self) -> (u8, u8) {
        (self.termios.cc[VMIN], self.termios.cc[VTIME])
    }

    /// Bytes the slave can read now (`FIONREAD`).
    pub fn readable_bytes(&self) -> usize {
        self.input.len()
    }

    /// Bytes the master may still write before the input is full.
    pub fn input_room(&self) -> usize {
        CAPACITY.saturating_sub(self.input.len() + self.edit.len())
    }

    /// Whether a read of the slave would return now (`poll`: with VMIN
    /// and no VTIME, VMIN bytes must be there, as Linux's).
    pub fn readable(&self) -> bool {
        if self.canonical() {
            return !self.lines.is_empty();
        }
        let (min, time) = self.min_time();
        let want = if time == 0 && min > 0 {
            usize::from(min)
        } else {
            1
        };
        self.input.len() >= want
    }

    /// What a read of up to `max` bytes returns now (`None`: it waits):
    /// canonical, at most the rest of one line (empty at an EOF); else
    /// per VMIN/VTIME (VMIN and VTIME both set: as soon as a byte is
    /// there).
    pub fn peek(&self, max: usize) -> Option<Vec<u8>> {
        let n = if self.canonical() {
            *self.lines.front()?
        } else {
            let (min, time) = self.min_time();
            let have = self.input.len();
            let enough = match (min, time) {
                (0, 0) => true,
                (0, _) | (_, 1..) => have > 0,
                (m, 0) => have >= usize::from(m).min(max),
            };
            if !enough {
                return None;
            }
            have
        };
        Some(self.input.iter().take(n.min(max)).copied().collect())
    }

    /// Takes the `n` bytes [`peek`](Self::peek) gave (an EOF with 0).
    pub fn consume(&mut self, n: usize) {
        let n = n.min(self.input.len());
        self.input.drain(..n);
        if self.canonical()
            && let Some(first) = self.lines.front_mut()
        {
            *first = first.saturating_sub(n);
            if *first == 0 {
                self.lines.pop_front();
            }
        }
    }

    /// New termios (`TCSETS*`): leaving canonical mode makes the line
    /// being edited readable; entering it makes what was unread the line
    /// being edited. `flush`: `TCSETSF` discards unread input.
    pub fn set_termios(&mut self, t: Termios, flush: bool) {
        let was = self.canonical();
        self.termios = t;
        if flush {
            self.flush_input();
        }
        match (was, self.canonical()) {
            (true, false) => {
                let edit = core::mem::take(&mut self.edit);
                self.input.extend(edit);
                self.lines.clear();
            }
            (false, true) => {
                let mut rest: Vec<u8> = self.input.drain(..).collect();
                rest.truncate(MAX_LINE);
                self.edit = rest;
            }
            _ => {}
        }
    }

    /// Discards unread input (`TCIFLUSH`).
    pub fn flush_input(&mut self) {
        self.input.clear();
        self.lines.clear();
        self.edit.clear();
    }

    /// One byte of output through `OPOST` processing.
    pub fn output_byte(&mut self, c: u8) {
        let t = &self.termios;
        if t.oflag & OPOST != 0 {
            if c == b'\n' && t.oflag & ONLCR != 0 {
                self.output.extend([b'\r', b'\n']);
                return;
            }
            if c == b'\r' && t.oflag & OCRNL != 0 {
                self.output.push_back(b'\n');
                return;
            }
        }
        self.output.push_back(c);
    }

    /// Echoes `c` (`ECHOCTL`: a control character as `^X`), if there is room.
    fn echo(&mut self, c: u8) {
        if self.output.len() >= CAPACITY {
            return;
        }
        if self.l(ECHOCTL) && is_ctl(c) {
            self.output.extend([b'^', c ^ 0x40]);
        } else {
            self.output_byte(c);
        }
    }

    /// Erases the last character of the line being edited, echoing
    /// `\b \b` for each column it took with `ECHOE`.
    fn erase_one(&mut self) -> bool {
        let Some(c) = self.edit.pop() else {
            return false;
        };
        if self.l(ECHO) && self.l(ECHOE) {
            let cols = if self.l(ECHOCTL) && is_ctl(c) { 2 } else { 1 };
            for _ in 0..cols {
                self.output.extend(*b"\x08 \x08");
            }
        }
        true
    }

    /// Completes the line being edited (`eof`: without a character).
    fn complete_line(&mut self) {
        let line = core::mem::take(&mut self.edit);
        self.lines.push_back(line.len());
        self.input.extend(line);
    }

    /// Receives the bytes the master wrote; returns how many it took
    /// (fewer when the input fills) and adds the signals to send to the
    /// foreground group to `signals`.
    pub fn receive(&mut self, data: &[u8], signals: &mut Vec<u32>) -> usize {
        for (k, &c) in data.iter().enumerate() {
            if self.input_room() == 0 {
                return k;
            }
            if let Some(sig) = self.receive_byte(c) {
                signals.push(sig);
            }
        }
        data.len()
    }

    fn receive_byte(&mut self, mut c: u8) -> Option<u32> {
        let t = self.termios;
        if t.iflag & ISTRIP != 0 {
            c &= 0x7f;
        }
        if c == b'\r' {
            if t.iflag & IGNCR != 0 {
                return None;
            }
            if t.iflag & ICRNL != 0 {
                c = b'\n';
            }
        } else if c == b'\n' && t.iflag & INLCR != 0 {
            c = b'\r';
        }
        let is = |i: usize| t.cc[i] != 0 && t.cc[i] == c;
        if self.l(ISIG) {
            let sig = if is(VINTR) {
                Some(SIGINT)
            } else if is(VQUIT) {
                Some(SIGQUIT)
            } else if is(VSUSP) {
                Some(SIGTSTP)
            } else {
                None
            };
            if let Some(sig) = sig {
                if !self.l(NOFLSH) {
                    // Linux flushes the input and the master's unread
                    // output (the echo of the line so far).
                    self.flush_input();
                    self.output.clear();
                }
                if self.l(ECHO) {
                    self.echo(c);
                }
                return Some(sig);
            }
        }
        if t.iflag & IXON != 0 && (is(VSTART) || is(VSTOP)) {
            return None;
        }
        if !self.canonical() {
            self.input.push_back(c);
            if self.l(ECHO) {
                self.echo(c);
            }
            return None;
        }
        if is(VERASE) {
            self.erase_one();
        } else if is(VWERASE) && self.l(IEXTEN) {
            while self.edit.last() == Some(&b' ') && self.erase_one() {}
            while self.edit.last().is_some_and(|&b| b != b' ') && self.erase_one() {}
        } else if is(VKILL) {
            if self.l(ECHOKE) && self.l(ECHOE) {
                while self.erase_one() {}
            } else {
                let had = !self.edit.is_empty();
                self.edit.clear();
                if had && self.l(ECHO) {
                    self.echo(c);
                    if self.l(ECHOK) {
                        self.output_byte(b'\n');
                    }
                }
            }
        } else if is(VEOF) {
            self.complete_line();
        } else if c == b'\n' || is(VEOL) || is(VEOL2) {
            self.edit.push(c);
            if self.l(ECHO) || (c == b'\n' && self.l(ECHONL)) {
                self.echo(c);
            }
            self.complete_line();
        } else if self.edit.len() < MAX_LINE {
            self.edit.push(c);
            if self.l(ECHO) {
                self.echo(c);
            }
        }
        None
    }
}

/// Whether `c` echoes as `^X` under `ECHOCTL` (a control character other
/// than tab and newline, or DEL).
fn is_ctl(c: u8) -> bool {
    (c < 0x20 && c != b'\t' && c != b'\n') || c == 0x7f
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(l: &mut Ldisc, s: &[u8]) -> Vec<u32> {
        let mut sig = Vec::new();
        l.receive(s, &mut sig);
        sig
    }

    #[test]
    fn canonical_editing_and_echo() {
        let mut l = Ldisc::new(Termios::default());
        feed(&mut l, b"ab\x7fc");
        assert!(l.peek(100).is_none());
        feed(&mut l, b"\n");
        assert_eq!(l.peek(100).unwrap(), b"ac\n");
        l.consume(3);
        let echo: Vec<u8> = l.output.drain(..).collect();
        assert_eq!(echo, b"ab\x08 \x08c\r\n");
        feed(&mut l, b"foo\x04\x04");
        assert_eq!(l.peek(100).unwrap(), b"foo");
        l.consume(3);
        assert_eq!(l.peek(100).unwrap(), b"");
        l.consume(0);
        assert!(l.peek(100).is_none());
    }

    #[test]
    fn isig_flushes_and_signals() {
        let mut l = Ldisc::new(Termios::default());
        assert_eq!(feed(&mut l, b"abc\x03"), alloc::vec![SIGINT]);
        let echo: Vec<u8> = l.output.drain(..).collect();
        assert_eq!(echo, b"^C");
        assert!(l.peek(100).is_none());
    }

    #[test]
    fn termios_round_trip() {
        let t = Termios::default();
        assert_eq!(t.updated(&t.to_bytes()), t);
        assert_eq!(t.updated(&t.to_bytes()[..36]), t);
    }
}
