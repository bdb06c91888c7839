//! Every way `submit`, `poll` and the constructor refuse.

mod common;

use common::*;
use npu_compute::hal::{
    Fence, HalError, Job, JobKind, Npu, Queue, Region, Space, Variant, MAX_JOB_INPUTS,
};
use npu_compute::ops::{AddF32, DType, FullyConnectedF32, MulF32, Op, OpKind, OpSet, ReluF32};
use npu_kernels::FcShape;
use npu_sim::{AlignedMemory, SimConfig, SimError, SimNpu, MAX_EXECUTION_UNITS};

const OUT: u8 = MAX_JOB_INPUTS as u8;

fn add(len: u32) -> Op {
    Op::AddF32(AddF32 { len })
}

fn unit0(op: Op, inputs: &[Region], output: Region) -> Job<'static> {
    compute(op, inputs, output, Queue::Unit(0), &[])
}

/// Submits `job`, expects `err`, and checks that the refusal left no trace.
fn refused(npu: &mut SimNpu<'static>, job: &Job, err: HalError) {
    let before = npu.stats();
    assert_eq!(npu.submit(job), Err(err));
    assert_eq!(npu.stats(), before);
    assert_eq!(npu.in_flight(), 0);
}

#[test]
fn refused_jobs_consume_no_fence() {
    let mut npu = sim(SimConfig::default());
    refused(
        &mut npu,
        &transfer(Region::host(8, 16), Region::device(0, 16), &[]),
        HalError::Misaligned {
            region: Region::host(8, 16),
            alignment: 16,
        },
    );
    assert_eq!(
        npu.submit(&transfer(Region::host(0, 16), Region::device(0, 16), &[])),
        Ok(Fence(0))
    );
}

#[test]
fn no_such_unit() {
    let mut npu = sim(SimConfig::default());
    let job = compute(
        add(4),
        &[Region::device(0, 16), Region::device(16, 16)],
        Region::device(32, 16),
        Queue::Unit(1),
        &[],
    );
    refused(&mut npu, &job, HalError::NoSuchUnit { unit: 1, units: 1 });
    let mut t = transfer(Region::host(0, 16), Region::device(0, 16), &[]);
    t.queue = Queue::Unit(3);
    refused(&mut npu, &t, HalError::NoSuchUnit { unit: 3, units: 1 });
    // Transfers may run on an existing unit.
    t.queue = Queue::Unit(0);
    assert!(npu.submit(&t).is_ok());
}

#[test]
fn unsupported_ops_and_compute_on_the_dma_queue() {
    let ops = OpSet::all().without(OpKind::Add, DType::F32);
    let mut npu = sim(SimConfig {
        ops,
        ..SimConfig::default()
    });
    let job = unit0(
        add(4),
        &[Region::device(0, 16), Region::device(16, 16)],
        Region::device(32, 16),
    );
    refused(
        &mut npu,
        &job,
        HalError::Unsupported {
            op: OpKind::Add,
            dtype: DType::F32,
        },
    );
    assert_eq!(npu.capabilities().ops, ops);

    let mut npu = sim(SimConfig::default());
    let mut job = unit0(
        Op::MulF32(MulF32 { len: 4 }),
        &[Region::device(0, 16), Region::device(16, 16)],
        Region::device(32, 16),
    );
    job.queue = Queue::Dma;
    refused(
        &mut npu,
        &job,
        HalError::Unsupported {
            op: OpKind::Mul,
            dtype: DType::F32,
        },
    );
}

#[test]
fn out_of_bounds() {
    let mut npu = sim(SimConfig::default());
    let space_bytes = MEM as u32;
    let beyond = Region::device(space_bytes - 16, 32);
    refused(
        &mut npu,
        &transfer(Region::host(0, 32), beyond, &[]),
        HalError::OutOfBounds {
            region: beyond,
            space_bytes,
        },
    );
    let beyond = Region::host(space_bytes, 16);
    refused(
        &mut npu,
        &transfer(beyond, Region::device(0, 16), &[]),
        HalError::OutOfBounds {
            region: beyond,
            space_bytes,
        },
    );
    // offset + len past u32::MAX does not wrap around.
    let wrap = Region::device(u32::MAX - 15, 32);
    refused(
        &mut npu,
        &transfer(Region::host(0, 32), wrap, &[]),
        HalError::OutOfBounds {
            region: wrap,
            space_bytes,
        },
    );
    let out = Region::device(space_bytes, 16);
    refused(
        &mut npu,
        &unit0(
            add(4),
            &[Region::device(0, 16), Region::device(16, 16)],
            out,
        ),
        HalError::OutOfBounds {
            region: out,
            space_bytes,
        },
    );
    // The last bytes are fine.
    assert!(npu
        .submit(&transfer(
            Region::host(0, 16),
            Region::device(space_bytes - 16, 16),
            &[]
        ))
        .is_ok());
}

#[test]
fn misaligned() {
    let mut npu = sim(SimConfig::default());
    let r = Region::device(8, 16);
    refused(
        &mut npu,
        &transfer(Region::host(0, 16), r, &[]),
        HalError::Misaligned {
            region: r,
            alignment: 16,
        },
    );
    let r = Region::device(36, 16);
    refused(
        &mut npu,
        &unit0(add(4), &[Region::device(0, 16), r], Region::device(64, 16)),
        HalError::Misaligned {
            region: r,
            alignment: 16,
        },
    );
    // Lengths need not be multiples of the alignment.
    assert!(npu
        .submit(&transfer(Region::host(0, 3), Region::device(16, 3), &[]))
        .is_ok());
}

#[test]
fn coarser_alignment_is_enforced() {
    #[repr(C, align(64))]
    struct Aligned64([u8; 1024]);
    let device = Box::leak(Box::new(Aligned64([0; 1024])));
    let host = Box::leak(Box::new(Aligned64([0; 1024])));
    let config = SimConfig {
        alignment: 64,
        ..SimConfig::default()
    };
    let mut npu: SimNpu<'static> = SimNpu::new(&mut device.0, &mut host.0, config).unwrap();
    let r = Region::device(16, 16);
    refused(
        &mut npu,
        &transfer(Region::host(0, 16), r, &[]),
        HalError::Misaligned {
            region: r,
            alignment: 64,
        },
    );
    assert!(npu
        .submit(&transfer(
            Region::host(64, 16),
            Region::device(128, 16),
            &[]
        ))
        .is_ok());
}

#[test]
fn wrong_space() {
    let mut npu = sim(SimConfig::default());
    let host_in = Region::host(0, 16);
    refused(
        &mut npu,
        &unit0(
            add(4),
            &[Region::device(0, 16), host_in],
            Region::device(32, 16),
        ),
        HalError::WrongSpace { region: host_in },
    );
    let host_out = Region::host(64, 16);
    refused(
        &mut npu,
        &unit0(
            add(4),
            &[Region::device(0, 16), Region::device(16, 16)],
            host_out,
        ),
        HalError::WrongSpace { region: host_out },
    );
    // Transfer length mismatch.
    let dst = Region::device(0, 32);
    refused(
        &mut npu,
        &transfer(Region::host(0, 16), dst, &[]),
        HalError::WrongSpace { region: dst },
    );
    // Host to host is not a DMA job of this HAL.
    let dst = Region::host(64, 16);
    refused(
        &mut npu,
        &transfer(Region::host(0, 16), dst, &[]),
        HalError::WrongSpace { region: dst },
    );
}

#[test]
fn bad_length() {
    let mut npu = sim(SimConfig::default());
    let (a, b, o) = (
        Region::device(0, 16),
        Region::device(16, 16),
        Region::device(32, 16),
    );
    let short = Region::device(16, 8);
    refused(
        &mut npu,
        &unit0(add(4), &[a, short], o),
        HalError::BadLength {
            operand: 1,
            expected: 16,
            actual: 8,
        },
    );
    refused(
        &mut npu,
        &unit0(add(4), &[a, b], Region::device(32, 32)),
        HalError::BadLength {
            operand: OUT,
            expected: 16,
            actual: 32,
        },
    );
    // Missing and extra inputs.
    refused(
        &mut npu,
        &unit0(add(4), &[a], o),
        HalError::BadLength {
            operand: 1,
            expected: 16,
            actual: 0,
        },
    );
    refused(
        &mut npu,
        &unit0(Op::ReluF32(ReluF32 { len: 4 }), &[a, b], o),
        HalError::BadLength {
            operand: 1,
            expected: 0,
            actual: 16,
        },
    );
    refused(
        &mut npu,
        &unit0(add(4), &[a, b, Region::device(64, 16)], o),
        HalError::BadLength {
            operand: 2,
            expected: 0,
            actual: 16,
        },
    );
    refused(
        &mut npu,
        &unit0(add(4), &[], o),
        HalError::BadLength {
            operand: 0,
            expected: 16,
            actual: 0,
        },
    );
    // Fully connected: bias is 4 bytes per output feature.
    let fc = Op::FullyConnectedF32(FullyConnectedF32 {
        shape: FcShape {
            batches: 1,
            in_features: 4,
            out_features: 2,
        },
    });
    let (x, w, bias, y) = (
        Region::device(0, 16),
        Region::device(16, 32),
        Region::device(48, 8),
        Region::device(64, 8),
    );
    assert!(npu.submit(&unit0(fc, &[x, w, bias], y)).is_ok());
    assert!(npu.submit(&unit0(fc, &[x, w], y)).is_ok());
    let mut npu = sim(SimConfig::default());
    refused(
        &mut npu,
        &unit0(fc, &[x, w, Region::device(48, 4)], y),
        HalError::BadLength {
            operand: 2,
            expected: 8,
            actual: 4,
        },
    );
    refused(
        &mut npu,
        &unit0(fc, &[x, Region::device(16, 16)], y),
        HalError::BadLength {
            operand: 1,
            expected: 32,
            actual: 16,
        },
    );
    refused(
        &mut npu,
        &unit0(fc, &[x], y),
        HalError::BadLength {
            operand: 1,
            expected: 32,
            actual: 0,
        },
    );
    // A shape whose sizes overflow u32.
    let huge = Op::FullyConnectedF32(FullyConnectedF32 {
        shape: FcShape {
            batches: 1 << 20,
            in_features: 1 << 20,
            out_features: 1,
        },
    });
    refused(
        &mut npu,
        &unit0(huge, &[x, w], y),
        HalError::BadLength {
            operand: OUT,
            expected: u32::MAX,
            actual: 8,
        },
    );
}

#[test]
fn overlap() {
    let mut npu = sim(SimConfig::default());
    let (a, b) = (Region::device(0, 16), Region::device(16, 16));
    refused(
        &mut npu,
        &unit0(add(4), &[a, b], b),
        HalError::Overlap { operand: 1 },
    );
    refused(
        &mut npu,
        &unit0(add(4), &[a, b], Region::device(0, 16)),
        HalError::Overlap { operand: 0 },
    );
    // Device-to-device transfers must not overlap.
    refused(
        &mut npu,
        &transfer(Region::device(0, 32), Region::device(16, 32), &[]),
        HalError::Overlap { operand: 0 },
    );
    // Inputs may alias each other (x * x).
    assert!(npu
        .submit(&unit0(Op::MulF32(MulF32 { len: 4 }), &[a, a], b))
        .is_ok());
    // Same offsets in different spaces do not overlap.
    assert!(npu
        .submit(&transfer(Region::host(0, 16), Region::device(0, 16), &[]))
        .is_ok());
}

#[test]
fn unknown_fences() {
    let mut npu = sim(SimConfig::default());
    assert_eq!(
        npu.poll(Fence(0)),
        Err(nb::Error::Other(HalError::UnknownFence(Fence(0))))
    );
    refused(
        &mut npu,
        &transfer(Region::host(0, 16), Region::device(0, 16), &[Fence(0)]),
        HalError::UnknownFence(Fence(0)),
    );
    let f = npu
        .submit(&transfer(Region::host(0, 16), Region::device(0, 16), &[]))
        .unwrap();
    assert!(npu
        .submit(&transfer(Region::host(0, 16), Region::device(16, 16), &[f]))
        .is_ok());
    refused_in_flight(
        &mut npu,
        &transfer(Region::host(0, 16), Region::device(0, 16), &[f, Fence(7)]),
        HalError::UnknownFence(Fence(7)),
    );
    assert_eq!(
        npu.poll(Fence(2)),
        Err(nb::Error::Other(HalError::UnknownFence(Fence(2))))
    );
    assert_eq!(
        npu.poll(Fence(u64::MAX)),
        Err(nb::Error::Other(HalError::UnknownFence(Fence(u64::MAX))))
    );
}

fn refused_in_flight(npu: &mut SimNpu<'static>, job: &Job, err: HalError) {
    let (before, in_flight) = (npu.stats(), npu.in_flight());
    assert_eq!(npu.submit(job), Err(err));
    assert_eq!((npu.stats(), npu.in_flight()), (before, in_flight));
}

#[test]
fn queue_full_until_a_job_finishes() {
    let (device, host) = memories();
    let mut npu: SimNpu<'static, 4> =
        SimNpu::with_job_capacity(device, host, SimConfig::default()).unwrap();
    assert_eq!(npu.capabilities().max_in_flight, 4);
    let job = transfer(Region::host(0, 16), Region::device(0, 16), &[]);
    for i in 0..4 {
        assert_eq!(npu.submit(&job), Ok(Fence(i)));
    }
    assert_eq!(npu.submit(&job), Err(HalError::QueueFull { capacity: 4 }));
    npu.advance(33);
    assert_eq!(npu.submit(&job), Err(HalError::QueueFull { capacity: 4 }));
    // Once the first job has ended, submit retires it to make room.
    npu.advance(1);
    assert_eq!(npu.submit(&job), Ok(Fence(4)));
    assert_eq!(npu.poll(Fence(0)), Ok(()));
    assert_eq!(npu.in_flight(), 4);
    assert_eq!(npu.stats().peak_in_flight, 4);
    // Validation errors take precedence over a full table.
    let bad = transfer(Region::host(8, 16), Region::device(0, 16), &[]);
    assert!(matches!(npu.submit(&bad), Err(HalError::Misaligned { .. })));
}

#[test]
fn capabilities_follow_config_and_memories() {
    let config = SimConfig {
        execution_units: 3,
        alignment: 16,
        reads_flash: false,
        ..SimConfig::default()
    };
    let device = Box::leak(Box::new(AlignedMemory::<4096>::new()));
    let host = Box::leak(Box::new(AlignedMemory::<1024>::new()));
    let npu: SimNpu<'static, 7> =
        SimNpu::with_job_capacity(device.as_mut_slice(), host.as_mut_slice(), config).unwrap();
    let c = npu.capabilities();
    assert_eq!(c.device_memory_bytes, 4096);
    assert_eq!(c.host_memory_bytes, 1024);
    assert_eq!(c.alignment, 16);
    assert_eq!(c.execution_units, 3);
    assert_eq!(c.max_in_flight, 7);
    assert_eq!(c.ops, npu_sim::ETHOS_U55_OPS);
    assert!(!c.reads_flash);
    assert_eq!(npu.config(), &config);
}

#[test]
fn constructor_errors() {
    fn build(config: SimConfig) -> Result<(), SimError> {
        let (device, host) = memories();
        SimNpu::<'static, 32>::with_job_capacity(device, host, config).map(|_| ())
    }
    let d = SimConfig::default();
    for alignment in [0, 1, 2, 3, 12, 24] {
        assert_eq!(
            build(SimConfig { alignment, ..d }),
            Err(SimError::BadAlignment { alignment })
        );
    }
    assert_eq!(build(SimConfig { alignment: 4, ..d }), Ok(()));
    assert_eq!(
        build(SimConfig {
            execution_units: 0,
            ..d
        }),
        Err(SimError::NoExecutionUnits)
    );
    assert_eq!(
        build(SimConfig {
            execution_units: MAX_EXECUTION_UNITS as u8,
            ..d
        }),
        Ok(())
    );
    assert_eq!(
        build(SimConfig {
            execution_units: 9,
            ..d
        }),
        Err(SimError::TooManyExecutionUnits { units: 9, max: 8 })
    );
    assert_eq!(
        build(SimConfig {
            macs_per_cycle: 0,
            ..d
        }),
        Err(SimError::ZeroRate {
            parameter: "macs_per_cycle"
        })
    );
    assert_eq!(
        build(SimConfig {
            sram_bytes_per_cycle: 0,
            ..d
        }),
        Err(SimError::ZeroRate {
            parameter: "sram_bytes_per_cycle"
        })
    );
    assert_eq!(
        build(SimConfig {
            dma_bytes_per_cycle: 0,
            ..d
        }),
        Err(SimError::ZeroRate {
            parameter: "dma_bytes_per_cycle"
        })
    );

    let (device, host) = memories();
    assert_eq!(
        SimNpu::<'static, 0>::with_job_capacity(device, host, d).err(),
        Some(SimError::BadJobCapacity { jobs: 0 })
    );
    // A 65536-slot table is ~15 MB: build it on a thread with a big enough stack.
    let too_many = std::thread::Builder::new()
        .stack_size(512 << 20)
        .spawn(move || {
            let (device, host) = memories();
            SimNpu::<'static, 65536>::with_job_capacity(device, host, d).err()
        })
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(too_many, Some(SimError::BadJobCapacity { jobs: 65536 }));

    // Misaligned bases (an aligned buffer shifted by 4 bytes).
    let (device, host) = memories();
    assert_eq!(
        SimNpu::<'static, 32>::with_job_capacity(&mut device[4..], host, d).err(),
        Some(SimError::MisalignedMemory {
            space: Space::Device,
            alignment: 16
        })
    );
    let (device, host) = memories();
    assert_eq!(
        SimNpu::<'static, 32>::with_job_capacity(device, &mut host[4..], d).err(),
        Some(SimError::MisalignedMemory {
            space: Space::Host,
            alignment: 16
        })
    );
    // With 4-byte alignment the same shift is fine; empty memories are always fine.
    let (device, _) = memories();
    assert!(SimNpu::<'static, 32>::with_job_capacity(
        &mut device[4..],
        &mut [],
        SimConfig { alignment: 4, ..d }
    )
    .is_ok());
}

#[test]
fn empty_host_memory_rejects_host_regions() {
    let device = Box::leak(Box::new(AlignedMemory::<256>::new()));
    let mut npu: SimNpu<'static> =
        SimNpu::new(device.as_mut_slice(), &mut [], SimConfig::default()).unwrap();
    let r = Region::host(0, 16);
    assert_eq!(
        npu.submit(&transfer(r, Region::device(0, 16), &[])),
        Err(HalError::OutOfBounds {
            region: r,
            space_bytes: 0
        })
    );
    assert_eq!(npu.host_memory().len(), 0);
}

#[test]
fn sim_error_displays() {
    let text = SimError::MisalignedMemory {
        space: Space::Host,
        alignment: 16,
    }
    .to_string();
    assert!(
        text.contains("host memory") && text.contains("16"),
        "{text}"
    );
    let text = SimError::ZeroRate {
        parameter: "dma_bytes_per_cycle",
    }
    .to_string();
    assert!(text.contains("dma_bytes_per_cycle"), "{text}");
}

/// Until the simulator models kernel variants, it runs `Auto` only, says so through
/// `supports_variant`, and refuses anything else without consuming a fence.
#[test]
fn variants_other_than_auto_are_refused() {
    let mut npu = sim(SimConfig::default());
    let op = add(4);
    assert!(npu.supports_variant(&op, Variant::Auto));
    assert!(!npu.supports_variant(&op, Variant::Im2col));
    let mut job = unit0(
        op,
        &[Region::device(0, 16), Region::device(16, 16)],
        Region::device(32, 16),
    );
    if let JobKind::Compute { variant, .. } = &mut job.kind {
        *variant = Variant::Block { h: 8, w: 8 };
    }
    let refusal = HalError::VariantUnsupported {
        op: OpKind::Add,
        variant: Variant::Block { h: 8, w: 8 },
    };
    refused(&mut npu, &job, refusal);
    if let JobKind::Compute {
        variant, scratch, ..
    } = &mut job.kind
    {
        *variant = Variant::Auto;
        *scratch = Some(Region::device(48, 16));
    }
    refused(
        &mut npu,
        &job,
        HalError::VariantUnsupported {
            op: OpKind::Add,
            variant: Variant::Auto,
        },
    );
}
