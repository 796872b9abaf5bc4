//! Stack use.
//!
//! What needed stack in qrun was oci-spec's large nested `Spec`: serde's
//! derived visitors keep every field of every level on the stack while
//! config.json is parsed, and `Spec::default()` and its serialization are
//! big too (measured: `qrun run` needed between 32 and 64 KiB of main
//! thread stack, `qrun spec` about 16 KiB). Under `ulimit -s 16` qrun died
//! of SIGABRT with "stack overflow". That work now runs on a thread of
//! its own with [`WORK_STACK`] ([`with_stack`]); the rest needs about
//! 6 KiB below `main` (`qrun do`, in qvisor's `Sandbox::run`).
//!
//! The limit counts more than that: the environment and arguments, and
//! up to 8 KiB of random offset the kernel puts above the first frame
//! (x86-64 `arch_align_stack`), so a 16 KiB limit leaves a program only a
//! few KiB, some runs more than others. [`ensure`] therefore asks for
//! [`MIN_STACK`]: a smaller soft limit is raised (the kernel checks
//! `RLIMIT_STACK` each time the main thread's stack grows), and a hard
//! limit below it is a clear error before anything is done (`ulimit -s`
//! sets both). Running the commands on a bigger thread instead is not an
//! option: the sandbox process changes namespaces, root, credentials and
//! signal masks, which are per thread, for the whole process.

use nix::sys::resource::{Resource, getrlimit, setrlimit};

/// Stack of the thread that parses or builds a `Spec`.
const WORK_STACK: usize = 4 << 20;
/// Least stack limit qrun runs with: its use, the random offset, a big
/// environment and a margin.
pub const MIN_STACK: u64 = 64 << 10;
/// What a raised soft limit becomes, at most (Linux's usual default).
const WANT_STACK: u64 = 8 << 20;

/// Makes sure the main thread may grow its stack to [`MIN_STACK`]; the
/// error says why it cannot.
pub fn ensure() -> Result<(), String> {
    let (soft, hard) = getrlimit(Resource::RLIMIT_STACK)
        .map_err(|e| format!("reading the stack size limit: {e}"))?;
    if soft >= MIN_STACK {
        return Ok(());
    }
    if hard < MIN_STACK {
        return Err(format!(
            "the stack size limit (ulimit -s) is {} KiB, hard limit {} KiB: qrun needs at least {} KiB",
            soft >> 10,
            hard >> 10,
            MIN_STACK >> 10
        ));
    }
    setrlimit(Resource::RLIMIT_STACK, WANT_STACK.min(hard), hard).map_err(|e| {
        format!(
            "the stack size limit (ulimit -s) is {} KiB and raising it failed: {e}",
            soft >> 10
        )
    })
}

/// Runs `f` on a thread with a [`WORK_STACK`] stack and returns its
/// result (on this thread if no thread can be made).
pub fn with_stack<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    let slot = std::sync::Mutex::new(Some(f));
    let run = || {
        let f = slot.lock().ok().and_then(|mut g| g.take());
        f.map(|f| f())
    };
    let run = &run;
    let out = std::thread::scope(|s| {
        let spawned = std::thread::Builder::new()
            .name("qrun-spec".into())
            .stack_size(WORK_STACK)
            .spawn_scoped(s, run);
        match spawned {
            Ok(handle) => handle
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            Err(_) => run(),
        }
    });
    out.expect("the closure runs exactly once")
}
