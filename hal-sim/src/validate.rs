//! What `submit` refuses: a job on a unit that does not exist, an unknown dependency, and
//! transfers, compute jobs and variants whose regions break the HAL's rules, each with the
//! contract's [`HalError`].

use npu_compute::hal::{HalError, Job, JobKind, Queue, Region, Space, Variant, MAX_JOB_INPUTS};
use npu_compute::ops::Op;

use crate::{cost, layer, memory, SimNpu};

impl<const JOBS: usize> SimNpu<'_, JOBS> {
    /// Length in bytes of a memory (at most `u32::MAX`, checked at construction).
    fn space_len(&self, space: Space) -> usize {
        match space {
            Space::Device => self.device.len(),
            Space::Host => self.host.len(),
            Space::Slow => self.slow.len(),
            Space::Flash(segment) => self
                .flash
                .get(usize::from(segment))
                .copied()
                .flatten()
                .map_or(0, <[u8]>::len),
        }
    }

    fn check_region(&self, region: &Region) -> Result<(), HalError> {
        let mut alignment = self.config.alignment;
        if let Space::Flash(segment) = region.space {
            if !self.config.reads_flash {
                return Err(HalError::FlashUnreadable);
            }
            if self
                .flash
                .get(usize::from(segment))
                .copied()
                .flatten()
                .is_none()
            {
                return Err(HalError::FlashNotMapped { segment });
            }
            alignment = self.config.flash_alignment;
        }
        memory::check_region(region, self.space_len(region.space), alignment)
    }

    /// Full validation of a job (everything but capacity), in this order: queue, dependencies,
    /// then the kind's checks.
    pub(crate) fn validate(&self, job: &Job<'_>) -> Result<(), HalError> {
        if let Queue::Unit(unit) = job.queue {
            if unit >= self.config.execution_units {
                return Err(HalError::NoSuchUnit {
                    unit,
                    units: self.config.execution_units,
                });
            }
        }
        if let Some(dep) = job.deps.iter().find(|d| d.0 >= self.next_fence) {
            return Err(HalError::UnknownFence(*dep));
        }
        match &job.kind {
            JobKind::Transfer { src, dst } => self.validate_transfer(src, dst),
            JobKind::Compute {
                op,
                variant,
                inputs,
                output,
                scratch,
            } => {
                self.validate_compute(job.queue, op, inputs, output)?;
                self.validate_variant(op, *variant, inputs, output, scratch.as_ref())
            }
        }
    }

    /// Whether this simulator runs `op` over `inputs` as `variant`: [`Variant::Auto`] always;
    /// a block or im2col only with the layer cost model configured (it alone knows what a
    /// forced block or a gather costs), on an op kind the variant
    /// [applies to](Variant::applies_to), whose scratch size fits `u32`, and where the cost
    /// model says it fits on every unit ([`cost::supports_variant`] with the unit's
    /// configuration: a forced block whose input and accumulators fit SHRAM, an ungrouped
    /// convolution with something to gather).
    pub(crate) fn runs_variant(&self, op: &Op, variant: Variant, inputs: &[Region]) -> bool {
        if variant == Variant::Auto {
            return true;
        }
        if self.config.layers.is_none() {
            return false;
        }
        // On every unit, so that a variant chosen once runs wherever the job is queued.
        variant.applies_to(op)
            && self.config.ops.runs(op)
            && variant.scratch_bytes(op).is_some()
            && layer::describe(op, variant, inputs).is_some_and(|d| {
                let units = self.config.active_units();
                (0u8..).zip(units).all(|(n, unit)| {
                    // Units of one size answer alike: ask once per size.
                    let seen = units
                        .iter()
                        .take(usize::from(n))
                        .any(|u| u.macs_per_cycle == unit.macs_per_cycle);
                    seen || self
                        .config
                        .unit_layers(n)
                        .is_some_and(|cfg| cost::supports_variant(&d, &cfg))
                })
            })
    }

    /// Variant checks of a compute job whose operands passed
    /// [`validate_compute`](Self::validate_compute), in order: the variant runs here
    /// ([`runs_variant`](Self::runs_variant)), and a scratch is given exactly when the variant
    /// needs one (`VariantUnsupported` otherwise, as the job cannot run as asked). Then the
    /// output of a variant with a scratch is device memory (`WrongSpace`), and the scratch
    /// (operand `MAX_JOB_INPUTS + 1`) is device memory (`WrongSpace`), in bounds
    /// (`OutOfBounds`) and aligned (`Misaligned`), at least
    /// [`Variant::scratch_bytes`] long (`BadLength`), and overlaps neither an input nor the
    /// output (`Overlap`): the variant overwrites all of it.
    fn validate_variant(
        &self,
        op: &Op,
        variant: Variant,
        inputs: &[Region],
        output: &Region,
        scratch: Option<&Region>,
    ) -> Result<(), HalError> {
        let refused = HalError::VariantUnsupported {
            op: op.kind(),
            variant,
        };
        if !self.runs_variant(op, variant, inputs) {
            return Err(refused);
        }
        let needed = variant.scratch_bytes(op).ok_or(refused)?;
        let scratch = match (scratch, needed) {
            (None, 0) => return Ok(()),
            (Some(scratch), n) if n > 0 => scratch,
            _ => return Err(refused),
        };
        let operand = MAX_JOB_INPUTS as u8 + 1;
        // The gather runs in the arena, around its scratch.
        if output.space != Space::Device {
            return Err(HalError::WrongSpace { region: *output });
        }
        if scratch.space != Space::Device {
            return Err(HalError::WrongSpace { region: *scratch });
        }
        self.check_region(scratch)?;
        if scratch.len < needed {
            return Err(HalError::BadLength {
                operand,
                expected: needed,
                actual: scratch.len,
            });
        }
        if scratch.overlaps(output) || inputs.iter().any(|r| r.overlaps(scratch)) {
            return Err(HalError::Overlap { operand });
        }
        Ok(())
    }

    /// Transfer checks (between any two of host, device and slow memory, or from flash to
    /// one of them): not host→host and not into flash (`WrongSpace` on `dst`), both
    /// regions in bounds and aligned, equal lengths (`WrongSpace` on `dst`), no overlap
    /// (`Overlap { operand: 0 }`).
    fn validate_transfer(&self, src: &Region, dst: &Region) -> Result<(), HalError> {
        if (src.space == Space::Host && dst.space == Space::Host)
            || matches!(dst.space, Space::Flash(_))
        {
            return Err(HalError::WrongSpace { region: *dst });
        }
        self.check_region(src)?;
        self.check_region(dst)?;
        if src.len != dst.len {
            return Err(HalError::WrongSpace { region: *dst });
        }
        if src.overlaps(dst) {
            return Err(HalError::Overlap { operand: 0 });
        }
        Ok(())
    }

    /// Compute checks, in order: runs on an execution unit and the op is in `config.ops`
    /// (`Unsupported`); sizes fit `u32` (`BadLength` on the output with `expected: u32::MAX`
    /// otherwise); every input is device memory, the slow tier or mapped flash and the output
    /// device memory or the slow tier (`WrongSpace`), in bounds (`OutOfBounds`) and aligned
    /// (`Misaligned`); the number of inputs and every length match [`Op::operands`]
    /// (`BadLength`: a missing input has `actual: 0`, an extra one `expected: 0`); the output
    /// overlaps no input (`Overlap`),
    /// except an input it equals when the op [runs in place](Op::runs_in_place).
    fn validate_compute(
        &self,
        queue: Queue,
        op: &Op,
        inputs: &[Region],
        output: &Region,
    ) -> Result<(), HalError> {
        let unsupported = HalError::Unsupported {
            op: op.kind(),
            dtype: op.dtype(),
        };
        if queue == Queue::Dma || !self.config.ops.runs(op) {
            return Err(unsupported);
        }
        let out_operand = MAX_JOB_INPUTS as u8;
        let Some(operands) = op.operands() else {
            return Err(HalError::BadLength {
                operand: out_operand,
                expected: u32::MAX,
                actual: output.len,
            });
        };
        let out_bytes = operands.output;
        for region in inputs.iter().chain(core::iter::once(output)) {
            let readable = matches!(region.space, Space::Device | Space::Slow | Space::Flash(_));
            let writable = matches!(region.space, Space::Device | Space::Slow);
            if !readable || (region == output && !writable) {
                return Err(HalError::WrongSpace { region: *region });
            }
            self.check_region(region)?;
        }
        let required = operands.inputs.len() - usize::from(operands.optional);
        for i in 0..operands.inputs.len().max(inputs.len()) {
            let want = operands.inputs.get(i).copied();
            let have = inputs.get(i).map(|r| r.len);
            let mismatch = match (want, have) {
                (Some(e), Some(a)) if e != a => Some((e, a)),
                (Some(e), None) if i < required => Some((e, 0)),
                (None, Some(a)) => Some((0, a)),
                _ => None,
            };
            if let Some((expected, actual)) = mismatch {
                return Err(HalError::BadLength {
                    operand: i as u8,
                    expected,
                    actual,
                });
            }
        }
        if inputs.len() > MAX_JOB_INPUTS {
            // Unreachable with the HAL's `heapless::Vec<_, MAX_JOB_INPUTS>`; kept for safety.
            return Err(HalError::BadLength {
                operand: out_operand,
                expected: 0,
                actual: 0,
            });
        }
        if output.len != out_bytes {
            return Err(HalError::BadLength {
                operand: out_operand,
                expected: out_bytes,
                actual: output.len,
            });
        }
        let in_place = |r: &Region| op.runs_in_place() && r == output;
        if let Some(i) = inputs
            .iter()
            .position(|r| r.overlaps(output) && !in_place(r))
        {
            return Err(HalError::Overlap { operand: i as u8 });
        }
        Ok(())
    }
}
