//! The chunk/slice memory manager: every reserve path, both deallocation strategies, the
//! release-and-retry on a full arena, errors, alignment, and a long random sequence.

use npu_compute::hal::{Fence, Queue};
use npu_compute::memory::{
    ChunkSliceMemory, DeallocStrategy, MemoryBinding, MemoryConfig, MemoryManagement, SliceStrategy,
};
use npu_compute::{Capacity, Error};
use proptest::prelude::*;

fn mm<const N: usize>(
    size: u32,
    slice: SliceStrategy,
    dealloc: DeallocStrategy,
) -> ChunkSliceMemory<N> {
    ChunkSliceMemory::new(size, 16, MemoryConfig { slice, dealloc }).unwrap()
}

#[test]
fn exact_free_chunk_is_reused() {
    let mut m = mm::<8>(1024, SliceStrategy::Never, DeallocStrategy::Never);
    let a = m.reserve(100).unwrap();
    let offset = m.block(a).unwrap().offset;
    m.release(a).unwrap();
    // 100 and 112 are the same number of 16-byte units: the same chunk.
    let b = m.reserve(112).unwrap();
    assert_eq!(m.block(b).unwrap().offset, offset);
    let s = m.stats();
    assert_eq!((s.allocations, s.exact_reuses, s.slice_reuses), (1, 1, 0));
}

#[test]
fn slice_on_smallest_accepted_chunk() {
    let mut m = mm::<8>(4096, SliceStrategy::Ratio(0.5), DeallocStrategy::Never);
    let big = m.reserve(1024).unwrap();
    let mid = m.reserve(256).unwrap();
    let mid_offset = m.block(mid).unwrap().offset;
    m.release(big).unwrap();
    m.release(mid).unwrap();
    // 160 bytes: 160/256 = 0.625 >= 0.5 accepted; 160/1024 rejected. Smallest accepted wins.
    let s = m.reserve(160).unwrap();
    assert_eq!(
        m.block(s).unwrap(),
        npu_compute::storage::Block {
            offset: mid_offset,
            len: 160
        }
    );
    assert_eq!(m.stats().slice_reuses, 1);
    // A slice rejected everywhere makes a new chunk.
    let t = m.reserve(100).unwrap();
    assert_eq!(m.stats().allocations, 3);
    assert_ne!(m.block(t).unwrap().offset, mid_offset);
}

#[test]
fn slice_strategies_decide() {
    assert!(!SliceStrategy::Never.can_use_chunk(100, 99));
    assert!(SliceStrategy::Ratio(0.8).can_use_chunk(100, 80));
    assert!(!SliceStrategy::Ratio(0.8).can_use_chunk(100, 79));
    assert!(SliceStrategy::MinimumSize(64).can_use_chunk(1000, 64));
    assert!(!SliceStrategy::MinimumSize(64).can_use_chunk(1000, 63));
    assert!(SliceStrategy::MaximumSize(64).can_use_chunk(1000, 64));
    assert!(!SliceStrategy::MaximumSize(64).can_use_chunk(1000, 65));
    assert!(
        !SliceStrategy::MaximumSize(64).can_use_chunk(32, 48),
        "never larger than the chunk"
    );
}

#[test]
fn a_free_slice_frees_its_chunk_at_the_next_reserve() {
    let mut m = mm::<8>(1024, SliceStrategy::Ratio(0.5), DeallocStrategy::Never);
    let chunk = m.reserve(512).unwrap();
    m.release(chunk).unwrap();
    let slice = m.reserve(320).unwrap();
    m.release(slice).unwrap();
    // The next reserve drops the free slice first, so the chunk serves an exact request.
    let again = m.reserve(512).unwrap();
    assert_eq!(m.block(again).unwrap().offset, 0);
    assert_eq!(m.stats().allocations, 1);
}

#[test]
fn new_chunk_when_nothing_fits() {
    let mut m = mm::<8>(1024, SliceStrategy::Ratio(0.8), DeallocStrategy::Never);
    let a = m.reserve(64).unwrap();
    let b = m.reserve(64).unwrap();
    assert_ne!(m.block(a).unwrap().offset, m.block(b).unwrap().offset);
    assert_eq!(m.stats().allocations, 2);
    assert_eq!(m.stats().reserved, 128);
}

#[test]
fn never_dealloc_keeps_free_chunks() {
    let mut m = mm::<8>(4096, SliceStrategy::Never, DeallocStrategy::Never);
    for size in [64, 128, 256, 512] {
        let b = m.reserve(size).unwrap();
        m.release(b).unwrap();
    }
    let s = m.stats();
    assert_eq!((s.reserved, s.deallocations, s.in_use), (960, 0, 0));
}

#[test]
fn period_one_releases_at_every_reserve() {
    let mut m = mm::<8>(
        4096,
        SliceStrategy::Never,
        DeallocStrategy::PeriodTick { period: 1 },
    );
    let a = m.reserve(64).unwrap();
    m.release(a).unwrap();
    let _b = m.reserve(128).unwrap(); // the tick after this reserve frees the 64-byte chunk
    let s = m.stats();
    assert_eq!((s.reserved, s.deallocations), (128, 1));
}

#[test]
fn period_p_releases_every_p_reserves() {
    let mut m = mm::<16>(
        8192,
        SliceStrategy::Never,
        DeallocStrategy::PeriodTick { period: 4 },
    );
    let mut held = Vec::new();
    for i in 0..3u32 {
        let b = m.reserve(64 * (i + 1)).unwrap();
        m.release(b).unwrap();
    }
    assert_eq!(m.stats().deallocations, 0, "three reserves: no tick yet");
    held.push(m.reserve(1024).unwrap()); // fourth reserve: free chunks go back
    assert_eq!(m.stats().deallocations, 3);
    assert_eq!(m.stats().reserved, 1024);
}

#[test]
fn full_arena_releases_free_chunks_and_retries() {
    let mut m = mm::<8>(1024, SliceStrategy::Never, DeallocStrategy::Never);
    let a = m.reserve(512).unwrap();
    let b = m.reserve(512).unwrap();
    m.release(a).unwrap();
    m.release(b).unwrap();
    // 1024 does not fit beside the two free 512-byte chunks; they are released and it fits.
    let c = m.reserve(1024).unwrap();
    assert_eq!(m.block(c).unwrap().offset, 0);
    assert_eq!(m.stats().deallocations, 2);
}

#[test]
fn out_of_memory_says_requested_and_free() {
    let mut m = mm::<8>(1024, SliceStrategy::Never, DeallocStrategy::Never);
    let _a = m.reserve(256).unwrap();
    let _b = m.reserve(512).unwrap();
    assert_eq!(
        m.reserve(300),
        Err(Error::OutOfMemory {
            requested: 304,
            free: 256,
            largest_free: 256
        })
    );
}

#[test]
fn chunk_capacity_is_named() {
    let mut m = mm::<2>(1024, SliceStrategy::Never, DeallocStrategy::Never);
    let _a = m.reserve(16).unwrap();
    let _b = m.reserve(16).unwrap();
    assert_eq!(
        m.reserve(16),
        Err(Error::CapacityExceeded {
            capacity: Capacity::Chunks,
            limit: 2
        })
    );
}

#[test]
fn stale_binding_is_an_error() {
    let mut m = mm::<4>(1024, SliceStrategy::Never, DeallocStrategy::Never);
    let a = m.reserve(64).unwrap();
    m.release(a).unwrap();
    assert!(matches!(m.release(a), Err(Error::StaleHandle { .. })));
    let b = m.reserve(64).unwrap(); // same chunk, new generation
    assert!(matches!(m.block(a), Err(Error::StaleHandle { .. })));
    assert!(m.block(b).is_ok());
}

#[test]
fn busy_chunks_stay_until_their_jobs_complete() {
    let mut m = mm::<4>(
        1024,
        SliceStrategy::Never,
        DeallocStrategy::PeriodTick { period: 1 },
    );
    let a = m.reserve(512).unwrap();
    m.access_mut(a)
        .unwrap()
        .record_read(Queue::Unit(0), Fence(7));
    m.release(a).unwrap();
    let _b = m.reserve(256).unwrap();
    assert_eq!(
        m.stats().deallocations,
        0,
        "a job still reads the freed chunk"
    );
    assert!(m.has_busy_free_chunks());
    m.retire_fences(&mut |_, f| f == Fence(7));
    let _c = m.reserve(128).unwrap();
    assert_eq!(m.stats().deallocations, 1);
}

#[derive(Clone, Debug)]
enum Step {
    Reserve(u32),
    Release(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (1u32..3000).prop_map(Step::Reserve),
        any::<usize>().prop_map(Step::Release)
    ]
}

fn strategies() -> impl Strategy<Value = MemoryConfig> {
    let slice = prop_oneof![
        Just(SliceStrategy::Never),
        Just(SliceStrategy::Ratio(0.8)),
        Just(SliceStrategy::Ratio(0.5)),
        Just(SliceStrategy::MinimumSize(256)),
        Just(SliceStrategy::MaximumSize(1024)),
    ];
    let dealloc = prop_oneof![
        Just(DeallocStrategy::Never),
        Just(DeallocStrategy::PeriodTick { period: 1 }),
        Just(DeallocStrategy::PeriodTick { period: 7 }),
        Just(DeallocStrategy::PeriodTick { period: 128 }),
    ];
    (slice, dealloc).prop_map(|(slice, dealloc)| MemoryConfig { slice, dealloc })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Thousands of reserves and releases: live blocks never overlap, stay aligned and inside
    /// the arena, and the figures add up.
    #[test]
    fn live_allocations_never_overlap(config in strategies(), steps in prop::collection::vec(step(), 2000..4000)) {
        const ARENA: u32 = 32 * 1024;
        let mut m: ChunkSliceMemory<64> = ChunkSliceMemory::new(ARENA, 16, config).unwrap();
        let mut live: Vec<(MemoryBinding, u32)> = Vec::new();
        for s in steps {
            match s {
                Step::Reserve(n) => match m.reserve(n) {
                    Ok(b) => live.push((b, n)),
                    Err(Error::OutOfMemory { requested, free, .. }) => {
                        prop_assert!(requested >= n);
                        let in_use: u32 = live.iter().map(|&(_, n)| n).sum();
                        prop_assert!(free <= ARENA - in_use);
                    }
                    Err(Error::CapacityExceeded { capacity: Capacity::Chunks, .. }) => {}
                    Err(e) => prop_assert!(false, "unexpected {e:?}"),
                },
                Step::Release(i) if !live.is_empty() => {
                    let (b, _) = live.swap_remove(i % live.len());
                    m.release(b).unwrap();
                }
                Step::Release(_) => {}
            }
            let mut blocks: Vec<_> = live.iter().map(|&(b, n)| {
                let blk = m.block(b).unwrap();
                assert_eq!(blk.len, n);
                blk
            }).collect();
            blocks.sort_by_key(|b| b.offset);
            for b in &blocks {
                prop_assert_eq!(b.offset % 16, 0);
                prop_assert!(b.end() <= ARENA);
            }
            for w in blocks.windows(2) {
                prop_assert!(w[0].end() <= w[1].offset, "overlap {:?} {:?}", w[0], w[1]);
            }
            let stats = m.stats();
            prop_assert_eq!(stats.in_use, live.iter().map(|&(_, n)| n).sum::<u32>());
            prop_assert!(stats.reserved <= ARENA);
            prop_assert!(stats.in_use <= stats.reserved);
            prop_assert_eq!(stats.allocations - stats.deallocations, stats.chunks);
        }
    }
}

#[test]
fn a_placement_reuses_the_slot_of_a_released_placement_it_covers() {
    // Four slots: the pool and three placements fill them.
    let mut m = mm::<4>(1024, SliceStrategy::Never, DeallocStrategy::Never);
    let pool = m.reserve(256).unwrap();
    let placed: Vec<_> = (0..3).map(|k| m.place(pool, k * 64, 64).unwrap()).collect();
    assert_eq!(m.stats().chunk_slots_peak, 4);
    for p in placed {
        m.release(p).unwrap();
    }
    // Every slot is held, by the pool or a released placement: placing over the first one
    // dissolves it and takes its slot (a graph's next invoke places the same offsets).
    let again = m.place(pool, 0, 64).unwrap();
    assert_eq!(
        m.block(again).unwrap().offset,
        m.block(pool).unwrap().offset
    );
    assert_eq!(m.stats().chunk_slots_peak, 4, "no slot beyond the four");
    // A placement over free space no released placement covers needs a fifth slot.
    assert_eq!(
        m.place(pool, 192, 64),
        Err(Error::CapacityExceeded {
            capacity: Capacity::Chunks,
            limit: 4
        })
    );
}

/// Every writer in `access`'s record, as (queue index, fence), lowest queue first.
fn writers(m: &mut ChunkSliceMemory<8>, b: MemoryBinding) -> Vec<(usize, Fence)> {
    let mut found = Vec::new();
    m.access_mut(b)
        .unwrap()
        .jobs(false, &mut |_, _| false, |q, f| found.push((q, f)));
    found
}

#[test]
fn a_pool_and_its_placements_see_each_others_jobs_and_placements_side_by_side_do_not() {
    let mut m = mm::<8>(1024, SliceStrategy::Never, DeallocStrategy::Never);
    let pool = m.reserve(256).unwrap();
    let [a, b] = [0, 128].map(|at| m.place(pool, at, 64).unwrap());
    // A job writes `a`: the pool, whose bytes it wrote, must see it; `b` beside it need not.
    m.access_mut(a)
        .unwrap()
        .record_write(Queue::Unit(0), Fence(1));
    assert_eq!(writers(&mut m, b), []);
    assert_eq!(writers(&mut m, pool), [(Queue::Unit(0).index(), Fence(1))]);
    // The pool is written whole (after that job): a job on either placement must wait for it.
    m.access_mut(pool)
        .unwrap()
        .record_write(Queue::Dma, Fence(2));
    for placed in [a, b] {
        assert!(writers(&mut m, placed).contains(&(Queue::Dma.index(), Fence(2))));
    }
    // A plain reservation has only its own record.
    let plain = m.reserve(64).unwrap();
    assert_eq!(writers(&mut m, plain), []);
}

#[test]
fn a_view_takes_on_the_jobs_of_a_held_placement_it_overlaps_when_placed() {
    let mut m = mm::<8>(1024, SliceStrategy::Never, DeallocStrategy::Never);
    let pool = m.reserve(256).unwrap();
    let empty = m.place(pool, 0, 0).unwrap();
    let a = m.place(pool, 0, 128).unwrap();
    m.access_mut(a).unwrap().record_write(Queue::Dma, Fence(1));
    let view = m.place(pool, 64, 128).unwrap();
    let beside = m.place(pool, 192, 64).unwrap();
    assert_eq!(writers(&mut m, view), [(Queue::Dma.index(), Fence(1))]);
    // Nor does a placement over bytes `a` does not cover, or one placed before.
    assert_eq!(writers(&mut m, beside), []);
    assert_eq!(writers(&mut m, empty), []);
}
