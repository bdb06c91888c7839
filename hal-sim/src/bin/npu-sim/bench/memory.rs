//! `npu-sim bench memory [--inferences N]`: peak arena bytes of Burn-Compute's chunk/slice
//! memory strategy, then of the measured-then-guided manager.
//!
//! Runs the static conv net and the transformer (sequence length varying per inference)
//! for `--inferences` inferences under every deallocation period (never, 1000, 128, 1) and
//! slice ratio (0.9, 0.8); then the guided rows: the transformer over `GuidedMemory`, one
//! cycle of every sequence length measured, peaks reset, then guided cycles.
//!
//! Output (stdout): two Markdown tables, peak reserved bytes against the worst moment's
//! live bytes and their ratio, the first per strategy, the second per phase (measured,
//! guided), and a line of the guided manager's pass, reservation and plan counters. Every
//! figure is deterministic.
//!
//! Failure modes: none expected, since workloads and memories are built in; a
//! [`WorkloadError`] means the simulator or the compute stack failed (e.g. a strategy
//! running out of the fixed arena), a regression of the memory manager rather than a user
//! error.

use npu_compute::memory::{DeallocStrategy, MemoryConfig, SliceStrategy};
use npu_sim::workloads::{self, Workload, WorkloadError, SEQ_LENGTHS};

/// `npu-sim bench memory`.
pub fn run(inferences: usize) -> Result<(), WorkloadError> {
    outln!("Peak arena bytes, Burn-Compute chunk/slice strategy, {inferences} inferences per run");
    outln!();
    outln!("| workload | dealloc period | slice ratio | peak reserved (B) | worst-moment live (B) | reserved / live |");
    outln!("|---|---|---|---|---|---|");
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
                outln!(
                    "| {name} | {label} | {ratio} | {} | {} | {:.2} |",
                    s.reserved_peak,
                    s.in_use_peak,
                    s.reserved_peak as f64 / s.in_use_peak as f64
                );
            }
        }
    }
    guided(inferences)
}

/// The guided rows: the transformer over `GuidedMemory`, peaks after the first run of each
/// shape.
fn guided(inferences: usize) -> Result<(), WorkloadError> {
    let cycles = (inferences / SEQ_LENGTHS.len()).saturating_sub(1).max(1);
    outln!();
    outln!(
        "Measured then guided (GuidedMemory over the chunk/slice manager, slice ratio 0.8, dealloc period 128), transformer, varying seq: one cycle of {} lengths measured, peaks reset, then {cycles} cycles",
        SEQ_LENGTHS.len()
    );
    outln!();
    outln!("| workload | phase | peak reserved (B) | worst-moment live (B) | reserved / live |");
    outln!("|---|---|---|---|---|");
    let g = workloads::run_guided(MemoryConfig::default(), cycles)?;
    for (phase, s) in [
        ("first run of each shape (measured)", g.first_cycle),
        ("after the first run of each shape (guided)", g.guided),
    ] {
        outln!(
            "| transformer, varying seq | {phase} | {} | {} | {:.2} |",
            s.reserved_peak,
            s.in_use_peak,
            s.reserved_peak as f64 / s.in_use_peak as f64
        );
    }
    let p = g.passes;
    outln!();
    outln!(
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
