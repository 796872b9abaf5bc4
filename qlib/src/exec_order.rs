//! Orders for processes started from outside the guest (`qrun exec`):
//! what [`crate::abi::Call::Exec`]'s `TAKE` op writes into the guest's
//! buffer. The VMM encodes, the guest kernel decodes (and checks every
//! length: the bytes come from the host, but a decoder that trusts no
//! length is as cheap).
//!
//! Wire format, little-endian, strings length-prefixed (`u32`):
//! ```text
//! spawn  = 1u32 id:u64 fd0:i32 fd1:i32 fd2:i32 uid:u32 gid:u32
//!          ngroups:u32 gid:u32*  cwd:str  argc:u32 str*  envc:u32 str*
//!          flags:u32   (bit 0: terminal)
//! signal = 2u32 pid:u32 signo:u32
//! ```

/// `Call::Exec` ops (`args[0]`).
pub mod op {
    /// Take the next order: `args[1]`, `args[2]` = GPA and length of a
    /// buffer. Returns the order's length, 0 when there is none, `-E2BIG`
    /// when it does not fit (the order is dropped and its client told).
    pub const TAKE: u64 = 0;
    /// A spawn order was carried out: `args[1]` = its id, `args[2]` = the
    /// guest pid or a negated errno (`-(CWD_FAILED + errno)` when the
    /// working directory is the problem).
    pub const STARTED: u64 = 1;
    /// Added to the errno of a failed `STARTED` about the cwd.
    pub const CWD_FAILED: i32 = 4096;
    /// A process started by an order ended: `args[1]` = its id,
    /// `args[2]` = its status as a shell reports it (128 + N for a
    /// signal).
    pub const EXITED: u64 = 2;
}

/// Largest encoded order (the guest's buffer).
pub const MAX_ORDER: usize = 256 << 10;

const SPAWN: u32 = 1;
const SIGNAL: u32 = 2;

/// A process to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spawn<'a> {
    /// The VMM's id for the order (reported back with `STARTED`/`EXITED`).
    pub id: u64,
    /// Host fds (of the sandbox) for the new process's fds 0, 1, 2; -1 =
    /// none.
    pub stdio: [i32; 3],
    pub uid: u32,
    pub gid: u32,
    pub groups: Groups<'a>,
    pub cwd: &'a [u8],
    pub argv: Strings<'a>,
    pub env: Strings<'a>,
    /// The stdio is the slave of a host terminal (`qrun exec --tty`): the
    /// guest gives the process a guest pty relayed to it.
    pub terminal: bool,
}

/// One order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Order<'a> {
    Spawn(Spawn<'a>),
    /// Send `signo` to guest process `pid` (one a spawn order started).
    Signal {
        pid: u32,
        signo: u32,
    },
}

/// Encoded strings, decoded lazily.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Strings<'a> {
    count: u32,
    bytes: &'a [u8],
}

impl<'a> Strings<'a> {
    /// How many strings.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The strings (checked when decoded).
    pub fn iter(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        let mut r = Reader(self.bytes);
        (0..self.count).map_while(move |_| r.str().ok())
    }
}

/// Encoded supplementary groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Groups<'a>(&'a [u8]);

impl<'a> Groups<'a> {
    /// The gids.
    pub fn iter(&self) -> impl Iterator<Item = u32> + 'a {
        self.0
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
    }
}

/// Why an order could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("exec order truncated")]
    Truncated,
    #[error("unknown exec order kind {0}")]
    Kind(u32),
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.0.len() {
            return Err(DecodeError::Truncated);
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from(self.u32()?) | (u64::from(self.u32()?) << 32))
    }
    fn str(&mut self) -> Result<&'a [u8], DecodeError> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    fn strings(&mut self) -> Result<Strings<'a>, DecodeError> {
        let count = self.u32()?;
        let start = self.0;
        for _ in 0..count {
            self.str()?;
        }
        let used = start.len() - self.0.len();
        Ok(Strings {
            count,
            bytes: &start[..used],
        })
    }
}

/// Decodes one order.
pub fn decode(bytes: &[u8]) -> Result<Order<'_>, DecodeError> {
    let mut r = Reader(bytes);
    match r.u32()? {
        SPAWN => {
            let id = r.u64()?;
            let stdio = [r.u32()? as i32, r.u32()? as i32, r.u32()? as i32];
            let uid = r.u32()?;
            let gid = r.u32()?;
            let n = r.u32()? as usize;
            let groups = Groups(r.take(n.checked_mul(4).ok_or(DecodeError::Truncated)?)?);
            let cwd = r.str()?;
            let argv = r.strings()?;
            let env = r.strings()?;
            let terminal = r.u32()? & 1 != 0;
            Ok(Order::Spawn(Spawn {
                id,
                stdio,
                uid,
                gid,
                groups,
                cwd,
                argv,
                env,
                terminal,
            }))
        }
        SIGNAL => Ok(Order::Signal {
            pid: r.u32()?,
            signo: r.u32()?,
        }),
        k => Err(DecodeError::Kind(k)),
    }
}

/// What the VMM encodes for a spawn.
#[cfg(feature = "std")]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpawnSpec {
    pub uid: u32,
    pub gid: u32,
    pub groups: std::vec::Vec<u32>,
    pub cwd: std::string::String,
    pub argv: std::vec::Vec<std::string::String>,
    pub env: std::vec::Vec<std::string::String>,
    /// See [`Spawn::terminal`].
    pub terminal: bool,
}

#[cfg(feature = "std")]
fn put_str(out: &mut std::vec::Vec<u8>, s: &[u8]) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s);
}

/// Encodes a spawn order.
#[cfg(feature = "std")]
pub fn encode_spawn(id: u64, stdio: [i32; 3], s: &SpawnSpec) -> std::vec::Vec<u8> {
    let mut out = std::vec::Vec::new();
    out.extend_from_slice(&SPAWN.to_le_bytes());
    out.extend_from_slice(&id.to_le_bytes());
    for fd in stdio {
        out.extend_from_slice(&fd.to_le_bytes());
    }
    out.extend_from_slice(&s.uid.to_le_bytes());
    out.extend_from_slice(&s.gid.to_le_bytes());
    out.extend_from_slice(&(s.groups.len() as u32).to_le_bytes());
    for g in &s.groups {
        out.extend_from_slice(&g.to_le_bytes());
    }
    put_str(&mut out, s.cwd.as_bytes());
    for list in [&s.argv, &s.env] {
        out.extend_from_slice(&(list.len() as u32).to_le_bytes());
        for a in list {
            put_str(&mut out, a.as_bytes());
        }
    }
    out.extend_from_slice(&u32::from(s.terminal).to_le_bytes());
    out
}

/// Encodes a signal order.
#[cfg(feature = "std")]
pub fn encode_signal(pid: u32, signo: u32) -> std::vec::Vec<u8> {
    let mut out = std::vec::Vec::new();
    for w in [SIGNAL, pid, signo] {
        out.extend_from_slice(&w.to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> SpawnSpec {
        SpawnSpec {
            uid: 1000,
            gid: 100,
            groups: vec![5, 6],
            cwd: "/tmp".into(),
            argv: vec!["sh".into(), "-c".into(), "exit 3".into()],
            env: vec!["PATH=/bin".into()],
            terminal: true,
        }
    }

    #[test]
    fn spawn_round_trips() {
        let bytes = encode_spawn(7, [10, 11, -1], &spec());
        let Ok(Order::Spawn(s)) = decode(&bytes) else {
            panic!("not a spawn");
        };
        assert_eq!((s.id, s.stdio, s.uid, s.gid), (7, [10, 11, -1], 1000, 100));
        assert_eq!(s.groups.iter().collect::<Vec<_>>(), vec![5, 6]);
        assert_eq!(s.cwd, b"/tmp");
        let argv: Vec<&[u8]> = s.argv.iter().collect();
        assert_eq!(argv, vec![&b"sh"[..], b"-c", b"exit 3"]);
        assert_eq!(s.env.iter().collect::<Vec<_>>(), vec![&b"PATH=/bin"[..]]);
        assert!(s.terminal);
    }

    #[test]
    fn signal_round_trips() {
        assert_eq!(
            decode(&encode_signal(42, 15)),
            Ok(Order::Signal { pid: 42, signo: 15 })
        );
    }

    #[test]
    fn every_truncation_is_refused() {
        let bytes = encode_spawn(1, [0, 1, 2], &spec());
        for n in 0..bytes.len() {
            assert!(decode(&bytes[..n]).is_err(), "prefix of {n} bytes");
        }
        assert_eq!(decode(&9u32.to_le_bytes()), Err(DecodeError::Kind(9)));
        // A count far beyond the bytes: refused, not an allocation.
        let mut huge = encode_signal(0, 0);
        huge[..4].copy_from_slice(&SPAWN.to_le_bytes());
        huge.extend_from_slice(&[0xff; 40]);
        assert!(decode(&huge).is_err());
    }
}
