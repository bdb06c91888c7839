//! Retiring a job: applying its effect to memory (a transfer's copy, an operator's output) once
//! its end has passed, and recording how it ended in the stats, the failed-fence record and the
//! trace. See [Effects at retire](crate#effects-at-retire).

use npu_compute::hal::{Fault, JobKind};

use crate::failures::Failure;
use crate::faults::{FaultKind, FAULT_FILL};
use crate::in_flight::InFlight;
use crate::{
    exec, memory, queue_index, SimNpu, TraceEntry, TraceKind, TraceRegions, CODE_DEPENDENCY_FAILED,
};

impl<const JOBS: usize> SimNpu<'_, JOBS> {
    /// Index of the in-flight job to retire next: smallest `(end, fence)` with `end <= now`
    /// (a job that never ends never is).
    pub(crate) fn next_ready(&self) -> Option<usize> {
        self.in_flight
            .iter()
            .enumerate()
            .filter(|(_, j)| j.ends() && j.end <= self.now)
            .min_by_key(|(_, j)| (j.end, j.fence))
            .map(|(i, _)| i)
    }

    /// Applies a job's effect and records its outcome.
    pub(crate) fn retire(&mut self, job: InFlight) {
        let job_kind = job.work.kind();
        let outcome = match (job.dep_failed, job.fault) {
            (Some(Failure::Fault(_)), _) => Err(Failure::Fault(Fault::Cancelled)),
            (Some(Failure::Code(_)), _) => Err(Failure::Code(CODE_DEPENDENCY_FAILED)),
            (None, Some(kind @ (FaultKind::Dma | FaultKind::Bus))) => {
                // What a faulted job wrote is undefined: a recognisable pattern shows it.
                let written = match &job_kind {
                    JobKind::Transfer { dst, .. } => *dst,
                    JobKind::Compute { output, .. } => *output,
                };
                memory::fill(&mut self.memories(), &written, FAULT_FILL);
                Err(Failure::Fault(if kind == FaultKind::Dma {
                    Fault::Dma
                } else {
                    Fault::Bus
                }))
            }
            (None, _) => match &job_kind {
                JobKind::Transfer { src, dst } => {
                    let flash = self.flash;
                    memory::transfer(&mut self.memories(), &flash, src, dst).map_err(Failure::Code)
                }
                JobKind::Compute {
                    op,
                    variant,
                    inputs,
                    output,
                    scratch,
                } => match self.inject.take() {
                    Some(code) => Err(Failure::Code(code)),
                    None => exec::run_compute(
                        op,
                        *variant,
                        self.device,
                        self.slow,
                        &self.flash,
                        inputs,
                        output,
                        scratch.as_ref(),
                    )
                    .map_err(Failure::Code),
                },
            },
        };

        if let Some(busy) = queue_index(job.queue).and_then(|i| self.stats.busy_cycles.get_mut(i)) {
            *busy = busy.saturating_add(job.end - job.start);
        }
        match outcome {
            Ok(()) => {
                self.stats.jobs_completed += 1;
                match &job_kind {
                    JobKind::Transfer { src, .. } => {
                        self.stats.transfers += 1;
                        self.stats.transfer_bytes += u64::from(src.len);
                    }
                    JobKind::Compute { op, .. } => {
                        self.stats.macs = self.stats.macs.saturating_add(op.macs());
                    }
                }
            }
            Err(failure) => {
                self.stats.jobs_failed += 1;
                if self.failed.record(job.fence, failure) {
                    self.stats.failures_forgotten += 1;
                }
                // A fault of the job's own halts its queue, as the NPU stops its command
                // stream: the jobs queued behind it do not run, nor any submitted to the
                // queue until the reset. (A failure code, or a cancellation, halts nothing.)
                let halts = matches!(failure, Failure::Fault(Fault::Dma | Fault::Bus));
                if halts {
                    if let Some(halted) =
                        queue_index(job.queue).and_then(|q| self.halted.get_mut(q))
                    {
                        *halted = true;
                    }
                }
                for other in self.in_flight.iter_mut() {
                    if other.deps.contains(&job.fence) {
                        other.dep_failed = Some(Failure::worst(other.dep_failed, failure));
                    } else if halts && other.queue == job.queue && other.fence > job.fence {
                        other.dep_failed = Some(Failure::worst(
                            other.dep_failed,
                            Failure::Fault(Fault::Cancelled),
                        ));
                    }
                }
            }
        }

        self.trace.record(
            TraceEntry {
                fence: job.fence,
                queue: job.queue,
                kind: trace_kind(&job_kind),
                start: job.start,
                end: job.end,
                failure: outcome.err().map(Failure::code),
            },
            || trace_regions(&job_kind),
        );
    }
}

/// What a job is, for its trace entry.
pub(crate) fn trace_kind(job: &JobKind<'_>) -> TraceKind {
    match job {
        JobKind::Transfer { src, dst } => TraceKind::Transfer {
            from: src.space,
            to: dst.space,
            bytes: src.len,
        },
        JobKind::Compute { op, .. } => TraceKind::Compute {
            op: op.kind(),
            dtype: op.dtype(),
        },
    }
}

/// What a job reads and writes, for its trace entry.
pub(crate) fn trace_regions(job: &JobKind<'_>) -> TraceRegions {
    match job {
        JobKind::Transfer { src, dst } => TraceRegions {
            reads: heapless::Vec::from_iter([*src]),
            write: Some(*dst),
            scratch: None,
        },
        JobKind::Compute {
            inputs,
            output,
            scratch,
            ..
        } => TraceRegions {
            reads: inputs.clone(),
            write: Some(*output),
            scratch: *scratch,
        },
    }
}
