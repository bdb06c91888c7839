//! Compute results (against the kernels), fault injection and failure propagation.

mod common;

use common::*;
use npu_compute::hal::{Fence, HalError, Npu, Queue, Region};
use npu_compute::ops::{
    AddF32, AddI8, FullyConnectedF32, FullyConnectedI8, MulF32, MulI8, Op, ReluF32, ReluI8,
};
use npu_kernels::int8::{Activation, AddParams, FcParams, MulParams, Quant, ReluParams};
use npu_kernels::FcShape;
use npu_sim::{
    kernel_error_code, SimConfig, CODE_DEPENDENCY_FAILED, CODE_KERNEL_INVALID_QUANTIZATION,
    CODE_KERNEL_LENGTH_MISMATCH, CODE_KERNEL_SHAPE_OVERFLOW, CODE_USER_BASE,
    FAILED_RECORD_CAPACITY,
};

fn q(scale: f32, zero_point: i32) -> Quant {
    Quant { scale, zero_point }
}

#[test]
fn f32_add_through_transfers_matches_the_kernel() {
    let mut npu = traced(SimConfig::default(), 16);
    let n = 37usize; // not a multiple of 4: lengths need no padding
    let a: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 3.0).collect();
    let b: Vec<f32> = (0..n).map(|i| (i * i) as f32 / 7.0).collect();
    let bytes = (n * 4) as u32;
    npu.host_memory()[..n * 4].copy_from_slice(&f32_bytes(&a));
    npu.host_memory()[256..256 + n * 4].copy_from_slice(&f32_bytes(&b));

    let ta = npu
        .submit(&transfer(
            Region::host(0, bytes),
            Region::device(0, bytes),
            &[],
        ))
        .unwrap();
    let tb = npu
        .submit(&transfer(
            Region::host(256, bytes),
            Region::device(256, bytes),
            &[],
        ))
        .unwrap();
    let add = Op::AddF32(AddF32 { len: n as u32 });
    let c = npu
        .submit(&compute(
            add,
            &[Region::device(0, bytes), Region::device(256, bytes)],
            Region::device(512, bytes),
            Queue::Unit(0),
            &[ta, tb],
        ))
        .unwrap();
    let out = npu
        .submit(&transfer(
            Region::device(512, bytes),
            Region::host(1024, bytes),
            &[c],
        ))
        .unwrap();

    // Only the last fence is polled: completion implies its dependencies completed.
    assert_eq!(wait(&mut npu, out), Ok(()));
    let mut expected = vec![0f32; n];
    npu_kernels::f32::add(&a, &b, &mut expected).expect("f32 add kernel");
    assert_eq!(bytes_f32(&npu.host_memory()[1024..1024 + n * 4]), expected);
    assert_eq!(expected[3], a[3] + b[3]);

    // The compute job waited for the second transfer; the copy-out for the compute job.
    assert_eq!(entry(&npu, c).start, entry(&npu, tb).end);
    assert_eq!(entry(&npu, out).start, entry(&npu, c).end);
    assert_eq!(npu.stats().macs, n as u64);
    assert_eq!(npu.stats().jobs_failed, 0);
}

#[test]
fn f32_fully_connected_matches_the_kernel() {
    let mut npu = sim(SimConfig::default());
    let shape = FcShape {
        batches: 3,
        in_features: 10,
        out_features: 5,
    };
    let input: Vec<f32> = (0..30).map(|i| (i as f32 - 15.0) / 4.0).collect();
    let weights: Vec<f32> = (0..50)
        .map(|i| ((i * 7) % 11) as f32 / 10.0 - 0.5)
        .collect();
    let bias: Vec<f32> = (0..5).map(|i| i as f32).collect();
    let host = npu.host_memory();
    host[..120].copy_from_slice(&f32_bytes(&input));
    host[128..328].copy_from_slice(&f32_bytes(&weights));
    host[336..356].copy_from_slice(&f32_bytes(&bias));

    let t1 = npu
        .submit(&transfer(Region::host(0, 120), Region::device(0, 120), &[]))
        .unwrap();
    let t2 = npu
        .submit(&transfer(
            Region::host(128, 200),
            Region::device(128, 200),
            &[],
        ))
        .unwrap();
    let t3 = npu
        .submit(&transfer(
            Region::host(336, 20),
            Region::device(336, 20),
            &[],
        ))
        .unwrap();
    let fc = Op::FullyConnectedF32(FullyConnectedF32 { shape });
    let inputs = [
        Region::device(0, 120),
        Region::device(128, 200),
        Region::device(336, 20),
    ];
    let with_bias = npu
        .submit(&compute(
            fc,
            &inputs,
            Region::device(384, 60),
            Queue::Unit(0),
            &[t1, t2, t3],
        ))
        .unwrap();
    let no_bias = npu
        .submit(&compute(
            fc,
            &inputs[..2],
            Region::device(448, 60),
            Queue::Unit(0),
            &[t1, t2],
        ))
        .unwrap();
    let o1 = npu
        .submit(&transfer(
            Region::device(384, 60),
            Region::host(512, 60),
            &[with_bias],
        ))
        .unwrap();
    let o2 = npu
        .submit(&transfer(
            Region::device(448, 60),
            Region::host(576, 60),
            &[no_bias],
        ))
        .unwrap();
    assert_eq!(wait(&mut npu, o1), Ok(()));
    assert_eq!(wait(&mut npu, o2), Ok(()));

    let mut expected = vec![0f32; 15];
    npu_kernels::f32::fully_connected(shape, &input, &weights, Some(&bias), &mut expected)
        .expect("f32 fc kernel");
    assert_eq!(bytes_f32(&npu.host_memory()[512..572]), expected);
    let mut expected_nb = vec![0f32; 15];
    npu_kernels::f32::fully_connected(shape, &input, &weights, None, &mut expected_nb)
        .expect("f32 fc kernel");
    assert_eq!(bytes_f32(&npu.host_memory()[576..636]), expected_nb);
    // Sanity of the reference itself: first output, first feature.
    let dot: f32 = (0..10).map(|i| input[i] * weights[i]).sum();
    assert!((expected_nb[0] - dot).abs() < 1e-4);
    assert_eq!(npu.stats().macs, 2 * 150);
}

#[test]
fn f32_mul_and_relu_match_the_kernels() {
    let mut npu = sim(SimConfig::default());
    let x: Vec<f32> = (0..16).map(|i| i as f32 - 8.25).collect();
    npu.device_memory_mut()[..64].copy_from_slice(&f32_bytes(&x));
    let sq = npu
        .submit(&compute(
            Op::MulF32(MulF32 { len: 16 }),
            &[Region::device(0, 64), Region::device(0, 64)],
            Region::device(64, 64),
            Queue::Unit(0),
            &[],
        ))
        .unwrap();
    let r = npu
        .submit(&compute(
            Op::ReluF32(ReluF32 { len: 16 }),
            &[Region::device(0, 64)],
            Region::device(128, 64),
            Queue::Unit(0),
            &[],
        ))
        .unwrap();
    assert_eq!(wait(&mut npu, sq), Ok(()));
    assert_eq!(wait(&mut npu, r), Ok(()));
    let mut e_sq = vec![0f32; 16];
    npu_kernels::f32::mul(&x, &x, &mut e_sq).expect("f32 mul kernel");
    let mut e_r = vec![0f32; 16];
    npu_kernels::f32::relu(&x, &mut e_r).expect("f32 relu kernel");
    assert_eq!(bytes_f32(&npu.device_memory()[64..128]), e_sq);
    assert_eq!(bytes_f32(&npu.device_memory()[128..192]), e_r);
    assert_eq!(e_r[0], 0.0);
}

/// Runs one int8 op in the simulator and directly through `kernel`, and checks they agree:
/// same bytes on success, the mapped failure code on a kernel error.
fn check_int8(
    op: Op,
    inputs: &[Vec<i8>],
    out_len: usize,
    kernel: impl FnOnce(&[&[i8]], &mut [i8]) -> Result<(), npu_kernels::KernelError>,
) {
    let mut npu = sim(SimConfig::default());
    let sentinel = 0x5Au8;
    let mut regions = Vec::new();
    let mut offset = 0u32;
    for input in inputs {
        let bytes: Vec<u8> = input.iter().map(|&v| v as u8).collect();
        npu.device_memory_mut()[offset as usize..offset as usize + bytes.len()]
            .copy_from_slice(&bytes);
        regions.push(Region::device(offset, bytes.len() as u32));
        offset += (bytes.len() as u32).div_ceil(16) * 16;
    }
    let out = Region::device(offset, out_len as u32);
    npu.device_memory_mut()[offset as usize..offset as usize + out_len].fill(sentinel);
    let f = npu
        .submit(&compute(op, &regions, out, Queue::Unit(0), &[]))
        .unwrap();

    let views: Vec<&[i8]> = inputs.iter().map(Vec::as_slice).collect();
    let mut expected = vec![sentinel as i8; out_len];
    let direct = kernel(&views, &mut expected);
    let got = wait(&mut npu, f);
    let produced: Vec<i8> = npu.device_memory()[offset as usize..offset as usize + out_len]
        .iter()
        .map(|&b| b as i8)
        .collect();
    match direct {
        Ok(()) => {
            assert_eq!(got, Ok(()));
            assert_eq!(produced, expected);
            assert_eq!(npu.stats().macs, op.macs());
        }
        Err(e) => assert_eq!(
            got,
            Err(HalError::JobFailed {
                fence: f,
                code: kernel_error_code(e)
            })
        ),
    }
}

#[test]
fn int8_ops_agree_with_the_kernels() {
    let a: Vec<i8> = (0..40).map(|i| (i * 13 % 256) as u8 as i8).collect();
    let b: Vec<i8> = (0..40).map(|i| (i * 29 % 256) as u8 as i8).collect();
    let act = Activation::None;

    let p = AddParams::new(q(0.5, -3), q(0.25, 7), q(0.75, 1), act).expect("AddParams::new");
    check_int8(
        Op::AddI8(AddI8 { len: 40, params: p }),
        &[a.clone(), b.clone()],
        40,
        |i, o| npu_kernels::int8::add(&p, i[0], i[1], o),
    );

    let p = MulParams::new(q(0.5, -3), q(0.25, 7), q(2.0, 1), act).expect("MulParams::new");
    check_int8(
        Op::MulI8(MulI8 { len: 40, params: p }),
        &[a.clone(), b.clone()],
        40,
        |i, o| npu_kernels::int8::mul(&p, i[0], i[1], o),
    );

    let p = ReluParams::new(q(0.5, -3), q(0.5, -128)).expect("ReluParams::new");
    check_int8(
        Op::ReluI8(ReluI8 { len: 40, params: p }),
        std::slice::from_ref(&a),
        40,
        |i, o| npu_kernels::int8::relu(&p, i[0], o),
    );

    let shape = FcShape {
        batches: 2,
        in_features: 20,
        out_features: 3,
    };
    let p = FcParams::new(q(0.5, -3), 0.01, q(1.0, 2), act).expect("FcParams::new");
    let bias: Vec<i32> = vec![100, -2000, 30000];
    let bias_bytes: Vec<i8> = bias
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .map(|b| b as i8)
        .collect();
    let weights: Vec<i8> = b[..].iter().chain(&b[..20]).copied().collect();
    let op = Op::FullyConnectedI8(FullyConnectedI8 { shape, params: p });
    check_int8(op, &[a.clone(), weights.clone(), bias_bytes], 6, |i, o| {
        npu_kernels::int8::fully_connected(&p, shape, i[0], i[1], Some(&bias), o)
    });
    check_int8(op, &[a, weights], 6, |i, o| {
        npu_kernels::int8::fully_connected(&p, shape, i[0], i[1], None, o)
    });
}

#[test]
fn kernel_errors_map_to_documented_codes() {
    use npu_kernels::KernelError;
    assert_eq!(
        kernel_error_code(KernelError::LengthMismatch {
            operand: "a",
            expected: 1,
            actual: 2
        }),
        CODE_KERNEL_LENGTH_MISMATCH
    );
    assert_eq!(
        kernel_error_code(KernelError::InvalidQuantization { what: "x" }),
        CODE_KERNEL_INVALID_QUANTIZATION
    );
    assert_eq!(
        kernel_error_code(KernelError::ShapeOverflow),
        CODE_KERNEL_SHAPE_OVERFLOW
    );
    let codes = [
        CODE_KERNEL_LENGTH_MISMATCH,
        CODE_KERNEL_INVALID_QUANTIZATION,
        CODE_KERNEL_SHAPE_OVERFLOW,
        CODE_DEPENDENCY_FAILED,
    ];
    assert!(codes.iter().all(|&c| c != 0 && c < CODE_USER_BASE));
}

#[test]
fn injected_fault_fails_the_next_compute_job_without_writing() {
    let mut npu = traced(SimConfig::default(), 8);
    npu.device_memory_mut()[64..128].fill(0xEE);
    npu.fail_next_compute_job(0x1234);
    // Transfers do not consume the injection.
    let t = npu
        .submit(&transfer(Region::host(0, 64), Region::device(0, 64), &[]))
        .unwrap();
    let c = npu
        .submit(&compute(
            Op::ReluF32(ReluF32 { len: 16 }),
            &[Region::device(0, 64)],
            Region::device(64, 64),
            Queue::Unit(0),
            &[t],
        ))
        .unwrap();
    let next = npu
        .submit(&compute(
            Op::ReluF32(ReluF32 { len: 16 }),
            &[Region::device(0, 64)],
            Region::device(128, 64),
            Queue::Unit(0),
            &[t],
        ))
        .unwrap();
    npu.run_until_idle();

    assert_eq!(npu.poll(t), Ok(()));
    assert_eq!(
        npu.poll(c),
        Err(nb::Error::Other(HalError::JobFailed {
            fence: c,
            code: 0x1234
        }))
    );
    // Still reported on a second poll.
    assert_eq!(
        npu.poll(c),
        Err(nb::Error::Other(HalError::JobFailed {
            fence: c,
            code: 0x1234
        }))
    );
    assert_eq!(
        &npu.device_memory()[64..128],
        &[0xEE; 64],
        "failed job wrote nothing"
    );
    // Only one job fails.
    assert_ne!(
        npu.poll(next),
        Err(nb::Error::Other(HalError::JobFailed {
            fence: next,
            code: 0x1234
        }))
    );
    assert_eq!(entry(&npu, c).failure, Some(0x1234));
    assert_eq!(entry(&npu, t).failure, None);
    assert!(npu.stats().jobs_failed >= 1);
    // The failed job still occupied its unit.
    assert_eq!(
        npu.stats().busy(Queue::Unit(0)),
        (entry(&npu, c).end - entry(&npu, c).start) * 2
    );
}

#[test]
fn failure_propagates_to_dependents() {
    let mut npu = traced(SimConfig::default(), 8);
    npu.device_memory_mut()[..64].fill(1);
    npu.fail_next_compute_job(CODE_USER_BASE);
    let c = npu
        .submit(&compute(
            Op::ReluF32(ReluF32 { len: 16 }),
            &[Region::device(0, 64)],
            Region::device(64, 64),
            Queue::Unit(0),
            &[],
        ))
        .unwrap();
    // In flight when `c` fails.
    let out = npu
        .submit(&transfer(Region::device(64, 64), Region::host(0, 64), &[c]))
        .unwrap();
    let chained = npu
        .submit(&transfer(
            Region::device(0, 64),
            Region::host(64, 64),
            &[out],
        ))
        .unwrap();
    npu.host_memory()[..128].fill(0xAB);
    assert_eq!(
        wait(&mut npu, chained),
        Err(HalError::JobFailed {
            fence: chained,
            code: CODE_DEPENDENCY_FAILED
        })
    );
    assert_eq!(
        npu.poll(out),
        Err(nb::Error::Other(HalError::JobFailed {
            fence: out,
            code: CODE_DEPENDENCY_FAILED
        }))
    );
    assert_eq!(
        &npu.host_memory()[..128],
        &[0xAB; 128],
        "skipped transfers copied nothing"
    );
    // Submitted after `c` already failed.
    let late = npu
        .submit(&transfer(Region::device(0, 64), Region::host(0, 64), &[c]))
        .unwrap();
    assert_eq!(
        wait(&mut npu, late),
        Err(HalError::JobFailed {
            fence: late,
            code: CODE_DEPENDENCY_FAILED
        })
    );
    // An independent job is unaffected.
    let fine = npu
        .submit(&transfer(Region::device(0, 64), Region::host(0, 64), &[]))
        .unwrap();
    assert_eq!(wait(&mut npu, fine), Ok(()));
    assert_eq!(&npu.host_memory()[..64], &[1; 64]);
    assert_eq!(npu.stats().jobs_failed, 4);
    assert_eq!(entry(&npu, out).failure, Some(CODE_DEPENDENCY_FAILED));
}

#[test]
fn failure_record_keeps_the_most_recent_failures() {
    let mut npu = sim(SimConfig::default());
    let mut failed = Vec::new();
    for i in 0..=FAILED_RECORD_CAPACITY as u32 {
        npu.fail_next_compute_job(CODE_USER_BASE + i);
        let f = npu
            .submit(&compute(
                Op::ReluF32(ReluF32 { len: 4 }),
                &[Region::device(0, 16)],
                Region::device(16, 16),
                Queue::Unit(0),
                &[],
            ))
            .unwrap();
        npu.run_until_idle();
        failed.push(f);
    }
    let s = npu.stats();
    assert_eq!(s.jobs_failed, FAILED_RECORD_CAPACITY as u64 + 1);
    assert_eq!(s.failures_forgotten, 1);
    // The oldest record is gone (documented: it then polls as Ok); the rest remain.
    assert_eq!(npu.poll(failed[0]), Ok(()));
    assert_eq!(
        npu.poll(failed[1]),
        Err(nb::Error::Other(HalError::JobFailed {
            fence: failed[1],
            code: CODE_USER_BASE + 1
        }))
    );
    let last = *failed.last().unwrap();
    assert_eq!(
        npu.poll(last),
        Err(nb::Error::Other(HalError::JobFailed {
            fence: last,
            code: CODE_USER_BASE + FAILED_RECORD_CAPACITY as u32
        }))
    );
    assert_eq!(npu.poll(Fence(0)), Ok(()));
}

#[test]
fn compute_results_are_invisible_until_retired() {
    let mut npu = sim(SimConfig::default());
    npu.device_memory_mut()[..64].copy_from_slice(&f32_bytes(&[-1.0; 16]));
    npu.device_memory_mut()[64..128].fill(0x77);
    let f = npu
        .submit(&compute(
            Op::ReluF32(ReluF32 { len: 16 }),
            &[Region::device(0, 64)],
            Region::device(64, 64),
            Queue::Unit(0),
            &[],
        ))
        .unwrap();
    let (_, end) = npu.scheduled(f).unwrap();
    npu.advance(end - 1);
    assert_eq!(npu.poll(f), Err(nb::Error::WouldBlock));
    npu.advance(1);
    assert_eq!(&npu.device_memory()[64..128], &[0x77; 64]);
    npu.on_interrupt();
    assert_eq!(npu.in_flight(), 0);
    // Once the kernels land the output is relu(-1) = 0.
    if npu.poll(f).is_ok() {
        assert_eq!(bytes_f32(&npu.device_memory()[64..128]), vec![0.0; 16]);
    } else {
        assert_eq!(&npu.device_memory()[64..128], &[0x77; 64]);
    }
}
