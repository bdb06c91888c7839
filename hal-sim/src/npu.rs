//! The HAL: [`SimNpu`]'s implementation of [`Npu`], scheduling each accepted job at once (see
//! [Scheduling](crate#scheduling)) and retiring finished jobs when polled or interrupted.

use npu_compute::hal::{
    Bandwidth, Capabilities, Cycles, Estimate, ExecutionUnit, Fault, Fence, HalError, Job, Npu,
    Queue, Region, Space, Variant, MAX_FLASH_SEGMENTS, MAX_JOB_INPUTS,
};
use npu_compute::ops::Op;

use crate::failures::Failure;
use crate::faults::{FaultKind, NEVER};
use crate::fingerprint::fingerprint;
use crate::in_flight::{InFlight, Work};
use crate::{queue_index, SimNpu, TraceEntry, TraceKind, TraceRegions, CPU_FENCE};

#[cfg(doc)]
use crate::{cost, CpuModel, SimConfig, SimStats, UnitConfig, FAILED_RECORD_CAPACITY};

impl<const JOBS: usize> Npu for SimNpu<'_, JOBS> {
    /// Derived from the configuration and the memories; `max_in_flight = JOBS`.
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            device_memory_bytes: u32::try_from(self.device.len()).unwrap_or(u32::MAX),
            host_memory_bytes: u32::try_from(self.host.len()).unwrap_or(u32::MAX),
            slow_memory_bytes: u32::try_from(self.slow.len()).unwrap_or(u32::MAX),
            alignment: self.config.alignment,
            execution_units: self.config.execution_units,
            max_in_flight: u16::try_from(JOBS).unwrap_or(u16::MAX),
            ops: self.config.ops,
            reads_flash: self.config.reads_flash,
            flash_alignment: self.config.flash_alignment,
        }
    }

    /// Validates the job (see the crate docs for the order of checks), schedules it and
    /// returns its fence (fences count up from `Fence(0)`). Never moves the clock. If the
    /// in-flight table is full it first retires finished jobs, then refuses with
    /// [`HalError::QueueFull`] if none had finished. A transfer may run on any queue (an
    /// execution unit's command stream can copy too); a compute job on [`Queue::Dma`] is
    /// [`HalError::Unsupported`].
    fn submit(&mut self, job: &Job<'_>) -> Result<Fence, HalError> {
        self.validate(job)?;
        let capacity = u16::try_from(JOBS).unwrap_or(u16::MAX);
        if self.in_flight.is_full() {
            self.retire_ready();
            if self.in_flight.is_full() {
                return Err(HalError::QueueFull { capacity });
            }
        }
        // 2^64 fences cannot be issued in practice; refuse rather than reuse one.
        let Some(next) = self.next_fence.checked_add(1) else {
            return Err(HalError::QueueFull { capacity });
        };
        let Some(q) = queue_index(job.queue) else {
            // Unreachable: units are validated against `execution_units <= MAX_EXECUTION_UNITS`.
            let unit = if let Queue::Unit(u) = job.queue { u } else { 0 };
            return Err(HalError::NoSuchUnit {
                unit,
                units: self.config.execution_units,
            });
        };
        let fence = Fence(self.next_fence);

        // Real times stay short of NEVER, even on a clock that saturated: only a hung job (or
        // one behind it, on its queue or through a dependency) is scheduled to end there.
        let mut start = self.now.min(NEVER - 1).max(self.free_at[q]);
        let mut deps = heapless::Vec::new();
        // A queue halted by a fault runs nothing until the reset.
        let mut dep_failed = self.halted[q].then_some(Failure::Fault(Fault::Cancelled));
        for dep in &job.deps {
            if let Some(d) = self.in_flight.iter().find(|j| j.fence == *dep) {
                start = start.max(d.end);
                if let Some(f) = d.dep_failed {
                    dep_failed = Some(Failure::worst(dep_failed, f));
                }
                let _ = deps.push(*dep); // at most MAX_JOB_DEPS
            } else if let Some(f) = self.failed.failure_of(*dep) {
                dep_failed = Some(Failure::worst(dep_failed, f));
            } else if self.abandoned.contains(dep) {
                dep_failed = Some(Failure::Fault(Fault::Cancelled));
            }
        }
        let timing = self.job_timing(job.queue, &job.kind);
        // Compute jobs share the memory ports; transfers keep the DMA engine's own, but for
        // their bytes in the slow tier, which hold the flash port (`timing` says which). A job
        // behind a hung one never starts, and reserves nothing.
        let mut end = if start == NEVER {
            NEVER
        } else {
            self.ports_free_at.reserve(start, timing).min(NEVER - 1)
        };

        // A job that will not run (a dependency failed) suffers no fault.
        let fault = self
            .injector
            .decide(&self.config.faults, &job.kind, dep_failed.is_none());
        let mut irq = true;
        if let Some(kind) = fault {
            self.stats.faults_injected.count(kind);
            match kind {
                FaultKind::Hang => end = NEVER,
                FaultKind::Overrun { times, plus } if end != NEVER => {
                    let cycles = end - start;
                    // Saturating short of NEVER: an overrun ends, however late.
                    end = start
                        .saturating_add(cycles.saturating_mul(u64::from(times.max(1))))
                        .saturating_add(plus)
                        .min(NEVER - 1);
                }
                FaultKind::LostIrq => irq = false,
                // Raised as the job starts; one behind a hung job never starts.
                FaultKind::SpuriousIrq if start != NEVER => {
                    self.spurious_irq = Some(self.spurious_irq.map_or(start, |at| at.min(start)));
                }
                FaultKind::Dma
                | FaultKind::Bus
                | FaultKind::Overrun { .. }
                | FaultKind::SpuriousIrq => {}
            }
        }

        let entry = InFlight {
            fence,
            queue: job.queue,
            work: Work::of(&job.kind),
            start,
            end,
            deps,
            dep_failed,
            fault,
            irq: irq && end != NEVER,
        };
        if self.in_flight.push(entry).is_err() {
            return Err(HalError::QueueFull { capacity });
        }
        self.next_fence = next;
        self.free_at[q] = end;
        self.stats.jobs_submitted += 1;
        let in_flight = u32::try_from(self.in_flight.len()).unwrap_or(u32::MAX);
        self.stats.peak_in_flight = self.stats.peak_in_flight.max(in_flight);
        Ok(fence)
    }

    /// `UnknownFence` for a fence never issued; otherwise retires finished jobs, then answers
    /// `WouldBlock` while the job is in flight, `JobFailed` if it failed or [`HalError::Fault`]
    /// if it faulted (while its record lasts, see [`FAILED_RECORD_CAPACITY`]),
    /// `Fault { fault: Cancelled }` if the last [`reset`](Npu::reset) abandoned it, `Ok`
    /// otherwise. Never moves the clock. A job whose interrupt was lost
    /// ([`FaultKind::LostIrq`]) completes here all the same: poll reads the status.
    fn poll(&mut self, fence: Fence) -> nb::Result<(), HalError> {
        if fence.0 >= self.next_fence {
            return Err(nb::Error::Other(HalError::UnknownFence(fence)));
        }
        self.retire_ready();
        if self.in_flight.iter().any(|j| j.fence == fence) {
            return Err(nb::Error::WouldBlock);
        }
        if self.abandoned.contains(&fence) {
            return Err(nb::Error::Other(HalError::Fault {
                fence,
                fault: Fault::Cancelled,
            }));
        }
        match self.failed.failure_of(fence) {
            Some(failure) => Err(nb::Error::Other(failure.error(fence))),
            None => Ok(()),
        }
    }

    /// Jumps the clock to [`next_event`](SimNpu::next_event) if that is later than now;
    /// otherwise (nothing in flight, or an interrupt already raised) returns at once. Without
    /// injected faults that is the earliest in-flight end. Takes a spurious interrupt it wakes
    /// on (the CPU woke and the line is quiet again); retires nothing.
    fn wait_for_event(&mut self) {
        if let Some(next) = self.next_event() {
            self.now = self.now.max(next);
        }
        if self.spurious_irq.is_some_and(|at| at <= self.now) {
            self.spurious_irq = None;
        }
    }

    /// Retires finished jobs (those whose interrupt was lost too: the handler reads the
    /// status), which clears [`irq_pending`](SimNpu::irq_pending), and takes a spurious
    /// interrupt that has been raised.
    fn on_interrupt(&mut self) {
        self.retire_ready();
        if self.spurious_irq.is_some_and(|at| at <= self.now) {
            self.spurious_irq = None;
        }
    }

    fn now(&self) -> Cycles {
        self.now
    }

    /// Maps `bytes` into the first free segment. Refuses with [`HalError::FlashUnreadable`]
    /// when the configuration says the NPU cannot read flash, [`HalError::Misaligned`] when
    /// `bytes` does not start on the configured alignment (region offsets are checked against
    /// it), and [`HalError::FlashSegmentsFull`].
    fn map_flash(&mut self, bytes: &'static [u8]) -> Result<u8, HalError> {
        if !self.config.reads_flash {
            return Err(HalError::FlashUnreadable);
        }
        let segment =
            self.flash
                .iter()
                .position(Option::is_none)
                .ok_or(HalError::FlashSegmentsFull {
                    capacity: MAX_FLASH_SEGMENTS as u8,
                })? as u8;
        if !(bytes.as_ptr() as usize).is_multiple_of(self.config.alignment as usize) {
            return Err(HalError::Misaligned {
                region: Region::flash(segment, 0, u32::try_from(bytes.len()).unwrap_or(u32::MAX)),
                alignment: self.config.alignment,
            });
        }
        if u32::try_from(bytes.len()).is_err() {
            return Err(HalError::OutOfBounds {
                region: Region::flash(segment, 0, u32::MAX),
                space_bytes: u32::MAX,
            });
        }
        self.flash[usize::from(segment)] = Some(bytes);
        Ok(segment)
    }

    /// Forgets the segment (no effect if it is not mapped).
    fn unmap_flash(&mut self, segment: u8) {
        if let Some(slot) = self.flash.get_mut(usize::from(segment)) {
            *slot = None;
        }
    }

    fn host_memory(&mut self) -> &mut [u8] {
        self.host
    }

    /// [`Variant::Auto`] always. A block or im2col when the layer cost model is configured
    /// ([`SimConfig::layers`]), the variant [applies to](Variant::applies_to) the op's kind
    /// and the cost model says it fits ([`cost::supports_variant`]); `submit` then accepts the
    /// job (given an im2col's scratch). The answer depends on the op alone: whether the weights
    /// sit in flash or device memory changes a variant's cost, never whether it fits.
    fn supports_variant(&self, op: &Op, variant: Variant) -> bool {
        if variant == Variant::Auto {
            return true;
        }
        // The cost model reads the filter's size from the job's regions; an op's own operand
        // sizes are what a valid job's regions have.
        let Some(operands) = op.operands() else {
            return false;
        };
        let inputs: heapless::Vec<Region, MAX_JOB_INPUTS> = operands
            .inputs
            .iter()
            .map(|&len| Region::device(0, len))
            .collect();
        self.runs_variant(op, variant, &inputs)
    }

    /// FNV-1a-64 over [`cost::COST_MODEL_VERSION`] and every field of [`SimConfig`] that
    /// changes a job's cycles but is not in [`Capabilities`] (the caller's fingerprint covers
    /// those): the rates and overheads of the simple model, the layer model's configuration
    /// (a tag, then every [`U55Config`](cost::U55Config) field) and the CPU model's (a tag,
    /// then every [`CpuModel`] field).
    fn tuning_fingerprint(&self) -> u64 {
        fingerprint(&self.config)
    }

    /// Advances the clock by the op's [`CpuModel::cycles`] when [`SimConfig::cpu`] is set:
    /// the CPU was busy computing, and jobs in flight went on meanwhile. Counted in
    /// [`SimStats::cpu_ops`] and [`SimStats::cpu_cycles`], and traced as a
    /// [`TraceKind::Cpu`] entry from the clock before to the clock after.
    fn host_compute(&mut self, op: &Op) {
        if let Some(model) = self.config.cpu {
            let cycles = model.cycles(op);
            let start = self.now;
            self.advance(cycles);
            self.stats.cpu_ops += 1;
            self.stats.cpu_cycles = self.stats.cpu_cycles.saturating_add(cycles);
            let entry = TraceEntry {
                fence: CPU_FENCE,
                queue: Queue::Dma,
                kind: TraceKind::Cpu {
                    op: op.kind(),
                    dtype: op.dtype(),
                },
                start,
                end: self.now,
                failure: None,
            };
            self.trace.record(entry, || TraceRegions::EMPTY);
        }
    }

    /// Unit `unit`'s [`UnitConfig::name`] and its MAC rate in the simple model
    /// ([`SimConfig::unit_macs_per_cycle`]: the unit's own MACs with the default rates);
    /// [`ExecutionUnit::UNDECLARED`] beyond [`SimConfig::execution_units`].
    fn execution_unit(&self, unit: u8) -> ExecutionUnit {
        match self.config.unit(unit) {
            Some(u) => ExecutionUnit {
                name: u.name,
                macs_per_cycle: self.config.unit_macs_per_cycle(unit),
            },
            None => ExecutionUnit::UNDECLARED,
        }
    }

    /// The rates the simulator charges: the arena at
    /// [`SimConfig::sram_bytes_per_cycle`] (with the layer model's SRAM latency), host
    /// memory at the DMA engine's [`SimConfig::dma_bytes_per_cycle`] after
    /// [`SimConfig::dma_overhead_cycles`], flash at the layer model's flash rate and latency
    /// (`None` without the layer model, which alone reads flash at a cost), the slow tier at
    /// [`SimConfig::slow`] (`None` without one).
    fn bandwidth(&self, space: Space) -> Option<Bandwidth> {
        let per_cycle = |bytes: u32, latency: u32| Bandwidth {
            bytes,
            cycles: 1,
            latency,
        };
        let layers = self.config.layers;
        match space {
            Space::Device => Some(per_cycle(
                self.config.sram_bytes_per_cycle,
                layers.map_or(0, |l| l.sram_latency),
            )),
            Space::Host => Some(per_cycle(
                self.config.dma_bytes_per_cycle,
                self.config.dma_overhead_cycles,
            )),
            Space::Flash(_) => layers.map(|l| per_cycle(l.flash_bytes_per_cycle, l.flash_latency)),
            Space::Slow => (!self.slow.is_empty()).then_some(self.config.slow),
        }
    }

    /// The job's cost on its queue's unit with nothing else running, by the functions
    /// `submit` uses, on nothing but the cost cache: `cycles` is its duration alone (a layer
    /// op through an empty weight pipeline, so a layer with weights in flash waits for their
    /// prefetch, which `prefetch_cycles` gives: the flash-port cycles of copying its weights
    /// and scales ahead of it, which a run of several layers overlaps with earlier ones),
    /// `sram_cycles` and `flash_cycles` the [shared ports](SimConfig#shared-memory-ports) it
    /// holds (0 for a transfer, which uses the DMA engine's own port). Submitted alone to a
    /// fresh simulator, the job runs exactly `cycles`. `None` for a job `submit` would refuse.
    fn estimate(&mut self, job: &Job<'_>) -> Option<Estimate> {
        let (prefetch, prefetched) = self.estimate_prefetched(job)?;
        Some(Estimate {
            cycles: prefetched.cycles.saturating_add(prefetch),
            prefetch_cycles: prefetch,
            ..prefetched
        })
    }

    /// What [`host_compute`](Npu::host_compute) would charge: [`CpuModel::cycles`] of the op
    /// when [`SimConfig::cpu`] is set, else `None` (CPU work is free and not timed).
    fn estimate_host_compute(&self, op: &Op) -> Option<Cycles> {
        self.config.cpu.map(|model| model.cycles(op))
    }

    /// `true` when [`SimConfig::cpu`] is set.
    fn clock_counts_cpu(&self) -> bool {
        self.config.cpu.is_some()
    }

    /// Abandons the jobs in flight, as the Ethos-U driver's reset does after a fault.
    ///
    /// First every job that has ended by now retires as usual (it completed on the NPU before
    /// the reset; its interrupt may have been lost). The rest are abandoned: their fences
    /// poll as [`HalError::Fault`] with [`Fault::Cancelled`] until the next reset (however many
    /// there are: up to `JOBS`, recorded apart from the failed-fence ring), and a job
    /// submitted later that depends on one is cancelled too. They write nothing (memory an
    /// abandoned job would have written keeps its old bytes, one case of "undefined"); the
    /// rest of memory is kept. Those that had started are traced, cut at the reset, with
    /// [`CODE_FAULT_CANCELLED`](crate::CODE_FAULT_CANCELLED), and their cycles so far count as
    /// their queue's busy time; they are counted in [`SimStats::jobs_abandoned`].
    ///
    /// The NPU is then idle at the current clock: the queues running again (a DMA or bus
    /// fault halts its queue until a reset) and free now, like the shared memory ports, the weight pipeline empty, no spurious interrupt raised, so that the next job
    /// runs and costs exactly as it would on a fresh simulator whose clock stood here. Fences
    /// go on counting up, the clock does not move, the fault plan goes on where it was, and a
    /// pending [`fail_next_compute_job`](SimNpu::fail_next_compute_job) stays pending.
    /// Counted in [`SimStats::resets`]. Never fails.
    fn reset(&mut self) -> Result<(), HalError> {
        self.retire_ready();
        let now = self.now;
        self.abandoned.clear();
        for job in &self.in_flight {
            // As many as the table holds, which has the same capacity.
            let _ = self.abandoned.push(job.fence);
        }
        self.abandoned.sort_unstable();
        for fence in &self.abandoned {
            let Some(job) = self.in_flight.iter().find(|j| j.fence == *fence) else {
                continue;
            };
            self.stats.jobs_abandoned += 1;
            if job.start >= now {
                continue; // never started: nothing ran, nothing to trace
            }
            if let Some(busy) =
                queue_index(job.queue).and_then(|i| self.stats.busy_cycles.get_mut(i))
            {
                *busy = busy.saturating_add(now.min(job.end) - job.start);
            }
            let kind = job.work.kind();
            self.trace.record(
                TraceEntry {
                    fence: job.fence,
                    queue: job.queue,
                    kind: crate::retire::trace_kind(&kind),
                    start: job.start,
                    end: now,
                    failure: Some(crate::CODE_FAULT_CANCELLED),
                },
                || crate::retire::trace_regions(&kind),
            );
        }
        self.in_flight.clear();
        self.free_at = [now; crate::MAX_QUEUES];
        self.ports_free_at = crate::timing::Ports::idle_at(now);
        self.pipeline = self.config.layers.map(crate::cost::Pipeline::new);
        self.spurious_irq = None;
        self.halted = [false; crate::MAX_QUEUES];
        self.stats.resets += 1;
        Ok(())
    }
}
