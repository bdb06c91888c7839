//! Tests of the guided manager: measured then guided passes, divergence, escaping and held-back
//! tensors, plan eviction and the limits of the tracker.

use super::*;
use crate::memory::{DeallocStrategy, MemoryConfig, SliceStrategy};

type Guided<const P: usize, const E: usize> = GuidedMemory<ChunkSliceMemory<32>, P, E>;

fn guided<const P: usize, const E: usize>() -> Guided<P, E> {
    let config = MemoryConfig {
        slice: SliceStrategy::Ratio(0.8),
        dealloc: DeallocStrategy::Never,
    };
    GuidedMemory::new(ChunkSliceMemory::new(1 << 16, 16, config).unwrap())
}

/// A little chain: x → a → b, c, as an inference would, with sizes scaled by `n`.
fn run<const P: usize, const E: usize>(m: &mut Guided<P, E>, key: u32, n: u32) -> [Block; 4] {
    m.begin_pass(key).unwrap();
    let x = m.reserve(64 * n).unwrap();
    let a = m.reserve(128 * n).unwrap();
    let bx = m.block(x).unwrap();
    let ba = m.block(a).unwrap();
    m.release(x).unwrap();
    let b = m.reserve(64 * n).unwrap();
    let bb = m.block(b).unwrap();
    m.release(a).unwrap();
    let c = m.reserve(96 * n).unwrap();
    let bc = m.block(c).unwrap();
    m.release(b).unwrap();
    m.release(c).unwrap();
    m.end_pass().unwrap();
    [bx, ba, bb, bc]
}

#[test]
fn measured_then_guided_places_at_the_bound() {
    let mut m = guided::<4, 8>();
    run(&mut m, 1, 1);
    assert_eq!(
        m.stats().reserved,
        0,
        "measured chunks went back to the arena"
    );
    m.reset_peak();
    let blocks = run(&mut m, 1, 1);
    let s = m.pass_stats();
    assert_eq!((s.measured_passes, s.guided_passes), (1, 1));
    assert_eq!(s.placed_reservations, 4);
    assert_eq!((s.fallback_reservations, s.diverged_passes), (0, 0));
    // Live at once at most: x + a (192) or a + b (192) or b + c (160): the pool is 192.
    let stats = m.stats();
    assert_eq!(stats.reserved_peak, 192);
    assert_eq!(stats.in_use_peak, 192);
    assert_eq!((stats.in_use, stats.reserved), (0, 0));
    // a and b live together do not share bytes.
    let [_, a, b, _] = blocks;
    assert!(a.end() <= b.offset || b.end() <= a.offset);
}

#[test]
fn a_changed_workload_falls_back_and_is_measured_again() {
    let mut m = guided::<4, 8>();
    run(&mut m, 1, 1);
    run(&mut m, 1, 2); // same key, other sizes
    let s = m.pass_stats();
    assert_eq!((s.diverged_passes, s.placed_reservations), (1, 0));
    assert_eq!(s.fallback_reservations, 4);
    run(&mut m, 1, 2);
    assert_eq!(m.pass_stats().measured_passes, 2, "measured again");
    run(&mut m, 1, 2);
    assert_eq!(m.pass_stats().placed_reservations, 4);
}

#[test]
fn a_tensor_released_late_stops_placement() {
    let mut m = guided::<4, 8>();
    run(&mut m, 1, 1);
    m.begin_pass(1).unwrap();
    let x = m.reserve(64).unwrap();
    let a = m.reserve(128).unwrap();
    // x is kept: b must not be placed over it.
    let b = m.reserve(64).unwrap();
    let (bx, bb) = (m.block(x).unwrap(), m.block(b).unwrap());
    assert!(bx.end() <= bb.offset || bb.end() <= bx.offset);
    assert_eq!(m.pass_stats().placed_reservations, 2);
    for t in [x, a, b] {
        m.release(t).unwrap();
    }
    m.end_pass().unwrap();
    assert_eq!(m.pass_stats().diverged_passes, 1);
    assert_eq!(m.stats().in_use, 0);
}

#[test]
fn escaping_tensors_are_not_planned_and_kept_placements_hold_the_pool() {
    let mut m = guided::<4, 8>();
    for _ in 0..2 {
        m.begin_pass(3).unwrap();
        let t = m.reserve(32).unwrap();
        let keep = m.reserve(48).unwrap();
        m.release(t).unwrap();
        m.end_pass().unwrap();
        m.release(keep).unwrap();
    }
    let s = m.pass_stats();
    assert_eq!((s.placed_reservations, s.escaping_reservations), (1, 1));
    // A placed tensor kept past the pass holds its pool back until released.
    m.begin_pass(3).unwrap();
    let t = m.reserve(32).unwrap();
    let keep = m.reserve(48).unwrap();
    m.end_pass().unwrap();
    assert_eq!(m.pass_stats().held_pools, 1);
    assert_eq!(m.stats().in_use, 80);
    m.release(t).unwrap();
    m.release(keep).unwrap();
    assert_eq!(m.pass_stats().held_pools, 0);
    assert_eq!(m.stats().in_use, 0);
    m.release_free();
    assert_eq!(m.stats().reserved, 0);
}

#[test]
fn plans_are_evicted_least_recently_used_first() {
    let mut m = guided::<2, 8>();
    run(&mut m, 1, 1);
    run(&mut m, 2, 1);
    run(&mut m, 1, 1); // guided: 1 is now more recent than 2
    run(&mut m, 3, 1); // evicts 2
    let mut keys: heapless::Vec<u32, 2> = m.plans().map(|(k, _)| k).collect();
    keys.sort_unstable();
    assert_eq!(&keys[..], &[1, 3]);
    assert_eq!(m.pass_stats().plan_evictions, 1);
    run(&mut m, 2, 1);
    assert_eq!(m.pass_stats().measured_passes, 4);
}

#[test]
fn too_many_reservations_are_not_planned_nor_an_error() {
    let mut m = guided::<2, 3>();
    for _ in 0..2 {
        run(&mut m, 1, 1);
    }
    let s = m.pass_stats();
    assert_eq!(
        (s.overflowed_passes, s.measured_passes, s.guided_passes),
        (2, 2, 0)
    );
    assert_eq!(m.stats().in_use, 0);
}

#[test]
fn passes_do_not_nest() {
    let mut m = guided::<2, 8>();
    assert_eq!(m.end_pass(), Err(Error::NoPassOpen));
    m.begin_pass(5).unwrap();
    assert_eq!(m.begin_pass(6), Err(Error::PassAlreadyOpen { key: 5 }));
    m.end_pass().unwrap();
}

#[test]
fn a_pool_that_does_not_fit_leaves_the_pass_unguided() {
    let config = MemoryConfig::default();
    let inner = ChunkSliceMemory::<8>::new(512, 16, config).unwrap();
    let mut m: GuidedMemory<_, 2, 8> = GuidedMemory::new(inner);
    m.begin_pass(1).unwrap();
    let a = m.reserve(256).unwrap();
    m.release(a).unwrap();
    m.end_pass().unwrap();
    let hog = m.reserve(384).unwrap();
    m.begin_pass(1).unwrap();
    assert_eq!(m.pass_stats().unguided_passes, 1);
    assert!(matches!(
        m.reserve(256),
        Err(Error::OutOfMemory { .. } | Error::CapacityExceeded { .. })
    ));
    m.end_pass().unwrap();
    m.release(hog).unwrap();
}
