//! A bounded, seeded fuzz test of config.json parsing and checking
//! ([`super::from_text`], what `qrun create` runs): valid configs mutated
//! as JSON (wrong types, huge numbers, missing and unknown fields, deep
//! nesting, NUL bytes, huge strings) and as bytes, thousands of times.
//! Every input must give a plan or an error whose printed form (what the
//! CLI prints, [`crate::report::chain`]) is one non-empty line; none may
//! panic.

use std::path::{Path, PathBuf};

use qlib::test_rng::Rng;
use serde_json::{Value, json};

use super::from_text;
use crate::report;

/// Mutated inputs per seed config, structural and byte-level each.
const ROUNDS: usize = 4000;

/// Removes the scratch bundle, also when an assertion fails.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A bundle directory whose rootfs holds `/bin/sh` (a regular file: the
/// parser only resolves the program).
fn bundle() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("qrun-fuzz-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("rootfs/bin")).expect("mkdir");
    std::fs::write(dir.join("rootfs/bin/sh"), b"#!").expect("write");
    std::fs::create_dir_all(dir.join("data")).expect("mkdir");
    dir
}

fn seeds() -> Vec<Value> {
    let mut base =
        serde_json::to_value(oci_spec::runtime::Spec::default()).expect("default spec as JSON");
    base["process"]["args"] = json!(["sh", "-c", "true"]);
    base["process"]["terminal"] = json!(false);
    let mut full = base.clone();
    full["hostname"] = json!("box");
    full["process"]["env"] = json!(["PATH=/bin", "A=b"]);
    full["process"]["user"] = json!({"uid": 1000, "gid": 1000, "additionalGids": [5, 6]});
    full["mounts"] = json!([
        {"destination": "/proc", "type": "proc", "source": "proc"},
        {"destination": "/data", "type": "bind", "source": "data", "options": ["rbind", "ro"]},
        {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["size=1m"]},
    ]);
    full["linux"]["resources"] = json!({"memory": {"limit": 268435456}, "cpu": {"quota": 50000, "period": 100000},
               "pids": {"limit": 64}});
    full["linux"]["cgroupsPath"] = json!("qrun/fuzz");
    full["annotations"] = json!({"k": "v"});
    vec![base, full]
}

/// A value of another kind than a config expects somewhere.
fn hostile(rng: &mut Rng) -> Value {
    match rng.index(14) {
        0 => Value::Null,
        1 => json!(true),
        2 => json!(u64::MAX),
        3 => json!(i64::MIN),
        4 => json!(1e308),
        5 => json!(-1),
        6 => json!(""),
        7 => json!("a\u{0}b"),
        8 => Value::String("x".repeat(1 << 16)),
        9 => json!([]),
        10 => json!({}),
        11 => json!("/../../../etc"),
        12 => json!("line\nbreak \u{1b}[31m"),
        _ => {
            let mut v = json!("deep");
            for _ in 0..(20 + rng.index(200)) {
                v = json!([v]);
            }
            v
        }
    }
}

/// A random node of `v` (the root included), as a mutable reference.
fn pick<'a>(v: &'a mut Value, rng: &mut Rng) -> &'a mut Value {
    if rng.index(4) == 0 {
        return v;
    }
    let len = match &*v {
        Value::Object(m) => m.len(),
        Value::Array(a) => a.len(),
        _ => 0,
    };
    if len == 0 {
        return v;
    }
    let i = rng.index(len);
    match v {
        Value::Object(m) => {
            let child = m.values_mut().nth(i).expect("i < len");
            pick(child, rng)
        }
        Value::Array(a) => pick(&mut a[i], rng),
        other => other,
    }
}

fn mutate_json(seed: &Value, rng: &mut Rng) -> String {
    let mut v = seed.clone();
    for _ in 0..1 + rng.index(3) {
        let node = pick(&mut v, rng);
        match (rng.index(4), &mut *node) {
            (0, Value::Object(m)) if !m.is_empty() => {
                let k = m.keys().nth(rng.index(m.len())).cloned();
                if let Some(k) = k {
                    m.remove(&k);
                }
            }
            (1, Value::Object(m)) => {
                m.insert("unknownField\u{0}".into(), hostile(rng));
            }
            (2, Value::Array(a)) if !a.is_empty() => {
                let dup = a[rng.index(a.len())].clone();
                a.extend(std::iter::repeat_n(dup, 1 + rng.index(100)));
            }
            _ => *node = hostile(rng),
        }
    }
    v.to_string()
}

fn mutate_bytes(seed: &Value, rng: &mut Rng) -> String {
    let mut b = serde_json::to_vec_pretty(seed).expect("JSON");
    for _ in 0..1 + rng.index(4) {
        if b.is_empty() {
            break;
        }
        let at = rng.index(b.len());
        match rng.index(6) {
            0 => b[at] ^= 1 << rng.index(8),
            1 => {
                let pool = b"{}[]\",:0\\\x00";
                b.insert(at, pool[rng.index(pool.len())]);
            }
            2 => {
                let end = (at + rng.index(32)).min(b.len());
                b.drain(at..end);
            }
            3 => b.truncate(at),
            4 => {
                let end = (at + rng.index(64)).min(b.len());
                let chunk = b[at..end].to_vec();
                b.splice(at..at, chunk);
            }
            _ => b.splice(at..at, b"\\u0000".iter().copied()).for_each(drop),
        }
    }
    // The CLI reads config.json as UTF-8 text: invalid bytes are a read
    // error there, so they are replaced here to reach the parser.
    String::from_utf8_lossy(&b).into_owned()
}

fn check(input: &str, path: &Path, bundle: &Path, what: &str) -> bool {
    let result = std::panic::catch_unwind(|| from_text(input, path, bundle, "fuzz"));
    let shown = || input.chars().take(400).collect::<String>();
    match result {
        Err(_) => panic!("{what}: the parser panicked on {}", shown()),
        Ok(Ok(_)) => true,
        Ok(Err(e)) => {
            let msg = report::chain(&e);
            assert!(
                !msg.is_empty() && !msg.contains('\n') && !msg.contains('\r'),
                "{what}: not one line: {msg:?} for {}",
                shown()
            );
            false
        }
    }
}

#[test]
fn mutated_configs_never_panic_and_fail_in_one_line() {
    let dir = Scratch(bundle());
    let bundle = std::fs::canonicalize(&dir.0).expect("canonical");
    let path = bundle.join("config.json");
    let mut rng = Rng(0x5eed_cafe_f00d_0001);
    let (mut accepted, mut total) = (0, 0);
    for (n, seed) in seeds().iter().enumerate() {
        assert!(
            check(&seed.to_string(), &path, &bundle, "seed"),
            "seed {n} must be valid"
        );
        for i in 0..ROUNDS {
            let s = mutate_json(seed, &mut rng);
            accepted += usize::from(check(&s, &path, &bundle, &format!("json {n}/{i}")));
            let b = mutate_bytes(seed, &mut rng);
            accepted += usize::from(check(&b, &path, &bundle, &format!("bytes {n}/{i}")));
            total += 2;
        }
    }
    // Both outcomes happen: the mutations reach past the JSON syntax.
    assert!(
        accepted > 0 && accepted < total,
        "{accepted} of {total} accepted"
    );
}
