//! Random bytes for `getrandom` and `AT_RANDOM`: RDRAND when the CPU has
//! it, mixed with the VMM's seed through a SplitMix64 stream.

use core::sync::atomic::{AtomicU64, Ordering};

use crate::arch;

static STATE: AtomicU64 = AtomicU64::new(0);
static HAS_RDRAND: AtomicU64 = AtomicU64::new(0);

/// Seeds the generator from the VMM's seed.
pub fn init(seed: [u64; 4]) {
    STATE.store(
        seed[0] ^ seed[1].rotate_left(17) ^ seed[2].rotate_left(31) ^ seed[3],
        Ordering::Relaxed,
    );
    let has = (arch::cpuid(1).2 >> 30) & 1;
    HAS_RDRAND.store(u64::from(has), Ordering::Relaxed);
}

fn splitmix() -> u64 {
    let mut z = STATE
        .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed)
        .wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// One random u64.
pub fn next_u64() -> u64 {
    let hw = if HAS_RDRAND.load(Ordering::Relaxed) != 0 {
        arch::rdrand().unwrap_or(0)
    } else {
        0
    };
    hw ^ splitmix()
}

/// Fills `buf` with random bytes.
pub fn fill(buf: &mut [u8]) {
    for chunk in buf.chunks_mut(8) {
        let v = next_u64().to_le_bytes();
        chunk.copy_from_slice(&v[..chunk.len()]);
    }
}
