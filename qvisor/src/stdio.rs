//! What the guest needs to know about the host's stdio at boot (file type,
//! terminal or not, window size, termios), so that `isatty`, `fstat` and
//! `TIOCGWINSZ` on fds 0-2 cost no host call.

/// Facts about host fds 0-2.
pub struct StdioFacts {
    /// `st_mode` of fds 0, 1, 2 (0 = closed), and padding.
    pub mode: [u32; 4],
    /// Bit n: fd n is a terminal.
    pub tty_mask: u64,
    /// `struct winsize` of the first terminal.
    pub winsize: [u16; 4],
    /// Kernel `struct termios` (36 bytes) of the first terminal.
    pub termios: [u8; 40],
}

/// Reads the facts from the host.
pub fn facts() -> StdioFacts {
    let mut f = StdioFacts {
        mode: [0; 4],
        tty_mask: 0,
        winsize: [0; 4],
        termios: [0; 40],
    };
    for fd in 0..3 {
        // SAFETY: an all-zero stat is a valid value for fstat to overwrite.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: st is a valid, writable stat buffer.
        if unsafe { libc::fstat(fd, &mut st) } == 0 {
            f.mode[fd as usize] = st.st_mode;
        }
        let mut termios = [0u8; 60];
        // SAFETY: TCGETS writes a kernel termios (36 bytes) into a buffer of 60.
        if unsafe { libc::ioctl(fd, libc::TCGETS, termios.as_mut_ptr()) } == 0 {
            if f.tty_mask == 0 {
                f.termios[..36].copy_from_slice(&termios[..36]);
                let mut ws = libc::winsize {
                    ws_row: 0,
                    ws_col: 0,
                    ws_xpixel: 0,
                    ws_ypixel: 0,
                };
                // SAFETY: TIOCGWINSZ fills a winsize struct.
                if unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut ws) } == 0 {
                    f.winsize = [ws.ws_row, ws.ws_col, ws.ws_xpixel, ws.ws_ypixel];
                }
            }
            f.tty_mask |= 1 << fd;
        }
    }
    f
}

/// Puts the terminal on fd 0 in raw mode (the guest's line discipline
/// does echo, editing and signals: `qlib::abi::BOOT_CONSOLE`); returns
/// whether fd 0 is a terminal that is raw now.
pub fn raw_terminal() -> bool {
    // SAFETY: an all-zero termios is a valid value for tcgetattr to fill.
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: `t` is a valid termios buffer.
    if unsafe { libc::tcgetattr(0, &mut t) } != 0 {
        return false;
    }
    // SAFETY: `t` is a termios tcgetattr filled.
    unsafe { libc::cfmakeraw(&mut t) };
    // SAFETY: as above; TCSANOW changes only the terminal's settings.
    unsafe { libc::tcsetattr(0, libc::TCSANOW, &t) == 0 }
}
