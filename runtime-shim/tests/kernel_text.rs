//! The guest kernel's code comes from the host's page cache: its
//! read-only pages are mapped from the qrun binary over their place in
//! guest RAM (`qvisor/src/kernel_text.rs`), so sandboxes share one copy.
//! Seen from the host: in each sandbox's VMM a private mapping of the qrun
//! binary of about the kernel's code size, with no private (anonymous)
//! pages, whose pages a second sandbox shares (its PSS below its RSS).
//!
//! Needs /dev/kvm: without it a test says SKIPPED loudly, and fails under
//! `CI=true`.

#![forbid(unsafe_code)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};

/// (Rss, Pss, Anonymous) in KiB of the writable private mappings of the
/// qrun binary of at least 512 KiB in process `pid`: the kernel's pages.
fn kernel_mappings(pid: u32) -> (u64, u64, u64) {
    let exe = std::fs::canonicalize(common::qrun()).expect("qrun path");
    let exe = exe.to_string_lossy().into_owned();
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps")).expect("smaps");
    let (mut rss, mut pss, mut anon) = (0, 0, 0);
    let mut ours = false;
    for line in text.lines() {
        let mut f = line.split_whitespace();
        let first = f.next().unwrap_or("");
        if let Some((start, end)) = first.split_once('-')
            && let (Ok(s), Ok(e)) = (u64::from_str_radix(start, 16), u64::from_str_radix(end, 16))
        {
            let perms = f.next().unwrap_or("");
            let path = line.split_whitespace().nth(5).unwrap_or("");
            ours = perms == "rw-p" && path == exe && e - s >= 512 << 10;
            continue;
        }
        if !ours {
            continue;
        }
        let kib = || {
            f.clone()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        match first {
            "Rss:" => rss += kib(),
            "Pss:" => pss += kib(),
            "Anonymous:" => anon += kib(),
            _ => {}
        }
    }
    (rss, pss, anon)
}

/// A sandbox running `free_probe hold 1 munmap`, once it printed
/// "touched" (it then waits for a line on stdin).
fn start() -> Child {
    let mut child = Command::new(common::qrun())
        .args(["do", "--"])
        .arg(test_apps::path("free_probe"))
        .args(["hold", "1", "munmap"])
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn qrun");
    let mut out = BufReader::new(child.stdout.as_mut().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("read");
    assert_eq!(line, "touched\n", "the probe should have started");
    child
}

fn finish(mut child: Child) {
    let mut stdin = child.stdin.take().expect("stdin");
    let _ = stdin.write_all(b"\n\n");
    drop(stdin);
    let st = child.wait().expect("wait");
    assert!(st.success(), "the probe ends well: {st:?}");
}

#[test]
fn sandboxes_share_the_kernels_code_through_the_page_cache() {
    if !common::require_kvm() {
        return;
    }
    let a = start();
    let (rss_a, _, anon_a) = kernel_mappings(a.id());
    // The kernel's code and constants are ~1 MiB; it touches most of it.
    assert!(
        rss_a >= 256,
        "the kernel's code should be mapped from the qrun binary: RSS {rss_a} KiB"
    );
    assert_eq!(anon_a, 0, "no private copy of the kernel's code");
    let b = start();
    let (rss_b, pss_b, anon_b) = kernel_mappings(b.id());
    assert_eq!(anon_b, 0, "no private copy of the kernel's code");
    assert!(
        rss_b >= 256 && pss_b * 10 <= rss_b * 7,
        "the second sandbox shares the first one's pages: RSS {rss_b} KiB, PSS {pss_b} KiB"
    );
    finish(a);
    finish(b);
}
