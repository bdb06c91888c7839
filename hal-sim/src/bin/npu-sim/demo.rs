//! `npu-sim demo`: the stack's main job on the simulated NPU.
//!
//! Builds the whole stack (client, channel, server, simulator with its default
//! Ethos-U55-128-like configuration) over fixed memories and runs the static conv net once
//! and the transformer encoder at four sequence lengths, on fixed pseudo-random inputs.
//!
//! Output (stdout): the conv net's scores and class, the transformer's first output bytes
//! per length, NPU cycles of each inference, the server's job and transfer counts, the
//! memory statistics and the final virtual time. Every figure is deterministic.
//!
//! Failure modes: none expected, since inputs and configuration are built in; a
//! [`WorkloadError`] means the simulator refused its configuration or memories, or the
//! compute stack failed (out of arena, a kernel refusing its parameters): a bug in the
//! stack or a changed default, not a user error.

use crate::common::print_memory;
use npu_compute::channel::ComputeChannel;
use npu_compute::client::ComputeClient;
use npu_compute::hal::Npu;
use npu_compute::memory::MemoryConfig;
use npu_sim::workloads::{self, ConvNet, Transformer, WorkloadError, D_MODEL, SEQ_LENGTHS};
use npu_sim::SimConfig;

/// `npu-sim demo`.
pub fn run() -> Result<(), WorkloadError> {
    let (mut device, mut host) = (
        workloads::aligned_memory(workloads::DEVICE_BYTES),
        workloads::aligned_memory(workloads::HOST_BYTES),
    );
    let channel = workloads::channel(
        &mut device,
        &mut host,
        SimConfig::default(),
        MemoryConfig::default(),
    )?;
    let client = ComputeClient::new(&channel);
    let cycles = || channel.with(|s| s.npu().now());
    outln!(
        "npu-compute demo on npu-sim (Ethos-U55-128-like: 128 MACs/cycle, 8 B/cycle SRAM and DMA)"
    );

    let net = ConvNet::new(&client)?;
    let image = workloads::pseudo_random_i8(7, 32 * 32 * 3);
    let t0 = cycles()?;
    let scores = net.infer(&client, &image)?;
    let t1 = cycles()?;
    let class = scores
        .iter()
        .enumerate()
        .max_by_key(|&(_, s)| *s)
        .map_or(0, |(i, _)| i);
    outln!("conv net (3x conv3x3 via im2col + FC on the NPU, dense 10):");
    outln!("  scores {scores:?} -> class {class}");
    outln!("  {} NPU cycles for one inference", t1 - t0);

    let tr = Transformer::new(&client)?;
    outln!("transformer encoder (d=32, 2 heads, ff=64), sequence length per inference:");
    for &len in &SEQ_LENGTHS[..4] {
        let x = workloads::pseudo_random_i8(len as u32, len * D_MODEL);
        let t0 = cycles()?;
        let y = tr.infer(&client, &x)?;
        let t1 = cycles()?;
        outln!(
            "  len {len:2}: output[0..8] {:?}, {} NPU cycles",
            &y[..8],
            t1 - t0
        );
    }
    let stats = client.stats()?;
    outln!(
        "  server: {} NPU jobs, {} CPU-fallback ops, {} uploads ({} B), {} downloads ({} B)",
        stats.compute_jobs,
        stats.cpu_ops,
        stats.uploads,
        stats.upload_bytes,
        stats.downloads,
        stats.download_bytes
    );
    print_memory(&client.memory_stats()?);
    outln!("  virtual time {} cycles", cycles()?);
    Ok(())
}
