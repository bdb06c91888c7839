//! Queues, dependencies, the cycle model, traces, statistics and determinism.

mod common;

use common::*;
use npu_compute::hal::{Fence, Npu, Queue, Region, Space};
use npu_compute::ops::{
    AddF32, DType, FullyConnectedF32, FullyConnectedI8, MulF32, Op, OpKind, ReluF32,
};
use npu_kernels::FcShape;
use npu_sim::{Lane, SimConfig, SimStats, TraceEntry, TraceKind, TraceRegions, CPU_FENCE};

#[test]
fn jobs_on_one_queue_serialize() {
    let mut npu = traced(SimConfig::default(), 16);
    let a = npu
        .submit(&transfer(Region::host(0, 16), Region::device(0, 16), &[]))
        .unwrap();
    let b = npu
        .submit(&transfer(
            Region::host(0, 100),
            Region::device(16, 100),
            &[],
        ))
        .unwrap();
    let relu = Op::ReluF32(ReluF32 { len: 4 });
    let c = npu
        .submit(&compute(
            relu,
            &[Region::device(256, 16)],
            Region::device(512, 16),
            Queue::Unit(0),
            &[],
        ))
        .unwrap();
    let d = npu
        .submit(&compute(
            relu,
            &[Region::device(256, 16)],
            Region::device(528, 16),
            Queue::Unit(0),
            &[],
        ))
        .unwrap();
    npu.run_until_idle();

    let (ea, eb, ec, ed) = (
        entry(&npu, a),
        entry(&npu, b),
        entry(&npu, c),
        entry(&npu, d),
    );
    assert_eq!((ea.start, ea.end), (0, 34));
    // 32 + ceil(100 / 8) = 45 cycles, after `a`.
    assert_eq!((eb.start, eb.end), (34, 79));
    // Compute on unit 0 overlaps the DMA queue and serializes with itself.
    assert_eq!(ec.start, 0);
    assert_eq!(ed.start, ec.end);
    assert_eq!(ed.end - ed.start, ec.end - ec.start);
}

#[test]
fn dependencies_across_queues_delay_the_start() {
    let mut npu = traced(two_units(), 16);
    let relu = Op::ReluF32(ReluF32 { len: 4 });
    let t = npu
        .submit(&transfer(Region::host(0, 16), Region::device(0, 16), &[]))
        .unwrap();
    // Independent job on unit 0 starts at once; dependent job on unit 1 waits for the DMA.
    let free = npu
        .submit(&compute(
            relu,
            &[Region::device(64, 16)],
            Region::device(128, 16),
            Queue::Unit(0),
            &[],
        ))
        .unwrap();
    let dep = npu
        .submit(&compute(
            relu,
            &[Region::device(0, 16)],
            Region::device(32, 16),
            Queue::Unit(1),
            &[t],
        ))
        .unwrap();
    // A transfer out that depends on the compute job.
    let out = npu
        .submit(&transfer(
            Region::device(32, 16),
            Region::host(64, 16),
            &[dep],
        ))
        .unwrap();
    // Dependencies on completed jobs do not delay.
    npu.run_until_idle();
    let late = npu
        .submit(&compute(
            relu,
            &[Region::device(0, 16)],
            Region::device(48, 16),
            Queue::Unit(1),
            &[t, dep],
        ))
        .unwrap();
    let now = npu.now();
    npu.run_until_idle();

    assert_eq!(entry(&npu, free).start, 0);
    assert_eq!(entry(&npu, dep).start, entry(&npu, t).end);
    assert_eq!(entry(&npu, dep).start, 34);
    assert_eq!(entry(&npu, out).start, entry(&npu, dep).end);
    assert_eq!(entry(&npu, late).start, now);
    assert_eq!(entry(&npu, dep).queue, Queue::Unit(1));
}

#[test]
fn dependency_on_a_later_ending_job_of_another_queue_wins_over_queue_order() {
    let mut npu = traced(two_units(), 16);
    let fc = Op::FullyConnectedF32(FullyConnectedF32 {
        shape: FcShape {
            batches: 4,
            in_features: 64,
            out_features: 64,
        },
    });
    let long = npu
        .submit(&compute(
            fc,
            &[Region::device(0, 1024), Region::device(1024, 16384)],
            Region::device(20480, 1024),
            Queue::Unit(0),
            &[],
        ))
        .unwrap();
    let relu = Op::ReluF32(ReluF32 { len: 4 });
    let short = npu
        .submit(&compute(
            relu,
            &[Region::device(32768, 16)],
            Region::device(32784, 16),
            Queue::Unit(1),
            &[],
        ))
        .unwrap();
    let after_both = npu
        .submit(&compute(
            relu,
            &[Region::device(32768, 16)],
            Region::device(32800, 16),
            Queue::Unit(1),
            &[long],
        ))
        .unwrap();
    let (_, long_end) = npu.scheduled(long).unwrap();
    let (_, short_end) = npu.scheduled(short).unwrap();
    assert!(long_end > short_end);
    assert_eq!(npu.scheduled(after_both).unwrap().0, long_end);
}

#[test]
fn cycle_costs_follow_the_documented_formulas() {
    let c = SimConfig::default();
    // transfer = 32 + ceil(len / 8)
    assert_eq!(c.transfer_cost(0), 32);
    assert_eq!(c.transfer_cost(1), 33);
    assert_eq!(c.transfer_cost(16), 34);
    assert_eq!(c.transfer_cost(100), 45);
    // f32 add, 64 elements: compute = ceil(64 * 6 * 4 / 4) = 384, memory = 768 / 8 = 96.
    assert_eq!(c.compute_cycles(&Op::AddF32(AddF32 { len: 64 })), 384);
    assert_eq!(
        c.compute_cost(&Op::AddF32(AddF32 { len: 64 }), 768),
        64 + 384
    );
    // f32 mul: 0.75 * 4 = 3 cycles per element; relu: 0.5 * 4 = 2.
    assert_eq!(c.compute_cycles(&Op::MulF32(MulF32 { len: 64 })), 192);
    assert_eq!(c.compute_cycles(&Op::ReluF32(ReluF32 { len: 64 })), 128);
    assert_eq!(c.compute_cycles(&Op::ReluF32(ReluF32 { len: 1 })), 2);
    // FC f32 2x16 -> 8: 256 MACs * 4 / 128 = 8 cycles; memory-bound:
    // (128 + 512 + 32 + 64) bytes / 8 = 92 with bias, 88 without.
    let fc = Op::FullyConnectedF32(FullyConnectedF32 {
        shape: FcShape {
            batches: 2,
            in_features: 16,
            out_features: 8,
        },
    });
    assert_eq!(c.compute_cycles(&fc), 8);
    assert_eq!(c.compute_cost(&fc, 736), 64 + 92);
    // FC f32 64x64 -> 64: 262144 MACs * 4 / 128 = 8192 > memory 49152 / 8 = 6144.
    let big = Op::FullyConnectedF32(FullyConnectedF32 {
        shape: FcShape {
            batches: 64,
            in_features: 64,
            out_features: 64,
        },
    });
    assert_eq!(c.compute_cost(&big, 49152), 64 + 8192);
    // Twice the MACs per cycle makes it memory-bound.
    let wide = SimConfig {
        macs_per_cycle: 256,
        ..c
    };
    assert_eq!(wide.compute_cost(&big, 49152), 64 + 6144);
    // Every cost is at least one cycle.
    let free = SimConfig {
        job_overhead_cycles: 0,
        dma_overhead_cycles: 0,
        ..c
    };
    assert_eq!(free.transfer_cost(0), 1);
    assert_eq!(free.compute_cost(&Op::AddF32(AddF32 { len: 0 }), 0), 1);
}

#[test]
fn scheduled_costs_match_the_formulas() {
    let mut npu = sim(SimConfig::default());
    let fc = Op::FullyConnectedF32(FullyConnectedF32 {
        shape: FcShape {
            batches: 2,
            in_features: 16,
            out_features: 8,
        },
    });
    let with_bias = npu
        .submit(&compute(
            fc,
            &[
                Region::device(0, 128),
                Region::device(128, 512),
                Region::device(640, 32),
            ],
            Region::device(672, 64),
            Queue::Unit(0),
            &[],
        ))
        .unwrap();
    let without = npu
        .submit(&compute(
            fc,
            &[Region::device(0, 128), Region::device(128, 512)],
            Region::device(736, 64),
            Queue::Unit(0),
            &[],
        ))
        .unwrap();
    let add = npu
        .submit(&compute(
            Op::AddF32(AddF32 { len: 64 }),
            &[Region::device(1024, 256), Region::device(1280, 256)],
            Region::device(1536, 256),
            Queue::Unit(0),
            &[],
        ))
        .unwrap();
    assert_eq!(npu.scheduled(with_bias), Some((0, 156)));
    assert_eq!(npu.scheduled(without), Some((156, 156 + 152)));
    assert_eq!(npu.scheduled(add), Some((308, 308 + 448)));
}

#[test]
fn int8_runs_four_times_faster_than_f32() {
    use npu_kernels::int8::{Activation, FcParams, Quant};
    let c = SimConfig::default();
    let params = FcParams::new(
        Quant {
            scale: 0.5,
            zero_point: 0,
        },
        0.25,
        Quant {
            scale: 1.0,
            zero_point: 0,
        },
        Activation::None,
    )
    .expect("npu-kernels FcParams::new");
    let shape = FcShape {
        batches: 64,
        in_features: 64,
        out_features: 64,
    };
    let i8_fc = Op::FullyConnectedI8(FullyConnectedI8 { shape, params });
    // 262144 MACs / 128 per cycle.
    assert_eq!(c.compute_cycles(&i8_fc), 2048);
    assert_eq!(
        c.compute_cycles(&Op::FullyConnectedF32(FullyConnectedF32 { shape })),
        4 * 2048
    );
}

#[test]
fn trace_ring_wraps_and_keeps_the_newest_entries() {
    let mut npu = traced(SimConfig::default(), 3);
    let mut fences = Vec::new();
    for i in 0..5u32 {
        fences.push(
            npu.submit(&transfer(
                Region::host(i * 16, 16),
                Region::device(i * 16, 16),
                &[],
            ))
            .unwrap(),
        );
    }
    npu.run_until_idle();
    let t = trace(&npu);
    assert_eq!(t.iter().map(|e| e.fence).collect::<Vec<_>>(), &fences[2..]);
    assert_eq!(npu.trace_len(), 3);
    assert_eq!(npu.trace_overwritten(), 2);
    assert_eq!(
        t[0],
        TraceEntry {
            fence: fences[2],
            queue: Queue::Dma,
            kind: TraceKind::Transfer {
                from: Space::Host,
                to: Space::Device,
                bytes: 16
            },
            start: 68,
            end: 102,
            failure: None,
        }
    );
    npu.clear_trace();
    assert_eq!(npu.trace().count(), 0);
    // No trace storage: nothing recorded.
    let mut plain = sim(SimConfig::default());
    plain
        .submit(&transfer(Region::host(0, 16), Region::device(0, 16), &[]))
        .unwrap();
    plain.run_until_idle();
    assert_eq!(plain.trace().count(), 0);
}

#[test]
fn trace_records_in_retire_order() {
    let mut npu = traced(two_units(), 8);
    let relu = Op::ReluF32(ReluF32 { len: 64 });
    let slow = npu
        .submit(&compute(
            relu,
            &[Region::device(0, 256)],
            Region::device(256, 256),
            Queue::Unit(0),
            &[],
        ))
        .unwrap();
    let fast = npu
        .submit(&transfer(
            Region::host(0, 16),
            Region::device(1024, 16),
            &[],
        ))
        .unwrap();
    npu.run_until_idle();
    let t = trace(&npu);
    assert_eq!(t.iter().map(|e| e.fence).collect::<Vec<_>>(), [fast, slow]);
    assert_eq!(
        t[1].kind,
        TraceKind::Compute {
            op: OpKind::Relu,
            dtype: DType::F32
        }
    );
    assert!(t[0].end <= t[1].end);
}

#[test]
fn cpu_work_is_traced_on_its_own_lane() {
    let mut npu = traced(SimConfig::default(), 8);
    let relu = Op::ReluF32(ReluF32 { len: 64 });
    // A job in flight while the CPU computes: the CPU's entry overlaps it.
    let job = npu
        .submit(&compute(
            relu,
            &[Region::device(0, 256)],
            Region::device(256, 256),
            Queue::Unit(0),
            &[],
        ))
        .unwrap();
    let before = npu.now();
    let on_cpu = Op::ReluF32(ReluF32 { len: 4096 });
    npu.host_compute(&on_cpu);
    let after = npu.now();
    assert!(after > before, "the CPU model charges cycles");
    npu.run_until_idle();
    let t = trace(&npu);
    let cpu: Vec<&TraceEntry> = t.iter().filter(|e| e.lane() == Lane::Cpu).collect();
    assert_eq!(cpu.len(), 1);
    assert_eq!(
        *cpu[0],
        TraceEntry {
            fence: CPU_FENCE,
            queue: Queue::Dma,
            kind: TraceKind::Cpu {
                op: OpKind::Relu,
                dtype: DType::F32
            },
            start: before,
            end: after,
            failure: None,
        }
    );
    assert_eq!(after - before, npu.stats().cpu_cycles);
    // The job keeps its own lane, and finding it by fence does not find the CPU's entry.
    assert_eq!(entry(&npu, job).lane(), Lane::Unit(0));
    // Without a CPU model the clock does not move and nothing is traced.
    let mut free = traced(
        SimConfig {
            cpu: None,
            ..SimConfig::default()
        },
        8,
    );
    free.host_compute(&on_cpu);
    assert_eq!(free.trace().count(), 0);
}

#[test]
fn trace_regions_record_what_each_job_touched() {
    let entries = Box::leak(vec![TraceEntry::EMPTY; 8].into_boxed_slice());
    let regions = Box::leak(vec![TraceRegions::EMPTY; 8].into_boxed_slice());
    let mut npu = sim(SimConfig::default()).with_trace_regions(entries, regions);
    let up = npu
        .submit(&transfer(Region::host(0, 16), Region::device(64, 16), &[]))
        .unwrap();
    let add = Op::AddF32(AddF32 { len: 4 });
    let sum = npu
        .submit(&compute(
            add,
            &[Region::device(64, 16), Region::device(0, 16)],
            Region::device(128, 16),
            Queue::Unit(0),
            &[up],
        ))
        .unwrap();
    npu.host_compute(&add);
    npu.run_until_idle();
    let got: Vec<(Fence, TraceRegions)> = npu
        .trace_regions()
        .map(|(e, r)| (e.fence, r.cloned().expect("regions are kept")))
        .collect();
    let of = |fence: Fence| {
        got.iter()
            .find(|(f, _)| *f == fence)
            .map(|(_, r)| r.clone())
            .unwrap()
    };
    assert_eq!(
        of(up),
        TraceRegions {
            reads: heapless::Vec::from_slice(&[Region::host(0, 16)]).unwrap(),
            write: Some(Region::device(64, 16)),
            scratch: None,
        }
    );
    assert_eq!(
        of(sum),
        TraceRegions {
            reads: heapless::Vec::from_slice(&[Region::device(64, 16), Region::device(0, 16)])
                .unwrap(),
            write: Some(Region::device(128, 16)),
            scratch: None,
        }
    );
    assert_eq!(of(CPU_FENCE), TraceRegions::EMPTY);
    // Plain trace storage keeps no regions.
    let mut plain = traced(SimConfig::default(), 4);
    plain
        .submit(&transfer(Region::host(0, 16), Region::device(0, 16), &[]))
        .unwrap();
    plain.run_until_idle();
    assert!(plain.trace_regions().all(|(_, r)| r.is_none()));
    assert_eq!(plain.trace_regions().count(), 1);
}

#[test]
fn stats_count_work() {
    let mut npu = sim(two_units());
    let a = npu
        .submit(&transfer(Region::host(0, 16), Region::device(0, 16), &[]))
        .unwrap();
    let b = npu
        .submit(&transfer(
            Region::host(0, 100),
            Region::device(16, 100),
            &[a],
        ))
        .unwrap();
    assert_eq!(npu.stats().jobs_submitted, 2);
    assert_eq!(npu.stats().jobs_completed, 0, "nothing retired yet");
    assert_eq!(npu.stats().peak_in_flight, 2);
    npu.run_until_idle();
    let _ = npu
        .submit(&transfer(Region::host(0, 16), Region::device(0, 16), &[b]))
        .unwrap();
    npu.run_until_idle();
    let s = npu.stats();
    assert_eq!(s.jobs_submitted, 3);
    assert_eq!(s.jobs_completed, 3);
    assert_eq!(s.jobs_failed, 0);
    assert_eq!(s.transfers, 3);
    assert_eq!(s.transfer_bytes, 132);
    assert_eq!(s.busy(Queue::Dma), 34 + 45 + 34);
    assert_eq!(s.busy(Queue::Unit(0)), 0);
    assert_eq!(s.busy(Queue::Unit(7)), 0);
    assert_eq!(s.busy(Queue::Unit(200)), 0);
    assert_eq!(s.peak_in_flight, 2);
    assert_eq!(s.jobs_retired(), 3);
}

/// A mixed workload on two units; returns everything observable.
fn scenario() -> (Vec<TraceEntry>, SimStats, Vec<u8>, Vec<u8>, u64) {
    let mut npu = traced(two_units(), 64);
    let values: Vec<f32> = (0..64).map(|i| i as f32 - 20.5).collect();
    npu.host_memory()[..256].copy_from_slice(&f32_bytes(&values));
    let mut last = Vec::new();
    for round in 0..4u32 {
        let base = round * 2048;
        let t = npu
            .submit(&transfer(
                Region::host(0, 256),
                Region::device(base, 256),
                &[],
            ))
            .unwrap();
        let unit = Queue::Unit((round % 2) as u8);
        let r = npu
            .submit(&compute(
                Op::ReluF32(ReluF32 { len: 64 }),
                &[Region::device(base, 256)],
                Region::device(base + 256, 256),
                unit,
                &[t],
            ))
            .unwrap();
        let m = npu
            .submit(&compute(
                Op::MulF32(MulF32 { len: 64 }),
                &[Region::device(base, 256), Region::device(base + 256, 256)],
                Region::device(base + 512, 256),
                unit,
                &[r],
            ))
            .unwrap();
        let o = npu
            .submit(&transfer(
                Region::device(base + 512, 256),
                Region::host(1024 + base, 256),
                &[m],
            ))
            .unwrap();
        last.push(o);
        npu.advance(17 * u64::from(round));
        let _ = npu.poll(Fence(0));
    }
    for f in last {
        let _ = wait(&mut npu, f);
    }
    let now = npu.now();
    (
        trace(&npu),
        npu.stats(),
        npu.device_memory().to_vec(),
        npu.host_memory().to_vec(),
        now,
    )
}

#[test]
fn identical_runs_are_identical() {
    let first = scenario();
    let second = scenario();
    assert_eq!(first.0.len(), 16);
    assert!(first.4 > 0);
    assert_eq!(first, second);
}
