//! Unit and concurrency tests, plus the helpers the property tests share.

extern crate std;

use std::alloc::{Layout, alloc, dealloc};
use std::collections::HashSet;
use std::format;
use std::string::{String, ToString};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::vec::Vec;

use super::*;

/// What a [`TestSource`] has done, shared with the test.
#[derive(Default)]
pub(super) struct SourceLog {
    pub live: HashSet<usize>,
    /// Chunks given back: kept mapped (the `ChunkSource` contract) and
    /// handed out again first.
    pub spare: Vec<usize>,
    pub allocs: usize,
    pub frees: usize,
}

/// Chunks from `std::alloc` (4 MiB aligned), at most `limit` live at once;
/// chunks given back are reused, and unmapped only with the source.
pub(super) struct TestSource {
    limit: usize,
    log: Arc<Mutex<SourceLog>>,
}

fn chunk_layout() -> Layout {
    Layout::from_size_align(CHUNK_SIZE, CHUNK_SIZE).expect("4 MiB is a valid alignment")
}

/// A raw 4 MiB-aligned chunk that the allocator under test never sees.
pub(super) struct ForeignChunk(pub usize);

impl ForeignChunk {
    pub fn new() -> Self {
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { alloc(chunk_layout()) };
        assert!(!p.is_null(), "out of memory");
        Self(p as usize)
    }
}

impl Drop for ForeignChunk {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with the same layout.
        unsafe { dealloc(self.0 as *mut u8, chunk_layout()) };
    }
}

impl TestSource {
    pub fn new(limit: usize) -> (Self, Arc<Mutex<SourceLog>>) {
        let log = Arc::new(Mutex::new(SourceLog::default()));
        (
            Self {
                limit,
                log: Arc::clone(&log),
            },
            log,
        )
    }
}

// SAFETY: chunks come from `std::alloc` with size and alignment CHUNK_SIZE,
// are handed out only while not out already, stay mapped after they come
// back (reused by this source only) and are freed when the source is
// dropped, after the allocator that owns it.
unsafe impl ChunkSource for TestSource {
    fn alloc_chunk(&mut self) -> Option<usize> {
        let mut log = self.log.lock().expect("log lock");
        if log.live.len() >= self.limit {
            return None;
        }
        let chunk = match log.spare.pop() {
            Some(chunk) => chunk,
            None => {
                // SAFETY: the layout has a non-zero size.
                let p = unsafe { alloc(chunk_layout()) };
                if p.is_null() {
                    return None;
                }
                p as usize
            }
        };
        log.live.insert(chunk);
        log.allocs += 1;
        Some(chunk)
    }

    fn free_chunk(&mut self, chunk: usize) {
        let mut log = self.log.lock().expect("log lock");
        assert!(
            log.live.remove(&chunk),
            "freed a chunk that is not out: {chunk:#x}"
        );
        log.frees += 1;
        log.spare.push(chunk);
    }
}

impl Drop for TestSource {
    fn drop(&mut self) {
        let mut log = self.log.lock().expect("log lock");
        let log = &mut *log;
        for chunk in log.live.drain().chain(log.spare.drain(..)) {
            // SAFETY: allocated by `alloc_chunk` with this layout; each
            // chunk is in exactly one of the two sets, freed once here.
            unsafe { dealloc(chunk as *mut u8, chunk_layout()) };
        }
    }
}

impl<S: ChunkSource> BitmapAllocator<S> {
    /// Held chunks in address order.
    pub(super) fn held_chunks(&self) -> Vec<usize> {
        let _inner = self.inner.lock();
        let mut v = Vec::new();
        self.owned.for_each(|c| v.push(c));
        v
    }

    /// Checks every structural invariant; single-threaded use only.
    pub(super) fn check_invariants(&self) -> Result<(), String> {
        self.check_invariants_with(&[])
    }

    /// `check_invariants` with `cached` pages reserved by page caches.
    pub(super) fn check_invariants_with(&self, cached: &[usize]) -> Result<(), String> {
        let cached: HashSet<usize> = cached.iter().copied().collect();
        let inner = self.inner.lock();
        let mut held = Vec::new();
        self.owned.for_each(|c| held.push(c));
        let mut listed = Vec::new();
        inner.list.for_each(|c| listed.push(c));
        let listed_set: HashSet<usize> = listed.iter().copied().collect();
        if listed_set.len() != listed.len() {
            return Err("a chunk is on the list twice".into());
        }
        let (mut free, mut fully_free) = (0, 0);
        for &c in &held {
            // SAFETY: held (ownership record) and the lock is held.
            let cp = unsafe { ControlPage::at(c) };
            cp.check(|i| cached.contains(&(c + i * PAGE_SIZE)))
                .map_err(|e| format!("chunk {c:#x}: {e}"))?;
            let n = cp.free_pages();
            free += n;
            fully_free += usize::from(n == USABLE_PAGES_PER_CHUNK);
            if (n > 0) != listed_set.contains(&c) {
                return Err(format!(
                    "chunk {c:#x} with {n} free pages on list: {}",
                    n == 0
                ));
            }
        }
        if listed.iter().any(|c| !held.contains(c)) {
            return Err("a chunk on the list is not held".into());
        }
        if held.len() != inner.chunks || free != inner.list.free_pages() {
            return Err("counters disagree with the chunks".into());
        }
        if fully_free != inner.list.free_chunks() {
            return Err("free_chunks disagrees with the chunks".into());
        }
        Ok(())
    }
}

fn chunk_of(page: usize) -> usize {
    page & !(CHUNK_SIZE - 1)
}

fn new_alloc(limit: usize) -> (BitmapAllocator<TestSource>, Arc<Mutex<SourceLog>>) {
    let (src, log) = TestSource::new(limit);
    (BitmapAllocator::new(src), log)
}

fn alloc_n(a: &BitmapAllocator<TestSource>, n: usize) -> Vec<usize> {
    (0..n).map(|_| a.alloc().expect("alloc")).collect()
}

#[test]
fn fresh_allocator_holds_nothing() {
    let (a, log) = new_alloc(4);
    assert_eq!(a.stats(), AllocStats::default());
    assert_eq!(log.lock().unwrap().allocs, 0);
    assert_eq!(a.free(0x40_1000), Err(AllocError::NotOwned));
    assert_eq!(a.refcount(0x40_1000), Err(AllocError::NotOwned));
}

#[test]
fn fills_a_chunk_then_takes_a_second() {
    let (a, log) = new_alloc(4);
    let pages = alloc_n(&a, USABLE_PAGES_PER_CHUNK);
    let first = chunk_of(pages[0]);
    let distinct: HashSet<usize> = pages.iter().copied().collect();
    assert_eq!(distinct.len(), USABLE_PAGES_PER_CHUNK);
    for &p in &pages {
        assert_eq!(chunk_of(p), first);
        assert_ne!(p, first, "control page handed out");
        assert_eq!(p % PAGE_SIZE, 0);
        assert_eq!(a.refcount(p), Ok(1));
    }
    let s = a.stats();
    assert_eq!((s.chunks, s.pages_in_use, s.pages_free), (1, 1023, 0));
    assert_eq!(log.lock().unwrap().allocs, 1);

    let next = a.alloc().expect("second chunk");
    assert_ne!(chunk_of(next), first);
    assert_eq!(
        next,
        chunk_of(next) + PAGE_SIZE,
        "lowest page of the new chunk"
    );
    assert_eq!(log.lock().unwrap().allocs, 2);
    let s = a.stats();
    assert_eq!((s.chunks, s.pages_in_use, s.pages_free), (2, 1024, 1022));
    a.check_invariants().unwrap();
}

#[test]
fn freed_page_rejoins_and_is_reused_first() {
    let (a, _log) = new_alloc(4);
    let pages = alloc_n(&a, USABLE_PAGES_PER_CHUNK + 5);
    let victim = pages[500];
    a.free(victim).unwrap();
    assert_eq!(a.refcount(victim), Ok(0));
    a.check_invariants().unwrap();
    // The full first chunk got a page back: it is at the head of the list.
    assert_eq!(a.alloc(), Some(victim));
    assert_eq!(a.stats().pages_in_use, USABLE_PAGES_PER_CHUNK + 5);
    a.check_invariants().unwrap();
}

#[test]
fn control_page_never_handed_out() {
    let (a, _log) = new_alloc(3);
    let pages = alloc_n(&a, 3 * USABLE_PAGES_PER_CHUNK);
    assert!(pages.iter().all(|p| p & (CHUNK_SIZE - 1) != 0));
    assert_eq!(a.alloc(), None, "source limit reached");
    a.check_invariants().unwrap();
}

#[test]
fn exhausted_source_recovers_after_free() {
    let (a, _log) = new_alloc(1);
    let pages = alloc_n(&a, USABLE_PAGES_PER_CHUNK);
    assert_eq!(a.alloc(), None);
    a.free(pages[7]).unwrap();
    assert_eq!(a.alloc(), Some(pages[7]));
}

#[test]
fn fully_free_chunks_go_back_after_the_cache_fills() {
    let chunks = FREE_CHUNK_CACHE + 2;
    let (a, log) = new_alloc(chunks);
    let pages = alloc_n(&a, chunks * USABLE_PAGES_PER_CHUNK);
    let mut by_chunk: Vec<Vec<usize>> = Vec::new();
    for c in a.held_chunks() {
        by_chunk.push(
            pages
                .iter()
                .copied()
                .filter(|&p| chunk_of(p) == c)
                .collect(),
        );
    }
    for (i, group) in by_chunk.iter().enumerate() {
        for &p in group {
            a.free(p).unwrap();
        }
        let s = a.stats();
        let emptied = i + 1;
        assert_eq!(s.free_chunks, emptied.min(FREE_CHUNK_CACHE));
        assert_eq!(
            log.lock().unwrap().frees,
            emptied.saturating_sub(FREE_CHUNK_CACHE)
        );
        assert_eq!(s.chunks, chunks - emptied.saturating_sub(FREE_CHUNK_CACHE));
        // A released chunk's pages are no longer ours.
        if emptied > FREE_CHUNK_CACHE {
            assert_eq!(a.free(group[0]), Err(AllocError::NotOwned));
        }
        a.check_invariants().unwrap();
    }
    assert_eq!(log.lock().unwrap().live.len(), FREE_CHUNK_CACHE);
}

#[test]
fn alloc_free_at_a_chunk_boundary_does_not_thrash() {
    let (a, log) = new_alloc(4);
    let _full = alloc_n(&a, USABLE_PAGES_PER_CHUNK);
    for _ in 0..100 {
        let p = a.alloc().unwrap();
        a.free(p).unwrap();
    }
    let log = log.lock().unwrap();
    assert_eq!((log.allocs, log.frees), (2, 0));
}

#[test]
fn bad_input_errors() {
    let (a, _log) = new_alloc(2);
    let p = a.alloc().unwrap();
    let q = a.alloc().unwrap();
    let chunk = chunk_of(p);
    let foreign = ForeignChunk::new();

    for bad in [
        p + 8,
        p + PAGE_SIZE - 1,
        chunk,
        foreign.0,
        foreign.0 + PAGE_SIZE,
        0,
        usize::MAX,
    ] {
        assert_eq!(a.free(bad), Err(AllocError::NotOwned), "free {bad:#x}");
        assert_eq!(
            a.inc_ref(bad),
            Err(AllocError::NotOwned),
            "inc_ref {bad:#x}"
        );
        assert_eq!(
            a.dec_ref(bad),
            Err(AllocError::NotOwned),
            "dec_ref {bad:#x}"
        );
        assert_eq!(
            a.refcount(bad),
            Err(AllocError::NotOwned),
            "refcount {bad:#x}"
        );
    }

    assert_eq!(a.inc_ref(q), Ok(2));
    assert_eq!(a.free(q), Err(AllocError::StillReferenced));
    assert_eq!(a.refcount(q), Ok(2), "failed free changed nothing");

    a.free(p).unwrap();
    assert_eq!(a.free(p), Err(AllocError::DoubleFree));
    assert_eq!(a.dec_ref(p), Err(AllocError::RefcountUnderflow));
    assert_eq!(a.inc_ref(p), Err(AllocError::NotAllocated));
    assert_eq!(a.refcount(p), Ok(0));
    // A page never handed out is free too.
    let never = chunk + 900 * PAGE_SIZE;
    assert_eq!(a.free(never), Err(AllocError::DoubleFree));
    assert_eq!(a.dec_ref(never), Err(AllocError::RefcountUnderflow));
    a.check_invariants().unwrap();
}

#[test]
fn refcount_overflow_is_an_error() {
    let (a, _log) = new_alloc(1);
    let p = a.alloc().unwrap();
    for n in 2..=u16::MAX {
        assert_eq!(a.inc_ref(p), Ok(n));
    }
    assert_eq!(a.inc_ref(p), Err(AllocError::RefcountOverflow));
    assert_eq!(a.refcount(p), Ok(u16::MAX));
}

#[test]
fn dec_ref_to_zero_frees() {
    let (a, _log) = new_alloc(1);
    let p = a.alloc().unwrap();
    assert_eq!(a.inc_ref(p), Ok(2));
    assert_eq!(a.dec_ref(p), Ok(1));
    assert_eq!(a.stats().pages_in_use, 1);
    assert_eq!(a.dec_ref(p), Ok(0));
    assert_eq!(a.stats().pages_in_use, 0);
    assert_eq!(a.dec_ref(p), Err(AllocError::RefcountUnderflow));
    a.check_invariants().unwrap();
}

#[test]
fn error_messages_are_distinct() {
    use AllocError::*;
    let all = [
        DoubleFree,
        NotOwned,
        RefcountUnderflow,
        RefcountOverflow,
        NotAllocated,
        StillReferenced,
    ];
    let msgs: HashSet<String> = all.iter().map(|e| e.to_string()).collect();
    assert_eq!(msgs.len(), all.len());
    assert!(DoubleFree.to_string().contains("double free"));
}

fn runs(a: &BitmapAllocator<TestSource>) -> Vec<(usize, usize)> {
    let mut v = Vec::new();
    a.for_each_free_run(|s, l| v.push((s, l)));
    v
}

#[test]
fn free_runs_coalesce_and_skip_control_pages() {
    let (a, _log) = new_alloc(2);
    assert!(runs(&a).is_empty());
    let pages = alloc_n(&a, 10); // pages 1..=10 of the first chunk
    let c = chunk_of(pages[0]);
    assert_eq!(runs(&a), [(c + 11 * PAGE_SIZE, 1013 * PAGE_SIZE)]);
    a.free(pages[4]).unwrap(); // page 5
    a.free(pages[2]).unwrap(); // page 3
    assert_eq!(
        runs(&a),
        [
            (c + 3 * PAGE_SIZE, PAGE_SIZE),
            (c + 5 * PAGE_SIZE, PAGE_SIZE),
            (c + 11 * PAGE_SIZE, 1013 * PAGE_SIZE)
        ]
    );
    a.free(pages[3]).unwrap(); // page 4 joins 3 and 5
    assert_eq!(
        runs(&a),
        [
            (c + 3 * PAGE_SIZE, 3 * PAGE_SIZE),
            (c + 11 * PAGE_SIZE, 1013 * PAGE_SIZE)
        ]
    );
    a.free(pages[0]).unwrap(); // page 1 starts right after the control page
    assert_eq!(runs(&a)[0], (c + PAGE_SIZE, PAGE_SIZE));
}

#[test]
fn free_runs_of_one_chunk() {
    let (a, _log) = new_alloc(2);
    let pages = alloc_n(&a, USABLE_PAGES_PER_CHUNK + 3);
    let (c0, c1) = (chunk_of(pages[0]), chunk_of(pages[USABLE_PAGES_PER_CHUNK]));
    assert_ne!(c0, c1);
    a.free(pages[1]).unwrap(); // page 2 of the first chunk
    let mut v = Vec::new();
    assert!(a.for_each_free_run_in(c0, |s, l| v.push((s, l))));
    assert_eq!(v, [(c0 + 2 * PAGE_SIZE, PAGE_SIZE)]);
    v.clear();
    assert!(a.for_each_free_run_in(c1, |s, l| v.push((s, l))));
    assert_eq!(
        v,
        [(c1 + 4 * PAGE_SIZE, (USABLE_PAGES_PER_CHUNK - 3) * PAGE_SIZE)]
    );
    // Not a held chunk, or not a chunk address: nothing.
    let foreign = ForeignChunk::new();
    assert!(!a.for_each_free_run_in(foreign.0, |_, _| panic!("called")));
    assert!(!a.for_each_free_run_in(c0 + PAGE_SIZE, |_, _| panic!("called")));
}

/// Hands out one given chunk, once; records what comes back.
struct PresetSource {
    chunk: Option<usize>,
    returned: Arc<Mutex<Vec<usize>>>,
}

// SAFETY: the one chunk is a live `ForeignChunk` (4 MiB, aligned, ours)
// that the test keeps alive longer than the allocator.
unsafe impl ChunkSource for PresetSource {
    fn alloc_chunk(&mut self) -> Option<usize> {
        self.chunk.take()
    }

    fn free_chunk(&mut self, chunk: usize) {
        self.returned.lock().unwrap().push(chunk);
    }
}

#[test]
fn window_base_bounds_the_chunks_accepted() {
    let foreign = ForeignChunk::new();
    let returned = Arc::new(Mutex::new(Vec::new()));
    let src = PresetSource {
        chunk: Some(foreign.0),
        returned: Arc::clone(&returned),
    };
    // The chunk lies just below the window: refused and given back.
    let a = BitmapAllocator::with_window_base(src, foreign.0 + CHUNK_SIZE);
    assert_eq!(a.alloc(), None);
    assert_eq!(*returned.lock().unwrap(), [foreign.0]);
    assert_eq!(a.stats(), AllocStats::default());
    drop(a);

    let src = PresetSource {
        chunk: Some(foreign.0),
        returned: Arc::clone(&returned),
    };
    // (Saturates to 0 for a low heap address: still inside the window.)
    let last_slot = foreign.0.saturating_sub((WINDOW_CHUNKS - 1) * CHUNK_SIZE);
    let a = BitmapAllocator::with_window_base(src, last_slot);
    assert_eq!(a.alloc(), Some(foreign.0 + PAGE_SIZE), "inside the window");
    assert_eq!(a.free(foreign.0 + PAGE_SIZE), Ok(()));
    drop(a);
    assert_eq!(
        *returned.lock().unwrap(),
        [foreign.0, foreign.0],
        "drop gave it back"
    );
}

#[test]
fn drop_returns_every_chunk() {
    let (a, log) = new_alloc(3);
    let _pages = alloc_n(&a, 2 * USABLE_PAGES_PER_CHUNK + 1);
    assert_eq!(log.lock().unwrap().live.len(), 3);
    drop(a);
    let log = log.lock().unwrap();
    assert_eq!((log.live.len(), log.frees), (0, 3));
}

#[test]
fn concurrent_refcounts_are_exact() {
    const THREADS: usize = 8;
    const ROUNDS: usize = 20_000;
    let (a, _log) = new_alloc(2);
    let a = Arc::new(a);
    let pages = alloc_n(&a, 4);
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (a, pages, barrier) = (Arc::clone(&a), pages.clone(), Arc::clone(&barrier));
            thread::spawn(move || {
                barrier.wait();
                for r in 0..ROUNDS {
                    let p = pages[(t + r) % pages.len()];
                    a.inc_ref(p).unwrap();
                    a.inc_ref(p).unwrap();
                    assert!(a.dec_ref(p).unwrap() >= 2);
                }
                // Each thread leaves one reference per round on its pages.
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let per_page = THREADS * ROUNDS / pages.len();
    for &p in &pages {
        assert_eq!(usize::from(a.refcount(p).unwrap()), 1 + per_page);
    }
    a.check_invariants().unwrap();
}

#[test]
fn concurrent_last_dec_ref_frees_exactly_once() {
    const THREADS: u16 = 8;
    let (a, _log) = new_alloc(2);
    let a = Arc::new(a);
    for _ in 0..200 {
        let p = a.alloc().unwrap();
        for _ in 1..THREADS {
            a.inc_ref(p).unwrap();
        }
        let barrier = Arc::new(Barrier::new(usize::from(THREADS)));
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                let (a, barrier) = (Arc::clone(&a), Arc::clone(&barrier));
                thread::spawn(move || {
                    barrier.wait();
                    a.dec_ref(p).unwrap()
                })
            })
            .collect();
        let mut left: Vec<u16> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        left.sort_unstable();
        assert_eq!(left, (0..THREADS).collect::<Vec<_>>());
        assert_eq!(a.stats().pages_in_use, 0);
        a.check_invariants().unwrap();
    }
}

#[test]
fn concurrent_alloc_free_never_shares_a_page() {
    const THREADS: usize = 6;
    let (a, _log) = new_alloc(16);
    let a = Arc::new(a);
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let a = Arc::clone(&a);
            thread::spawn(move || {
                for round in 0..50 {
                    let pages: Vec<usize> = (0..300).map(|_| a.alloc().unwrap()).collect();
                    let tag = (t * 1000 + round) as u64;
                    for &p in &pages {
                        // SAFETY: `p` is a page we own exclusively (refcount 1).
                        unsafe { (p as *mut u64).write(tag) };
                    }
                    for &p in &pages {
                        // SAFETY: as above; nobody else may write it.
                        assert_eq!(unsafe { (p as *const u64).read() }, tag);
                        a.free(p).unwrap();
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let s = a.stats();
    assert_eq!(s.pages_in_use, 0);
    assert!(s.free_chunks <= FREE_CHUNK_CACHE);
    a.check_invariants().unwrap();
}

/// A source with no memory at all.
struct NoChunks;

// SAFETY: never hands out a chunk.
unsafe impl ChunkSource for NoChunks {
    fn alloc_chunk(&mut self) -> Option<usize> {
        None
    }

    fn free_chunk(&mut self, chunk: usize) {
        panic!("never handed out {chunk:#x}");
    }
}

/// The kernel keeps its allocator in a `static`: `new` must be `const` and
/// the allocator `Sync`.
static STATIC_ALLOC: BitmapAllocator<NoChunks> = BitmapAllocator::new(NoChunks);
static STATIC_WINDOWED: BitmapAllocator<NoChunks> =
    BitmapAllocator::with_window_base(NoChunks, 0xffff_8000_0000_0000);

#[test]
fn usable_from_a_static() {
    assert_eq!(STATIC_ALLOC.alloc(), None);
    assert_eq!(STATIC_WINDOWED.alloc(), None);
    assert_eq!(
        STATIC_WINDOWED.free(0xffff_8000_0040_1000),
        Err(AllocError::NotOwned)
    );
    assert_eq!(STATIC_ALLOC.stats(), AllocStats::default());
}

/// Lock-free calls racing with chunks going back to the source and coming
/// out again (control pages retired and set up anew): a racy `refcount` of
/// a page whose chunk is being released gets a count or `NotOwned`, and
/// stray frees of such pages get an error, never a fault or a page handed
/// out twice.
#[test]
fn lock_free_calls_race_safely_with_chunk_release() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let (a, log) = new_alloc(8);
    let a = Arc::new(a);
    let pinned = a.alloc().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    // Pages of the chunks the churn thread will take and release.
    let churn = alloc_n(&a, 5 * USABLE_PAGES_PER_CHUNK);
    let targets: Vec<usize> = churn.iter().copied().step_by(97).collect();
    for &p in &churn {
        a.free(p).unwrap();
    }
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let (a, stop, targets) = (Arc::clone(&a), Arc::clone(&stop), targets.clone());
            thread::spawn(move || {
                let mut pinned_refs = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    for &p in &targets {
                        match a.refcount(p) {
                            Ok(_) | Err(AllocError::NotOwned) => {}
                            Err(e) => panic!("refcount: {e}"),
                        }
                    }
                    a.inc_ref(pinned).unwrap();
                    a.dec_ref(pinned).unwrap();
                    pinned_refs += 1;
                }
                pinned_refs
            })
        })
        .collect();
    for _ in 0..200 {
        let pages = alloc_n(&a, 5 * USABLE_PAGES_PER_CHUNK);
        for p in pages {
            a.free(p).unwrap();
        }
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    assert!(
        log.lock().unwrap().frees > 0,
        "the race never released a chunk"
    );
    assert_eq!(a.refcount(pinned), Ok(1));
    assert_eq!(a.stats().pages_in_use, 1);
    a.check_invariants().unwrap();
}
