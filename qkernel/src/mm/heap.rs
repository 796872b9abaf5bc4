//! The kernel heap: `linked_list_allocator` over a static region in the
//! kernel image. Untouched heap pages cost the host nothing.

use core::alloc::{GlobalAlloc, Layout};
use core::sync::atomic::{AtomicUsize, Ordering};

use linked_list_allocator::LockedHeap;

const HEAP_SIZE: usize = 16 << 20;

#[repr(C, align(4096))]
struct HeapArea([u8; HEAP_SIZE]);

static mut HEAP_AREA: HeapArea = HeapArea([0; HEAP_SIZE]);

/// The allocator, noting the highest address it ever handed out (the
/// heap above it was never touched).
struct Tracked(LockedHeap);

/// End of the highest allocation so far (a kernel virtual address).
static HIGH_WATER: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to `LockedHeap`, a correct allocator; only notes
// addresses on the side.
unsafe impl GlobalAlloc for Tracked {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { self.0.alloc(layout) };
        if !p.is_null() {
            HIGH_WATER.fetch_max(p as usize + layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.0.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Tracked = Tracked(LockedHeap::empty());

/// Hands the heap area to the allocator. Called once at boot.
pub fn init() {
    // SAFETY: called once, before any allocation; HEAP_AREA is used by
    // nothing else.
    unsafe {
        let start = core::ptr::addr_of_mut!(HEAP_AREA) as *mut u8;
        ALLOCATOR.0.lock().init(start, HEAP_SIZE);
    }
}

/// Free heap blocks taken by [`grab_free_pages`]: whole pages nothing
/// uses, which the host may drop while they are held.
pub struct Grabbed {
    blocks: alloc::vec::Vec<(core::ptr::NonNull<u8>, Layout)>,
}

/// Most blocks one [`grab_free_pages`] takes.
pub const MAX_GRABBED: usize = 256;

/// Free heap [`grab_free_pages`] leaves for allocations while it holds
/// the rest (a host call's logging, a control request).
const RESERVE: usize = 256 << 10;

/// Takes free heap memory in page-aligned blocks of at least two pages,
/// largest first (so that the host can drop them: a hibernated guest's
/// heap holes are garbage it need not keep). Each block's first page is
/// written again when it is given back ([`Grabbed::release`]: the
/// allocator's hole header), hence no single pages.
pub fn grab_free_pages() -> Grabbed {
    let mut blocks = alloc::vec::Vec::with_capacity(MAX_GRABBED);
    // Nothing below allocates: the vector has its room already.
    let mut heap = ALLOCATOR.0.lock();
    let reserve = Layout::from_size_align(RESERVE, 4096)
        .ok()
        .and_then(|l| heap.allocate_first_fit(l).ok().map(|p| (p, l)));
    let mut size = HEAP_SIZE;
    while size >= 8192 && blocks.len() < MAX_GRABBED {
        let Ok(layout) = Layout::from_size_align(size, 4096) else {
            break;
        };
        match heap.allocate_first_fit(layout) {
            Ok(p) => blocks.push((p, layout)),
            Err(()) => size /= 2,
        }
    }
    if let Some((p, l)) = reserve {
        // SAFETY: allocated just above from this heap with layout `l`.
        unsafe { heap.deallocate(p, l) };
    }
    Grabbed { blocks }
}

impl Grabbed {
    /// The blocks as guest-physical ranges.
    /// The blocks as guest-physical ranges, up to the heap's high-water
    /// mark (above it nothing was ever written).
    pub fn ranges(&self) -> impl Iterator<Item = qlib::abi::IoVec> + '_ {
        let high = HIGH_WATER.load(Ordering::Relaxed).next_multiple_of(4096) as u64;
        self.blocks.iter().filter_map(move |(p, l)| {
            let start = p.as_ptr() as u64;
            let end = (start + l.size() as u64).min(high);
            (end > start).then(|| qlib::abi::IoVec {
                gpa: super::kva_to_gpa(start),
                len: end - start,
            })
        })
    }

    /// Gives the blocks back to the allocator.
    pub fn release(self) {
        let mut heap = ALLOCATOR.0.lock();
        for &(p, l) in &self.blocks {
            // SAFETY: `p` came from this heap's `allocate_first_fit` with
            // layout `l` and is given back once.
            unsafe { heap.deallocate(p, l) };
        }
    }
}
