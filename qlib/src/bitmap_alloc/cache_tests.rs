//! Tests of the per-CPU page cache: unit, concurrency and a property test
//! against a model.

extern crate std;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::thread;
use std::vec::Vec;

use proptest::prelude::*;
use proptest::sample::Index;

use super::tests::TestSource;
use super::*;

fn new_alloc(limit: usize) -> BitmapAllocator<TestSource> {
    BitmapAllocator::new(TestSource::new(limit).0)
}

#[test]
fn refill_reserves_whole_words_and_counts_them_in_use() {
    let a = new_alloc(4);
    let mut c = PageCache::new(&a);
    let p = c.alloc().expect("page");
    assert_eq!(a.refcount(p), Ok(1));
    // Word 0 of a fresh chunk has 63 free pages (page 0 is the control
    // page), then one page of word 1 completes the batch.
    assert_eq!(c.len(), CACHE_BATCH - 1);
    assert_eq!(a.stats().pages_in_use, CACHE_BATCH);
    for &q in c.pages() {
        assert_eq!(a.refcount(q), Ok(0), "a cached page has count 0");
    }
    a.check_invariants_with(c.pages()).unwrap();
    // The bitmaps hand out none of the cached pages.
    let direct = a.alloc().expect("page");
    assert!(!c.pages().contains(&direct) && direct != p);
}

#[test]
fn cached_pages_refuse_double_free_and_new_references() {
    let a = new_alloc(4);
    let mut c = PageCache::new(&a);
    let p = c.alloc().expect("page");
    c.free(p).unwrap();
    assert_eq!(c.free(p), Err(AllocError::DoubleFree));
    assert_eq!(a.free(p), Err(AllocError::DoubleFree));
    assert_eq!(a.inc_ref(p), Err(AllocError::NotAllocated));
    assert_eq!(c.dec_ref(p), Err(AllocError::RefcountUnderflow));
    assert_eq!(c.free(p + 8), Err(AllocError::NotOwned));
    assert_eq!(c.free(p & !(CHUNK_SIZE - 1)), Err(AllocError::NotOwned));
    a.check_invariants_with(c.pages()).unwrap();
    // The page freed last comes out first.
    assert_eq!(c.alloc(), Some(p));
}

#[test]
fn shared_page_goes_to_the_cache_on_the_last_reference() {
    let a = new_alloc(4);
    let mut c = PageCache::new(&a);
    let p = c.alloc().expect("page");
    assert_eq!(a.inc_ref(p), Ok(2));
    assert_eq!(c.free(p), Err(AllocError::StillReferenced));
    let before = c.len();
    assert_eq!(c.dec_ref(p), Ok(1));
    assert_eq!(c.len(), before);
    assert_eq!(c.dec_ref(p), Ok(0));
    assert_eq!(c.pages().last(), Some(&p));
}

#[test]
fn full_cache_flushes_a_batch_and_drain_returns_everything() {
    let a = new_alloc(8);
    let mut c = PageCache::new(&a);
    let pages: Vec<usize> = (0..3 * USABLE_PAGES_PER_CHUNK)
        .map(|_| c.alloc().expect("page"))
        .collect();
    assert_eq!(pages.iter().collect::<HashSet<_>>().len(), pages.len());
    for &p in &pages {
        c.free(p).unwrap();
        assert!(c.len() <= CACHE_PAGES);
    }
    a.check_invariants_with(c.pages()).unwrap();
    assert_eq!(a.stats().pages_in_use, c.len());
    c.drain();
    assert!(c.is_empty());
    a.check_invariants().unwrap();
    let s = a.stats();
    assert_eq!(s.pages_in_use, 0);
    assert_eq!(s.chunks, FREE_CHUNK_CACHE, "extra free chunks went back");
    let mut free = 0;
    a.for_each_free_run(|_, len| free += len / PAGE_SIZE);
    assert_eq!(free, s.pages_free);
}

#[test]
fn dropping_a_cache_gives_its_pages_back() {
    let a = new_alloc(4);
    {
        let mut c = PageCache::new(&a);
        let p = c.alloc().expect("page");
        c.free(p).unwrap();
    }
    assert_eq!(a.stats().pages_in_use, 0);
    a.check_invariants().unwrap();
}

#[test]
fn out_of_chunks_is_none_and_recovers() {
    let a = new_alloc(1);
    let mut c = PageCache::new(&a);
    let pages: Vec<usize> = (0..USABLE_PAGES_PER_CHUNK)
        .map(|_| c.alloc().expect("page"))
        .collect();
    assert_eq!(c.alloc(), None);
    c.free(pages[7]).unwrap();
    assert_eq!(c.alloc(), Some(pages[7]));
}

/// Several CPUs, each with its own cache over one allocator: a page is
/// never out twice at once (each owner stamps it and checks the stamp
/// before freeing), and at the end every page is back.
#[test]
fn caches_on_several_threads_never_share_a_page() {
    let a = Arc::new(new_alloc(16));
    let workers: Vec<_> = (0..4u64)
        .map(|t| {
            let a = Arc::clone(&a);
            thread::spawn(move || {
                let mut c = PageCache::new(&*a);
                // (page, the stamp written into it)
                let mut held: Vec<(usize, u64)> = Vec::new();
                let mut x = t + 1;
                for i in 0..200_000u64 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    if held.len() < 300 && (x % 3 != 0 || held.is_empty()) {
                        let p = c.alloc().expect("16 chunks are plenty");
                        let stamp = (t << 32) | (i & 0xffff_ffff);
                        // SAFETY: the page is ours (count 1) until freed.
                        unsafe { (p as *mut u64).write_volatile(stamp) };
                        held.push((p, stamp));
                    } else {
                        let (p, stamp) = held.swap_remove(x as usize % held.len());
                        // SAFETY: as above.
                        let seen = unsafe { (p as *const u64).read_volatile() };
                        assert_eq!(seen, stamp, "page {p:#x} was handed out twice");
                        c.free(p).unwrap();
                    }
                }
                for (p, _) in held {
                    c.free(p).unwrap();
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(a.stats().pages_in_use, 0);
    a.check_invariants().unwrap();
}

#[derive(Debug, Clone)]
enum Op {
    CacheAlloc(usize),
    CacheFree(Index),
    CacheDecRef(Index),
    Alloc(usize),
    Free(Index),
    IncRef(Index),
    Drain,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1usize..=8).prop_map(Op::CacheAlloc),
        1 => (100usize..=700).prop_map(Op::CacheAlloc),
        4 => any::<Index>().prop_map(Op::CacheFree),
        2 => any::<Index>().prop_map(Op::CacheDecRef),
        1 => (1usize..=40).prop_map(Op::Alloc),
        2 => any::<Index>().prop_map(Op::Free),
        2 => any::<Index>().prop_map(Op::IncRef),
        1 => Just(Op::Drain),
    ]
}

/// Page -> count of allocated pages; every page ever seen, for targets.
#[derive(Default)]
struct Model {
    rc: HashMap<usize, u16>,
    known: Vec<usize>,
}

impl Model {
    fn pick(&self, i: &Index) -> Option<usize> {
        (!self.known.is_empty()).then(|| self.known[i.index(self.known.len())])
    }

    fn on_alloc(&mut self, p: usize) -> Result<(), TestCaseError> {
        prop_assert!(
            self.rc.insert(p, 1).is_none(),
            "page {:#x} handed out twice",
            p
        );
        self.known.push(p);
        Ok(())
    }

    /// What a call that needs count 1 gets on `p`, given it is held.
    fn free_result(&self, p: usize) -> Result<(), AllocError> {
        match self.rc.get(&p) {
            Some(1) => Ok(()),
            Some(_) => Err(AllocError::StillReferenced),
            None => Err(AllocError::DoubleFree),
        }
    }
}

fn step(
    a: &BitmapAllocator<TestSource>,
    c: &mut PageCache<'_, TestSource>,
    m: &mut Model,
    op: &Op,
) -> Result<(), TestCaseError> {
    // Pages stay in held chunks while the model knows them: chunks go back
    // only when fully free, and targets are only pages once handed out,
    // whose chunk may have gone (then `NotOwned`) – so compare loosely there.
    let owned = |p: usize| a.refcount(p) != Err(AllocError::NotOwned);
    match op {
        Op::CacheAlloc(n) | Op::Alloc(n) => {
            for _ in 0..*n {
                let p = match op {
                    Op::CacheAlloc(_) => c.alloc(),
                    _ => a.alloc(),
                };
                let Some(p) = p else {
                    // Out of chunks: everything held is in use or cached.
                    let s = a.stats();
                    prop_assert_eq!(s.pages_free, 0);
                    break;
                };
                m.on_alloc(p)?;
                prop_assert_eq!(a.refcount(p), Ok(1));
            }
        }
        Op::CacheFree(i) | Op::Free(i) => {
            let Some(p) = m.pick(i) else { return Ok(()) };
            let want = if owned(p) {
                m.free_result(p)
            } else {
                Err(AllocError::NotOwned)
            };
            let got = match op {
                Op::CacheFree(_) => c.free(p),
                _ => a.free(p),
            };
            prop_assert_eq!(got, want);
            if got.is_ok() {
                m.rc.remove(&p);
            }
        }
        Op::CacheDecRef(i) => {
            let Some(p) = m.pick(i) else { return Ok(()) };
            let want = match m.rc.get(&p) {
                Some(&n) => Ok(n - 1),
                None if owned(p) => Err(AllocError::RefcountUnderflow),
                None => Err(AllocError::NotOwned),
            };
            prop_assert_eq!(c.dec_ref(p), want);
            match want {
                Ok(0) => drop(m.rc.remove(&p)),
                Ok(n) => drop(m.rc.insert(p, n)),
                Err(_) => {}
            }
        }
        Op::IncRef(i) => {
            let Some(p) = m.pick(i) else { return Ok(()) };
            let want = match m.rc.get(&p) {
                Some(&n) => Ok(n + 1),
                None if owned(p) => Err(AllocError::NotAllocated),
                None => Err(AllocError::NotOwned),
            };
            prop_assert_eq!(a.inc_ref(p), want);
            if let Ok(n) = want {
                m.rc.insert(p, n);
            }
        }
        Op::Drain => c.drain(),
    }
    a.check_invariants_with(c.pages())
        .map_err(TestCaseError::fail)?;
    let s = a.stats();
    prop_assert_eq!(s.pages_in_use, m.rc.len() + c.len());
    for &p in c.pages() {
        prop_assert!(!m.rc.contains_key(&p), "an allocated page is cached");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn cache_matches_model(ops in proptest::collection::vec(op(), 1..150)) {
        let a = new_alloc(4);
        let mut c = PageCache::new(&a);
        let mut m = Model::default();
        for op in &ops {
            step(&a, &mut c, &mut m, op)?;
        }
        c.drain();
        a.check_invariants().map_err(TestCaseError::fail)?;
        prop_assert_eq!(a.stats().pages_in_use, m.rc.len());
    }
}
