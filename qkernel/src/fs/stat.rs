//! `struct statx` (what the VMM returns) and `struct stat` (x86-64), with
//! the conversion between them and statx records for the kernel's own
//! files.

/// Size of `struct statx`.
pub const STATX_SIZE: usize = 256;
/// Size of the x86-64 `struct stat`.
pub const STAT_SIZE: usize = 144;

/// File type bits.
pub const S_IFMT: u32 = 0o170000;
/// Directory.
pub const S_IFDIR: u32 = 0o040000;
/// Character device.
pub const S_IFCHR: u32 = 0o020000;
/// Regular file.
pub const S_IFREG: u32 = 0o100000;
/// Symbolic link.
pub const S_IFLNK: u32 = 0o120000;
/// FIFO (a pipe).
pub const S_IFIFO: u32 = 0o010000;

fn get(b: &[u8], off: usize, n: usize) -> u64 {
    let mut v = [0u8; 8];
    v[..n].copy_from_slice(&b[off..off + n]);
    u64::from_le_bytes(v)
}

fn put(b: &mut [u8], off: usize, n: usize, v: u64) {
    b[off..off + n].copy_from_slice(&v.to_le_bytes()[..n]);
}

/// Linux `makedev`.
pub fn makedev(major: u64, minor: u64) -> u64 {
    ((major & 0xffff_f000) << 32)
        | ((major & 0xfff) << 8)
        | ((minor & 0xffff_ff00) << 12)
        | (minor & 0xff)
}

/// The mode (type and permissions) of a statx record.
pub fn statx_mode(sx: &[u8; STATX_SIZE]) -> u32 {
    get(sx, 28, 2) as u32
}

/// The size of a statx record.
pub fn statx_size(sx: &[u8; STATX_SIZE]) -> u64 {
    get(sx, 40, 8)
}

/// The owner (uid, gid) of a statx record.
pub fn statx_owner(sx: &[u8; STATX_SIZE]) -> (u32, u32) {
    (get(sx, 20, 4) as u32, get(sx, 24, 4) as u32)
}

/// Converts a statx record to a `struct stat`.
pub fn stat_from_statx(sx: &[u8; STATX_SIZE]) -> [u8; STAT_SIZE] {
    let mut st = [0u8; STAT_SIZE];
    put(&mut st, 0, 8, makedev(get(sx, 136, 4), get(sx, 140, 4))); // st_dev
    put(&mut st, 8, 8, get(sx, 32, 8)); // st_ino
    put(&mut st, 16, 8, get(sx, 16, 4)); // st_nlink
    put(&mut st, 24, 4, get(sx, 28, 2)); // st_mode
    put(&mut st, 28, 4, get(sx, 20, 4)); // st_uid
    put(&mut st, 32, 4, get(sx, 24, 4)); // st_gid
    put(&mut st, 40, 8, makedev(get(sx, 128, 4), get(sx, 132, 4))); // st_rdev
    put(&mut st, 48, 8, get(sx, 40, 8)); // st_size
    put(&mut st, 56, 8, get(sx, 4, 4)); // st_blksize
    put(&mut st, 64, 8, get(sx, 48, 8)); // st_blocks
    // atime (64), mtime (112), ctime (96) -> stat's atime, mtime, ctime.
    for (i, off) in [64usize, 112, 96].iter().enumerate() {
        put(&mut st, 72 + i * 16, 8, get(sx, *off, 8));
        put(&mut st, 80 + i * 16, 8, get(sx, off + 8, 4));
    }
    st
}

/// A statx record for a kernel-provided file.
pub fn synthetic_statx(
    mode: u32,
    size: u64,
    rdev: (u32, u32),
    ino: u64,
    ids: [u32; 4],
) -> [u8; STATX_SIZE] {
    let mut sx = [0u8; STATX_SIZE];
    put(&mut sx, 0, 4, 0x7ff); // STATX_BASIC_STATS
    put(&mut sx, 4, 4, 4096);
    put(&mut sx, 16, 4, if mode & S_IFMT == S_IFDIR { 2 } else { 1 });
    put(&mut sx, 20, 4, u64::from(ids[1]));
    put(&mut sx, 24, 4, u64::from(ids[3]));
    put(&mut sx, 28, 2, u64::from(mode));
    put(&mut sx, 32, 8, ino);
    put(&mut sx, 40, 8, size);
    put(&mut sx, 128, 4, u64::from(rdev.0));
    put(&mut sx, 132, 4, u64::from(rdev.1));
    // A device number of its own, so these never compare equal to a host file.
    put(&mut sx, 136, 4, 0);
    put(&mut sx, 140, 4, 0x51);
    sx
}
