//! The kernel heap: `linked_list_allocator` over a static region in the
//! kernel image. Untouched heap pages cost the host nothing.

use linked_list_allocator::LockedHeap;

const HEAP_SIZE: usize = 16 << 20;

#[repr(C, align(4096))]
struct HeapArea([u8; HEAP_SIZE]);

static mut HEAP_AREA: HeapArea = HeapArea([0; HEAP_SIZE]);

#[global_allocator]
static ALLOCATOR: LockedHeap = LockedHeap::empty();

/// Hands the heap area to the allocator. Called once at boot.
pub fn init() {
    // SAFETY: called once, before any allocation; HEAP_AREA is used by
    // nothing else.
    unsafe {
        let start = core::ptr::addr_of_mut!(HEAP_AREA) as *mut u8;
        ALLOCATOR.lock().init(start, HEAP_SIZE);
    }
}
