//! Execution units with their own configurations: naming them (`parse_units`), the U55-256's
//! MAC array, the SRAM and flash ports every unit shares, and the HAL estimates a static
//! scheduler plans from (a job alone, the CPU fallback).

mod common;

use npu_compute::hal::{
    Cycles, Estimate, ExecutionUnit, Fence, Job, JobKind, Npu, Queue, Region, Variant,
};
use npu_compute::ops::{Conv2dI8, FullyConnectedPerChannelI8, Op, OpKind, TransposeI8};
use npu_kernels::int8::{
    Activation, Conv2dParams, Conv2dShape, FcPerChannelParams, Nhwc, Padding, Quant,
    TransposeParams, Window2d,
};
use npu_kernels::FcShape;
use npu_sim::{
    parse_units, workloads, AlignedMemory, SimConfig, SimError, SimNpu, UnitConfig, UnitsError,
    MAX_EXECUTION_UNITS,
};

/// Device memory of each simulator: room for two layers' operands side by side.
const DEVICE: usize = 512 * 1024;

fn sim(config: SimConfig) -> SimNpu<'static> {
    let device = Box::leak(Box::new(AlignedMemory::<DEVICE>::new()));
    let host = Box::leak(Box::new(AlignedMemory::<1024>::new()));
    SimNpu::new(device.as_mut_slice(), host.as_mut_slice(), config).expect("valid config")
}

fn units(spec: &str) -> SimConfig {
    SimConfig::default()
        .with_units(&parse_units(spec).expect("a valid spec"))
        .expect("a valid unit list")
}

fn q(scale: f32, zero_point: i32) -> Quant {
    Quant { scale, zero_point }
}

/// A `k` x `k` same-padded convolution of `h` x `w` x `cin` to `cout` channels.
fn conv(h: u32, w: u32, cin: u32, cout: u32, k: u32) -> Op {
    let shape = Conv2dShape {
        input: Nhwc {
            batches: 1,
            height: h,
            width: w,
            channels: cin,
        },
        out_channels: cout,
        filter_depth: cin,
        window: Window2d {
            filter_height: k,
            filter_width: k,
            stride_height: 1,
            stride_width: 1,
            dilation_height: 1,
            dilation_width: 1,
            padding: Padding::Same,
        },
    };
    let params = Conv2dParams::new(shape, q(0.05, -3), q(0.1, 2), Activation::None).unwrap();
    Op::Conv2dI8(Conv2dI8 { shape, params })
}

/// A `rows` x `columns` matrix transposed: one read and one write of it through the SRAM
/// port, twice the cycles of the NPU's own side, so memory-bound.
fn transpose(rows: u32, columns: u32) -> Op {
    let params = TransposeParams::new(&[rows, columns], &[1, 0]).unwrap();
    Op::TransposeI8(TransposeI8 { params })
}

/// A batch-1 fully connected layer: its weights are read once (memory-bound in the simple
/// model; the layer model's vector product is slower than its weight traffic).
fn fc(in_features: u32, out_features: u32) -> Op {
    let shape = FcShape {
        batches: 1,
        in_features,
        out_features,
    };
    let params = FcPerChannelParams::new(q(0.05, -7), q(0.2, 0), Activation::None).unwrap();
    Op::FullyConnectedPerChannelI8(FullyConnectedPerChannelI8 { shape, params })
}

/// A compute job of `op` on `queue` with its operands packed in device memory from `base`
/// (the inputs, then the output, each 16-byte aligned); the op is leaked for the test.
fn job_at(op: Op, base: u32, queue: Queue) -> Job<'static> {
    let op: &'static Op = Box::leak(Box::new(op));
    let operands = op.operands().expect("a valid op");
    let mut at = base;
    let mut place = |len: u32| {
        let r = Region::device(at, len);
        at += len.max(1).div_ceil(16) * 16;
        r
    };
    let inputs: Vec<Region> = operands.inputs.iter().map(|&len| place(len)).collect();
    let output = place(operands.output);
    Job {
        kind: JobKind::Compute {
            op,
            variant: Variant::Auto,
            inputs: heapless::Vec::from_slice(&inputs).expect("<= MAX_JOB_INPUTS"),
            output,
            scratch: None,
        },
        queue,
        deps: heapless::Vec::new(),
    }
}

/// Fills a job's inputs with the workloads' operand bytes (valid biases and all).
fn fill(npu: &mut SimNpu<'_>, job: &Job<'_>) {
    let JobKind::Compute { op, inputs, .. } = &job.kind else {
        return;
    };
    let bytes = workloads::operand_bytes(op, 0x51ed).expect("a valid op");
    for (r, b) in inputs.iter().zip(bytes) {
        if r.space == npu_compute::hal::Space::Device {
            let at = r.offset as usize;
            npu.device_memory_mut()[at..at + b.len()].copy_from_slice(&b);
        }
    }
}

/// Submits `jobs` at cycle 0, runs them to the end and returns the makespan (every job must
/// succeed).
fn makespan(npu: &mut SimNpu<'_>, jobs: &[Job<'_>]) -> Cycles {
    let fences: Vec<Fence> = jobs
        .iter()
        .map(|j| {
            fill(npu, j);
            npu.submit(j).expect("accepted")
        })
        .collect();
    let end = npu.run_until_idle();
    for f in fences {
        assert_eq!(npu.poll(f), Ok(()));
    }
    end
}

/// The cycles `job` takes submitted alone to a fresh simulator of `config`.
fn alone(config: SimConfig, job: &Job<'_>) -> Cycles {
    let mut npu = sim(config);
    fill(&mut npu, job);
    let fence = npu.submit(job).expect("accepted");
    let (start, end) = npu.scheduled(fence).expect("in flight");
    npu.run_until_idle();
    assert_eq!(npu.poll(fence), Ok(()));
    end - start
}

#[test]
fn parse_units_names_the_bad_item_and_the_accepted_names() {
    let list = parse_units("u55-256,u55-128").unwrap();
    assert_eq!(
        list.as_slice(),
        [UnitConfig::ETHOS_U55_256, UnitConfig::ETHOS_U55_128]
    );
    assert_eq!(
        parse_units(" U55-128 , u55-128").unwrap().as_slice(),
        [UnitConfig::ETHOS_U55_128; 2]
    );
    let err = parse_units("u55-128,u65-512").unwrap_err();
    assert_eq!(err, UnitsError::Unknown { item: "u65-512" });
    let text = err.to_string();
    assert!(
        text.contains("`u65-512`") && text.contains("u55-128, u55-256"),
        "{text}"
    );
    assert_eq!(
        parse_units("").unwrap_err(),
        UnitsError::Unknown { item: "" }
    );
    assert_eq!(
        parse_units("u55-128,,u55-256").unwrap_err(),
        UnitsError::Unknown { item: "" }
    );
    assert_eq!(
        parse_units("u55-128, u99 ").unwrap_err(),
        UnitsError::Unknown { item: "u99" }
    );
    let nine = ["u55-128"; MAX_EXECUTION_UNITS + 1].join(",");
    assert_eq!(
        parse_units(&nine).unwrap_err(),
        UnitsError::TooMany {
            units: MAX_EXECUTION_UNITS + 1
        }
    );
    assert!(parse_units(&nine)
        .unwrap_err()
        .to_string()
        .contains("at most 8"));
    let eight = ["u55-256"; MAX_EXECUTION_UNITS].join(",");
    assert_eq!(parse_units(&eight).unwrap().len(), MAX_EXECUTION_UNITS);
}

#[test]
fn configs_are_built_from_unit_lists_and_checked() {
    // Every existing constructor: one U55-128.
    for config in [SimConfig::default(), SimConfig::ETHOS_U55_128] {
        assert_eq!(config.active_units(), [UnitConfig::ETHOS_U55_128]);
    }
    let mixed = units("u55-256,u55-128");
    assert_eq!(mixed.execution_units, 2);
    assert_eq!(mixed.unit_macs_per_cycle(0), 256);
    assert_eq!(mixed.unit_macs_per_cycle(1), 128);
    // A unit of 128 MACs is the configuration as it stands, whatever its rates.
    let slow = SimConfig {
        macs_per_cycle: 64,
        ..mixed
    };
    assert_eq!(
        (slow.unit_macs_per_cycle(0), slow.unit_macs_per_cycle(1)),
        (128, 64)
    );
    assert_eq!(mixed.unit_layers(1), SimConfig::default().layers);
    assert_eq!(
        mixed.unit_layers(0),
        Some(npu_sim::cost::U55Config::ETHOS_U55_256)
    );

    assert_eq!(
        SimConfig::default().with_units(&[]),
        Err(SimError::NoExecutionUnits)
    );
    assert!(matches!(
        SimConfig::default().with_units(&[UnitConfig::ETHOS_U55_128; 9]),
        Err(SimError::TooManyExecutionUnits { units: 9, .. })
    ));
    let zero = UnitConfig {
        name: "none",
        macs_per_cycle: 0,
    };
    assert_eq!(
        SimConfig::default().with_units(&[UnitConfig::ETHOS_U55_128, zero]),
        Err(SimError::ZeroRate {
            parameter: "units[].macs_per_cycle"
        })
    );
    // A bad unit beyond `execution_units` is not used, so not an error.
    let mut spare = SimConfig::default();
    spare.units[5] = zero;
    assert_eq!(spare.validate(), Ok(()));
}

#[test]
fn units_declare_their_name_and_throughput() {
    let npu = sim(units("u55-256,u55-128"));
    assert_eq!(npu.capabilities().execution_units, 2);
    assert_eq!(
        npu.execution_unit(0),
        ExecutionUnit {
            name: "u55-256",
            macs_per_cycle: 256
        }
    );
    assert_eq!(
        npu.execution_unit(1),
        ExecutionUnit {
            name: "u55-128",
            macs_per_cycle: 128
        }
    );
    assert_eq!(npu.execution_unit(2), ExecutionUnit::UNDECLARED);
    assert_eq!(sim(SimConfig::default()).execution_unit(0).name, "u55-128");
}

#[test]
fn a_u55_256_runs_a_compute_bound_convolution_in_about_half_the_cycles() {
    // 3 x 3, 32 -> 64 channels on 32 x 32: about 19,000 MAC cycles on the 128, weights and
    // feature maps resident, far from memory-bound.
    let layer = || job_at(conv(32, 32, 32, 64, 3), 0, Queue::Unit(0));
    let u128 = alone(SimConfig::default(), &layer());
    let u256 = alone(units("u55-256"), &layer());
    let ratio = u256 as f64 / u128 as f64;
    assert!(
        (0.45..=0.6).contains(&ratio),
        "{u256} / {u128} = {ratio:.3}"
    );
    // Unit 1 of a mixed part is a U55-128 again: the same job there costs what it costs alone
    // on the default part.
    let on_second = Job {
        queue: Queue::Unit(1),
        ..layer()
    };
    assert_eq!(alone(units("u55-256,u55-128"), &on_second), u128);
}

#[test]
fn a_memory_bound_layer_split_over_two_units_is_no_faster() {
    // A 64 x 1024 transpose: 16,384 SRAM cycles (64 KiB read and written at 8 bytes a
    // cycle) against 8,224 of its own. Split by rows, each half moves half.
    let whole = makespan(
        &mut sim(SimConfig::default()),
        &[job_at(transpose(64, 1024), 0, Queue::Unit(0))],
    );
    let halves = |op: fn() -> Op| {
        [
            job_at(op(), 0, Queue::Unit(0)),
            job_at(op(), 256 * 1024, Queue::Unit(1)),
        ]
    };
    let half = || transpose(32, 1024);
    let split = makespan(&mut sim(units("u55-128,u55-128")), &halves(half));
    assert!(split >= whole, "split {split} < whole {whole}");
    // Without the shared port each half would have taken half the time: the port is what
    // holds the split back.
    let half_alone = alone(SimConfig::default(), &halves(half)[0]);
    assert!(2 * half_alone <= whole, "{half_alone} {whole}");

    // The simple model (no layer model): a 512 -> 256 fully connected layer moves 130 KiB
    // (16,600 SRAM cycles against 1,024 MAC cycles). The port is `memory_cycles` of the
    // operands; only a job's fixed overhead, which holds no port, overlaps.
    let simple = SimConfig {
        layers: None,
        ..SimConfig::default()
    };
    let whole = makespan(&mut sim(simple), &[job_at(fc(512, 256), 0, Queue::Unit(0))]);
    let split = makespan(
        &mut sim(simple.with_units(&[UnitConfig::ETHOS_U55_128; 2]).unwrap()),
        &halves(|| fc(512, 128)),
    );
    assert!(
        split + u64::from(simple.job_overhead_cycles) >= whole,
        "split {split}, whole {whole}"
    );
}

#[test]
fn a_compute_bound_layer_split_over_two_units_takes_about_half() {
    // Output channels 64 = 32 + 32 on two U55-128.
    let whole = makespan(
        &mut sim(SimConfig::default()),
        &[job_at(conv(32, 32, 32, 64, 3), 0, Queue::Unit(0))],
    );
    let split = makespan(
        &mut sim(units("u55-128,u55-128")),
        &[
            job_at(conv(32, 32, 32, 32, 3), 0, Queue::Unit(0)),
            job_at(conv(32, 32, 32, 32, 3), 256 * 1024, Queue::Unit(1)),
        ],
    );
    let ratio = split as f64 / whole as f64;
    assert!(
        (0.45..=0.6).contains(&ratio),
        "{split} / {whole} = {ratio:.3}"
    );
}

/// Weights in flash: a 16-byte aligned static copy of the job's weights, mapped.
fn with_flash_weights(npu: &mut SimNpu<'static>, job: Job<'static>) -> Job<'static> {
    let JobKind::Compute {
        op,
        variant,
        mut inputs,
        output,
        scratch,
    } = job.kind
    else {
        return job;
    };
    let bytes = workloads::operand_bytes(op, 0x51ed).expect("a valid op");
    let flash = Box::leak(Box::new(AlignedMemory::<{ 160 * 1024 }>::new()));
    flash.as_mut_slice()[..bytes[1].len()].copy_from_slice(&bytes[1]);
    let segment = npu.map_flash(flash.as_mut_slice()).expect("mapped");
    inputs[1] = Region::flash(segment, 0, inputs[1].len);
    Job {
        kind: JobKind::Compute {
            op,
            variant,
            inputs,
            output,
            scratch,
        },
        ..job
    }
}

#[test]
fn an_estimate_is_the_duration_of_the_job_run_alone() {
    let configs = [
        SimConfig::default(),
        units("u55-256,u55-128"),
        SimConfig {
            layers: None,
            ..units("u55-128,u55-256")
        },
    ];
    for config in configs {
        for queue in [Queue::Unit(0), Queue::Unit(1)] {
            if queue.index() > usize::from(config.execution_units) {
                continue;
            }
            for (flash, op) in [
                (false, conv(32, 32, 32, 64, 3)),
                (false, fc(512, 256)),
                (false, transpose(64, 1024)),
                (true, fc(512, 256)),
                (true, conv(16, 16, 16, 32, 3)),
            ] {
                let mut fresh = sim(config);
                let mut job = job_at(op, 0, queue);
                if flash {
                    job = with_flash_weights(&mut fresh, job);
                }
                let estimate = fresh.estimate(&job).expect("a valid job");
                let prefetch = estimate.prefetch_cycles;
                assert!(prefetch < estimate.cycles, "{op:?}");
                assert_eq!(prefetch > 0, flash && config.layers.is_some(), "{op:?}");
                fill(&mut fresh, &job);
                let fence = fresh.submit(&job).expect("accepted");
                let (start, end) = fresh.scheduled(fence).expect("in flight");
                assert_eq!(estimate.cycles, end - start, "{queue:?} {op:?}");
                assert!(estimate.sram_cycles <= estimate.cycles);
                assert!(estimate.flash_cycles <= estimate.cycles);
                if op.kind() == OpKind::Transpose {
                    // Memory-bound: the SRAM port is what bounds it (and in the simple
                    // model, the job's fixed overhead).
                    let overhead = estimate.cycles - estimate.sram_cycles;
                    assert!(
                        overhead <= u64::from(config.job_overhead_cycles),
                        "{estimate:?}"
                    );
                }
                if flash && config.layers.is_some() {
                    // The weights are prefetched before the layer runs, and the layer then
                    // holds the SRAM port, not the flash port.
                    assert_eq!(estimate.flash_cycles, 0, "{estimate:?}");
                    assert!(estimate.sram_cycles > 0, "{estimate:?}");
                }
                fresh.run_until_idle();
                assert_eq!(fresh.poll(fence), Ok(()));
            }
        }
    }
}

#[test]
fn estimating_changes_no_schedule() {
    let jobs = || {
        [
            job_at(conv(16, 16, 16, 32, 3), 0, Queue::Unit(0)),
            job_at(fc(512, 128), 256 * 1024, Queue::Unit(1)),
            job_at(conv(16, 16, 16, 32, 3), 128 * 1024, Queue::Unit(1)),
        ]
    };
    let schedule = |estimate_first: bool| {
        let mut npu = sim(units("u55-256,u55-128"));
        let mut out = Vec::new();
        let mut estimates = Vec::new();
        for job in jobs() {
            if estimate_first {
                estimates.push(npu.estimate(&job).expect("valid"));
            }
            fill(&mut npu, &job);
            let fence = npu.submit(&job).expect("accepted");
            out.push(npu.scheduled(fence).expect("in flight"));
            if estimate_first {
                // Asked again mid-run: the same answer.
                assert_eq!(npu.estimate(&job), estimates.last().copied());
            }
        }
        npu.run_until_idle();
        (out, estimates)
    };
    let (plain, _) = schedule(false);
    let (estimated, estimates) = schedule(true);
    assert_eq!(plain, estimated);
    assert_eq!(estimates.len(), 3);
    // Unit 1's FC shares the SRAM port with unit 0's convolution: it ends no sooner than the
    // two jobs' SRAM cycles allow.
    let sram: Cycles = estimates[..2]
        .iter()
        .map(|e: &Estimate| e.sram_cycles)
        .sum();
    assert!(plain[1].1.max(plain[0].1) >= sram);
}

#[test]
fn an_invalid_job_has_no_estimate() {
    let mut npu = sim(SimConfig::default());
    let on_missing_unit = job_at(fc(64, 16), 0, Queue::Unit(1));
    assert_eq!(npu.estimate(&on_missing_unit), None);
    let on_dma = job_at(fc(64, 16), 0, Queue::Dma);
    assert_eq!(npu.estimate(&on_dma), None);
    let transfer = common::transfer(Region::host(0, 64), Region::device(0, 64), &[]);
    assert_eq!(
        npu.estimate(&transfer),
        Some(Estimate {
            cycles: SimConfig::default().transfer_cost(64),
            sram_cycles: 0,
            flash_cycles: 0,
            prefetch_cycles: 0,
        })
    );
}

#[test]
fn the_cpu_estimate_is_what_host_compute_charges() {
    let op = conv(16, 16, 16, 32, 3);
    let mut npu = sim(SimConfig::default());
    let estimate = npu.estimate_host_compute(&op).expect("a CPU model");
    assert!(estimate > 0);
    let before = npu.now();
    npu.host_compute(&op);
    assert_eq!(npu.now() - before, estimate);
    assert_eq!(npu.stats().cpu_cycles, estimate);
    let free = sim(SimConfig {
        cpu: None,
        ..SimConfig::default()
    });
    assert_eq!(free.estimate_host_compute(&op), None);
}

#[test]
fn a_layer_after_another_runs_between_its_prefetched_and_its_alone_estimate() {
    // Weights in flash: alone, a layer waits for their copy; after another layer, the copy
    // overlapped that layer.
    let mut npu = sim(SimConfig::default());
    let first = with_flash_weights(&mut npu, job_at(conv(16, 16, 16, 32, 3), 0, Queue::Unit(0)));
    let second = with_flash_weights(
        &mut npu,
        job_at(conv(16, 16, 16, 32, 3), 128 * 1024, Queue::Unit(0)),
    );
    let alone = npu.estimate(&second).expect("valid");
    let prefetch = alone.prefetch_cycles;
    assert!(prefetch > 0);
    for job in [&first, &second] {
        fill(&mut npu, job);
    }
    let a = npu.submit(&first).expect("accepted");
    let b = npu.submit(&second).expect("accepted");
    let (first_start, first_end) = npu.scheduled(a).expect("in flight");
    let (start, end) = npu.scheduled(b).expect("in flight");
    assert_eq!(
        first_end - first_start,
        alone.cycles,
        "the first runs as if alone"
    );
    let ran = end - start;
    assert!(
        alone.cycles - prefetch <= ran && ran < alone.cycles,
        "{prefetch} {ran} {alone:?}"
    );
    npu.run_until_idle();
}
