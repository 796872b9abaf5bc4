//! Page allocator micro-benchmark: qlib's `BitmapAllocator` against
//! `buddy_system_allocator`'s `FrameAllocator` (plain, and behind its spin
//! lock as `LockedFrameAllocator`, which is what a kernel would share
//! between CPUs). Ours runs two ways: `bitmap`, its shared entry points
//! (lock per alloc and per free), and `bitmap_cached`, through one CPU's
//! `PageCache` as the guest kernel uses it (no lock in the common case, one
//! compare-and-swap per free; refills and flushes move whole L2 words).
//!
//! Workloads, single-threaded, one page at a time:
//! - `pair`: allocate a page and free it at once, `PAIR_OPS` times;
//! - `batch`: allocate `BATCH` pages (several 4 MiB chunks' worth), then
//!   free them all in allocation order, repeated; chunks go back to the
//!   source and come again, as in a real workload.
//!
//! An op is one allocation plus one free. All allocators run in the same
//! process, interleaved within each of `REPS` repetitions after one warm-up
//! repetition; each metric is the median over the repetitions. Metric names:
//! `alloc.<workload>.<allocator>.ns_per_op` and `.ops_per_s`, plus
//! `alloc.inc_dec_ref.bitmap.ns_per_op` (one lock-free `inc_ref` + `dec_ref`).
//!
//! Chunks come from a pool reserved up front, so the bitmap allocator's
//! numbers include setting up control pages but not `mmap`.
//!
//! Run alone with `cargo run --release -p bench -- --only-alloc`. The bench
//! crate is built with one codegen unit (workspace `Cargo.toml`): the buddy
//! allocator's generic code is compiled here, and with several units its
//! speed followed how LLVM happened to split the crate, moving the buddy
//! numbers by up to 2x on unrelated edits.

use std::alloc::{Layout, alloc, dealloc};
use std::hint::black_box;
use std::time::Instant;

use buddy_system_allocator::{FrameAllocator, LockedFrameAllocator};
use qlib::bitmap_alloc::{BitmapAllocator, CHUNK_SIZE, ChunkSource, PAGE_SIZE, PageCache};

const REPS: usize = 7;
const PAIR_OPS: usize = 1_000_000;
const BATCH: usize = 8 * 1024;
const BATCH_ROUNDS: usize = 100;
const REF_OPS: usize = 1_000_000;
/// Chunks in the pool: enough for `BATCH` pages plus slack.
const POOL_CHUNKS: usize = BATCH / 1023 + 4;
/// Buddy frames: the same memory as the pool.
const FRAMES: usize = POOL_CHUNKS * CHUNK_SIZE / PAGE_SIZE;

/// Chunks from `std::alloc`, reserved once and recycled.
struct ChunkPool {
    free: Vec<usize>,
    all: Vec<usize>,
}

fn chunk_layout() -> Layout {
    Layout::from_size_align(CHUNK_SIZE, CHUNK_SIZE).expect("4 MiB size and alignment are valid")
}

impl ChunkPool {
    fn new(chunks: usize) -> Self {
        let all: Vec<usize> = (0..chunks)
            .map(|_| {
                // SAFETY: the layout has a non-zero size.
                let p = unsafe { alloc(chunk_layout()) };
                assert!(!p.is_null(), "cannot reserve the benchmark chunk pool");
                p as usize
            })
            .collect();
        Self {
            free: all.clone(),
            all,
        }
    }
}

// SAFETY: each chunk is a distinct live `std::alloc` block of CHUNK_SIZE
// bytes aligned to CHUNK_SIZE, handed out only while not already out (the
// allocator gives it back before it can come out again), and deallocated
// only when the pool is dropped, after the allocator that owns the pool.
unsafe impl ChunkSource for ChunkPool {
    fn alloc_chunk(&mut self) -> Option<usize> {
        self.free.pop()
    }

    fn free_chunk(&mut self, chunk: usize) {
        self.free.push(chunk);
    }
}

impl Drop for ChunkPool {
    fn drop(&mut self) {
        for &chunk in &self.all {
            // SAFETY: allocated in `new` with this layout, freed once here.
            unsafe { dealloc(chunk as *mut u8, chunk_layout()) };
        }
    }
}

/// The page operations the workloads need.
trait Pages {
    fn get(&mut self) -> usize;
    fn put(&mut self, page: usize);
}

struct Bitmap(BitmapAllocator<ChunkPool>);

impl Pages for Bitmap {
    fn get(&mut self) -> usize {
        self.0.alloc().expect("pool sized for the batch")
    }
    fn put(&mut self, page: usize) {
        self.0.free(page).expect("freeing a page we allocated");
    }
}

struct Cached<'a>(PageCache<'a, ChunkPool>);

impl Pages for Cached<'_> {
    fn get(&mut self) -> usize {
        self.0.alloc().expect("pool sized for the batch")
    }
    fn put(&mut self, page: usize) {
        self.0.free(page).expect("freeing a page we allocated");
    }
}

struct Buddy(FrameAllocator);

impl Pages for Buddy {
    fn get(&mut self) -> usize {
        self.0.alloc(1).expect("frames sized for the batch")
    }
    fn put(&mut self, page: usize) {
        self.0.dealloc(page, 1);
    }
}

struct LockedBuddy(LockedFrameAllocator);

impl Pages for LockedBuddy {
    fn get(&mut self) -> usize {
        self.0.lock().alloc(1).expect("frames sized for the batch")
    }
    fn put(&mut self, page: usize) {
        self.0.lock().dealloc(page, 1);
    }
}

/// Nanoseconds per op of `PAIR_OPS` alloc+free pairs.
fn pair(p: &mut impl Pages) -> f64 {
    let start = Instant::now();
    for _ in 0..PAIR_OPS {
        let page = p.get();
        p.put(black_box(page));
    }
    start.elapsed().as_nanos() as f64 / PAIR_OPS as f64
}

/// Nanoseconds per op of `BATCH_ROUNDS` rounds of `BATCH` allocs then frees.
fn batch(p: &mut impl Pages, pages: &mut Vec<usize>) -> f64 {
    let start = Instant::now();
    for _ in 0..BATCH_ROUNDS {
        pages.clear();
        for _ in 0..BATCH {
            pages.push(p.get());
        }
        for &page in black_box(&*pages) {
            p.put(page);
        }
    }
    start.elapsed().as_nanos() as f64 / (BATCH_ROUNDS * BATCH) as f64
}

/// Nanoseconds per lock-free `inc_ref` + `dec_ref` pair.
fn inc_dec_ref(a: &BitmapAllocator<ChunkPool>, page: usize) -> f64 {
    let start = Instant::now();
    for _ in 0..REF_OPS {
        a.inc_ref(black_box(page)).expect("page is allocated");
        a.dec_ref(black_box(page)).expect("page is allocated");
    }
    start.elapsed().as_nanos() as f64 / REF_OPS as f64
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn new_buddy() -> FrameAllocator {
    let mut f = FrameAllocator::new();
    f.add_frame(1, FRAMES + 1);
    f
}

fn new_locked_buddy() -> LockedFrameAllocator {
    let f = LockedFrameAllocator::new();
    f.lock().add_frame(1, FRAMES + 1);
    f
}

/// Runs the benchmark; returns `(metric, value)` pairs.
pub fn run_alloc_bench() -> Vec<(String, f64)> {
    let mut bitmap = Bitmap(BitmapAllocator::new(ChunkPool::new(POOL_CHUNKS)));
    let cached_alloc = BitmapAllocator::new(ChunkPool::new(POOL_CHUNKS));
    let mut cached = Cached(PageCache::new(&cached_alloc));
    let mut buddy = Buddy(new_buddy());
    let mut locked = LockedBuddy(new_locked_buddy());
    let mut pages = Vec::with_capacity(BATCH);
    let ref_page = bitmap.get();

    // [workload][allocator] -> samples (ns/op)
    let names = ["bitmap", "bitmap_cached", "buddy", "buddy_locked"];
    let mut pair_ns = vec![Vec::new(); names.len()];
    let mut batch_ns = vec![Vec::new(); names.len()];
    let mut ref_ns = Vec::new();
    for rep in 0..=REPS {
        let samples = [
            (pair(&mut bitmap), batch(&mut bitmap, &mut pages)),
            (pair(&mut cached), batch(&mut cached, &mut pages)),
            (pair(&mut buddy), batch(&mut buddy, &mut pages)),
            (pair(&mut locked), batch(&mut locked, &mut pages)),
        ];
        let r = inc_dec_ref(&bitmap.0, ref_page);
        if rep == 0 {
            continue; // warm-up
        }
        for (i, (p, b)) in samples.into_iter().enumerate() {
            pair_ns[i].push(p);
            batch_ns[i].push(b);
        }
        ref_ns.push(r);
    }
    bitmap.put(ref_page);

    let mut out = Vec::new();
    for (workload, samples) in [("pair", pair_ns), ("batch", batch_ns)] {
        for (name, s) in names.iter().zip(samples) {
            let ns = median(s);
            out.push((format!("alloc.{workload}.{name}.ns_per_op"), ns));
            out.push((format!("alloc.{workload}.{name}.ops_per_s"), 1e9 / ns));
        }
    }
    out.push((
        "alloc.inc_dec_ref.bitmap.ns_per_op".to_string(),
        median(ref_ns),
    ));
    out
}
