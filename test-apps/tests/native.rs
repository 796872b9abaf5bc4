//! The test programs pass natively and are deterministic: two native runs
//! print the same bytes and exit the same way. The sandbox comparison in
//! runtime-shim/tests/compat_static.rs relies on both.

#![forbid(unsafe_code)]

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};

/// One native run: program, args, environment, expected shell status.
type Case = (&'static str, &'static [&'static str], Env, i32);
type Env = &'static [(&'static str, &'static str)];

const CASES: &[Case] = &[
    ("hello", &[], &[], 0),
    (
        "args_env",
        &["one", "two words", ""],
        &[("QTEST", "1"), ("B", "x=y")],
        0,
    ),
    ("exit_code", &["42"], &[], 42),
    ("exit_code", &["255", "_exit"], &[], 255),
    ("exit_code", &["1", "return"], &[], 1),
    ("malloc_stress", &[], &[], 0),
    ("touch_mem", &["16"], &[], 0),
    ("clocks", &[], &[], 0),
    ("ioops", &[], &[], 0),
    ("sysinfo", &[], &[], 0),
    ("segfault", &[], &[], 139),
    ("reclaim_probe", &["16"], &[], 0),
    ("rust-hello", &["a", "b c"], &[("QTEST", "v")], 0),
];

fn run(name: &str, args: &[&str], env: &[(&str, &str)]) -> (Vec<u8>, Vec<u8>, i32) {
    let out = Command::new(test_apps::path(name))
        .args(args)
        .env_clear()
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running {name}: {e}"));
    let status = out
        .status
        .code()
        .or_else(|| out.status.signal().map(|s| 128 + s))
        .expect("an exit code or a signal");
    (out.stdout, out.stderr, status)
}

#[test]
fn programs_pass_natively_and_repeat_exactly() {
    for &(name, args, env, want) in CASES {
        let first = run(name, args, env);
        let text = String::from_utf8_lossy(&first.0);
        assert_eq!(first.2, want, "{name} {args:?}: status; stdout:\n{text}");
        assert!(!text.contains("FAIL"), "{name} {args:?}:\n{text}");
        assert!(
            first.1.is_empty(),
            "{name}: stderr {:?}",
            String::from_utf8_lossy(&first.1)
        );
        let second = run(name, args, env);
        assert!(
            first == second,
            "{name} {args:?}: two native runs differ:\n{text}\n---\n{}",
            String::from_utf8_lossy(&second.0)
        );
    }
}
