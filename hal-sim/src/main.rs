//! `npu-sim`: the host command line of the simulator.
//!
//! - `npu-sim demo`: runs the stack's main job on the simulated NPU (the static conv net and the
//!   transformer through client, channel, server and simulator) and prints results, virtual
//!   cycles and memory statistics.
//! - `npu-sim bench memory`: the peak-memory table of the Burn-Compute study.
//! - `npu-sim bench dispatch`: host nanoseconds per `execute` of a tiny op.
//! - `npu-sim bench chain`: a chain of 1,000 dependent tiny jobs: virtual time against the sum
//!   of the jobs' own times, idle gaps from the trace, CPU waits, host time per job.
//! - `npu-sim run MODEL.tflite --input IN.bin --output OUT.bin [--arena BYTES] [--stats F.json]`:
//!   runs a TensorFlow Lite model on the simulated NPU.
//! - `npu-sim inspect MODEL.tflite`: tensors, quantization, and where each operator runs.
//! - `npu-sim plan MODEL.tflite [--json]`: the exact arena bytes the model needs (the size to
//!   give the firmware's arena section), from the arena plan made at prepare.
//! - `npu-sim bench models DIR`: every model of a reference-model directory: conformance,
//!   host time, NPU cycles and arena bytes next to the peers' figures, and the transfers of
//!   one invoke.
//! - `npu-sim bench pipeline MODEL.tflite`: a stream of frames with a fixed host
//!   preprocessing cost each, run one after another and pipelined: how busy the NPU stays.

use clap::{Parser, Subcommand};
use npu_compute::channel::{ComputeChannel, RefCellChannel};
use npu_compute::client::ComputeClient;
use npu_compute::graph::Optimise;
use npu_compute::hal::{JobKind, Npu, Op, Region, Variant};
use npu_compute::memory::{DeallocStrategy, MemoryConfig, MemoryStats, SliceStrategy};
use npu_compute::server::NpuServer;
use npu_compute::tune::{Candidate, TuneMode};
use npu_kernels::int8::{Activation, AddParams, Quant};
use npu_sim::runner::{self, RunOptions};
use npu_sim::workloads::{
    self, ConvNet, Transformer, Workload, WorkloadError, D_MODEL, SEQ_LENGTHS,
};
use npu_sim::{SimConfig, SimNpu, TraceEntry, TraceKind};
use std::path::{Path, PathBuf};
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
    /// Run a .tflite model on the simulated NPU: write the raw output bytes, print the
    /// predicted class, cycles and arena bytes.
    Run {
        /// The model.
        model: PathBuf,
        /// Raw bytes of the input tensor (repeat for models with several inputs).
        #[arg(long, required = true)]
        input: Vec<PathBuf>,
        /// Where to write the raw bytes of the output tensor (repeat for several outputs).
        #[arg(long)]
        output: Vec<PathBuf>,
        /// Bytes of NPU arena (device memory).
        #[arg(long, default_value_t = 1 << 20)]
        arena: usize,
        /// Write the run's figures as JSON to this file.
        #[arg(long)]
        stats: Option<PathBuf>,
        /// Timed invocations for host_us (median).
        #[arg(long, default_value_t = 1)]
        repeat: usize,
        /// `memory`: the smallest arena (layers run in stripes where it helps); `cycles`: the
        /// fewest cycles (whole tensors).
        #[arg(long, value_enum, default_value_t = OptimiseArg::Cycles)]
        optimise: OptimiseArg,
        /// Run each layer as this tuning table (from `npu-sim tune`) says, measuring nothing.
        #[arg(long, conflicts_with = "autotune")]
        tune_table: Option<PathBuf>,
        /// Tune every layer shape in an untimed first invoke, then report the next one.
        #[arg(long)]
        autotune: bool,
    },
    /// Tune a .tflite model on the simulated NPU: time each layer shape's kernel variants
    /// once, keep the fastest, and write the choices as a tuning table.
    Tune {
        /// The model.
        model: PathBuf,
        /// Where to write the tuning table.
        #[arg(long)]
        export: PathBuf,
        /// Raw bytes of the input tensor (repeat for several; default zeros: cycles do not
        /// depend on the data).
        #[arg(long)]
        input: Vec<PathBuf>,
        /// Bytes of NPU arena (device memory).
        #[arg(long, default_value_t = 1 << 20)]
        arena: usize,
    },
    /// Describe a .tflite model: tensors, quantization, and where each operator runs.
    Inspect {
        /// The model.
        model: PathBuf,
    },
    /// Print the exact arena bytes a model needs: an arena of that size runs it, one
    /// alignment unit less does not.
    Plan {
        /// The model.
        model: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// `memory`: the smallest arena (layers run in stripes where it helps); `cycles`: the
        /// fewest cycles (whole tensors).
        #[arg(long, value_enum, default_value_t = OptimiseArg::Cycles)]
        optimise: OptimiseArg,
    },
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        which: Bench,
    },
}

/// What the arena plan optimises (`npu_compute::graph::Optimise`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum OptimiseArg {
    /// The fewest cycles.
    Cycles,
    /// The smallest arena.
    Memory,
}

impl From<OptimiseArg> for Optimise {
    fn from(o: OptimiseArg) -> Self {
        match o {
            OptimiseArg::Cycles => Optimise::Cycles,
            OptimiseArg::Memory => Optimise::Memory,
        }
    }
}

#[derive(Subcommand)]
enum Bench {
    /// Peak arena bytes of Burn's strategy: deallocation period x slice ratio, two workloads.
    Memory {
        /// Inferences per workload run.
        #[arg(long, default_value_t = 48)]
        inferences: usize,
    },
    /// Every model of a reference-model directory (each `NAME/model.tflite` with
    /// `input_K.bin` and `expected_tflm_K.bin`, and `figures.json`): checks the outputs, and
    /// prints host time, NPU cycles and arena bytes next to the peers' figures.
    Models {
        /// The directory (e.g. ../shared/models).
        dir: PathBuf,
        /// Timed invocations per input (the median over all is reported).
        #[arg(long, default_value_t = 30)]
        repeat: usize,
    },
    /// Every model of a reference-model directory (as `bench models`): NPU cycles with each
    /// kernel variant fixed, tuned (a table made by tuning, imported into a fresh simulator),
    /// the one-time tuning cost, and the measurements a run from the table takes (none). Fails
    /// if a tuned model is slower than its best fixed choice, a run from the table measures,
    /// or an output differs from TFLM's.
    Tune {
        /// The directory (e.g. examples/models or ../shared/models).
        dir: PathBuf,
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
    /// A chain of dependent tiny jobs submitted with no read in between, then one read:
    /// virtual cycles against the sum of the jobs' costs, idle gaps, CPU waits, host ns/job.
    Chain {
        /// Jobs in the chain.
        #[arg(long, default_value_t = 1000)]
        jobs: usize,
        /// Virtual cycles the CPU spends per `execute` (advanced on the simulator's clock).
        #[arg(long, default_value_t = 30)]
        host_cycles: u64,
        /// Timed runs (the median host time is reported).
        #[arg(long, default_value_t = 11)]
        repeat: usize,
    },
    /// Frames of one model with a fixed host preprocessing cost each, one after another and
    /// pipelined over two sets of pinned buffers: NPU busy fraction in the steady state.
    Pipeline {
        /// The model (one input, one output).
        model: PathBuf,
        /// The input frame (default: `input_0.bin` beside the model).
        #[arg(long)]
        input: Option<PathBuf>,
        /// Frames per run.
        #[arg(long, default_value_t = 20)]
        frames: usize,
        /// Preprocessing cycles per frame, repeatable (default: a quarter, a half and nine
        /// tenths of one inference's cycles).
        #[arg(long)]
        cpu_cycles: Vec<u64>,
    },
}

fn plan_model(model: &'static [u8], json: bool, optimise: Optimise) -> Result<(), String> {
    let config = SimConfig::default();
    let plan = runner::plan(model, config, optimise).map_err(|e| e.to_string())?;
    if json {
        println!(
            "{{\n  \"arena_bytes\": {},\n  \"activation_bytes\": {},\n  \"constant_bytes\": {},\n  \"activation_lower_bound_bytes\": {},\n  \"tiled_chains\": {},\n  \"recomputed_macs\": {},\n  \"alignment\": {}\n}}",
            plan.arena_bytes(),
            plan.activation_bytes,
            plan.constant_bytes,
            plan.lower_bound_bytes,
            plan.tiled_chains,
            plan.recomputed_macs,
            config.alignment
        );
    } else {
        println!(
            "arena: {} bytes ({} of activations, {} of constants), alignment {}",
            plan.arena_bytes(),
            plan.activation_bytes,
            plan.constant_bytes,
            config.alignment
        );
        println!(
            "whole-tensor lower bound of the activations: {} bytes",
            plan.lower_bound_bytes
        );
        if plan.tiled_chains > 0 {
            println!(
                "{} chains of layers run in stripes, recomputing {} multiply-accumulates per invoke",
                plan.tiled_chains, plan.recomputed_macs
            );
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Demo => demo().map_err(|e| e.to_string()),
        Command::Run {
            model,
            input,
            output,
            arena,
            stats,
            repeat,
            optimise,
            tune_table,
            autotune,
        } => run_model(
            &model,
            &input,
            &output,
            arena,
            stats.as_deref(),
            repeat,
            optimise.into(),
            tune_table.as_deref(),
            autotune,
        ),
        Command::Tune {
            model,
            export,
            input,
            arena,
        } => tune_model(&model, &export, &input, arena),
        Command::Inspect { model } => read_model(&model)
            .and_then(|m| runner::inspect(m, SimConfig::default()).map_err(|e| e.to_string()))
            .map(|text| print!("{text}")),
        Command::Plan {
            model,
            json,
            optimise,
        } => read_model(&model).and_then(|m| plan_model(m, json, optimise.into())),
        Command::Bench {
            which: Bench::Memory { inferences },
        } => bench_memory(inferences).map_err(|e| e.to_string()),
        Command::Bench {
            which: Bench::Models { dir, repeat },
        } => bench_models(&dir, repeat),
        Command::Bench {
            which: Bench::Tune { dir },
        } => bench_tune(&dir),
        Command::Bench {
            which: Bench::Dispatch { batches, per_batch },
        } => bench_dispatch(batches, per_batch).map_err(|e| e.to_string()),
        Command::Bench {
            which:
                Bench::Chain {
                    jobs,
                    host_cycles,
                    repeat,
                },
        } => bench_chain(jobs, host_cycles, repeat),
        Command::Bench {
            which:
                Bench::Pipeline {
                    model,
                    input,
                    frames,
                    cpu_cycles,
                },
        } => bench_pipeline(&model, input.as_deref(), frames, &cpu_cycles),
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
    bench_guided(inferences)
}

/// The guided rows: the transformer over `GuidedMemory`, peaks after the first run of each
/// shape.
fn bench_guided(inferences: usize) -> Result<(), WorkloadError> {
    let cycles = (inferences / SEQ_LENGTHS.len()).saturating_sub(1).max(1);
    println!();
    println!(
        "Measured then guided (GuidedMemory over the chunk/slice manager, slice ratio 0.8, dealloc period 128), transformer, varying seq: one cycle of {} lengths measured, peaks reset, then {cycles} cycles",
        SEQ_LENGTHS.len()
    );
    println!();
    println!("| workload | phase | peak reserved (B) | worst-moment live (B) | reserved / live |");
    println!("|---|---|---|---|---|");
    let g = workloads::run_guided(MemoryConfig::default(), cycles)?;
    for (phase, s) in [
        ("first run of each shape (measured)", g.first_cycle),
        ("after the first run of each shape (guided)", g.guided),
    ] {
        println!(
            "| transformer, varying seq | {phase} | {} | {} | {:.2} |",
            s.reserved_peak,
            s.in_use_peak,
            s.reserved_peak as f64 / s.in_use_peak as f64
        );
    }
    let p = g.passes;
    println!();
    println!(
        "passes: {} measured, {} guided ({} diverged, {} unguided); reservations: {} placed, {} fallback, {} escaping; {} plans stored, {} evicted; {} allocations / {} deallocations",
        p.measured_passes,
        p.guided_passes,
        p.diverged_passes,
        p.unguided_passes,
        p.placed_reservations,
        p.fallback_reservations,
        p.escaping_reservations,
        p.plans_stored,
        p.plan_evictions,
        g.guided.allocations,
        g.guided.deallocations
    );
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
    // The same ADD from a job plan of 32 (a ping-pong chain), run per_batch / 32 times.
    let pair = [client.empty(16)?, client.empty(16)?];
    let mut plan: npu_compute::client::Plan<'_, _, 32, 8> = client.plan();
    plan.push(&op, &[&a, &b], &pair[0])?;
    for k in 1..32 {
        plan.push(&op, &[&pair[(k + 1) % 2], &b], &pair[k % 2])?;
    }
    let ops = [&op; 32];
    let runs = (per_batch / 32).max(1);
    let mut planned = Vec::with_capacity(batches);
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
    println!("dispatch: AddI8 x16 through ComputeClient -> RefCellChannel -> NpuServer -> SimNpu");
    println!("  {batches} batches of {per_batch} executes: median {median:.0} ns/execute (p10 {lo:.0}, p90 {hi:.0})");
    println!("  {batches} batches of {runs} runs of a 32-job plan: median {p_median:.0} ns/job (p10 {p_lo:.0}, p90 {p_hi:.0}); planned / execute {:.2}", p_median / median);
    println!("  includes the simulator retiring jobs (kernel run) when its 32-entry queue is full");
    Ok(())
}

/// Deterministic figures of one `bench chain` run (identical run to run).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ChainFigures {
    /// Sum of `SimConfig::job_cost` over the compute jobs.
    cost_sum: u64,
    /// First compute job's start to the last one's end.
    span: u64,
    /// Sum over compute jobs k > 0 of start(k) - end(k - 1).
    gaps: u64,
    /// CPU waits until the last job was submitted, and in all (after the read).
    submit_waits: u32,
    waits: u32,
    /// Virtual cycle when the read returned (upload + chain + download).
    end: u64,
}

/// One run of `bench chain`: `jobs` MULs of 16 int8 elements, each reading the previous one's
/// output (`x <- x * x - 1.904`, ping-pong between two tensors), checked against the kernels.
/// Returns the figures and the host nanoseconds per job.
fn chain_run(
    config: SimConfig,
    jobs: usize,
    host_cycles: u64,
) -> Result<(ChainFigures, f64), String> {
    const LEN: u32 = 16;
    let err = |e: npu_compute::Error| e.to_string();
    let (mut device, mut host) = (
        workloads::aligned_memory(64 << 10),
        workloads::aligned_memory(64 << 10),
    );
    let mut trace = vec![TraceEntry::EMPTY; jobs + 8];
    let npu = SimNpu::new(
        bytemuck::cast_slice_mut(&mut device),
        bytemuck::cast_slice_mut(&mut host),
        config,
    )
    .map_err(|e| format!("simulator: {e:?}"))?
    .with_trace(&mut trace);
    let channel: workloads::SimChannel<'_> =
        RefCellChannel::new(NpuServer::new(npu, MemoryConfig::default()).map_err(err)?);
    let client = ComputeClient::new(&channel);
    let params = workloads::chain_params().map_err(|e| format!("{e:?}"))?;
    let op = Op::MulI8 { len: LEN, params };
    let x0 = workloads::pseudo_random_i8(1, LEN as usize);
    let want = workloads::chain_reference(&x0, jobs).map_err(|e| format!("{e:?}"))?;

    let mut a = client.create(bytemuck::cast_slice(&x0)).map_err(err)?;
    let mut b = client.empty(LEN).map_err(err)?;
    let start = Instant::now();
    for _ in 0..jobs {
        client.execute(op, &[&a, &a], &b).map_err(err)?;
        channel
            .with(|s| s.npu_mut().advance(host_cycles))
            .map_err(err)?;
        std::mem::swap(&mut a, &mut b);
    }
    let submit_waits = client.stats().map_err(err)?.waits;
    let mut got = [0u8; LEN as usize];
    client.read(&a, &mut got).map_err(err)?;
    let host_ns = start.elapsed().as_nanos() as f64 / jobs.max(1) as f64;
    if got[..] != *bytemuck::cast_slice::<i8, u8>(&want) {
        return Err("the chain's result differs from the kernels'".into());
    }

    let (mut entries, overwritten, end) = channel
        .with(|s| {
            let npu = s.npu();
            (
                npu.trace().collect::<Vec<_>>(),
                npu.trace_overwritten(),
                npu.now(),
            )
        })
        .map_err(err)?;
    if overwritten > 0 {
        return Err("trace storage too small".into());
    }
    entries.sort_by_key(|e| e.fence);
    let computes: Vec<_> = entries
        .iter()
        .filter(|e| matches!(e.kind, TraceKind::Compute { .. }))
        .collect();
    let region = Region::device(0, LEN);
    let kind = JobKind::Compute {
        op: &op,
        variant: Variant::Auto,
        scratch: None,
        inputs: heapless::Vec::from_slice(&[region, region]).map_err(|_| "two inputs")?,
        output: region,
    };
    let figures = ChainFigures {
        cost_sum: config.job_cost(&kind) * computes.len() as u64,
        span: match (computes.first(), computes.last()) {
            (Some(first), Some(last)) => last.end.saturating_sub(first.start),
            _ => 0,
        },
        gaps: computes
            .windows(2)
            .map(|w| w[1].start.saturating_sub(w[0].end))
            .sum(),
        submit_waits,
        waits: client.stats().map_err(err)?.waits,
        end,
    };
    Ok((figures, host_ns))
}

/// `npu-sim bench chain`: the chain on one execution unit and alternating between two.
fn bench_chain(jobs: usize, host_cycles: u64, repeat: usize) -> Result<(), String> {
    println!(
        "chain: {jobs} dependent MulI8 x16 jobs (each reads the previous output; ping-pong) through ComputeClient -> RefCellChannel -> NpuServer -> SimNpu (32-job table), no read until the last; CPU {host_cycles} cycles per execute"
    );
    println!();
    println!("| units | jobs | sum of job costs (cycles) | first start → last end (cycles) | idle gap (cycles) | CPU waits to submit / in all | upload + chain + download (cycles) | host ns/job (median of {repeat}) |");
    println!("|---|---|---|---|---|---|---|---|");
    for units in [1u8, 2] {
        let config = SimConfig {
            execution_units: units,
            ..SimConfig::default()
        };
        let mut first: Option<ChainFigures> = None;
        let mut samples = Vec::with_capacity(repeat);
        for _ in 0..repeat.max(1) {
            let (figures, host_ns) = chain_run(config, jobs, host_cycles)?;
            if first.is_some_and(|f| f != figures) {
                return Err(format!("not deterministic: {first:?} then {figures:?}"));
            }
            first = Some(figures);
            samples.push(host_ns);
        }
        samples.sort_by(f64::total_cmp);
        let median = samples[samples.len() / 2];
        let Some(f) = first else { continue };
        println!(
            "| {units} | {jobs} | {} | {} | {} | {} / {} | {} | {median:.0} |",
            f.cost_sum, f.span, f.gaps, f.submit_waits, f.waits, f.end
        );
    }
    Ok(())
}

fn read_inputs(paths: &[PathBuf]) -> Result<Vec<Vec<u8>>, String> {
    paths
        .iter()
        .map(|p| std::fs::read(p).map_err(|e| format!("{}: {e}", p.display())))
        .collect()
}

/// `npu-sim tune MODEL --export TABLE`.
fn tune_model(model: &Path, export: &Path, inputs: &[PathBuf], arena: usize) -> Result<(), String> {
    let model_bytes = read_model(model)?;
    let mut inputs = read_inputs(inputs)?;
    if inputs.is_empty() {
        let sizes = runner::input_sizes(model_bytes).map_err(|e| e.to_string())?;
        inputs = sizes.into_iter().map(|n| vec![0; n as usize]).collect();
    }
    let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
    let opts = RunOptions {
        arena_bytes: arena,
        ..RunOptions::default()
    };
    let (table, stats) = runner::tune(model_bytes, &refs, &opts).map_err(|e| e.to_string())?;
    std::fs::write(export, &table).map_err(|e| format!("{}: {e}", export.display()))?;
    println!(
        "{}: {} layer shapes tuned, {} measurements, {} tuning cycles; table {} B written to {}",
        model.display(),
        stats.tuning_runs,
        stats.measurements,
        stats.tuning_cycles,
        table.len(),
        export.display()
    );
    Ok(())
}

fn read_model(path: &Path) -> Result<&'static [u8], String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(runner::leak_aligned(&bytes))
}

#[allow(clippy::too_many_arguments)] // one per command-line option
fn run_model(
    model: &Path,
    inputs: &[PathBuf],
    outputs: &[PathBuf],
    arena: usize,
    stats: Option<&Path>,
    repeat: usize,
    optimise: Optimise,
    tune_table: Option<&Path>,
    autotune: bool,
) -> Result<(), String> {
    let model_bytes = read_model(model)?;
    let inputs = read_inputs(inputs)?;
    let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
    let table = match tune_table {
        Some(path) => Some(&*Vec::leak(
            std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?,
        )),
        None => None,
    };
    let opts = RunOptions {
        arena_bytes: arena,
        repeats: repeat,
        optimise,
        tune_mode: match (table, autotune) {
            (Some(_), _) => TuneMode::CacheOnly,
            (None, true) => TuneMode::Tune,
            (None, false) => TuneMode::Off,
        },
        tune_table: table,
        ..RunOptions::default()
    };
    let report = runner::run(model_bytes, &refs, &opts).map_err(|e| e.to_string())?;
    if !outputs.is_empty() && outputs.len() != report.outputs.len() {
        return Err(format!(
            "the model has {} outputs, {} --output files given",
            report.outputs.len(),
            outputs.len()
        ));
    }
    for (path, bytes) in outputs.iter().zip(&report.outputs) {
        std::fs::write(path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if let Some(path) = stats {
        std::fs::write(path, report.to_json()).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let first = report.outputs.first().map(Vec::as_slice).unwrap_or(&[]);
    let class = first
        .iter()
        .enumerate()
        .max_by_key(|&(i, &b)| (b as i8, std::cmp::Reverse(i)))
        .map_or(0, |(i, _)| i);
    println!(
        "{}: predicted class {class} (output bytes {:?})",
        model.display(),
        first.iter().map(|&b| b as i8).collect::<Vec<_>>()
    );
    if tune_table.is_some() || autotune {
        println!(
            "  tuning: {} layer shapes measured ({} measurements), {} tuned choices used, {} fallbacks",
            report.tuning.tuning_runs,
            report.tuning.measurements,
            report.tuning.hits,
            report.tuning.fallbacks
        );
    }
    println!(
        "  {} NPU cycles, {} jobs ({} transfers, {} on the CPU fallback), arena peak {} B ({} B held by constants), runtime state {} B, weights {}",
        report.npu_cycles,
        report.jobs,
        report.transfers,
        report.cpu_ops,
        report.arena_peak_bytes,
        report.arena_constant_bytes,
        report.runtime_state_bytes,
        if report.weights_in_flash { "in flash" } else { "copied to the arena" }
    );
    Ok(())
}

/// `npu-sim bench pipeline MODEL`.
fn bench_pipeline(
    model_path: &Path,
    input: Option<&Path>,
    frames: usize,
    cpu_cycles: &[u64],
) -> Result<(), String> {
    let model = read_model(model_path)?;
    let input_path = match input {
        Some(p) => p.to_path_buf(),
        None => model_path.with_file_name("input_0.bin"),
    };
    let input = std::fs::read(&input_path).map_err(|e| format!("{}: {e}", input_path.display()))?;
    let config = SimConfig::default();
    let run = |cpu, pipelined| {
        npu_sim::pipeline::run(model, &input, config, cpu, frames, pipelined)
            .map_err(|e| e.to_string())
    };
    let inference = run(0, false)?.inference_cycles;
    let costs = if cpu_cycles.is_empty() {
        vec![inference / 4, inference / 2, inference * 9 / 10]
    } else {
        cpu_cycles.to_vec()
    };
    println!(
        "{}: {frames} frames, one inference = {inference} compute cycles ({} execution units)",
        model_path.display(),
        config.execution_units
    );
    println!("| preprocessing cycles / frame | × inference | mode | steady cycles / frame | NPU busy (steady) | total cycles | steady transfers per frame (up, down) | staging copy B per frame | CPU waits |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for cpu in costs {
        for pipelined in [false, true] {
            let r = run(cpu, pipelined)?;
            let steady = (frames - 2) as f64;
            println!(
                "| {cpu} | {:.2} | {} | {} | {:.1}% | {} | {:.0}, {:.0} | {:.0} | {} |",
                cpu as f64 / inference as f64,
                if pipelined {
                    "pipelined"
                } else {
                    "one after another"
                },
                r.steady_cycles_per_frame,
                100.0 * r.steady_busy,
                r.total_cycles,
                f64::from(r.steady_transfers.0) / steady,
                f64::from(r.steady_transfers.1) / steady,
                r.steady_staging_copy_bytes as f64 / steady,
                r.waits,
            );
        }
    }
    Ok(())
}

/// `npu-sim bench models DIR`.
fn bench_models(dir: &Path, repeat: usize) -> Result<(), String> {
    let figures_path = dir.join("figures.json");
    let figures: serde_json::Value = std::fs::read(&figures_path)
        .map_err(|e| format!("{}: {e}", figures_path.display()))
        .and_then(|b| {
            serde_json::from_slice(&b).map_err(|e| format!("{}: {e}", figures_path.display()))
        })?;
    let rows = figures
        .as_array()
        .ok_or("figures.json: expected an array")?;
    let mut time_table = String::from("| model | outputs = TFLM | host µs (median) | TFLM µs | × faster than TFLM | LiteRT µs | × LiteRT | NPU cycles | Vela cycles | cycles / Vela |\n|---|---|---|---|---|---|---|---|---|---|\n");
    let mut arena_table = String::from("| model | activations B (cycles) | lower bound B | TFLM head B | activations B (memory) | Vela size SRAM B | outputs = TFLM (memory) | tiled chains | NPU cycles (memory) | recompute cycles | constants B | runtime state B | TFLM tail B |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    let mut transfer_table = String::from("| model | input B | output B | invoke: uploads, downloads | invoke: bytes moved | invoke: staging copy B | pipelined steady frame: uploads, downloads | pipelined: staging copy B |\n|---|---|---|---|---|---|---|---|\n");
    let mut failures = 0;
    for row in rows {
        let name = row["model"]
            .as_str()
            .ok_or("figures.json: model without a name")?;
        let num = |k: &str| row[k].as_f64().unwrap_or(f64::NAN);
        let model_dir = dir.join(name);
        let model = read_model(&model_dir.join("model.tflite"))?;
        let mut matched = [0, 0];
        let mut total = 0;
        let mut times = Vec::new();
        let mut first: [Option<runner::RunReport>; 2] = [None, None];
        for k in 0.. {
            let input_path = model_dir.join(format!("input_{k}.bin"));
            if !input_path.exists() {
                break;
            }
            let input = std::fs::read(&input_path).map_err(|e| e.to_string())?;
            let expected = std::fs::read(model_dir.join(format!("expected_tflm_{k}.bin")))
                .map_err(|e| e.to_string())?;
            total += 1;
            for (m, optimise) in [Optimise::Cycles, Optimise::Memory].into_iter().enumerate() {
                let opts = RunOptions {
                    repeats: if m == 0 { repeat } else { 0 },
                    optimise,
                    ..RunOptions::default()
                };
                let report =
                    runner::run(model, &[&input], &opts).map_err(|e| format!("{name}: {e}"))?;
                if report.outputs.first() == Some(&expected) {
                    matched[m] += 1;
                }
                if m == 0 {
                    times.push(report.host_us);
                }
                first[m].get_or_insert(report);
            }
        }
        let [Some(fast), Some(small)] = first else {
            return Err(format!("{name}: no inputs"));
        };
        let input = std::fs::read(model_dir.join("input_0.bin")).map_err(|e| e.to_string())?;
        let piped = npu_sim::pipeline::run(model, &input, SimConfig::default(), 0, 4, true)
            .map_err(|e| format!("{name}: {e}"))?;
        transfer_table += &format!(
            "| {name} | {} | {} | {}, {} | {} | {} | {}, {} | {} |\n",
            input.len(),
            fast.outputs.iter().map(Vec::len).sum::<usize>(),
            fast.uploads,
            fast.downloads,
            fast.transfer_bytes,
            fast.staging_copy_bytes,
            piped.steady_transfers.0 / 2,
            piped.steady_transfers.1 / 2,
            piped.steady_staging_copy_bytes / 2,
        );
        failures += 2 * total - matched[0] - matched[1];
        times.sort_by(f64::total_cmp);
        let host = times[times.len() / 2];
        time_table += &format!(
            "| {name} | {}/{total} | {host:.1} | {:.1} | {:.1} | {:.1} | {:.2} | {} | {} | {:.2} |\n",
            matched[0],
            num("host_tflm_us"),
            num("host_tflm_us") / host,
            num("host_litert_us"),
            host / num("host_litert_us"),
            fast.npu_cycles,
            num("vela_u55_128_cycles"),
            fast.npu_cycles as f64 / num("vela_u55_128_cycles"),
        );
        arena_table += &format!(
            "| {name} | {} | {} | {} | {} | {} | {}/{total} | {} | {} | {} | {} | {} | {} |\n",
            fast.plan.activation_bytes,
            num("activation_lower_bound_bytes"),
            num("tflm_head_bytes"),
            small.plan.activation_bytes,
            num("vela_u55_128_size_sram_bytes"),
            matched[1],
            small.plan.tiled_chains,
            small.npu_cycles,
            small.npu_cycles as i64 - fast.npu_cycles as i64,
            fast.plan.constant_bytes,
            fast.runtime_state_bytes,
            num("tflm_total_bytes") - num("tflm_head_bytes"),
        );
    }
    println!("{time_table}\n{arena_table}\n{transfer_table}");
    if failures > 0 {
        return Err(format!("{failures} outputs differ from TFLM's"));
    }
    Ok(())
}

/// The fixed choices `bench tune` compares the tuned one with (each applied wherever the layer
/// supports it, `Auto` elsewhere).
const FIXED: [(&str, Candidate); 8] = [
    ("auto", Candidate::Npu(Variant::Auto)),
    ("8x8", Candidate::Npu(Variant::Block { h: 8, w: 8 })),
    ("16x4", Candidate::Npu(Variant::Block { h: 16, w: 4 })),
    ("4x16", Candidate::Npu(Variant::Block { h: 4, w: 16 })),
    ("2x32", Candidate::Npu(Variant::Block { h: 2, w: 32 })),
    ("32x2", Candidate::Npu(Variant::Block { h: 32, w: 2 })),
    ("im2col", Candidate::Npu(Variant::Im2col)),
    ("cpu", Candidate::Cpu),
];

/// `npu-sim bench tune DIR`.
fn bench_tune(dir: &Path) -> Result<(), String> {
    let names = model_names(dir)?;
    let mut table = String::from("| model |");
    for (name, _) in FIXED {
        table += &format!(" {name} |");
    }
    table += " **tuned** | best fixed | tuned / best | layers on CPU, tuned | shapes tuned | measurements | tuning cycles | ÷ one inference | table B | measurements with the table | outputs = TFLM |\n|---|";
    table += &"---|".repeat(FIXED.len() + 11);
    table += "\n";
    let mut failures = Vec::new();
    for name in names {
        let model_dir = dir.join(&name);
        let model = read_model(&model_dir.join("model.tflite"))?;
        let input = std::fs::read(model_dir.join("input_0.bin")).map_err(|e| e.to_string())?;
        let expected =
            std::fs::read(model_dir.join("expected_tflm_0.bin")).map_err(|e| e.to_string())?;
        let run = |opts: RunOptions| {
            runner::run(model, &[&input], &opts).map_err(|e| format!("{name}: {e}"))
        };
        let mut exact = 0;
        let mut runs = 0;
        let mut check = |report: &runner::RunReport| {
            runs += 1;
            exact += usize::from(report.outputs.first() == Some(&expected));
        };
        table += &format!("| {name} |");
        let mut best = u64::MAX;
        for (_, c) in FIXED {
            let report = run(RunOptions {
                tune_mode: TuneMode::Fixed(c),
                repeats: 0,
                ..RunOptions::default()
            })?;
            check(&report);
            best = best.min(report.npu_cycles);
            table += &format!(" {} |", report.npu_cycles);
        }
        let (tuning, stats) = runner::tune(model, &[&input], &RunOptions::default())
            .map_err(|e| format!("{name}: {e}"))?;
        let tuning_table: &'static [u8] = Vec::leak(tuning);
        let tuned = run(RunOptions {
            tune_mode: TuneMode::CacheOnly,
            tune_table: Some(tuning_table),
            repeats: 0,
            ..RunOptions::default()
        })?;
        check(&tuned);
        let auto = run(RunOptions {
            repeats: 0,
            ..RunOptions::default()
        })?;
        table += &format!(
            " **{}** | {best} | {:.3} | {} | {} | {} | {} | {:.1} | {} | {} | {exact}/{runs} |\n",
            tuned.npu_cycles,
            tuned.npu_cycles as f64 / best as f64,
            tuned.cpu_ops,
            stats.tuning_runs,
            stats.measurements,
            stats.tuning_cycles,
            stats.tuning_cycles as f64 / auto.npu_cycles as f64,
            tuning_table.len(),
            tuned.tuning.measurements,
        );
        if tuned.npu_cycles > best {
            failures.push(format!(
                "{name}: tuned {} > best fixed {best}",
                tuned.npu_cycles
            ));
        }
        if tuned.tuning.measurements != 0 || tuned.tuning.tuning_runs != 0 {
            failures.push(format!("{name}: the run from the table measured"));
        }
        if exact != runs {
            failures.push(format!(
                "{name}: {} of {runs} outputs differ from TFLM's",
                runs - exact
            ));
        }
    }
    println!("{table}");
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("; "))
    }
}

/// The model names of a reference-model directory: from its `figures.json`, or else every
/// subdirectory holding a `model.tflite` (the repository's `examples/models`), sorted.
fn model_names(dir: &Path) -> Result<Vec<String>, String> {
    let path = dir.join("figures.json");
    if !path.exists() {
        let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut names: Vec<String> = entries
            .filter_map(Result::ok)
            .filter(|e| e.path().join("model.tflite").exists())
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        names.sort();
        return Ok(names);
    }
    let figures: serde_json::Value = std::fs::read(&path)
        .map_err(|e| format!("{}: {e}", path.display()))
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| format!("{}: {e}", path.display())))?;
    figures
        .as_array()
        .ok_or("figures.json: expected an array")?
        .iter()
        .map(|row| {
            row["model"]
                .as_str()
                .map(String::from)
                .ok_or_else(|| "figures.json: model without a name".to_string())
        })
        .collect()
}
