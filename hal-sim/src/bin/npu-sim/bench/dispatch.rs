//! `npu-sim bench dispatch [--batches N] [--per-batch N]`: host nanoseconds per `execute`
//! of a tiny op.
//!
//! Times batches of `AddI8` of 16 elements through client, channel, server and simulator,
//! executed one by one and then as runs of a 32-job plan (a ping-pong chain). The times
//! include the simulator running the kernels when its 32-entry queue fills.
//!
//! Output (stdout): the median, 10th and 90th percentile nanoseconds per execute and per
//! planned job, and their ratio. These are wall-clock figures of the host: they vary run to
//! run and machine to machine.
//!
//! Failure modes: none expected, since the op and memories are built in; a
//! [`WorkloadError`] means the simulator refused its setup, the kernel refused the ADD's
//! quantization, or the stack failed (a bug, not a user error).

use npu_compute::client::ComputeClient;
use npu_compute::memory::MemoryConfig;
use npu_compute::ops::{AddI8, Op};
use npu_kernels::int8::{Activation, AddParams, Quant};
use npu_sim::workloads::{self, WorkloadError};
use npu_sim::SimConfig;
use std::time::Instant;

/// `npu-sim bench dispatch`.
pub fn run(batches: usize, per_batch: usize) -> Result<(), WorkloadError> {
    let (mut device, mut host) = (
        workloads::aligned_memory(64 << 10),
        workloads::aligned_memory(64 << 10),
    );
    let channel = workloads::channel(
        &mut device,
        &mut host,
        SimConfig::default(),
        MemoryConfig::default(),
    )?;
    let client = ComputeClient::new(&channel);
    let q = Quant {
        scale: 0.05,
        zero_point: 0,
    };
    let params =
        AddParams::new(q, q, q, Activation::None).map_err(|error| npu_compute::Error::Kernel {
            op: npu_compute::ops::OpKind::Add,
            error,
        })?;
    let a = client.create(&[1u8; 16])?;
    let b = client.create(&[2u8; 16])?;
    let out = client.empty(16)?;
    let op = Op::AddI8(AddI8 { len: 16, params });
    let mut samples = Vec::new();
    for _ in 0..batches.max(1) {
        let start = Instant::now();
        for _ in 0..per_batch {
            client.execute(op, &[&a, &b], &out)?;
        }
        samples.push(start.elapsed().as_nanos() as f64 / per_batch as f64);
        client.sync()?;
    }
    // The same ADD from a job plan of 32 (a ping-pong chain), run per_batch / 32 times.
    let pair = [client.empty(16)?, client.empty(16)?];
    let mut plan: npu_compute::client::JobPlan<'_, _, 32, 8> = client.job_plan();
    plan.push(&op, &[&a, &b], &pair[0])?;
    for k in 1..32 {
        plan.push(&op, &[&pair[(k + 1) % 2], &b], &pair[k % 2])?;
    }
    let ops = [&op; 32];
    let runs = (per_batch / 32).max(1);
    let mut planned = Vec::new();
    for _ in 0..batches.max(1) {
        let start = Instant::now();
        for _ in 0..runs {
            plan.run(&ops)?;
        }
        planned.push(start.elapsed().as_nanos() as f64 / (runs * 32) as f64);
        client.sync()?;
    }
    let spread = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[v.len() / 2], v[v.len() / 10], v[v.len() * 9 / 10])
    };
    let (median, lo, hi) = spread(samples);
    let (p_median, p_lo, p_hi) = spread(planned);
    outln!("dispatch: AddI8 x16 through ComputeClient -> RefCellChannel -> NpuServer -> SimNpu");
    outln!("  {batches} batches of {per_batch} executes: median {median:.0} ns/execute (p10 {lo:.0}, p90 {hi:.0})");
    outln!("  {batches} batches of {runs} runs of a 32-job plan: median {p_median:.0} ns/job (p10 {p_lo:.0}, p90 {p_hi:.0}); planned / execute {:.2}", p_median / median);
    outln!("  includes the simulator retiring jobs (kernel run) when its 32-entry queue is full");
    Ok(())
}
