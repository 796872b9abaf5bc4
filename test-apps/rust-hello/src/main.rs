//! A static Rust program for the compatibility tests: exercises Rust std's
//! startup (stdio checks, SIGPIPE, stack guard), its allocator, HashMap's
//! random seeding (getrandom) and std::env. Its output is the same on every
//! run: the checksum does not depend on HashMap iteration order.

#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

fn main() {
    println!("hello from rust");
    for (i, arg) in std::env::args_os().enumerate() {
        println!("arg[{i}] {}", arg.to_string_lossy());
    }
    match std::env::var_os("QTEST") {
        Some(v) => println!("QTEST={}", v.to_string_lossy()),
        None => println!("QTEST unset"),
    }
    println!("checksum {:016x}", workload());
}

/// Builds and queries a Vec and a HashMap; returns an order-independent sum.
fn workload() -> u64 {
    let mut words: Vec<String> = Vec::new();
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for _ in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        words.push(format!("w{}", x % 5_000));
    }
    words.sort();

    let mut counts: HashMap<&str, u64> = HashMap::new();
    for w in &words {
        *counts.entry(w.as_str()).or_default() += 1;
    }

    let mut sum: u64 = counts.len() as u64;
    for (w, n) in &counts {
        // DefaultHasher::new() has fixed keys, unlike the map's RandomState.
        let mut h = DefaultHasher::new();
        w.hash(&mut h);
        sum = sum.wrapping_add(h.finish().wrapping_mul(*n));
    }
    let big: Vec<u64> = (0..1_000_000u64).map(|i| i.wrapping_mul(i)).collect();
    sum.wrapping_add(big.iter().fold(0u64, |a, &b| a.wrapping_add(b)))
}
