//! `npu-sim bench chain [--jobs N] [--host-cycles N] [--repeat N]`: a chain of dependent
//! tiny jobs submitted with no read in between.
//!
//! Each job is a `MulI8` of 16 elements reading the previous job's output (ping-pong
//! between two tensors); the CPU spends `--host-cycles` virtual cycles per `execute`; one
//! read at the end, checked against the kernels. Run on one execution unit, then
//! alternating between two, `--repeat` times each.
//!
//! Output (stdout): a Markdown table per unit count: the sum of the jobs' own costs, the
//! span from the first job's start to the last one's end, the idle gaps between jobs (from
//! the simulator's trace), the CPU's waits until the last submit and in all, the virtual
//! cycle at which the read returned, and the host nanoseconds per job (median of the
//! runs). All but the host time are virtual-clock figures, identical run to run.
//!
//! Failure modes: the simulator or stack could not be set up; the trace of `--jobs` jobs
//! does not fit in memory; the virtual clock reached its end (so many `--host-cycles` that
//! the figures would saturate); the chain's result differs
//! from the kernels' (a simulator bug); the trace overflowed (the figures would be
//! incomplete); or two runs gave different figures (the simulator is meant to be
//! deterministic, so the table would be meaningless).

use npu_compute::channel::{ComputeChannel, RefCellChannel};
use npu_compute::client::ComputeClient;
use npu_compute::hal::{JobKind, Npu, Region, Variant};
use npu_compute::memory::MemoryConfig;
use npu_compute::ops::{MulI8, Op};
use npu_compute::server::NpuServer;
use npu_sim::workloads;
use npu_sim::{SimConfig, SimNpu, TraceEntry, TraceKind};
use std::time::Instant;

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
    // Every job traced: refused rather than a panic when `--jobs` asks for more than the
    // host can hold.
    let entries = jobs.saturating_add(8);
    let mut trace = Vec::new();
    trace
        .try_reserve_exact(entries)
        .map_err(|_| format!("--jobs {jobs}: the trace of so many jobs does not fit in memory"))?;
    trace.resize(entries, TraceEntry::EMPTY);
    let npu = SimNpu::new(
        bytemuck::cast_slice_mut(&mut device),
        bytemuck::cast_slice_mut(&mut host),
        config,
    )
    .map_err(|e| format!("simulator: {e}"))?
    .with_trace(&mut trace);
    let channel: workloads::SimChannel<'_> =
        RefCellChannel::new(NpuServer::new(npu, MemoryConfig::default()).map_err(err)?);
    let client = ComputeClient::new(&channel);
    let params = workloads::chain_params().map_err(|e| e.to_string())?;
    let op = Op::MulI8(MulI8 { len: LEN, params });
    let x0 = workloads::pseudo_random_i8(1, LEN as usize);
    let want = workloads::chain_reference(&x0, jobs).map_err(|e| e.to_string())?;

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
    if end == u64::MAX {
        // The clock saturates rather than wrap: the spans and gaps would be wrong.
        return Err(format!(
            "the virtual clock reached its end (u64::MAX cycles): give fewer --host-cycles \
             ({host_cycles}) or --jobs ({jobs})"
        ));
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
        cost_sum: config.job_cost(&kind).saturating_mul(computes.len() as u64),
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
pub fn run(jobs: usize, host_cycles: u64, repeat: usize) -> Result<(), String> {
    outln!(
        "chain: {jobs} dependent MulI8 x16 jobs (each reads the previous output; ping-pong) through ComputeClient -> RefCellChannel -> NpuServer -> SimNpu (32-job table), no read until the last; CPU {host_cycles} cycles per execute"
    );
    outln!();
    outln!("| units | jobs | sum of job costs (cycles) | first start → last end (cycles) | idle gap (cycles) | CPU waits to submit / in all | upload + chain + download (cycles) | host ns/job (median of {repeat}) |");
    outln!("|---|---|---|---|---|---|---|---|");
    for units in [1u8, 2] {
        let config = SimConfig {
            execution_units: units,
            ..SimConfig::default()
        };
        let mut first: Option<ChainFigures> = None;
        let mut samples = Vec::new();
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
        outln!(
            "| {units} | {jobs} | {} | {} | {} | {} / {} | {} | {median:.0} |",
            f.cost_sum,
            f.span,
            f.gaps,
            f.submit_waits,
            f.waits,
            f.end
        );
    }
    Ok(())
}
