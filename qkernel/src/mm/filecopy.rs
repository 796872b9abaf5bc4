//! Private copies of file-window pages (a write to a `MAP_PRIVATE` file
//! mapping: data segments), made by the VMM (`Call::CopyPages`).
//!
//! On this hypervisor every window page the guest touches costs a
//! shadow-MMU fault that KVM cannot prefetch (the window's memslot is
//! read-only), ~25 µs each: the kernel reading 16 window pages to copy
//! them cost more than the host call that has the host kernel copy them
//! (docs/coldstart.md, "Private copies made by the VMM"). Fewer than
//! [`HOST_MIN`] pages, a refused call, or a secondary vCPU (whose VMM
//! thread does not serve it) copy in the kernel as before.

use alloc::vec::Vec;

use qlib::abi::{COPY_PAGES_MAX, Call};
use qlib::pte::Pte;

use super::pagetable::PageTables;
use super::{frames, gpa_to_kva, kva_to_gpa};
use crate::errno::Errno;

/// Fewest pages worth a host call (one exit costs about what the kernel's
/// own copy of two window pages does).
const HOST_MIN: usize = 3;

/// One pending copy.
struct Copy {
    va: u64,
    dst: u64,
    src: u64,
    pte: Pte,
}

/// Copies gathered for one range, mapped by [`Copies::finish`]. Dropped
/// unfinished (an error on the way), the fresh pages are freed.
#[derive(Default)]
pub struct Copies {
    items: Vec<Copy>,
}

impl Copies {
    /// A fresh page for a copy of window page `src`, to be mapped at `va`
    /// with `flags`; copies and maps the batch once it is full.
    pub fn push(
        &mut self,
        pt: &mut PageTables,
        va: u64,
        src: u64,
        flags: u64,
    ) -> Result<(), Errno> {
        let dst = frames::alloc_zeroed().ok_or(Errno::ENOMEM)?;
        self.items.push(Copy {
            va,
            dst,
            src,
            pte: Pte::new(dst, flags),
        });
        if self.items.len() as u64 >= COPY_PAGES_MAX {
            self.finish(pt)?;
        }
        Ok(())
    }

    /// Copies the gathered pages (by the VMM, else here) and writes their
    /// PTEs; a PTE that was present needs the caller's TLB flush.
    pub fn finish(&mut self, pt: &mut PageTables) -> Result<(), Errno> {
        if self.items.is_empty() {
            return Ok(());
        }
        if self.items.len() < HOST_MIN || !by_host(&self.items) {
            for c in &self.items {
                // SAFETY: both are whole pages in the direct map; `dst`
                // is fresh and mapped nowhere yet.
                unsafe {
                    core::ptr::copy_nonoverlapping(
                        gpa_to_kva(c.src) as *const u8,
                        gpa_to_kva(c.dst) as *mut u8,
                        4096,
                    );
                }
            }
        }
        for c in core::mem::take(&mut self.items) {
            let Some(leaf) = pt.leaf(c.va, true) else {
                frames::put(c.dst);
                return Err(Errno::ENOMEM);
            };
            // SAFETY: `leaf` points into a live page-table page of ours.
            unsafe { *leaf = c.pte.0 };
        }
        Ok(())
    }
}

impl Drop for Copies {
    fn drop(&mut self) {
        for c in self.items.drain(..) {
            frames::put(c.dst);
        }
    }
}

/// Has the VMM copy `items` (vCPU 0 only); whether it did.
fn by_host(items: &[Copy]) -> bool {
    if crate::arch::percpu::this()
        .id
        .load(core::sync::atomic::Ordering::Relaxed)
        != 0
    {
        return false;
    }
    let pairs: Vec<[u64; 2]> = items.iter().map(|c| [c.dst, c.src]).collect();
    let list = kva_to_gpa(pairs.as_ptr() as u64);
    crate::hostcall::call_once(Call::CopyPages, [list, pairs.len() as u64, 0, 0, 0, 0]) == 0
}
