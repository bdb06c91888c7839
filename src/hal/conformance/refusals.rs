//! Jobs refused for where they run or what they run (a unit that does not exist, a compute job on
//! the DMA queue, an operator not declared), and a driver still usable after refusing jobs.

use super::jobs::{build_op, compute, transfer, UnitOp};
use super::suite::{fail, skip, Step, Suite};
use super::{Problem, Skip};
use crate::hal::{HalError, Job, Npu, Queue, Region};

impl<N: Npu + ?Sized> Suite<'_, N> {
    /// [`Check::BadQueue`](super::Check::BadQueue).
    pub(super) fn bad_queue(&mut self) -> Step {
        let l = self.layout;
        let units = self.caps.execution_units;
        let op = self.unit_op.map(|op| build_op(op, l.small));
        for unit in [units, u8::MAX] {
            let expected = HalError::NoSuchUnit { unit, units };
            match &op {
                Some(op) => self.refuse_exactly(
                    "submitted a compute job on an execution unit that does not exist",
                    &compute(op, l.a(), l.b(), Queue::Unit(unit), &[]),
                    expected,
                )?,
                None => {
                    let mut job = transfer(l.h0(l.small), l.a(), &[]);
                    job.queue = Queue::Unit(unit);
                    self.refuse_exactly(
                        "submitted a transfer on an execution unit that does not exist",
                        &job,
                        expected,
                    )?
                }
            }
        }
        if let Some(op) = &op {
            self.refuse_exactly(
                "submitted a compute job on the DMA queue",
                &compute(op, l.a(), l.b(), Queue::Dma, &[]),
                HalError::Unsupported {
                    op: op.kind(),
                    dtype: op.dtype(),
                },
            )?;
        }
        Ok(())
    }

    /// [`Check::UnsupportedOp`](super::Check::UnsupportedOp).
    pub(super) fn unsupported_op(&mut self) -> Step {
        let l = self.layout;
        let Some(which) = UnitOp::ALL
            .into_iter()
            .find(|&which| !self.caps.ops.runs(&build_op(which, 4)))
        else {
            return skip(Skip::EveryOpSupported);
        };
        let op = build_op(which, l.small);
        self.refuse_exactly(
            "submitted a compute job on unit 0 whose operator is not in Capabilities::ops",
            &compute(&op, l.a(), l.b(), Queue::Unit(0), &[]),
            HalError::Unsupported {
                op: op.kind(),
                dtype: op.dtype(),
            },
        )
    }

    /// [`Check::UsableAfterRefusal`](super::Check::UsableAfterRefusal).
    pub(super) fn usable_after_refusal(&mut self) -> Step {
        const REFUSE: &str = "submitted invalid jobs (a unit that does not exist; with region validation also misaligned, out-of-bounds and host -> host ones)";
        const STEP: &str =
            "after the refusals, copied host H0 -> device A -> host H1 and compared H1 with H0";
        let l = self.layout;
        let before = self.submit(STEP, &transfer(l.h0(l.small), l.a(), &[]))?;
        self.wait(STEP, before)?;
        let units = self.caps.execution_units;
        let mut invalid = transfer(l.h0(l.small), l.a(), &[]);
        invalid.queue = Queue::Unit(units);
        let mut jobs = heapless::Vec::<(Job<'static>, HalError), 4>::new();
        let _ = jobs.push((invalid, HalError::NoSuchUnit { unit: units, units }));
        if self.options.validates_regions {
            let (src, dst) = (l.h0(l.small), l.h1(l.small));
            let _ = jobs.push((
                transfer(src, dst, &[]),
                HalError::WrongSpace { region: dst },
            ));
            let device_bytes = self.caps.device_memory_bytes;
            let end = l.past_end(device_bytes, l.small).unwrap_or(l.wrapping());
            let region = Region::device(end, l.small);
            let _ = jobs.push((
                transfer(src, region, &[]),
                HalError::OutOfBounds {
                    region,
                    space_bytes: device_bytes,
                },
            ));
            if l.align > 1 {
                let region = Region::device(l.x().offset + 1, l.small);
                let _ = jobs.push((
                    transfer(src, region, &[]),
                    HalError::Misaligned {
                        region,
                        alignment: l.align,
                    },
                ));
            }
        }
        for (job, expected) in &jobs {
            // Which error is the other checks' business; here only that it was refused.
            if let Ok(fence) = self.npu.submit(job) {
                self.track(fence);
                let expected = *expected;
                return fail(REFUSE, Problem::Accepted { fence, expected });
            }
        }
        self.still_done(STEP, before)?;
        let seed = self.next_seed();
        if self.options.moves_bytes {
            let stale = self.next_seed();
            self.fill(STEP, l.h0(l.small), seed)?;
            self.fill(STEP, l.h1(l.small), stale)?;
        }
        self.submit(STEP, &transfer(l.h0(l.small), l.a(), &[]))?;
        let back = self.submit(STEP, &transfer(l.a(), l.h1(l.small), &[]))?;
        self.wait(STEP, back)?;
        if self.options.moves_bytes {
            self.compare(STEP, l.h1(l.small), seed)?;
        }
        Ok(())
    }
}
