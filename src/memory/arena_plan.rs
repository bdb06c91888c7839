//! [`ArenaPlan`]: fixed offsets for buffers of known lifetimes; the design is on the type.

/// One buffer to place: `bytes` live from step `first` to step `last`, both included.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Lifetime {
    /// Size in bytes (rounded up to the alignment when placed).
    pub bytes: u32,
    /// First step it is live at.
    pub first: u16,
    /// Last step it is live at (`>= first`).
    pub last: u16,
}

impl Lifetime {
    fn overlaps(&self, other: &Lifetime) -> bool {
        self.first <= other.last && other.first <= self.last
    }
}

/// Why a plan could not be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ArenaPlanError {
    /// More buffers than the planner's capacity `N`.
    TooManyBuffers {
        /// `N`.
        limit: u32,
        /// Buffers given.
        needed: u32,
    },
    /// A buffer ends before it starts, or the alignment is not a power of two.
    BadInput {
        /// Index of the buffer (`u32::MAX` for the alignment).
        buffer: u32,
    },
    /// The plan would pass `u32::MAX` bytes.
    TooLarge,
}

impl core::fmt::Display for ArenaPlanError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            ArenaPlanError::TooManyBuffers { limit, needed } => write!(
                f,
                "{needed} buffers to place, more than the planner's capacity of {limit}"
            ),
            ArenaPlanError::BadInput { buffer: u32::MAX } => {
                f.write_str("the alignment is not a power of two")
            }
            ArenaPlanError::BadInput { buffer } => {
                write!(f, "buffer {buffer} ends before it starts")
            }
            ArenaPlanError::TooLarge => f.write_str("the arena would pass 4 GiB"),
        }
    }
}

impl core::error::Error for ArenaPlanError {}

/// Offsets for a set of buffers, and the arena bytes they need.
///
/// A model's schedule is known when it is prepared, and an eager workload's after one
/// measured run ([`GuidedMemory`](super::GuidedMemory)), so memory need not be searched for at
/// run time: each tensor is placed where the plan says
/// ([`ComputeClient::place`](crate::client::ComputeClient::place)) and an arena sized by the
/// plan is exactly enough. This is memory management's knowledge of sizes and lifetimes; it
/// knows nothing of models.
///
/// # Design
///
/// A buffer is live over an inclusive range of steps and occupies its size rounded up to the
/// arena's alignment. Two buffers may share bytes when their lifetimes do not overlap. Placing
/// them is the dynamic storage allocation problem (NP-hard in general), so the planner does
/// what the good heuristics do and then searches:
///
/// 1. **Greedy first fit in several orders**: each buffer, in turn, goes to the lowest aligned
///    offset that clashes with no buffer placed so far whose lifetime overlaps its own. The
///    orders tried are: largest first (TFLM's greedy planner), longest-lived first, largest
///    area (bytes × steps) first, and earliest first.
/// 2. **Local search**: from the best order found, swap pairs of buffers picked by a fixed
///    pseudo-random sequence and keep every swap that does not make the arena larger, for
///    `effort` rounds. The sequence is fixed, so the plan is the same on every machine.
///
/// It stops as soon as a plan reaches the lower bound: the largest sum of sizes live at one
/// step, below which no placement of whole buffers can go.
///
/// Everything lives in fixed arrays of `N` entries; no heap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArenaPlan<const N: usize> {
    offsets: heapless::Vec<u32, N>,
    size: u32,
    lower_bound: u32,
}

impl<const N: usize> ArenaPlan<N> {
    /// Byte offset of buffer `i` (in the order given to [`plan_arena`]).
    pub fn offset(&self, i: usize) -> Option<u32> {
        self.offsets.get(i).copied()
    }

    /// All offsets, in the order of the buffers.
    pub fn offsets(&self) -> &[u32] {
        &self.offsets
    }

    /// Arena bytes the plan needs: the end of its highest buffer.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// The largest sum of (aligned) sizes live at one step: no plan of whole buffers is smaller.
    pub fn lower_bound(&self) -> u32 {
        self.lower_bound
    }
}

fn round_up(bytes: u32, alignment: u32) -> Option<u32> {
    Some(bytes.max(1).checked_add(alignment - 1)? & !(alignment - 1))
}

/// The largest sum of sizes live at one step.
pub fn lower_bound(buffers: &[Lifetime], alignment: u32) -> u32 {
    let steps = buffers.iter().map(|b| b.last).max().unwrap_or(0);
    (0..=steps)
        .map(|s| {
            buffers
                .iter()
                .filter(|b| b.first <= s && s <= b.last)
                .map(|b| round_up(b.bytes, alignment).unwrap_or(u32::MAX))
                .fold(0u32, u32::saturating_add)
        })
        .max()
        .unwrap_or(0)
}

/// Places `buffers` in an arena aligned to `alignment` (a power of two), with `effort` rounds
/// of local search (0: greedy orders only; 200 is plenty for models of a hundred tensors).
///
/// ```
/// use npu_compute::memory::{plan_arena, Lifetime};
/// // a → b → c, each read only by the next: a and c can share bytes.
/// let buffers = [
///     Lifetime { bytes: 100, first: 0, last: 1 },
///     Lifetime { bytes: 40, first: 1, last: 2 },
///     Lifetime { bytes: 100, first: 2, last: 3 },
/// ];
/// let p = plan_arena::<8>(&buffers, 16, 50).unwrap();
/// assert_eq!(p.size(), 112 + 48);
/// assert_eq!(p.size(), p.lower_bound());
/// ```
// Out of line: its candidate orders and offsets are tables of `N` entries, which inlined into
// a caller would sit in the caller's frame beside its own.
#[inline(never)]
pub fn plan_arena<const N: usize>(
    buffers: &[Lifetime],
    alignment: u32,
    effort: u32,
) -> Result<ArenaPlan<N>, ArenaPlanError> {
    if buffers.len() > N {
        return Err(ArenaPlanError::TooManyBuffers {
            limit: N as u32,
            needed: buffers.len() as u32,
        });
    }
    if !alignment.is_power_of_two() {
        return Err(ArenaPlanError::BadInput { buffer: u32::MAX });
    }
    let mut sizes: heapless::Vec<u32, N> = heapless::Vec::new();
    for (i, b) in buffers.iter().enumerate() {
        if b.last < b.first {
            return Err(ArenaPlanError::BadInput { buffer: i as u32 });
        }
        let _ = sizes.push(round_up(b.bytes, alignment).ok_or(ArenaPlanError::TooLarge)?);
    }
    let bound = lower_bound(buffers, alignment);
    let n = buffers.len();
    let steps = |b: &Lifetime| u32::from(b.last - b.first) + 1;
    let keys: [&dyn Fn(usize) -> (u64, u64); 4] = [
        &|i| (u64::from(sizes[i]), u64::from(steps(&buffers[i]))),
        &|i| (u64::from(steps(&buffers[i])), u64::from(sizes[i])),
        &|i| (u64::from(sizes[i]) * u64::from(steps(&buffers[i])), 0),
        &|i| (u64::from(u16::MAX - buffers[i].first), u64::from(sizes[i])),
    ];
    let mut best: Option<(u32, heapless::Vec<u16, N>, heapless::Vec<u32, N>)> = None;
    for key in keys {
        // Descending by key; ties keep the buffers' order, so the result is deterministic.
        // Each buffer is inserted after those that go before it: a model has few buffers,
        // and a general sort would put a quicksort in a firmware's flash for this alone.
        let mut order: heapless::Vec<u16, N> = heapless::Vec::new();
        for i in 0..n {
            let k = key(i);
            let at = order.partition_point(|&j| key(usize::from(j)) >= k);
            // At most N buffers (checked above).
            let _ = order.insert(at, i as u16);
        }
        let (size, offsets) = place_in_order::<N>(buffers, &sizes, &order)?;
        if best.as_ref().is_none_or(|(s, _, _)| size < *s) {
            best = Some((size, order, offsets));
        }
    }
    let Some((mut size, mut order, mut offsets)) = best else {
        return Ok(ArenaPlan {
            offsets: heapless::Vec::new(),
            size: 0,
            lower_bound: 0,
        });
    };
    // A fixed xorshift sequence: the same plan on every machine.
    let mut state = 0x9E37_79B9u32;
    let mut next = |m: usize| {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        state as usize % m
    };
    for _ in 0..effort {
        if size <= bound || n < 2 {
            break;
        }
        let (i, j) = (next(n), next(n));
        if i == j {
            continue;
        }
        order.swap(i, j);
        let (s, o) = place_in_order::<N>(buffers, &sizes, &order)?;
        if s <= size {
            size = s;
            offsets = o;
        } else {
            order.swap(i, j);
        }
    }
    Ok(ArenaPlan {
        offsets,
        size,
        lower_bound: bound,
    })
}

/// Greedy first fit of `order`: each buffer at the lowest offset free of the buffers placed
/// before it that are live at the same time.
fn place_in_order<const N: usize>(
    buffers: &[Lifetime],
    sizes: &[u32],
    order: &[u16],
) -> Result<(u32, heapless::Vec<u32, N>), ArenaPlanError> {
    let mut offsets: heapless::Vec<u32, N> = heapless::Vec::new();
    let _ = offsets.resize(buffers.len(), u32::MAX);
    let mut end = 0u32;
    // (offset, end) of the placed buffers that clash in time with the one being placed.
    let mut taken: heapless::Vec<(u32, u32), N> = heapless::Vec::new();
    for (k, &i) in order.iter().enumerate() {
        let i = usize::from(i);
        taken.clear();
        for &j in &order[..k] {
            let j = usize::from(j);
            if buffers[i].overlaps(&buffers[j]) {
                // Kept sorted as it grows (see the order above: no quicksort).
                let t = (offsets[j], offsets[j] + sizes[j]);
                let _ = taken.insert(taken.partition_point(|&x| x <= t), t);
            }
        }
        let mut at = 0u32;
        for &(start, stop) in &taken {
            if at.checked_add(sizes[i]).ok_or(ArenaPlanError::TooLarge)? <= start {
                break;
            }
            at = at.max(stop);
        }
        offsets[i] = at;
        end = end.max(at.checked_add(sizes[i]).ok_or(ArenaPlanError::TooLarge)?);
    }
    Ok((end, offsets))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No two buffers live at the same step share a byte.
    fn check<const N: usize>(buffers: &[Lifetime], p: &ArenaPlan<N>, alignment: u32) {
        for (i, a) in buffers.iter().enumerate() {
            let (ao, asz) = (p.offsets[i], round_up(a.bytes, alignment).unwrap());
            assert_eq!(ao % alignment, 0);
            assert!(ao + asz <= p.size());
            for (j, b) in buffers.iter().enumerate().skip(i + 1) {
                let (bo, bsz) = (p.offsets[j], round_up(b.bytes, alignment).unwrap());
                if a.overlaps(b) {
                    assert!(ao + asz <= bo || bo + bsz <= ao, "{i} and {j} clash");
                }
            }
        }
    }

    fn lt(bytes: u32, first: u16, last: u16) -> Lifetime {
        Lifetime { bytes, first, last }
    }

    #[test]
    fn chain_reaches_the_bound() {
        let b: [Lifetime; 5] = [
            lt(900, 0, 1),
            lt(300, 1, 2),
            lt(900, 2, 3),
            lt(64, 3, 4),
            lt(900, 4, 5),
        ];
        let p = plan_arena::<8>(&b, 16, 0).unwrap();
        check(&b, &p, 16);
        assert_eq!(p.size(), p.lower_bound());
        assert_eq!(p.lower_bound(), 912 + 304);
    }

    #[test]
    fn search_beats_greedy_by_size() {
        // Largest-first puts the long-lived small buffer above the big ones and wastes a gap;
        // some order reaches the bound.
        let b = [
            lt(64, 0, 9),
            lt(512, 0, 2),
            lt(256, 3, 5),
            lt(512, 6, 9),
            lt(256, 1, 4),
        ];
        let p = plan_arena::<8>(&b, 16, 200).unwrap();
        check(&b, &p, 16);
        assert!(p.size() <= 64 + 512 + 256, "{}", p.size());
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "over 30 s each under miri, which interprets every step (schedule searches, sweeps of many cases)"
    )]
    fn pseudo_random_instances_are_valid_and_deterministic() {
        let mut s = 12345u32;
        let mut r = |m: u32| {
            s = s.wrapping_mul(1_103_515_245).wrapping_add(12345);
            (s >> 8) % m
        };
        for _ in 0..50 {
            let mut b: heapless::Vec<Lifetime, 32> = heapless::Vec::new();
            for _ in 0..(r(30) + 1) {
                let first = r(20) as u16;
                let _ = b.push(lt(r(5000), first, first + r(6) as u16));
            }
            let p = plan_arena::<32>(&b, 16, 100).unwrap();
            check(&b, &p, 16);
            assert!(p.size() >= p.lower_bound());
            assert_eq!(p, plan_arena::<32>(&b, 16, 100).unwrap());
        }
    }

    #[test]
    fn errors_name_the_problem() {
        let b = [lt(1, 0, 0); 3];
        assert_eq!(
            plan_arena::<2>(&b, 16, 0),
            Err(ArenaPlanError::TooManyBuffers {
                limit: 2,
                needed: 3
            })
        );
        assert_eq!(
            plan_arena::<4>(&[lt(1, 2, 1)], 16, 0),
            Err(ArenaPlanError::BadInput { buffer: 0 })
        );
        assert_eq!(
            plan_arena::<4>(&b, 12, 0),
            Err(ArenaPlanError::BadInput { buffer: u32::MAX })
        );
        assert_eq!(
            plan_arena::<4>(&[lt(u32::MAX, 0, 0)], 16, 0),
            Err(ArenaPlanError::TooLarge)
        );
    }
}
