//! The kernel heap: `linked_list_allocator` over a static region in the
//! kernel image. Untouched heap pages cost the host nothing.

use core::alloc::{GlobalAlloc, Layout};

use linked_list_allocator::LockedHeap;

const HEAP_SIZE: usize = 16 << 20;

#[repr(C, align(4096))]
struct HeapArea([u8; HEAP_SIZE]);

static mut HEAP_AREA: HeapArea = HeapArea([0; HEAP_SIZE]);

/// The allocator. The heap starts at [`INITIAL`] bytes of the area and
/// grows at its end in [`GROW`] steps as allocations need it, so the
/// allocator's free holes lie below the highest address ever used (the
/// area above was never touched: a hibernation hands back only holes that
/// held data, [`grab_free_pages`]).
struct Growing(LockedHeap);

/// The heap's first size.
const INITIAL: usize = 256 << 10;
/// How much the heap grows at least when an allocation does not fit.
const GROW: usize = 64 << 10;

// SAFETY: a `linked_list_allocator` heap, a correct allocator; growing
// only adds the area's next bytes, which nothing else uses.
unsafe impl GlobalAlloc for Growing {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let mut heap = self.0.lock();
        loop {
            if let Ok(p) = heap.allocate_first_fit(layout) {
                return p.as_ptr();
            }
            let room = HEAP_SIZE - heap.size();
            if room == 0 {
                return core::ptr::null_mut();
            }
            let by = (layout.size() + layout.align())
                .next_multiple_of(GROW)
                .min(room);
            back(heap.top(), by);
            // SAFETY: the `by` bytes after the heap's top are the rest of
            // HEAP_AREA, which only this heap uses.
            unsafe { heap.extend(by) };
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if let Some(p) = core::ptr::NonNull::new(ptr) {
            // SAFETY: the caller's contract: `ptr` came from `alloc` with
            // `layout`.
            unsafe { self.0.lock().deallocate(p, layout) };
        }
    }
}

#[global_allocator]
static ALLOCATOR: Growing = Growing(LockedHeap::empty());

/// Hands the heap area to the allocator. Called once at boot.
pub fn init() {
    // SAFETY: called once, before any allocation; HEAP_AREA is used by
    // nothing else.
    unsafe {
        let start = core::ptr::addr_of_mut!(HEAP_AREA) as *mut u8;
        ALLOCATOR.0.lock().init(start, INITIAL);
        back(start, INITIAL);
    }
}

/// Heap memory is backed by the host before the kernel first writes it,
/// as fresh user frames are (`frames::back`): one host call instead of a
/// host fault inside the hypervisor's shadow fault per page.
fn back(from: *mut u8, len: usize) {
    super::frames::back(super::kva_to_gpa(from as u64), len as u64);
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
    let mut size = heap.size().next_power_of_two();
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
    /// The blocks as guest-physical ranges.
    pub fn ranges(&self) -> impl Iterator<Item = qlib::abi::IoVec> + '_ {
        self.blocks.iter().map(|(p, l)| qlib::abi::IoVec {
            gpa: super::kva_to_gpa(p.as_ptr() as u64),
            len: l.size() as u64,
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
