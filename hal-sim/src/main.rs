//! `npu-sim`: the host command line of the simulator.
//!
//! - `npu-sim demo`: runs the stack's main job on the simulated NPU (the static conv net and the
//!   transformer through client, channel, server and simulator) and prints results, virtual
//!   cycles and memory statistics.
//! - `npu-sim bench memory`: the peak-memory table of the Burn-Compute study.
//! - `npu-sim bench dispatch`: host nanoseconds per `execute` of a tiny op.

use clap::{Parser, Subcommand};
use npu_compute::channel::ComputeChannel;
use npu_compute::client::ComputeClient;
use npu_compute::hal::{Npu, Op};
use npu_compute::memory::{DeallocStrategy, MemoryConfig, MemoryStats, SliceStrategy};
use npu_kernels::int8::{Activation, AddParams, Quant};
use npu_sim::workloads::{
    self, ConvNet, Transformer, Workload, WorkloadError, D_MODEL, SEQ_LENGTHS,
};
use npu_sim::SimConfig;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Parser)]
#[command(
    name = "npu-sim",
    version,
    about = "Deterministic software NPU for npu-compute"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the main job on the simulated NPU and print results, cycles and memory statistics.
    Demo,
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        which: Bench,
    },
}

#[derive(Subcommand)]
enum Bench {
    /// Peak arena bytes of Burn's strategy: deallocation period x slice ratio, two workloads.
    Memory {
        /// Inferences per workload run.
        #[arg(long, default_value_t = 48)]
        inferences: usize,
    },
    /// Host nanoseconds per `execute` of a tiny op through client, channel, server, simulator.
    Dispatch {
        /// Timed batches (the median is reported).
        #[arg(long, default_value_t = 101)]
        batches: usize,
        /// Executes per batch.
        #[arg(long, default_value_t = 1000)]
        per_batch: usize,
    },
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Demo => demo(),
        Command::Bench {
            which: Bench::Memory { inferences },
        } => bench_memory(inferences),
        Command::Bench {
            which: Bench::Dispatch { batches, per_batch },
        } => bench_dispatch(batches, per_batch),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("npu-sim: error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn print_memory(s: &MemoryStats) {
    println!(
        "  memory: in use {} B (peak {} B), reserved {} B (peak {} B), {} chunks, {} allocations / {} deallocations, largest free block {} B",
        s.in_use, s.in_use_peak, s.reserved, s.reserved_peak, s.chunks, s.allocations, s.deallocations, s.largest_free
    );
}

fn demo() -> Result<(), WorkloadError> {
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
    println!(
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
    println!("conv net (3x conv3x3 via im2col + FC on the NPU, dense 10):");
    println!("  scores {scores:?} -> class {class}");
    println!("  {} NPU cycles for one inference", t1 - t0);

    let tr = Transformer::new(&client)?;
    println!("transformer encoder (d=32, 2 heads, ff=64), sequence length per inference:");
    for &len in &SEQ_LENGTHS[..4] {
        let x = workloads::pseudo_random_i8(len as u32, len * D_MODEL);
        let t0 = cycles()?;
        let y = tr.infer(&client, &x)?;
        let t1 = cycles()?;
        println!(
            "  len {len:2}: output[0..8] {:?}, {} NPU cycles",
            &y[..8],
            t1 - t0
        );
    }
    let stats = client.stats()?;
    println!(
        "  server: {} NPU jobs, {} CPU-fallback ops, {} uploads ({} B), {} downloads ({} B)",
        stats.compute_jobs,
        stats.cpu_ops,
        stats.uploads,
        stats.upload_bytes,
        stats.downloads,
        stats.download_bytes
    );
    print_memory(&client.memory_stats()?);
    println!("  virtual time {} cycles", cycles()?);
    Ok(())
}

fn bench_memory(inferences: usize) -> Result<(), WorkloadError> {
    println!(
        "Peak arena bytes, Burn-Compute chunk/slice strategy, {inferences} inferences per run"
    );
    println!();
    println!("| workload | dealloc period | slice ratio | peak reserved (B) | worst-moment live (B) | reserved / live |");
    println!("|---|---|---|---|---|---|");
    for (workload, name) in [
        (Workload::ConvNet, "static conv net"),
        (Workload::Transformer, "transformer, varying seq"),
    ] {
        for (dealloc, label) in [
            (DeallocStrategy::Never, "never"),
            (DeallocStrategy::PeriodTick { period: 1000 }, "1000"),
            (DeallocStrategy::PeriodTick { period: 128 }, "128"),
            (DeallocStrategy::PeriodTick { period: 1 }, "1"),
        ] {
            for ratio in [0.9f32, 0.8] {
                let config = MemoryConfig {
                    slice: SliceStrategy::Ratio(ratio),
                    dealloc,
                };
                let (s, _) = workloads::run(workload, config, inferences)?;
                println!(
                    "| {name} | {label} | {ratio} | {} | {} | {:.2} |",
                    s.reserved_peak,
                    s.in_use_peak,
                    s.reserved_peak as f64 / s.in_use_peak as f64
                );
            }
        }
    }
    Ok(())
}

fn bench_dispatch(batches: usize, per_batch: usize) -> Result<(), WorkloadError> {
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
            op: npu_compute::hal::OpKind::Add,
            error,
        })?;
    let a = client.create(&[1u8; 16])?;
    let b = client.create(&[2u8; 16])?;
    let out = client.empty(16)?;
    let op = Op::AddI8 { len: 16, params };
    let mut samples = Vec::with_capacity(batches);
    for _ in 0..batches.max(1) {
        let start = Instant::now();
        for _ in 0..per_batch {
            client.execute(op, &[&a, &b], &out)?;
        }
        samples.push(start.elapsed().as_nanos() as f64 / per_batch as f64);
        client.sync()?;
    }
    samples.sort_by(f64::total_cmp);
    let median = samples[samples.len() / 2];
    let (lo, hi) = (samples[samples.len() / 10], samples[samples.len() * 9 / 10]);
    println!("dispatch: AddI8 x16 through ComputeClient -> RefCellChannel -> NpuServer -> SimNpu");
    println!("  {batches} batches of {per_batch} executes: median {median:.0} ns/execute (p10 {lo:.0}, p90 {hi:.0})");
    println!("  includes the simulator retiring jobs (kernel run) when its 32-entry queue is full");
    Ok(())
}
