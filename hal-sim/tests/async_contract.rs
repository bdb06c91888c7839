//! The asynchronous contract: time moves only when told, results appear only at retire.

mod common;

use common::*;
use npu_compute::hal::{Fence, Npu, Queue, Region};
use npu_compute::ops::ReluF32;
use npu_sim::SimConfig;

#[test]
fn transfer_is_not_complete_before_its_virtual_end() {
    let mut npu = sim(SimConfig::default());
    npu.host_memory()[..16].copy_from_slice(&[7; 16]);
    let f = npu
        .submit(&transfer(Region::host(0, 16), Region::device(32, 16), &[]))
        .unwrap();
    // 32 cycles of DMA latency + 16 bytes at 8 bytes/cycle.
    assert_eq!(npu.scheduled(f), Some((0, 34)));
    assert_eq!(npu.now(), 0);

    npu.advance(33);
    assert_eq!(npu.poll(f), Err(nb::Error::WouldBlock));
    assert!(!npu.irq_pending());
    assert_eq!(
        &npu.device_memory()[32..48],
        &[0; 16],
        "no effect before the end"
    );
    assert_eq!(npu.now(), 33, "poll does not move the clock");

    npu.advance(1);
    assert!(npu.irq_pending());
    assert_eq!(
        &npu.device_memory()[32..48],
        &[0; 16],
        "no effect before retire"
    );
    assert_eq!(npu.poll(f), Ok(()));
    assert_eq!(&npu.device_memory()[32..48], &[7; 16]);
    assert!(!npu.irq_pending());
    assert_eq!(npu.in_flight(), 0);
    assert_eq!(npu.scheduled(f), None);
    // A completed fence stays complete.
    assert_eq!(npu.poll(f), Ok(()));
}

#[test]
fn on_interrupt_retires_finished_jobs_only() {
    let mut npu = sim(SimConfig::default());
    npu.host_memory()[..32].copy_from_slice(&[3; 32]);
    let a = npu
        .submit(&transfer(Region::host(0, 16), Region::device(0, 16), &[]))
        .unwrap();
    let b = npu
        .submit(&transfer(Region::host(16, 16), Region::device(16, 16), &[]))
        .unwrap();
    assert_eq!(npu.scheduled(b), Some((34, 68)));

    npu.on_interrupt();
    assert_eq!(npu.in_flight(), 2, "nothing ended yet");

    npu.advance(40);
    assert!(npu.irq_pending());
    npu.on_interrupt();
    assert!(!npu.irq_pending());
    assert_eq!(npu.in_flight(), 1);
    assert_eq!(&npu.device_memory()[..16], &[3; 16]);
    assert_eq!(&npu.device_memory()[16..32], &[0; 16]);
    assert_eq!(npu.poll(a), Ok(()));
    assert_eq!(npu.poll(b), Err(nb::Error::WouldBlock));
}

#[test]
fn wait_for_event_jumps_to_the_earliest_end() {
    let mut npu = sim(two_units());
    let relu = npu_compute::ops::Op::ReluF32(ReluF32 { len: 64 });
    // Unit 0: a long compute job; DMA: a short transfer.
    let long = npu
        .submit(&compute(
            relu,
            &[Region::device(0, 256)],
            Region::device(256, 256),
            Queue::Unit(0),
            &[],
        ))
        .unwrap();
    let short = npu
        .submit(&transfer(
            Region::host(0, 16),
            Region::device(1024, 16),
            &[],
        ))
        .unwrap();
    let (_, long_end) = npu.scheduled(long).unwrap();
    assert_eq!(npu.scheduled(short), Some((0, 34)));
    assert!(long_end > 34);
    assert_eq!(npu.next_event(), Some(34));

    npu.wait_for_event();
    assert_eq!(npu.now(), 34);
    // The earliest end has passed but is not retired: waiting again is a no-op.
    npu.wait_for_event();
    assert_eq!(npu.now(), 34);
    assert_eq!(npu.poll(short), Ok(()));
    npu.wait_for_event();
    assert_eq!(npu.now(), long_end);
    // Done (its outcome depends on the kernels, which other tests check).
    assert_ne!(npu.poll(long), Err(nb::Error::WouldBlock));
    assert_eq!(npu.in_flight(), 0);
    // Nothing in flight: returns at once.
    npu.wait_for_event();
    assert_eq!(npu.now(), long_end);
}

#[test]
fn wait_for_event_does_not_go_back_in_time() {
    let mut npu = sim(SimConfig::default());
    let f = npu
        .submit(&transfer(Region::host(0, 16), Region::device(0, 16), &[]))
        .unwrap();
    npu.advance(1000);
    npu.wait_for_event();
    assert_eq!(npu.now(), 1000);
    assert_eq!(npu.poll(f), Ok(()));
}

#[test]
fn run_until_idle_retires_everything_at_the_last_end() {
    let mut npu = sim(SimConfig::default());
    npu.host_memory()[..48].copy_from_slice(&[9; 48]);
    let mut last = Fence(0);
    for i in 0..3 {
        last = npu
            .submit(&transfer(
                Region::host(i * 16, 16),
                Region::device(i * 16, 16),
                &[],
            ))
            .unwrap();
    }
    assert_eq!(npu.scheduled(last), Some((68, 102)));
    assert_eq!(npu.run_until_idle(), 102);
    assert_eq!(npu.now(), 102);
    assert_eq!(npu.in_flight(), 0);
    assert_eq!(&npu.device_memory()[..48], &[9; 48]);
    // Idle: stays put.
    assert_eq!(npu.run_until_idle(), 102);
}

#[test]
fn jobs_submitted_later_start_at_now() {
    let mut npu = sim(SimConfig::default());
    npu.advance(500);
    let f = npu
        .submit(&transfer(Region::host(0, 16), Region::device(0, 16), &[]))
        .unwrap();
    assert_eq!(npu.scheduled(f), Some((500, 534)));
}

#[test]
fn staging_buffer_is_sampled_at_retire() {
    // Writing a staging buffer before its transfer completes is a race on hardware; the
    // simulator resolves it deterministically: the bytes present at retire are copied.
    let mut npu = sim(SimConfig::default());
    npu.host_memory()[..16].copy_from_slice(&[1; 16]);
    let f = npu
        .submit(&transfer(Region::host(0, 16), Region::device(0, 16), &[]))
        .unwrap();
    npu.host_memory()[..16].copy_from_slice(&[2; 16]);
    assert_eq!(wait(&mut npu, f), Ok(()));
    assert_eq!(&npu.device_memory()[..16], &[2; 16]);
}

#[test]
fn device_to_host_and_device_to_device_transfers_copy() {
    let mut npu = sim(SimConfig::default());
    npu.device_memory_mut()[..16].copy_from_slice(&[5; 16]);
    let a = npu
        .submit(&transfer(
            Region::device(0, 16),
            Region::device(64, 16),
            &[],
        ))
        .unwrap();
    let b = npu
        .submit(&transfer(
            Region::device(64, 16),
            Region::host(128, 16),
            &[a],
        ))
        .unwrap();
    assert_eq!(wait(&mut npu, b), Ok(()));
    assert_eq!(npu.poll(a), Ok(()));
    assert_eq!(&npu.device_memory()[64..80], &[5; 16]);
    assert_eq!(&npu.host_memory()[128..144], &[5; 16]);
    assert_eq!(&npu.host_memory()[112..128], &[0; 16]);
}

#[test]
fn fences_count_up_from_zero_and_are_never_reused() {
    let mut npu = sim(SimConfig::default());
    for i in 0..5 {
        let f = npu
            .submit(&transfer(Region::host(0, 16), Region::device(0, 16), &[]))
            .unwrap();
        assert_eq!(f, Fence(i));
        npu.run_until_idle();
    }
    assert_eq!(
        npu.poll(Fence(5)),
        Err(nb::Error::Other(npu_compute::hal::HalError::UnknownFence(
            Fence(5)
        )))
    );
}
