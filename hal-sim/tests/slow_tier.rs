//! The slow memory tier (`Space::Slow`): declared by the capabilities and `bandwidth`, moved
//! to and from by transfers, read and written by compute jobs with the same bytes as in the
//! arena, and charged on the flash port at `SimConfig::slow`'s rate, so that jobs using it
//! contend with each other and with nothing on the SRAM port.

use npu_compute::hal::{
    Bandwidth, Fence, HalError, Job, JobKind, Npu, Queue, Region, Space, Variant,
};
use npu_compute::ops::{Conv2dI8, Op};
use npu_kernels::int8::{Activation, Conv2dParams, Conv2dShape, Nhwc, Padding, Quant, Window2d};
use npu_sim::{workloads, AlignedMemory, SimConfig, SimNpu};

const DEVICE: usize = 64 * 1024;
const HOST: usize = 16 * 1024;
const SLOW: usize = 64 * 1024;

fn memories() -> (&'static mut [u8], &'static mut [u8], &'static mut [u8]) {
    (
        Box::leak(Box::new(AlignedMemory::<DEVICE>::new())).as_mut_slice(),
        Box::leak(Box::new(AlignedMemory::<HOST>::new())).as_mut_slice(),
        Box::leak(Box::new(AlignedMemory::<SLOW>::new())).as_mut_slice(),
    )
}

/// A simulator with a slow tier of `SLOW` bytes.
fn sim(config: SimConfig) -> SimNpu<'static> {
    let (device, host, slow) = memories();
    SimNpu::new(device, host, config)
        .expect("valid config")
        .with_slow_memory(slow)
        .expect("an aligned slow memory")
}

/// A `k` x `k` same-padded convolution of 16 x 16 x 8 to 16 channels.
fn conv(k: u32) -> &'static Op {
    let shape = Conv2dShape {
        input: Nhwc {
            batches: 1,
            height: 16,
            width: 16,
            channels: 8,
        },
        out_channels: 16,
        filter_depth: 8,
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
    let q = |scale, zero_point| Quant { scale, zero_point };
    let params = Conv2dParams::new(shape, q(0.05, -3), q(0.1, 2), Activation::None).unwrap();
    Box::leak(Box::new(Op::Conv2dI8(Conv2dI8 { shape, params })))
}

fn transfer(src: Region, dst: Region, queue: Queue, deps: &[Fence]) -> Job<'static> {
    Job {
        kind: JobKind::Transfer { src, dst },
        queue,
        deps: heapless::Vec::from_slice(deps).unwrap(),
    }
}

fn compute(op: &'static Op, inputs: &[Region], output: Region, queue: Queue) -> Job<'static> {
    Job {
        kind: JobKind::Compute {
            op,
            variant: Variant::Auto,
            inputs: heapless::Vec::from_slice(inputs).unwrap(),
            output,
            scratch: None,
        },
        queue,
        deps: heapless::Vec::new(),
    }
}

/// `len` bytes at `offset` of `space`, aligned up to 16.
fn at(space: Space, offset: u32, len: u32) -> Region {
    Region { space, offset, len }
}

/// The operands of `op` laid out from 0 of their spaces (inputs, then output): the first
/// input in `input`, the output in `output`, the constants in the arena.
fn operands(op: &Op, input: Space, output: Space) -> (Vec<Region>, Region) {
    let lens = op.operands().unwrap();
    let mut next = [0u32; 2];
    let mut place = |space: Space, len: u32| {
        let slot = usize::from(space == Space::Slow);
        let r = at(space, next[slot], len);
        next[slot] += len.div_ceil(16) * 16;
        r
    };
    let inputs = (0..)
        .zip(lens.inputs.iter())
        .map(|(i, &len)| place(if i == 0 { input } else { Space::Device }, len))
        .collect();
    let output = place(output, lens.output);
    (inputs, output)
}

#[test]
fn capabilities_and_bandwidth_declare_the_tier() {
    let (device, host, slow) = memories();
    let without = SimNpu::new(device, host, SimConfig::default()).unwrap();
    assert_eq!(without.capabilities().slow_memory_bytes, 0);
    assert_eq!(without.bandwidth(Space::Slow), None);
    let mut with = without.with_slow_memory(slow).unwrap();
    assert_eq!(with.capabilities().slow_memory_bytes, SLOW as u32);
    let declared = with.bandwidth(Space::Slow).unwrap();
    assert_eq!(declared, SimConfig::default().slow);
    // Slower than the arena, as a tier must be to be worth declaring.
    let arena = with.bandwidth(Space::Device).unwrap();
    assert!(declared.cycles_for(4096) > arena.cycles_for(4096));
    // Out of bounds past its size, like any memory.
    let too_far = at(Space::Slow, SLOW as u32, 16);
    assert!(matches!(
        with.submit(&transfer(Region::device(0, 16), too_far, Queue::Dma, &[])),
        Err(HalError::OutOfBounds { .. })
    ));
}

#[test]
fn a_simulator_without_the_tier_refuses_regions_in_it() {
    let (device, host, _) = memories();
    let mut npu = SimNpu::new(device, host, SimConfig::default()).unwrap();
    let r = at(Space::Slow, 0, 16);
    assert!(matches!(
        npu.submit(&transfer(Region::device(0, 16), r, Queue::Dma, &[])),
        Err(HalError::OutOfBounds { space_bytes: 0, .. })
    ));
}

#[test]
fn bytes_go_round_host_slow_device_and_back() {
    let mut npu = sim(SimConfig::default());
    let bytes: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 3) as u8).collect();
    npu.host_memory()[..4096].copy_from_slice(&bytes);
    let a = npu
        .submit(&transfer(
            Region::host(0, 4096),
            at(Space::Slow, 4096, 4096),
            Queue::Dma,
            &[],
        ))
        .unwrap();
    let b = npu
        .submit(&transfer(
            at(Space::Slow, 4096, 4096),
            Region::device(0, 4096),
            Queue::Dma,
            &[a],
        ))
        .unwrap();
    let c = npu
        .submit(&transfer(
            Region::device(0, 4096),
            at(Space::Slow, 0, 4096),
            Queue::Dma,
            &[b],
        ))
        .unwrap();
    let d = npu
        .submit(&transfer(
            at(Space::Slow, 0, 4096),
            Region::host(8192, 4096),
            Queue::Dma,
            &[c],
        ))
        .unwrap();
    npu.run_until_idle();
    npu.poll(d).unwrap();
    assert_eq!(&npu.host_memory()[8192..12288], &bytes[..]);
    assert_eq!(&npu.slow_memory()[..4096], &bytes[..]);
    assert_eq!(&npu.device_memory()[..4096], &bytes[..]);
    // Into flash is refused, from the slow tier as from anywhere.
    assert!(matches!(
        npu.submit(&transfer(
            at(Space::Slow, 0, 16),
            Region::flash(0, 0, 16),
            Queue::Dma,
            &[]
        )),
        Err(HalError::WrongSpace { .. })
    ));
}

#[test]
fn a_transfer_through_the_slow_tier_costs_its_rate() {
    let config = SimConfig::default();
    let mut npu = sim(config);
    let n = 4096u32;
    let to_host = npu
        .submit(&transfer(
            Region::device(0, n),
            Region::host(0, n),
            Queue::Dma,
            &[],
        ))
        .unwrap();
    npu.run_until_idle();
    let fast = npu.now();
    npu.poll(to_host).unwrap();
    let to_slow = npu
        .submit(&transfer(
            Region::device(0, n),
            at(Space::Slow, 0, n),
            Queue::Dma,
            &[],
        ))
        .unwrap();
    npu.run_until_idle();
    npu.poll(to_slow).unwrap();
    let slow = npu.now() - fast;
    assert_eq!(fast, config.transfer_cost(n));
    assert_eq!(
        slow,
        u64::from(config.dma_overhead_cycles) + config.slow.cycles_for(u64::from(n))
    );
    // A slower declared rate takes proportionally longer.
    let halved = SimConfig {
        slow: Bandwidth {
            cycles: 2,
            ..config.slow
        },
        ..config
    };
    let mut npu = sim(halved);
    npu.submit(&transfer(
        Region::device(0, n),
        at(Space::Slow, 0, n),
        Queue::Dma,
        &[],
    ))
    .unwrap();
    assert_eq!(
        npu.run_until_idle(),
        u64::from(config.dma_overhead_cycles) + 2 * u64::from(n) + u64::from(config.slow.latency)
    );
}

#[test]
fn a_job_over_the_slow_tier_computes_the_arenas_bytes() {
    let op = conv(3);
    let operand_bytes = workloads::operand_bytes(op, 0x5eed).unwrap();
    let mut outputs = Vec::new();
    for (input, out) in [
        (Space::Device, Space::Device),
        (Space::Slow, Space::Device),
        (Space::Device, Space::Slow),
        (Space::Slow, Space::Slow),
    ] {
        let mut npu = sim(SimConfig::default());
        let (inputs, output) = operands(op, input, out);
        // Operands reach their space through host memory, as the server's uploads do.
        let mut fences = Vec::new();
        for (r, b) in inputs.iter().zip(&operand_bytes) {
            npu.host_memory()[..b.len()].copy_from_slice(b);
            let f = npu
                .submit(&transfer(Region::host(0, r.len), *r, Queue::Dma, &[]))
                .unwrap();
            npu.run_until_idle();
            npu.poll(f).unwrap();
            fences.push(f);
        }
        let f = npu
            .submit(&compute(op, &inputs, output, Queue::Unit(0)))
            .unwrap();
        let back = npu
            .submit(&transfer(
                output,
                Region::host(0, output.len),
                Queue::Dma,
                &[f],
            ))
            .unwrap();
        npu.run_until_idle();
        npu.poll(back).unwrap();
        outputs.push(npu.host_memory()[..output.len as usize].to_vec());
    }
    assert!(outputs.iter().all(|o| o == &outputs[0]));
    assert!(outputs[0].iter().any(|&b| b != 0), "the output is computed");
}

#[test]
fn operands_in_the_slow_tier_hold_the_shared_port() {
    // A pointwise convolution over a slow tier at a quarter of the default rate: its input
    // read there takes longer than the job does from the arena.
    let op = conv(1);
    let slow = Bandwidth {
        cycles: 4,
        ..SimConfig::default().slow
    };
    // Alone: the same job, operands in the arena, then its input in the slow tier.
    let time = |input: Space, units: u8, jobs: u32| {
        let config = SimConfig {
            execution_units: units,
            slow,
            ..SimConfig::default()
        };
        let mut npu = sim(config);
        let (inputs, output) = operands(op, input, Space::Device);
        for n in 0..jobs {
            // Each job writes its own output, in the arena.
            let out = Region::device(32 * 1024 + n * 8 * 1024, output.len);
            npu.submit(&compute(
                op,
                &inputs,
                out,
                Queue::Unit((n % u32::from(units)) as u8),
            ))
            .unwrap();
        }
        npu.run_until_idle()
    };
    let arena = time(Space::Device, 1, 1);
    let slow_in = time(Space::Slow, 1, 1);
    let input = 16 * 16 * 8;
    let port = slow.cycles_for(input);
    assert!(slow_in >= port, "{slow_in} < {port}");
    assert!(slow_in > arena);
    // Two units, both reading the slow tier: the port serves one at a time, so the pair
    // takes at least both reservations; from the arena the pair takes less than two alone.
    let two_slow = time(Space::Slow, 2, 2);
    assert!(two_slow >= 2 * port, "{two_slow} < {}", 2 * port);
    let two_arena = time(Space::Device, 2, 2);
    assert!(two_arena < 2 * arena);
    // The estimate a planner reads says so too.
    let mut npu = sim(SimConfig {
        slow,
        ..SimConfig::default()
    });
    let (inputs, output) = operands(op, Space::Slow, Space::Device);
    let e = npu
        .estimate(&compute(op, &inputs, output, Queue::Unit(0)))
        .unwrap();
    assert!(e.flash_cycles >= port && e.cycles >= e.flash_cycles);
}

#[test]
fn im2col_needs_its_output_in_the_arena() {
    let op = conv(3);
    let mut npu = sim(SimConfig::default());
    let (inputs, output) = operands(op, Space::Device, Space::Slow);
    let scratch_len = Variant::Im2col.scratch_bytes(op).unwrap();
    let job = Job {
        kind: JobKind::Compute {
            op,
            variant: Variant::Im2col,
            inputs: heapless::Vec::from_slice(&inputs).unwrap(),
            output,
            scratch: Some(Region::device(48 * 1024, scratch_len)),
        },
        queue: Queue::Unit(0),
        deps: heapless::Vec::new(),
    };
    assert_eq!(
        npu.submit(&job),
        Err(HalError::WrongSpace { region: output })
    );
}

#[test]
fn the_tiers_rate_is_in_the_tuning_fingerprint_only_when_changed() {
    let default = sim(SimConfig::default()).tuning_fingerprint();
    let (device, host, _) = memories();
    let without = SimNpu::new(device, host, SimConfig::default()).unwrap();
    // Tables made before the tier existed stay valid on the default part.
    assert_eq!(without.tuning_fingerprint(), default);
    let slower = SimConfig {
        slow: Bandwidth {
            cycles: 2,
            ..SimConfig::default().slow
        },
        ..SimConfig::default()
    };
    assert_ne!(sim(slower).tuning_fingerprint(), default);
}
