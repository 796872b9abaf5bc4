//! `qkernel`: the guest kernel. It runs unmodified static Linux x86-64
//! programs inside a `qvisor` sandbox, in the hypervisor's native mode.
//!
//! Boot: `arch::boot` (emulated until the opt-in) calls [`kmain`], which
//! sets up descriptor tables, the heap, clocks and the user page allocator,
//! loads the program from the boot data and enters user mode. From then on
//! the kernel runs only in [`syscall_handler`] and [`exception_handler`].
//!
//! Host builds of this crate are an empty stub, so that `cargo` commands
//! over the whole workspace work; the kernel is built for
//! `x86_64-unknown-none` by `qvisor`'s build script.
#![cfg_attr(target_os = "none", no_std, no_main)]

#[cfg(target_os = "none")]
extern crate alloc;

#[cfg(target_os = "none")]
mod arch;
#[cfg(target_os = "none")]
mod control;
#[cfg(target_os = "none")]
mod creds;
#[cfg(target_os = "none")]
mod errno;
#[cfg(target_os = "none")]
mod exec;
#[cfg(target_os = "none")]
mod fs;
#[cfg(target_os = "none")]
mod hostcall;
#[cfg(target_os = "none")]
mod itimer;
#[cfg(target_os = "none")]
mod klog;
#[cfg(target_os = "none")]
mod loader;
#[cfg(target_os = "none")]
mod mm;
#[cfg(target_os = "none")]
mod process;
#[cfg(target_os = "none")]
mod random;
#[cfg(target_os = "none")]
mod seccomp;
#[cfg(target_os = "none")]
mod signal;
#[cfg(target_os = "none")]
mod stats;
#[cfg(target_os = "none")]
mod syscalls;
#[cfg(target_os = "none")]
mod task;
#[cfg(target_os = "none")]
mod time;
#[cfg(target_os = "none")]
mod trap;
#[cfg(target_os = "none")]
mod uts;

#[cfg(target_os = "none")]
mod vdso;

#[cfg(target_os = "none")]
pub use kernel::*;

#[cfg(target_os = "none")]
mod kernel {
    use alloc::vec::Vec;

    use qlib::abi::{BOOT_MAGIC, BootInfo};
    use qlib::layout::{BOOT_INFO_GPA, KERNEL_BASE};

    use crate::arch::{self, platform};
    use crate::loader::{self, Exec};
    use crate::mm::{self, addr_space::AddrSpace, gpa_to_kva, kva_to_gpa};
    use crate::process::{self, PROCESS, Process};
    use crate::{hostcall, klog, random, time, trap};

    static BOOT_INFO: spin::Once<BootInfo> = spin::Once::new();

    /// The boot information the VMM wrote.
    pub fn boot_info() -> &'static BootInfo {
        BOOT_INFO.get().expect("read at boot")
    }

    unsafe extern "C" {
        static __kernel_end: u8;
    }

    /// Bytes of the boot-data area the VMM wrote.
    pub fn boot_slice(v: qlib::abi::IoVec) -> &'static [u8] {
        // SAFETY: the VMM placed the boot data inside guest RAM or the file
        // window (checked by the caller); the direct map covers both and
        // nothing writes it while the kernel reads it.
        unsafe { core::slice::from_raw_parts(gpa_to_kva(v.gpa) as *const u8, v.len as usize) }
    }

    fn split_strings(bytes: &[u8], count: u64) -> Vec<&[u8]> {
        bytes.split(|&b| b == 0).take(count as usize).collect()
    }

    /// Kernel entry after the native-mode opt-in; `native` is the probe
    /// result.
    #[unsafe(no_mangle)]
    pub extern "C" fn kmain(native: u64) -> ! {
        // GS base = this vCPU's PerCpu before anything uses it (host calls).
        arch::percpu::install(0);
        arch::reset_gs_base();
        let platform = match platform::detect(native) {
            Ok(p) => p,
            Err(msg) => hostcall::boot_error(msg),
        };
        // SAFETY: the VMM wrote BootInfo at this reserved GPA before boot.
        let info = unsafe { ((gpa_to_kva(BOOT_INFO_GPA)) as *const BootInfo).read_volatile() };
        if info.magic != BOOT_MAGIC {
            hostcall::boot_error("boot information missing or corrupt");
        }
        let info = BOOT_INFO.call_once(|| info);
        trap::set_platform(platform);
        arch::entry::init_kernel_stack();
        arch::cpu::init();
        mm::heap::init();
        klog::init(info.log_level & 0xff);
        crate::stats::init(info.log_level & qlib::abi::LOG_STATS_FLAG != 0);
        // Which register state tasks save (XSAVE components), decided once.
        arch::fpu::mask();
        arch::entry::paint_boot_stack();
        crate::control::init();
        if let Err(msg) = time::init(platform) {
            hostcall::boot_error(msg);
        }
        random::init(info.seed);
        debug_assert!(crate::syscalls::table_is_sorted());

        // User pages: RAM between the kernel image and the boot data.
        // A linker symbol; only its address is used.
        let kernel_end = kva_to_gpa(&raw const __kernel_end as u64);
        let boot_end = info.boot_data_gpa;
        let outside = |v: qlib::abi::IoVec| v.gpa.saturating_add(v.len) > info.mem_size;
        // The program and its interpreter are in the file window (or
        // empty).
        let outside_window = |v: qlib::abi::IoVec| {
            use qlib::layout::{FILE_WINDOW_GPA, FILE_WINDOW_SIZE};
            let end = v.gpa.saturating_add(v.len);
            v.len != 0 && (v.gpa < FILE_WINDOW_GPA || end > FILE_WINDOW_GPA + FILE_WINDOW_SIZE)
        };
        if boot_end > info.mem_size || outside_window(info.program) || outside_window(info.interp) {
            hostcall::boot_error("boot data outside guest RAM");
        }
        mm::frames::init(kernel_end, boot_end);
        if outside(info.seccomp) {
            hostcall::boot_error("boot data outside guest RAM");
        }
        crate::seccomp::init(boot_slice(info.seccomp));
        crate::signal::set_init(info.flags & qlib::abi::BOOT_INIT != 0);
        mm::pagetable::init_entry_map();
        start_secondaries(info.cpus);
        log::debug!(
            "qkernel up: {} MiB RAM, kernel image {:#x}..{:#x}",
            info.mem_size >> 20,
            KERNEL_BASE,
            KERNEL_BASE + kernel_end
        );

        let argv = split_strings(boot_slice(info.argv), info.argc);
        let envp = split_strings(boot_slice(info.envp), info.envc);
        let execfn = boot_slice(info.execfn);
        let execfn = &execfn[..execfn.len().saturating_sub(1)];
        let mut random = [0u8; 16];
        random::fill(&mut random);
        let mut mm = AddrSpace::new();
        let exec = Exec {
            image: boot_slice(info.program),
            interp: (info.interp.len != 0).then(|| boot_slice(info.interp)),
            argv: &argv,
            envp: &envp,
            execfn,
            ids: info.ids,
            random,
        };
        let entry = match loader::load_fresh(&mut mm, &exec) {
            Ok(e) => e,
            Err(e) => {
                // One line on the host's stderr, as the VMM's own refusals.
                let name = core::str::from_utf8(execfn).unwrap_or("the program");
                hostcall::exit_with_reason(126, &alloc::format!("{name}: {e}"))
            }
        };
        let cwd =
            crate::fs::path::normalize(core::str::from_utf8(boot_slice(info.cwd)).unwrap_or("/"));
        // The ELF file run: the program, or a script's interpreter.
        let exe_path = boot_slice(info.exe);
        let exe = crate::fs::path::normalize(&alloc::format!(
            "{cwd}/{}",
            core::str::from_utf8(exe_path).unwrap_or("")
        ));
        let exe = if exe_path.first() == Some(&b'/') {
            crate::fs::path::normalize(core::str::from_utf8(exe_path).unwrap_or("/"))
        } else {
            exe
        };
        let cmdline = boot_slice(info.argv).to_vec();
        let mut files = crate::fs::stdio_table(&info.stdio_mode);
        // The container's terminal: pid 1's controlling terminal.
        if info.flags & qlib::abi::BOOT_CONSOLE != 0
            && info.tty_mask & 1 != 0
            && let Some(pty) = crate::fs::console::attach(&mut files, info.winsize)
        {
            crate::fs::console::set_session(&pty, 1);
        }
        // Switch the kernel to the process's PGD (same kernel half).
        process::activate(&mm);
        let mut proc = Process::new(mm, info.ids, files, cwd, exe, cmdline);
        proc.environ = split_strings(boot_slice(info.envp), info.envc).join(&0u8);
        if !proc.environ.is_empty() {
            proc.environ.push(0);
        }
        *PROCESS.lock() = Some(proc);
        crate::task::init();
        log::debug!(
            "entering user mode at {:#x}, rsp {:#x}",
            entry.rip,
            entry.rsp
        );
        // The first entry leaves like every later return (and like an
        // `execve`): a fresh context, `sysretq` through the return stub.
        let mut frame = crate::exec::fresh_frame(&entry);
        trap::prepare_return(&mut frame, true);
        // SAFETY: the frame is a fresh user context prepared for `sysretq`
        // and its address space is the active one.
        unsafe { arch::entry::enter_user(&frame) }
    }

    /// Lets the VMM start the other vCPUs (`smp_main`): every TSS,
    /// descriptor, the IDT and the heap are ready now.
    fn start_secondaries(cpus: u64) {
        if !(1..=arch::percpu::MAX_CPUS as u64).contains(&cpus) {
            hostcall::boot_error("BootInfo: vCPU count out of range");
        }
        if cpus > 1 {
            let n = hostcall::call_once(qlib::abi::Call::StartVcpus, [0; 6]);
            if n < 0 {
                hostcall::boot_error("a secondary vCPU did not come online");
            }
            log::debug!("{cpus} vCPUs, {n} secondaries online");
            if n == cpus as i64 - 1 {
                crate::task::offload::set_cpus(cpus as usize);
            }
        }
    }

    /// A secondary vCPU after its opt-in (`arch::boot`): RDI = its id. It
    /// waits in the host until vCPU 0 hands it a task's user mode
    /// (`task::offload`, docs/smp.md).
    #[unsafe(no_mangle)]
    pub extern "C" fn smp_main(k: u64) -> ! {
        let k = k as usize;
        if k == 0 || k >= arch::percpu::MAX_CPUS {
            hostcall::boot_error("secondary vCPU started with a bad id");
        }
        arch::percpu::install(k);
        arch::reset_gs_base();
        let cpu = arch::percpu::this();
        cpu.online
            .store(true, core::sync::atomic::Ordering::Release);
        crate::vdso::getcpu_by_syscall();
        log::info!("vCPU {k} online (native mode)");
        let (base, top) = arch::boot::ap_stack(k);
        crate::task::offload::secondary_main(base, top)
    }

    #[panic_handler]
    fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
        klog::report_panic(info)
    }
}

/// Host builds: the kernel only exists for `x86_64-unknown-none`.
#[cfg(not(target_os = "none"))]
fn main() {
    eprintln!("qkernel is the guest kernel; it is built for x86_64-unknown-none and run by qrun");
}
