//! Property tests: random sequences of good and bad calls against a model
//! (page -> reference count, plus which chunks must be held).

extern crate std;

use std::collections::{HashMap, HashSet};
use std::vec::Vec;

use proptest::prelude::*;
use proptest::sample::Index;

use super::tests::{ForeignChunk, TestSource};
use super::*;

/// Chunks the source will hand out at most at once.
const SOURCE_LIMIT: usize = 4;

#[derive(Debug, Clone)]
enum Op {
    /// Allocate this many pages.
    Alloc(usize),
    Free(Index),
    IncRef(Index),
    DecRef(Index),
    Refcount(Index),
    /// `dec_ref` every allocated page of a known page's chunk down to 0.
    DrainChunk(Index),
    /// `dec_ref` every allocated page down to 0.
    DrainAll,
    /// A bad address derived from a known page: 0 = misaligned by the
    /// offset, 1 = its control page, 2 = a page of a foreign chunk.
    Bad(Index, u8, usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1usize..=8).prop_map(Op::Alloc),
        2 => (200usize..=1100).prop_map(Op::Alloc),
        3 => any::<Index>().prop_map(Op::Free),
        3 => any::<Index>().prop_map(Op::IncRef),
        3 => any::<Index>().prop_map(Op::DecRef),
        1 => any::<Index>().prop_map(Op::Refcount),
        2 => any::<Index>().prop_map(Op::DrainChunk),
        1 => Just(Op::DrainAll),
        1 => (any::<Index>(), 0u8..3, 1usize..PAGE_SIZE).prop_map(|(i, k, o)| Op::Bad(i, k, o)),
    ]
}

fn chunk_of(page: usize) -> usize {
    page & !(CHUNK_SIZE - 1)
}

#[derive(Default)]
struct Model {
    /// Allocated pages and their counts.
    rc: HashMap<usize, u16>,
    /// Chunks that must be held, with their number of allocated pages.
    held: HashMap<usize, usize>,
    /// Every page ever handed out, for picking targets.
    known: Vec<usize>,
    known_set: HashSet<usize>,
}

impl Model {
    fn pick(&self, i: &Index) -> Option<usize> {
        (!self.known.is_empty()).then(|| self.known[i.index(self.known.len())])
    }

    fn fully_free(&self) -> usize {
        self.held.values().filter(|&&n| n == 0).count()
    }

    fn on_alloc(&mut self, p: usize) -> Result<(), TestCaseError> {
        prop_assert_eq!(p % PAGE_SIZE, 0);
        prop_assert_ne!(p, chunk_of(p), "control page handed out");
        prop_assert!(!self.rc.contains_key(&p), "page {:#x} handed out twice", p);
        let c = chunk_of(p);
        if !self.held.contains_key(&c) {
            prop_assert!(
                self.held.values().all(|&n| n == USABLE_PAGES_PER_CHUNK),
                "took a new chunk while a held one had free pages"
            );
            self.held.insert(c, 0);
        }
        *self.held.get_mut(&c).expect("inserted above") += 1;
        self.rc.insert(p, 1);
        if self.known_set.insert(p) {
            self.known.push(p);
        }
        Ok(())
    }

    /// The page's count reached 0: update chunk accounting and apply the
    /// release policy.
    fn on_freed(&mut self, p: usize) {
        self.rc.remove(&p);
        let c = chunk_of(p);
        let n = self
            .held
            .get_mut(&c)
            .expect("allocated page in a held chunk");
        *n -= 1;
        if *n == 0 && self.fully_free() > FREE_CHUNK_CACHE {
            self.held.remove(&c);
        }
    }

    /// Whether the chunk of `p` must be held.
    fn held(&self, p: usize) -> bool {
        self.held.contains_key(&chunk_of(p))
    }
}

fn check_all(
    a: &BitmapAllocator<TestSource>,
    m: &Model,
    runs_too: bool,
) -> Result<(), TestCaseError> {
    a.check_invariants().map_err(TestCaseError::fail)?;
    let held: HashSet<usize> = a.held_chunks().into_iter().collect();
    prop_assert_eq!(&held, &m.held.keys().copied().collect::<HashSet<_>>());
    let s = a.stats();
    let free = m.held.len() * USABLE_PAGES_PER_CHUNK - m.rc.len();
    prop_assert_eq!(s.chunks, m.held.len());
    prop_assert_eq!(s.pages_in_use, m.rc.len());
    prop_assert_eq!(s.pages_free, free);
    prop_assert_eq!(s.free_chunks, m.fully_free());
    if runs_too {
        let mut runs = Vec::new();
        a.for_each_free_run(|s, l| runs.push((s, l)));
        let mut covered = 0;
        let mut prev_end = None;
        for &(start, len) in &runs {
            prop_assert!(len > 0 && start % PAGE_SIZE == 0 && len % PAGE_SIZE == 0);
            if let Some(end) = prev_end {
                prop_assert!(start > end, "runs unsorted, overlapping or not coalesced");
            }
            prev_end = Some(start + len);
            for p in (start..start + len).step_by(PAGE_SIZE) {
                prop_assert_ne!(p, chunk_of(p), "control page in a free run");
                prop_assert!(m.held(p), "free run outside held chunks");
                prop_assert!(!m.rc.contains_key(&p), "allocated page in a free run");
            }
            covered += len / PAGE_SIZE;
        }
        prop_assert_eq!(covered, free, "free runs miss free pages");
    }
    Ok(())
}

fn step(
    a: &BitmapAllocator<TestSource>,
    m: &mut Model,
    op: &Op,
    foreign: usize,
) -> Result<(), TestCaseError> {
    use AllocError::*;
    match op {
        Op::Alloc(n) => {
            for _ in 0..*n {
                let all_full = m.held.values().all(|&n| n == USABLE_PAGES_PER_CHUNK);
                match a.alloc() {
                    Some(p) => {
                        m.on_alloc(p)?;
                        prop_assert_eq!(a.refcount(p), Ok(1));
                    }
                    None => prop_assert!(all_full && m.held.len() == SOURCE_LIMIT, "spurious None"),
                }
            }
        }
        Op::Free(i) => {
            let Some(p) = m.pick(i) else { return Ok(()) };
            let want = match m.rc.get(&p) {
                Some(1) => Ok(()),
                Some(_) => Err(StillReferenced),
                None if m.held(p) => Err(DoubleFree),
                None => Err(NotOwned),
            };
            prop_assert_eq!(a.free(p), want);
            if want.is_ok() {
                m.on_freed(p);
            }
        }
        Op::IncRef(i) => {
            let Some(p) = m.pick(i) else { return Ok(()) };
            let want = match m.rc.get(&p) {
                Some(&n) => n.checked_add(1).ok_or(RefcountOverflow),
                None if m.held(p) => Err(NotAllocated),
                None => Err(NotOwned),
            };
            prop_assert_eq!(a.inc_ref(p), want);
            if let Ok(n) = want {
                m.rc.insert(p, n);
            }
        }
        Op::DecRef(i) => {
            let Some(p) = m.pick(i) else { return Ok(()) };
            let want = match m.rc.get(&p) {
                Some(&n) => Ok(n - 1),
                None if m.held(p) => Err(RefcountUnderflow),
                None => Err(NotOwned),
            };
            prop_assert_eq!(a.dec_ref(p), want);
            match want {
                Ok(0) => m.on_freed(p),
                Ok(n) => drop(m.rc.insert(p, n)),
                Err(_) => {}
            }
        }
        Op::Refcount(i) => {
            let Some(p) = m.pick(i) else { return Ok(()) };
            let want = match m.rc.get(&p) {
                Some(&n) => Ok(n),
                None if m.held(p) => Ok(0),
                None => Err(NotOwned),
            };
            prop_assert_eq!(a.refcount(p), want);
        }
        Op::DrainChunk(i) => {
            let Some(p) = m.pick(i) else { return Ok(()) };
            drain(a, m, |q| chunk_of(q) == chunk_of(p))?;
        }
        Op::DrainAll => drain(a, m, |_| true)?,
        Op::Bad(i, kind, off) => {
            let Some(p) = m.pick(i) else { return Ok(()) };
            let bad = match kind {
                0 => p + off,
                1 => chunk_of(p),
                _ => foreign + PAGE_SIZE * (1 + off % USABLE_PAGES_PER_CHUNK),
            };
            prop_assert_eq!(a.free(bad), Err(NotOwned));
            prop_assert_eq!(a.inc_ref(bad), Err(NotOwned));
            prop_assert_eq!(a.dec_ref(bad), Err(NotOwned));
            prop_assert_eq!(a.refcount(bad), Err(NotOwned));
        }
    }
    Ok(())
}

/// `dec_ref`s every allocated page that `which` selects down to 0.
fn drain(
    a: &BitmapAllocator<TestSource>,
    m: &mut Model,
    which: impl Fn(usize) -> bool,
) -> Result<(), TestCaseError> {
    let mut pages: Vec<(usize, u16)> =
        m.rc.iter()
            .filter(|(q, _)| which(**q))
            .map(|(q, n)| (*q, *n))
            .collect();
    pages.sort_unstable();
    for (q, n) in pages {
        for left in (0..n).rev() {
            prop_assert_eq!(a.dec_ref(q), Ok(left));
        }
        m.on_freed(q);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn allocator_matches_model(ops in proptest::collection::vec(op(), 1..200)) {
        let foreign = ForeignChunk::new();
        let (src, _log) = TestSource::new(SOURCE_LIMIT);
        let a = BitmapAllocator::new(src);
        let mut m = Model::default();
        for (n, op) in ops.iter().enumerate() {
            step(&a, &mut m, op, foreign.0)?;
            check_all(&a, &m, n % 8 == 0)?;
        }
        check_all(&a, &m, true)?;
    }
}
