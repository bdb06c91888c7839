//! Kernel variants on the simulator: every supported variant of a layer gives exactly the bytes
//! of [`Variant::Auto`], a job costs what the cost model says for its variant, and what the
//! simulator does not support is refused at submit.
//!
//! The layers are built by hand with the shapes of real layers of the product models
//! (`kws_dscnn`/`mlperf_kws`, `mlperf_vww`, `mlperf_ic`), plus a few shapes chosen for the
//! im2col gather's edge cases (padding, dilation, batches, no bias).

use npu_compute::hal::{HalError, Job, JobKind, Npu, Queue, Region, Variant, MAX_JOB_INPUTS};
use npu_compute::ops::{
    AveragePool2dI8, Conv2dI8, DepthwiseConv2dI8, FullyConnectedPerChannelI8, MaxPool2dI8, Op,
    OpKind,
};
use npu_kernels::int8::{
    im2col, Activation, Conv2dParams, Conv2dShape, DepthwiseParams, DepthwiseShape,
    FcPerChannelParams, Nhwc, Padding, PoolParams, PoolShape, Quant, Window2d,
};
use npu_kernels::FcShape;
use npu_sim::cost::{self, U55Config};
use npu_sim::{workloads, AlignedMemory, SimConfig, SimNpu};

/// Device memory of each simulator: the largest layer (a 3 x 3 convolution on 32 x 32 x 16)
/// needs 147,456 bytes of im2col scratch on top of its operands.
const DEVICE: usize = 256 * 1024;
const ALIGN: u32 = 16;

/// The candidates a tuner would try (design: all 64-pixel blocks, and im2col).
const VARIANTS: [Variant; 7] = [
    Variant::Auto,
    Variant::Block { h: 8, w: 8 },
    Variant::Block { h: 16, w: 4 },
    Variant::Block { h: 4, w: 16 },
    Variant::Block { h: 2, w: 32 },
    Variant::Block { h: 32, w: 2 },
    Variant::Im2col,
];

fn sim(config: SimConfig) -> SimNpu<'static> {
    let device = Box::leak(Box::new(AlignedMemory::<DEVICE>::new()));
    let host = Box::leak(Box::new(AlignedMemory::<1024>::new()));
    SimNpu::new(device.as_mut_slice(), host.as_mut_slice(), config).expect("valid config")
}

fn q(scale: f32, zero_point: i32) -> Quant {
    Quant { scale, zero_point }
}

fn nhwc(batches: u32, height: u32, width: u32, channels: u32) -> Nhwc {
    Nhwc {
        batches,
        height,
        width,
        channels,
    }
}

fn window(k: (u32, u32), stride: u32, dilation: u32, padding: Padding) -> Window2d {
    Window2d {
        filter_height: k.0,
        filter_width: k.1,
        stride_height: stride,
        stride_width: stride,
        dilation_height: dilation,
        dilation_width: dilation,
        padding,
    }
}

fn conv(input: Nhwc, out_channels: u32, filter_depth: u32, w: Window2d) -> Op {
    let shape = Conv2dShape {
        input,
        out_channels,
        filter_depth,
        window: w,
    };
    let params = Conv2dParams::new(shape, q(0.05, -3), q(0.1, 2), Activation::None).unwrap();
    Op::Conv2dI8(Conv2dI8 { shape, params })
}

fn depthwise(input: Nhwc, w: Window2d) -> Op {
    let shape = DepthwiseShape {
        input,
        depth_multiplier: 1,
        window: w,
    };
    let params = DepthwiseParams::new(shape, q(0.05, 4), q(0.1, -1), Activation::Relu).unwrap();
    Op::DepthwiseConv2dI8(DepthwiseConv2dI8 { shape, params })
}

fn pool(input: Nhwc, k: (u32, u32), stride: u32, padding: Padding, max: bool) -> Op {
    let shape = PoolShape {
        input,
        filter_height: k.0,
        filter_width: k.1,
        stride_height: stride,
        stride_width: stride,
        padding,
    };
    let params = PoolParams::new(shape, q(0.1, 3), q(0.1, 3), Activation::None).unwrap();
    if max {
        Op::MaxPool2dI8(MaxPool2dI8 { shape, params })
    } else {
        Op::AveragePool2dI8(AveragePool2dI8 { shape, params })
    }
}

fn fc(in_features: u32, out_features: u32) -> Op {
    let shape = FcShape {
        batches: 1,
        in_features,
        out_features,
    };
    let params = FcPerChannelParams::new(q(0.05, -7), q(0.2, 0), Activation::None).unwrap();
    Op::FullyConnectedPerChannelI8(FullyConnectedPerChannelI8 { shape, params })
}

/// kws_dscnn's first convolution: 10 x 4, stride 2, on the 49 x 10 x 1 audio features.
fn kws_conv0() -> Op {
    conv(
        nhwc(1, 49, 10, 1),
        64,
        1,
        window((10, 4), 2, 1, Padding::Same),
    )
}

/// kws_dscnn's pointwise convolutions (the cycle-model document's worked example).
fn kws_pointwise() -> Op {
    conv(
        nhwc(1, 25, 5, 64),
        64,
        64,
        window((1, 1), 1, 1, Padding::Same),
    )
}

/// mlperf_ic's 3 x 3 stride-2 convolution on 16 x 16 x 32 (8 x 8 does not fit SHRAM).
fn ic_strided() -> Op {
    conv(
        nhwc(1, 16, 16, 32),
        64,
        32,
        window((3, 3), 2, 1, Padding::Same),
    )
}

/// Every layer under test, by name.
fn layers() -> Vec<(&'static str, Op)> {
    vec![
        ("kws conv0 10x4 s2", kws_conv0()),
        (
            "kws dw 3x3",
            depthwise(nhwc(1, 25, 5, 64), window((3, 3), 1, 1, Padding::Same)),
        ),
        ("kws pw 1x1", kws_pointwise()),
        (
            "kws avgpool 25x5",
            pool(nhwc(1, 25, 5, 64), (25, 5), 1, Padding::Valid, false),
        ),
        ("kws fc 64->12", fc(64, 12)),
        (
            "vww dw 3x3 6x6x128",
            depthwise(nhwc(1, 6, 6, 128), window((3, 3), 1, 1, Padding::Same)),
        ),
        (
            "ic conv 3x3 32x32x16",
            conv(
                nhwc(1, 32, 32, 16),
                16,
                16,
                window((3, 3), 1, 1, Padding::Same),
            ),
        ),
        ("ic conv 3x3 s2 16x16x32", ic_strided()),
        (
            "maxpool 2x2 s2",
            pool(nhwc(1, 16, 16, 8), (2, 2), 2, Padding::Valid, true),
        ),
        (
            "dilated conv, 2 images",
            conv(nhwc(2, 9, 7, 3), 5, 3, window((3, 3), 1, 2, Padding::Same)),
        ),
        (
            "valid conv 5x5 s3",
            conv(
                nhwc(1, 17, 13, 8),
                24,
                8,
                window((5, 5), 3, 1, Padding::Valid),
            ),
        ),
        (
            "grouped conv",
            conv(
                nhwc(1, 8, 8, 16),
                16,
                8,
                window((3, 3), 1, 1, Padding::Same),
            ),
        ),
    ]
}

/// Input contents in operand order (see [`workloads::operand_bytes`]).
fn operand_bytes(op: &Op) -> Vec<Vec<u8>> {
    workloads::operand_bytes(op, 0x9e37_79b9).expect("valid op")
}

fn round_up(v: u32) -> u32 {
    v.div_ceil(ALIGN) * ALIGN
}

/// Where a layer's operands go in device memory: the inputs back to back, then the output,
/// then the scratch.
struct Layout {
    inputs: Vec<Region>,
    output: Region,
    scratch_at: u32,
}

fn layout(op: &Op) -> Layout {
    let operands = op.operands().expect("valid op");
    let mut at = 0;
    let mut place = |len: u32| {
        let r = Region::device(at, len);
        at += round_up(len.max(1));
        r
    };
    let inputs = operands.inputs.iter().map(|&len| place(len)).collect();
    let output = place(operands.output);
    Layout {
        inputs,
        output,
        scratch_at: at,
    }
}

fn job<'a>(
    op: &'a Op,
    variant: Variant,
    inputs: &[Region],
    output: Region,
    scratch: Option<Region>,
) -> Job<'a> {
    Job {
        kind: JobKind::Compute {
            op,
            variant,
            inputs: heapless::Vec::from_slice(inputs).expect("<= MAX_JOB_INPUTS"),
            output,
            scratch,
        },
        queue: Queue::Unit(0),
        deps: heapless::Vec::new(),
    }
}

/// The scratch a variant needs at `at` (`None` when it needs none).
fn scratch_for(op: &Op, variant: Variant, at: u32) -> Option<Region> {
    match variant.scratch_bytes(op) {
        Some(0) | None => None,
        Some(n) => Some(Region::device(at, n)),
    }
}

/// What one run of a layer gave.
struct Run {
    output: Vec<u8>,
    cycles: u64,
    scratch: Vec<u8>,
}

/// Runs `op` as `variant` on a fresh simulator with resident operands; `Err` if submit refused.
fn run(op: &Op, variant: Variant) -> Result<Run, HalError> {
    let mut npu = sim(SimConfig::default());
    let l = layout(op);
    for (r, bytes) in l.inputs.iter().zip(operand_bytes(op)) {
        let at = r.offset as usize;
        npu.device_memory_mut()[at..at + bytes.len()].copy_from_slice(&bytes);
    }
    let scratch = scratch_for(op, variant, l.scratch_at);
    let fence = npu.submit(&job(op, variant, &l.inputs, l.output, scratch))?;
    let (start, end) = npu.scheduled(fence).expect("in flight");
    npu.run_until_idle();
    assert_eq!(npu.poll(fence), Ok(()), "{variant:?} failed");
    let out = l.output;
    let device = npu.device_memory();
    Ok(Run {
        output: device[out.offset as usize..out.end() as usize].to_vec(),
        cycles: end - start,
        scratch: scratch.map_or(Vec::new(), |s| {
            device[s.offset as usize..s.end() as usize].to_vec()
        }),
    })
}

/// The cost model's figure for `op` run as `variant` with its weights resident.
fn model_cycles(op: &Op, variant: Variant) -> u64 {
    let l = layout(op);
    let desc = npu_sim::layer::describe(op, variant, &l.inputs).expect("a layer op");
    let cost = cost::variant_cycles(&desc, &U55Config::ETHOS_U55_128).expect("supported");
    // Weights in device memory: nothing to prefetch, the job costs the layer's total.
    assert_eq!(cost.prefetch, 0);
    assert_eq!(cost.prefetched, cost.total);
    cost.total.max(1)
}

#[test]
fn every_supported_variant_matches_auto_bytes_and_the_cost_model() {
    let probe = sim(SimConfig::default());
    let (mut refused, mut block_differs, mut im2col_differs) = (0, false, false);
    for (name, op) in layers() {
        let auto = run(&op, Variant::Auto).expect("Auto always runs");
        assert_eq!(auto.cycles, model_cycles(&op, Variant::Auto), "{name}");
        for variant in VARIANTS.into_iter().skip(1) {
            let supported = probe.supports_variant(&op, variant);
            let outcome = run(&op, variant);
            if !supported {
                assert_eq!(
                    outcome.err(),
                    Some(HalError::VariantUnsupported {
                        op: op.kind(),
                        variant
                    }),
                    "{name} {variant:?}"
                );
                refused += 1;
                continue;
            }
            let got = outcome.unwrap_or_else(|e| panic!("{name} {variant:?}: {e:?}"));
            assert_eq!(got.output, auto.output, "{name} {variant:?}: output bytes");
            assert_eq!(
                got.cycles,
                model_cycles(&op, variant),
                "{name} {variant:?}: cycles"
            );
            match variant {
                Variant::Block { .. } => block_differs |= got.cycles != auto.cycles,
                Variant::Im2col => {
                    im2col_differs |= got.cycles != auto.cycles;
                    // The scratch holds the gathered patch matrix, as the kernel builds it.
                    let Op::Conv2dI8(Conv2dI8 { params, .. }) = op else {
                        panic!("im2col on {name}")
                    };
                    let input: Vec<i8> = bytemuck::cast_slice(&operand_bytes(&op)[0]).to_vec();
                    let mut matrix = vec![0i8; got.scratch.len()];
                    im2col(&params, &input, &mut matrix).unwrap();
                    assert_eq!(
                        got.scratch,
                        bytemuck::cast_slice::<i8, u8>(&matrix),
                        "{name}"
                    );
                }
                Variant::Auto => {}
            }
        }
    }
    assert!(block_differs && im2col_differs);
    // 1 x 1 convolution, depthwise, pools, FC and the grouped convolution refuse im2col;
    // 8 x 8 does not fit the strided mlperf_ic convolution.
    assert!(refused >= 8, "{refused}");
}

#[test]
fn tuning_finds_real_gains() {
    // The design's per-layer figures, through jobs.
    let conv0 = kws_conv0();
    assert_eq!(run(&conv0, Variant::Auto).unwrap().cycles, 25_001);
    assert_eq!(run(&conv0, Variant::Im2col).unwrap().cycles, 11_884);
    let pw = kws_pointwise();
    assert_eq!(run(&pw, Variant::Auto).unwrap().cycles, 5_944);
    assert_eq!(
        run(&pw, Variant::Block { h: 4, w: 16 }).unwrap().cycles,
        5_744
    );
    let vww = depthwise(nhwc(1, 6, 6, 128), window((3, 3), 1, 1, Padding::Same));
    assert_eq!(run(&vww, Variant::Auto).unwrap().cycles, 5_512);
    assert_eq!(
        run(&vww, Variant::Block { h: 16, w: 4 }).unwrap().cycles,
        3_832
    );
}

#[test]
fn weights_in_flash_cost_prefetch_then_the_variant() {
    let op = kws_conv0();
    let l = layout(&op);
    let bytes = operand_bytes(&op);
    for variant in [Variant::Auto, Variant::Im2col] {
        let mut npu = sim(SimConfig::default());
        // The filter in flash, the rest in device memory.
        let flash = Box::leak(Box::new(AlignedMemory::<4096>::new()));
        flash.0[..bytes[1].len()].copy_from_slice(&bytes[1]);
        let segment = npu.map_flash(&flash.0[..bytes[1].len()]).unwrap();
        let mut inputs = l.inputs.clone();
        inputs[1] = Region::flash(segment, 0, inputs[1].len);
        for (i, r) in l.inputs.iter().enumerate() {
            let at = r.offset as usize;
            npu.device_memory_mut()[at..at + bytes[i].len()].copy_from_slice(&bytes[i]);
        }
        let scratch = scratch_for(&op, variant, l.scratch_at);
        let fence = npu
            .submit(&job(&op, variant, &inputs, l.output, scratch))
            .unwrap();
        let (start, end) = npu.scheduled(fence).unwrap();
        let desc = npu_sim::layer::describe(&op, variant, &inputs).unwrap();
        assert!(desc.weights_in_flash);
        let c = cost::layer_cycles(&desc, &U55Config::ETHOS_U55_128);
        // A fresh pipeline: the weight copy, then the layer from SRAM.
        assert!(c.prefetch > 0);
        assert_eq!(end - start, c.prefetch + c.prefetched, "{variant:?}");
        npu.run_until_idle();
        assert_eq!(npu.poll(fence), Ok(()));
        let out = l.output;
        let auto = run(&op, Variant::Auto).unwrap().output;
        assert_eq!(
            &npu.device_memory()[out.offset as usize..out.end() as usize],
            &auto[..]
        );
    }
}

#[test]
fn variants_keep_their_own_costs_in_the_layer_cache() {
    // One simulator, alternating variants of one layer: each job costs its own variant.
    let mut npu = sim(SimConfig::default());
    let op = kws_conv0();
    let l = layout(&op);
    for _ in 0..2 {
        for variant in [
            Variant::Auto,
            Variant::Im2col,
            Variant::Block { h: 2, w: 32 },
        ] {
            let scratch = scratch_for(&op, variant, l.scratch_at);
            let fence = npu
                .submit(&job(&op, variant, &l.inputs, l.output, scratch))
                .unwrap();
            let (start, end) = npu.scheduled(fence).unwrap();
            assert_eq!(end - start, model_cycles(&op, variant), "{variant:?}");
            npu.run_until_idle();
        }
    }
}

#[test]
fn scratch_is_checked() {
    let op = kws_conv0();
    let l = layout(&op);
    let needed = Variant::Im2col.scratch_bytes(&op).unwrap();
    assert_eq!(needed, 125 * 40);
    let scratch_operand = MAX_JOB_INPUTS as u8 + 1;
    let mut npu = sim(SimConfig::default());
    let mut submit =
        |variant, scratch| npu.submit(&job(&op, variant, &l.inputs, l.output, scratch));
    // Missing, or given to a variant that needs none.
    let refused = |variant| HalError::VariantUnsupported {
        op: OpKind::Conv2d,
        variant,
    };
    assert_eq!(submit(Variant::Im2col, None), Err(refused(Variant::Im2col)));
    let good = Region::device(l.scratch_at, needed);
    for variant in [Variant::Auto, Variant::Block { h: 8, w: 8 }] {
        assert_eq!(submit(variant, Some(good)), Err(refused(variant)));
    }
    // Short.
    assert_eq!(
        submit(
            Variant::Im2col,
            Some(Region::device(l.scratch_at, needed - 1))
        ),
        Err(HalError::BadLength {
            operand: scratch_operand,
            expected: needed,
            actual: needed - 1
        })
    );
    // Host memory.
    let host = Region::host(0, needed);
    assert_eq!(
        submit(Variant::Im2col, Some(host)),
        Err(HalError::WrongSpace { region: host })
    );
    // Out of bounds, misaligned.
    let far = Region::device(DEVICE as u32 - 16, needed);
    assert!(matches!(
        submit(Variant::Im2col, Some(far)),
        Err(HalError::OutOfBounds { .. })
    ));
    let skewed = Region::device(l.scratch_at + 4, needed);
    assert!(matches!(
        submit(Variant::Im2col, Some(skewed)),
        Err(HalError::Misaligned { .. })
    ));
    // Over an input or the output.
    for over in [l.inputs[0].offset, l.inputs[2].offset, l.output.offset] {
        assert_eq!(
            submit(Variant::Im2col, Some(Region::device(over, needed))),
            Err(HalError::Overlap {
                operand: scratch_operand
            }),
            "scratch at {over}"
        );
    }
    // Longer than needed is fine.
    assert!(submit(
        Variant::Im2col,
        Some(Region::device(l.scratch_at, needed + 64))
    )
    .is_ok());
    assert!(submit(Variant::Im2col, Some(good)).is_ok());
}

#[test]
fn unsupported_combinations_are_refused() {
    let npu = sim(SimConfig::default());
    // Forced blocks of zero pixels never fit.
    let pw = kws_pointwise();
    for (h, w) in [(0, 8), (8, 0)] {
        assert!(!npu.supports_variant(&pw, Variant::Block { h, w }));
    }
    assert!(!npu.supports_variant(&ic_strided(), Variant::Block { h: 8, w: 8 }));
    assert!(npu.supports_variant(&ic_strided(), Variant::Block { h: 4, w: 4 }));
    // Without the layer model, only Auto: nothing else knows what a block costs.
    let mut simple = sim(SimConfig {
        layers: None,
        ..SimConfig::default()
    });
    let op = kws_conv0();
    assert!(simple.supports_variant(&op, Variant::Auto));
    let l = layout(&op);
    for variant in [Variant::Block { h: 8, w: 8 }, Variant::Im2col] {
        assert!(!simple.supports_variant(&op, variant));
        let scratch = scratch_for(&op, variant, l.scratch_at);
        assert_eq!(
            simple.submit(&job(&op, variant, &l.inputs, l.output, scratch)),
            Err(HalError::VariantUnsupported {
                op: OpKind::Conv2d,
                variant
            })
        );
    }
}

#[test]
fn tuning_fingerprint_follows_the_cost_configuration() {
    let base = sim(SimConfig::default()).tuning_fingerprint();
    assert_ne!(base, 0);
    assert_eq!(sim(SimConfig::default()).tuning_fingerprint(), base);
    let differs = |config: SimConfig| sim(config).tuning_fingerprint() != base;
    let d = SimConfig::default();
    let u55 = U55Config::ETHOS_U55_128;
    assert!(differs(SimConfig {
        job_overhead_cycles: 65,
        ..d
    }));
    assert!(differs(SimConfig {
        dma_bytes_per_cycle: 4,
        ..d
    }));
    assert!(differs(SimConfig { layers: None, ..d }));
    assert!(differs(SimConfig {
        layers: Some(U55Config {
            sram_latency: 33,
            ..u55
        }),
        ..d
    }));
    assert!(differs(SimConfig {
        layers: Some(U55Config {
            weight_encoding: (5, 5),
            ..u55
        }),
        ..d
    }));
    // The CPU model decides whether the CPU is timed and what it costs.
    assert!(differs(SimConfig { cpu: None, ..d }));
    let mut cpu = npu_sim::CpuModel::default();
    cpu.rates[npu_compute::ops::CpuKernel::Softmax as usize].call += 1;
    assert!(differs(SimConfig {
        cpu: Some(cpu),
        ..d
    }));
    // Capabilities are the tuner's to hash, not the driver's.
    assert!(!differs(SimConfig {
        execution_units: 2,
        reads_flash: false,
        flash_alignment: 16,
        ..d
    }));
}
