//! How long a job runs and which shared memory ports it holds: the Ethos-U55 layer model for
//! layer ops when configured (its answers cached, since the model searches block shapes),
//! else the simple model of [`SimConfig::unit_job_cost`](crate::SimConfig::unit_job_cost);
//! each on the job's unit's configuration. [`Ports`] applies the
//! [shared memory ports](crate::SimConfig#shared-memory-ports) to a job's start.

use npu_compute::hal::{Cycles, Estimate, Job, JobKind, Queue};

use crate::config::{io_bytes, slow_bytes};
use crate::cost::REFERENCE_MACS_PER_CYCLE;
use crate::{cost, layer, SimNpu};

/// Layer costs already computed (the cost model searches block shapes, which is worth
/// remembering: a model runs the same layers every inference). 64 rather than a model's
/// layer count: a tuner times up to seven variants of a layer, each its own entry.
const LAYER_CACHE: usize = 64;

/// `(layer, MACs of the unit's array, its cost)`.
type CacheEntry = (cost::LayerDesc, u32, cost::CostBreakdown);

#[derive(Debug)]
pub(crate) struct LayerCache {
    entries: [Option<CacheEntry>; LAYER_CACHE],
    next: usize,
}

impl LayerCache {
    /// A cache with nothing computed yet.
    pub(crate) const fn new() -> Self {
        LayerCache {
            entries: [None; LAYER_CACHE],
            next: 0,
        }
    }

    /// The cost of a layer on a unit of `macs` MACs whose configuration is `cfg`, from the
    /// cache when it was computed recently.
    pub(crate) fn cost(
        &mut self,
        desc: &cost::LayerDesc,
        macs: u32,
        cfg: &cost::U55Config,
    ) -> cost::CostBreakdown {
        if let Some((_, _, c)) = self
            .entries
            .iter()
            .flatten()
            .find(|(d, m, _)| *m == macs && d == desc)
        {
            return *c;
        }
        let c = cost::layer_cycles(desc, cfg);
        self.entries[self.next] = Some((*desc, macs, c));
        self.next = (self.next + 1) % LAYER_CACHE;
        c
    }
}

/// A job's cost on its unit: its own cycles and the cycles it holds each shared port (each at
/// most the time it runs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct JobTiming {
    /// Cycles from start to end with the ports free.
    pub(crate) cycles: Cycles,
    /// Cycles of the arena's SRAM port.
    pub(crate) sram: Cycles,
    /// Cycles of the flash port.
    pub(crate) flash: Cycles,
}

/// When the shared SRAM and flash ports finish their last reservation.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Ports {
    sram: Cycles,
    flash: Cycles,
}

impl Ports {
    /// Both ports free from `now` (after a reset).
    pub(crate) const fn idle_at(now: Cycles) -> Self {
        Ports {
            sram: now,
            flash: now,
        }
    }

    /// Reserves each port the job uses from `max(start, port free)` for its cycles and returns
    /// the job's end: the latest of `start + cycles` and its reservations' ends.
    pub(crate) fn reserve(&mut self, start: Cycles, job: JobTiming) -> Cycles {
        let mut end = start.saturating_add(job.cycles);
        for (free, cycles) in [(&mut self.sram, job.sram), (&mut self.flash, job.flash)] {
            if cycles > 0 {
                let port_end = start.max(*free).saturating_add(cycles);
                *free = port_end;
                end = end.max(port_end);
            }
        }
        end
    }
}

/// A layer charged `charged` cycles by the weight pipeline: it runs for `prefetched` (the
/// rest of `charged` waits for its weights), and cannot hold a port longer than it runs.
fn layer_timing(cost: &cost::CostBreakdown, charged: Cycles) -> JobTiming {
    JobTiming {
        cycles: charged.max(1),
        sram: cost.prefetched_sram.min(cost.prefetched),
        flash: cost.prefetched_flash.min(cost.prefetched),
    }
}

/// The execution unit a queue names (unit 0's configuration for the DMA queue, which runs
/// transfers only).
fn unit_of(queue: Queue) -> u8 {
    match queue {
        Queue::Unit(n) => n,
        Queue::Dma => 0,
    }
}

impl<const JOBS: usize> SimNpu<'_, JOBS> {
    /// The layer model's cost of a compute job on `unit`, when the layer model is configured
    /// and describes the job's op.
    fn layer_cost(&mut self, unit: u8, kind: &JobKind<'_>) -> Option<cost::CostBreakdown> {
        let JobKind::Compute {
            op,
            variant,
            inputs,
            ..
        } = kind
        else {
            return None;
        };
        let base = self.config.layers?;
        let desc = layer::describe(op, *variant, inputs)?;
        let macs = self
            .config
            .unit(unit)
            .map_or(REFERENCE_MACS_PER_CYCLE, |u| u.macs_per_cycle);
        let cfg = base.with_mac_array(macs);
        Some(self.layer_cache.cost(&desc, macs, &cfg))
    }

    /// A job's cost on `queue`'s unit, as the simulator schedules it: a layer op's cycles
    /// are what the weight [`Pipeline`](cost::Pipeline) charges after the layers before it
    /// (which this advances), other jobs' those of
    /// [`SimConfig::unit_job_cost`](crate::SimConfig::unit_job_cost).
    pub(crate) fn job_timing(&mut self, queue: Queue, kind: &JobKind<'_>) -> JobTiming {
        self.timing(queue, kind, false)
    }

    /// [`job_timing`](Self::job_timing) as if the job ran alone: a layer op through an
    /// empty weight pipeline, which is left as it was.
    pub(crate) fn job_timing_alone(&mut self, queue: Queue, kind: &JobKind<'_>) -> JobTiming {
        self.timing(queue, kind, true)
    }

    /// [`Npu::estimate`](npu_compute::hal::Npu::estimate) split for a planner that
    /// overlaps weight copies with earlier jobs, as the simulator's weight
    /// [`Pipeline`](cost::Pipeline) does when jobs follow each other: `(prefetch, estimate)`
    /// where `prefetch` is the flash-port cycles of copying the job's weights and scales from
    /// flash to SRAM ahead of it ([`CostBreakdown::prefetch`](cost::CostBreakdown::prefetch),
    /// 0 when nothing is prefetched) and `estimate` the job once they have landed
    /// ([`CostBreakdown::prefetched`](cost::CostBreakdown::prefetched), at least 1, with the
    /// same port cycles as `Npu::estimate`). Alone, a job runs `prefetch + estimate.cycles`
    /// (what `Npu::estimate` answers); after other layers it runs as little as
    /// `estimate.cycles`. `None` for a job `submit` would refuse. Moves nothing but the cost
    /// cache.
    pub(crate) fn estimate_prefetched(&mut self, job: &Job<'_>) -> Option<(Cycles, Estimate)> {
        self.validate(job).ok()?;
        let (prefetch, t) = match self.layer_cost(unit_of(job.queue), &job.kind) {
            Some(cost) if self.pipeline.is_some() => (
                cost.prefetch,
                self.on_slow_port(&job.kind, layer_timing(&cost, cost.prefetched)),
            ),
            _ => (0, self.job_timing_alone(job.queue, &job.kind)),
        };
        Some((
            prefetch,
            Estimate {
                cycles: t.cycles,
                sram_cycles: t.sram,
                flash_cycles: t.flash,
                prefetch_cycles: 0,
            },
        ))
    }

    fn timing(&mut self, queue: Queue, kind: &JobKind<'_>, alone: bool) -> JobTiming {
        let own = self.own_timing(queue, kind, alone);
        self.on_slow_port(kind, own)
    }

    /// `t` with the job's bytes in the slow tier added on the flash port, which that tier
    /// shares ([`SimConfig::slow`](crate::SimConfig::slow)), all its regions there one access
    /// of their sum (one latency per job); the job
    /// runs at least as long as it holds the port, and a transfer, whose engine waits on the
    /// slow side, at least its fixed cost more. The SRAM the layer model charged for the same
    /// operands is left as it was: the SRAM port overlaps the other, so the slower of the two
    /// bounds the job.
    fn on_slow_port(&self, kind: &JobKind<'_>, t: JobTiming) -> JobTiming {
        let bytes = slow_bytes(kind);
        if bytes == 0 {
            return t;
        }
        let slow = self.config.slow.cycles_for(bytes);
        let least = match kind {
            JobKind::Transfer { .. } => {
                slow.saturating_add(u64::from(self.config.dma_overhead_cycles))
            }
            JobKind::Compute { .. } => slow,
        };
        let flash = t.flash.saturating_add(slow);
        JobTiming {
            cycles: t.cycles.max(least).max(flash),
            flash,
            ..t
        }
    }

    /// A job's timing on its unit's own memories (the arena and flash).
    fn own_timing(&mut self, queue: Queue, kind: &JobKind<'_>, alone: bool) -> JobTiming {
        let unit = unit_of(queue);
        if let Some(cost) = self.layer_cost(unit, kind) {
            let charged = if alone {
                self.config
                    .layers
                    .map(|base| cost::Pipeline::new(base).push_cost(cost).total)
            } else {
                self.pipeline.as_mut().map(|p| p.push_cost(cost).total)
            };
            if let Some(charged) = charged {
                return layer_timing(&cost, charged);
            }
        }
        let cycles = self.config.unit_job_cost(unit, kind);
        let sram = match kind {
            JobKind::Transfer { .. } => 0,
            JobKind::Compute { .. } => self.config.memory_cycles(io_bytes(kind)).min(cycles),
        };
        JobTiming {
            cycles,
            sram,
            flash: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(cycles: Cycles, sram: Cycles, flash: Cycles) -> JobTiming {
        JobTiming {
            cycles,
            sram,
            flash,
        }
    }

    #[test]
    fn ports_serve_one_job_at_a_time_in_submission_order() {
        let mut ports = Ports::default();
        // Memory-bound on SRAM: the second job's SRAM waits for the first's.
        assert_eq!(ports.reserve(0, job(110, 100, 0)), 110);
        assert_eq!(ports.reserve(0, job(110, 100, 0)), 200);
        // A job that uses no port is not held back, and holds nothing.
        assert_eq!(ports.reserve(0, job(50, 0, 0)), 50);
        // Flash is a port of its own.
        assert_eq!(ports.reserve(0, job(40, 0, 30)), 40);
        assert_eq!(ports.reserve(10, job(20, 0, 30)), 60);
        // No gap filling: a job starting before the last reservation ends still queues
        // behind it.
        assert_eq!(ports.reserve(0, job(5, 5, 0)), 205);
    }

    #[test]
    fn one_unit_is_never_held_back() {
        // Jobs of one unit start when the previous one ended and hold the ports no longer
        // than they run: the ports are free at every start.
        let mut ports = Ports::default();
        let mut at = 0;
        for (cycles, sram, flash) in [(10, 10, 0), (64, 3, 60), (5, 0, 0), (100, 99, 100)] {
            let end = ports.reserve(at, job(cycles, sram, flash));
            assert_eq!(end, at + cycles);
            at = end;
        }
    }
}
