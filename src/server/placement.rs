//! Where a job runs when its caller decides: the static schedule's placements
//! ([`Placement`]), and the estimates a schedule is planned from.
//!
//! `execute` picks an execution unit round robin and, where the server tunes, the candidate its
//! tuning chose: the decision is made job by job, at dispatch. A graph with a static schedule
//! has decided ahead, for every task, the unit it runs on (an NPU execution unit, or the CPU
//! beside them): [`ComputeServer::execute_on`](super::ComputeServer::execute_on) and
//! [`ComputeServer::plan_step_on`](super::ComputeServer::plan_step_on) take that decision as
//! given. Dependencies are worked out from memory as for every other job, so a placement
//! changes where and when a job runs, never what it computes.
//!
//! [`ComputeServer::estimate`](super::ComputeServer::estimate) asks the HAL what a job would
//! cost on a placement before running anything ([`Npu::estimate`],
//! [`Npu::estimate_host_compute`]); the CPU's figure includes the transfers the fallback makes
//! (its inputs down to host staging, its output back up).

use super::dispatch::Operand;
use super::tensors::Binding;
use super::JobPlanState;
use super::NpuServer;
use crate::error::{Error, JobPlanError};
use crate::hal::{
    Estimate, HalError, Job, JobKind, Npu, Queue, Region, Variant, MAX_JOB_DEPS, MAX_JOB_INPUTS,
};
use crate::handle::HandleId;
use crate::memory::MemoryManagement;
use crate::ops::Op;
use crate::tune::Candidate;

/// Where a job runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Placement {
    /// As `execute` decides: the next execution unit round robin (or the CPU fallback where
    /// the NPU lacks the operator), the server's tuning followed.
    #[default]
    Auto,
    /// NPU execution unit `n` (`n < Capabilities::execution_units`). An operator the NPU
    /// does not run goes to the CPU fallback, as under `Auto`.
    Unit(u8),
    /// The CPU fallback kernels, whatever the NPU runs.
    Cpu,
}

impl core::fmt::Display for Placement {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Placement::Auto => f.write_str("any unit"),
            Placement::Unit(n) => write!(f, "execution unit {n}"),
            Placement::Cpu => f.write_str("the CPU"),
        }
    }
}

impl<
        H: Npu,
        M: MemoryManagement,
        const HANDLES: usize,
        const STAGING: usize,
        const TUNE: usize,
    > NpuServer<H, M, HANDLES, STAGING, TUNE>
{
    /// Checks that `placement` names a unit this NPU has.
    pub(super) fn check_placement(&self, placement: Placement) -> Result<(), Error> {
        match placement {
            Placement::Unit(unit) if unit >= self.caps.execution_units.max(1) => {
                Err(HalError::NoSuchUnit {
                    unit,
                    units: self.caps.execution_units,
                }
                .into())
            }
            _ => Ok(()),
        }
    }

    /// `execute` with the unit decided by the caller.
    pub(super) fn execute_on(
        &mut self,
        placement: Placement,
        op: &Op,
        inputs: &[HandleId],
        output: HandleId,
    ) -> Result<(), Error> {
        self.check_placement(placement)?;
        match placement {
            Placement::Auto => self.execute(op, inputs, output),
            Placement::Unit(unit) => {
                // The round robin starts from the unit asked for: this job takes it.
                self.next_unit = unit;
                self.execute(op, inputs, output)
            }
            Placement::Cpu => self.execute_with(op, Candidate::Cpu, inputs, output),
        }
    }

    /// `plan_step` with the unit decided by the caller.
    pub(super) fn plan_step_on<const S: usize, const T: usize>(
        &mut self,
        plan: &mut JobPlanState<S, T>,
        placement: Placement,
        op: &Op,
        inputs: &[HandleId],
        output: HandleId,
    ) -> Result<(), Error> {
        self.check_placement(placement)?;
        match placement {
            Placement::Unit(unit) => plan.set_next_unit(unit),
            // A plan runs on the CPU what `execute` would (an operator the NPU lacks, or the
            // tuning's choice): it cannot be made to run another there.
            Placement::Cpu if self.caps.ops.runs(op) => {
                return Err(JobPlanError::OnCpu { op: op.kind() }.into())
            }
            Placement::Auto | Placement::Cpu => {}
        }
        self.plan_step(plan, op, inputs, output)
    }

    /// What running `op` on `inputs` into `output` at `placement` would cost, as the HAL
    /// predicts it with nothing else running; `None` where the HAL cannot tell. Nothing runs.
    pub(super) fn estimate(
        &mut self,
        placement: Placement,
        op: &Op,
        inputs: &[HandleId],
        output: HandleId,
    ) -> Result<Option<Estimate>, Error> {
        self.check_placement(placement)?;
        let mut operands: heapless::Vec<Operand, MAX_JOB_INPUTS> = heapless::Vec::new();
        let (out, _) = self.check_operands(op, inputs, output, &mut operands)?;
        let region = |s: &Self, o: &Operand| match o.binding {
            Binding::Host => Ok(Region::device(0, o.bytes)),
            b => s.region_of(b),
        };
        let unit = match placement {
            Placement::Auto => 0,
            Placement::Unit(unit) => unit,
            Placement::Cpu => {
                let Some(compute) = self.npu.estimate_host_compute(op) else {
                    return Ok(None);
                };
                // The fallback's transfers: each input down to staging, the output back up.
                let mut cycles = compute;
                for o in operands.iter().chain(core::iter::once(&out)) {
                    let src = region(self, o)?;
                    let job = Job {
                        kind: JobKind::Transfer {
                            src,
                            dst: Region::host(0, o.bytes),
                        },
                        queue: Queue::Dma,
                        deps: heapless::Vec::new(),
                    };
                    match self.npu.estimate(&job) {
                        Some(e) => cycles = cycles.saturating_add(e.cycles),
                        None => return Ok(None),
                    }
                }
                return Ok(Some(Estimate {
                    cycles,
                    sram_cycles: 0,
                    flash_cycles: 0,
                    prefetch_cycles: 0,
                }));
            }
        };
        let mut regions = heapless::Vec::new();
        for o in &operands {
            // As many as `inputs`, at most MAX_JOB_INPUTS (checked with the operands).
            let _ = regions.push(region(self, o)?);
        }
        let deps: heapless::Vec<_, MAX_JOB_DEPS> = heapless::Vec::new();
        let job = Job {
            kind: JobKind::Compute {
                op,
                variant: Variant::Auto,
                inputs: regions,
                output: region(self, &out)?,
                scratch: None,
            },
            queue: Queue::Unit(unit),
            deps,
        };
        Ok(self.npu.estimate(&job))
    }
}
