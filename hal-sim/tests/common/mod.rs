//! Helpers shared by the integration tests.
#![allow(dead_code)]

use npu_compute::hal::{Fence, Job, JobKind, Npu, Queue, Region, Variant};
use npu_compute::ops::Op;
use npu_sim::{AlignedMemory, SimConfig, SimNpu, TraceEntry};

/// Bytes of each test memory.
pub const MEM: usize = 64 * 1024;

/// A fresh pair of 16-byte aligned memories, leaked so the simulator can be `'static`.
pub fn memories() -> (&'static mut [u8], &'static mut [u8]) {
    let device = Box::leak(Box::new(AlignedMemory::<MEM>::new()));
    let host = Box::leak(Box::new(AlignedMemory::<MEM>::new()));
    (device.as_mut_slice(), host.as_mut_slice())
}

/// A simulator with `config` over fresh memories.
pub fn sim(config: SimConfig) -> SimNpu<'static> {
    let (device, host) = memories();
    SimNpu::new(device, host, config).expect("valid config")
}

/// A simulator with `config` and a trace of `entries` entries.
pub fn traced(config: SimConfig, entries: usize) -> SimNpu<'static> {
    let buf = Box::leak(vec![TraceEntry::EMPTY; entries].into_boxed_slice());
    sim(config).with_trace(buf)
}

/// Two execution units, otherwise the default part.
pub fn two_units() -> SimConfig {
    SimConfig {
        execution_units: 2,
        ..SimConfig::default()
    }
}

pub fn deps(fences: &[Fence]) -> heapless::Vec<Fence, { npu_compute::hal::MAX_JOB_DEPS }> {
    heapless::Vec::from_slice(fences).expect("few deps")
}

pub fn transfer(src: Region, dst: Region, after: &[Fence]) -> Job<'static> {
    Job {
        kind: JobKind::Transfer { src, dst },
        queue: Queue::Dma,
        deps: deps(after),
    }
}

/// A compute job owning its op for the rest of the test (leaked: a few hundred bytes per job),
/// so tests can build jobs from op values.
pub fn compute(
    op: Op,
    inputs: &[Region],
    output: Region,
    queue: Queue,
    after: &[Fence],
) -> Job<'static> {
    Job {
        kind: JobKind::Compute {
            op: Box::leak(Box::new(op)),
            variant: Variant::Auto,
            scratch: None,
            inputs: heapless::Vec::from_slice(inputs).expect("<= 3 inputs"),
            output,
        },
        queue,
        deps: deps(after),
    }
}

pub fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

pub fn bytes_f32(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Polls `fence` to completion, sleeping between polls; returns the poll result.
pub fn wait(npu: &mut impl Npu, fence: Fence) -> Result<(), npu_compute::hal::HalError> {
    loop {
        match npu.poll(fence) {
            Ok(()) => return Ok(()),
            Err(nb::Error::Other(e)) => return Err(e),
            Err(nb::Error::WouldBlock) => npu.wait_for_event(),
        }
    }
}

/// The trace as a vector.
pub fn trace(npu: &SimNpu<'_>) -> Vec<TraceEntry> {
    npu.trace().collect()
}

/// The trace entry of `fence`.
pub fn entry(npu: &SimNpu<'_>, fence: Fence) -> TraceEntry {
    npu.trace()
        .find(|e| e.fence == fence)
        .expect("fence traced")
}
