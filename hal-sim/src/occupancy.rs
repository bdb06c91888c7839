//! The arena's occupancy over a traced run (behind the `std` feature): how many bytes of
//! device memory hold live data at each cycle, computed from the jobs' regions
//! ([`TraceRegions`], kept with [`SimNpu::with_trace_regions`](crate::SimNpu::with_trace_regions)).
//!
//! # What counts as live
//!
//! The simulator does not know the memory manager's allocations; it sees which device bytes
//! each job reads and writes. A byte is *live* while the data in it may still be read:
//!
//! - data written in the run is live from the **start** of the job that writes it (the bytes
//!   are the job's from then on) to the **end** of the last job that reads it before the next
//!   write over it, or to the writer's end if nothing reads it;
//! - data read before anything in the run writes it was there before the run (constants the
//!   prepare uploaded, a stateful layer's state): live from the run's first cycle to the end
//!   of its last read if a later write replaces it, else past the run's last cycle (nothing
//!   says it died: constants stay for the next invoke);
//! - bytes that held data when the run began are the model's persistent memory: what is
//!   written there is kept past the run's last cycle too, read or not (a stateful layer's
//!   new state is for the next invoke);
//! - an operator's scratch region is live for the operator's job.
//!
//! Bytes are tracked exactly, not per region: the regions' boundaries cut device memory into
//! segments, and each segment has its own history. The occupancy at a cycle is the number of
//! bytes live then, so two tensors sharing arena bytes at different times are counted once
//! each time, and the peak is at most the arena. Host and flash regions do not count: only
//! [`Space::Device`] is the arena. The run is the traced span: its first job's start to its
//! last job's end.

use std::collections::BTreeMap;

use npu_compute::hal::{Cycles, Region, Space};

use crate::{TraceEntry, TraceRegions};

/// The occupancy of a run: a step function of the cycle.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Occupancy {
    /// `(cycle, bytes)`: from `cycle` on (until the next step) `bytes` are live. Cycles
    /// increase strictly and each step changes the bytes, but for the last, at the run's
    /// end, which gives the bytes held past the run (persistent memory). The first is the
    /// run's start.
    pub steps: Vec<(Cycles, u64)>,
    /// The most bytes live at once.
    pub peak_bytes: u64,
    /// The first cycle the peak is reached.
    pub peak_at: Cycles,
}

impl Occupancy {
    /// Bytes live at `cycle` (0 before the run).
    pub fn at(&self, cycle: Cycles) -> u64 {
        let after = self.steps.partition_point(|&(c, _)| c <= cycle);
        after
            .checked_sub(1)
            .and_then(|i| self.steps.get(i))
            .map_or(0, |&(_, bytes)| bytes)
    }
}

/// One access of a device segment by a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Access {
    start: Cycles,
    /// Reads of a job come before its write (an operator may write over its input).
    write: bool,
    end: Cycles,
}

/// The occupancy of the traced `jobs` (any order; entries without device regions, CPU work
/// among them, only set the run's span).
pub fn occupancy(jobs: &[(TraceEntry, TraceRegions)]) -> Occupancy {
    let Some(run_start) = jobs.iter().map(|(e, _)| e.start).min() else {
        return Occupancy::default();
    };
    let run_end = jobs.iter().map(|(e, _)| e.end).max().unwrap_or(run_start);
    let device = |r: &Option<Region>| r.filter(|r| r.space == Space::Device && r.len > 0);

    // Segment boundaries: every device region's ends.
    let mut cuts: Vec<u64> = Vec::new();
    let regions = jobs.iter().flat_map(|(_, r)| {
        r.reads
            .iter()
            .copied()
            .map(Some)
            .chain([r.write, r.scratch])
            .filter_map(|r| device(&r))
    });
    for r in regions {
        cuts.push(u64::from(r.offset));
        cuts.push(u64::from(r.offset) + u64::from(r.len));
    }
    cuts.sort_unstable();
    cuts.dedup();

    // Each segment's accesses, and live spans that need no history (scratch).
    let mut accesses: Vec<Vec<Access>> = vec![Vec::new(); cuts.len().saturating_sub(1)];
    let mut spans: Vec<(Cycles, Cycles, u64)> = Vec::new();
    let segments = |r: Region| {
        let (from, to) = (u64::from(r.offset), u64::from(r.offset) + u64::from(r.len));
        cuts.partition_point(|&c| c < from)..cuts.partition_point(|&c| c < to)
    };
    for (entry, r) in jobs {
        let (start, end) = (entry.start, entry.end);
        for read in r.reads.iter().filter_map(|r| device(&Some(*r))) {
            for s in segments(read) {
                accesses[s].push(Access {
                    start,
                    write: false,
                    end,
                });
            }
        }
        if let Some(write) = device(&r.write) {
            for s in segments(write) {
                accesses[s].push(Access {
                    start,
                    write: true,
                    end,
                });
            }
        }
        if let Some(scratch) = device(&r.scratch) {
            spans.push((start, end, u64::from(scratch.len)));
        }
    }

    for (s, list) in accesses.iter_mut().enumerate() {
        let bytes = cuts[s + 1] - cuts[s];
        list.sort_unstable();
        // Persistent memory: the segment held data when the run began.
        let persistent = list.first().is_some_and(|a| !a.write);
        // The data now in the segment: (born, last read or write end).
        let mut current: Option<(Cycles, Cycles)> = None;
        for a in list.iter() {
            match (a.write, current.as_mut()) {
                (false, Some((_, death))) => *death = (*death).max(a.end),
                (false, None) => current = Some((run_start, a.end)),
                (true, _) => {
                    if let Some((born, death)) = current.take() {
                        spans.push((born, death, bytes));
                    }
                    current = Some((a.start, a.end));
                }
            }
        }
        if let Some((born, death)) = current {
            // Held past the run: no end within it.
            spans.push((born, if persistent { Cycles::MAX } else { death }, bytes));
        }
    }
    // Spans of one segment do not overlap (a write ends the previous data). A scratch span
    // is added on top: the simulator refuses a scratch that overlaps its own job's regions,
    // and other jobs' data there at the same time would be a race.
    let mut deltas: BTreeMap<Cycles, i128> = BTreeMap::new();
    deltas.entry(run_start).or_insert(0);
    deltas.entry(run_end).or_insert(0);
    for (born, death, bytes) in spans {
        if death > born {
            *deltas.entry(born).or_insert(0) += i128::from(bytes);
            *deltas.entry(death).or_insert(0) -= i128::from(bytes);
        }
    }
    let mut steps = Vec::with_capacity(deltas.len());
    let (mut live, mut peak_bytes, mut peak_at) = (0i128, 0u64, run_start);
    for (cycle, delta) in deltas.range(..=run_end) {
        let cycle = *cycle;
        live += delta;
        let bytes = u64::try_from(live.max(0)).unwrap_or(u64::MAX);
        if bytes > peak_bytes {
            (peak_bytes, peak_at) = (bytes, cycle);
        }
        // A step that changes nothing (one tensor dies as another is born) is left out.
        if cycle == run_end || steps.last().is_none_or(|&(_, before)| before != bytes) {
            steps.push((cycle, bytes));
        }
    }
    Occupancy {
        steps,
        peak_bytes,
        peak_at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TraceKind;
    use npu_compute::hal::{Fence, Queue};
    use npu_compute::ops::{DType, OpKind};

    fn job(
        fence: u64,
        start: Cycles,
        end: Cycles,
        reads: &[Region],
        write: Option<Region>,
    ) -> (TraceEntry, TraceRegions) {
        (
            TraceEntry {
                fence: Fence(fence),
                queue: Queue::Unit(0),
                kind: TraceKind::Compute {
                    op: OpKind::Add,
                    dtype: DType::I8,
                },
                start,
                end,
                failure: None,
            },
            TraceRegions {
                reads: heapless::Vec::from_slice(reads).unwrap(),
                write,
                scratch: None,
            },
        )
    }

    #[test]
    fn written_data_lives_from_its_writer_start_to_its_last_reader_end() {
        let a = Region::device(0, 100);
        let b = Region::device(100, 50);
        let jobs = [
            // Upload a, compute b from a, download b.
            (
                TraceEntry {
                    queue: Queue::Dma,
                    start: 0,
                    end: 10,
                    ..TraceEntry::EMPTY
                },
                TraceRegions {
                    reads: heapless::Vec::from_slice(&[Region::host(0, 100)]).unwrap(),
                    write: Some(a),
                    scratch: None,
                },
            ),
            job(1, 10, 30, &[a], Some(b)),
            job(2, 30, 35, &[b], Some(Region::host(0, 50))),
        ];
        let o = occupancy(&jobs);
        assert_eq!(o.steps, [(0, 100), (10, 150), (30, 50), (35, 0)]);
        assert_eq!((o.peak_bytes, o.peak_at), (150, 10));
        assert_eq!(o.at(9), 100);
        assert_eq!(o.at(29), 150);
        assert_eq!(o.at(100), 0);
    }

    #[test]
    fn data_from_before_the_run_is_held_unless_overwritten() {
        let weights = Region::device(0, 64);
        let x = Region::device(64, 16);
        let jobs = [
            // weights and x were there before; y = f(x, weights) written over x's bytes later.
            job(0, 5, 20, &[x, weights], Some(Region::device(80, 16))),
            job(1, 20, 40, &[Region::device(80, 16)], Some(x)),
        ];
        let o = occupancy(&jobs);
        // weights: 5 on (held past the end); old x: 5..20; y: 5..40; new x: 20 on (x's bytes
        // held data when the run began: they are kept).
        assert_eq!(o.at(5), 64 + 16 + 16);
        assert_eq!(o.at(20), 64 + 16 + 16);
        assert_eq!(o.steps, [(5, 96), (40, 80)]);
        assert_eq!(o.peak_bytes, 96);
    }

    #[test]
    fn state_written_back_is_kept_for_the_next_invoke() {
        let state = Region::device(0, 32);
        let out = Region::device(32, 8);
        let jobs = [
            // new state and output from the old state; the output is read, the state not.
            job(0, 0, 10, &[state], Some(Region::device(64, 32))),
            job(1, 10, 20, &[Region::device(64, 32)], Some(state)),
            job(2, 10, 15, &[Region::device(64, 32)], Some(out)),
            job(3, 20, 30, &[out], None),
        ];
        let o = occupancy(&jobs);
        // state: held all along (old to 10, new from 10 on, to the end); the scratch copy at
        // 64: 0..20; out: 10..30.
        assert_eq!(o.steps, [(0, 64), (10, 72), (20, 40), (30, 32)]);
    }

    #[test]
    fn overlapping_regions_count_each_byte_once() {
        // Two readers of overlapping windows of one written tensor.
        let t = Region::device(0, 100);
        let jobs = [
            job(0, 0, 10, &[], Some(t)),
            job(1, 10, 20, &[Region::device(0, 60)], None),
            job(2, 10, 50, &[Region::device(40, 60)], None),
        ];
        let o = occupancy(&jobs);
        // Bytes 0..40 die at 20, 40..100 at 50.
        assert_eq!(o.steps, [(0, 100), (20, 60), (50, 0)]);
    }

    #[test]
    fn scratch_host_and_flash_regions() {
        let mut conv = job(
            0,
            0,
            10,
            &[Region::flash(0, 0, 1000)],
            Some(Region::host(0, 10)),
        );
        conv.1.scratch = Some(Region::device(512, 32));
        let o = occupancy(&[conv]);
        assert_eq!(o.steps, [(0, 32), (10, 0)]);
        assert_eq!(occupancy(&[]), Occupancy::default());
    }
}
