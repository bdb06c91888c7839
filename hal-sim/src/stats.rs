//! [`SimStats`]: counters for tests and benchmarks.

use npu_compute::hal::{Cycles, Queue};

use crate::config::{MAX_EXECUTION_UNITS, MAX_QUEUES};
use crate::faults::FaultCounts;

/// Index of a queue in per-queue arrays such as [`SimStats::busy_cycles`]: `0` for
/// [`Queue::Dma`], `1 + n` for [`Queue::Unit(n)`](Queue::Unit). `None` for a unit beyond
/// [`MAX_EXECUTION_UNITS`].
pub const fn queue_index(queue: Queue) -> Option<usize> {
    match queue {
        Queue::Dma => Some(0),
        Queue::Unit(n) if (n as usize) < MAX_EXECUTION_UNITS => Some(1 + n as usize),
        Queue::Unit(_) => None,
    }
}

/// What the simulator did since it was built. Counters other than `jobs_submitted` and
/// `peak_in_flight` are updated when a job retires.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SimStats {
    /// Jobs accepted by `submit`.
    pub jobs_submitted: u64,
    /// Jobs retired successfully.
    pub jobs_completed: u64,
    /// Jobs retired as failed (kernel error, injected failure or fault, failed or faulted
    /// dependency).
    pub jobs_failed: u64,
    /// Successful transfers.
    pub transfers: u64,
    /// Bytes moved by successful transfers.
    pub transfer_bytes: u64,
    /// Multiply-accumulates (elements, for elementwise ops) of successful compute jobs.
    pub macs: u64,
    /// Cycles each queue spent on retired jobs (failed ones included) and on jobs a reset
    /// abandoned while they ran (up to the reset), indexed by [`queue_index`].
    pub busy_cycles: [Cycles; MAX_QUEUES],
    /// Most jobs in flight at once.
    pub peak_in_flight: u32,
    /// Failure records pushed out of the failed-fence record by newer failures (see
    /// [`FAILED_RECORD_CAPACITY`](crate::FAILED_RECORD_CAPACITY)).
    pub failures_forgotten: u64,
    /// Operators the server ran on the CPU and reported
    /// ([`Npu::host_compute`](npu_compute::hal::Npu::host_compute)) under a CPU model.
    pub cpu_ops: u64,
    /// Cycles the clock advanced for that CPU work.
    pub cpu_cycles: Cycles,
    /// Faults injected ([`SimConfig::faults`](crate::SimConfig::faults)), by kind, counted when
    /// `submit` decides them (see [When it happens](crate::faults#when-it-happens)).
    pub faults_injected: FaultCounts,
    /// Jobs abandoned in flight by [`Npu::reset`](npu_compute::hal::Npu::reset): they neither
    /// completed nor failed, so `jobs_submitted` is `jobs_completed + jobs_failed +
    /// jobs_abandoned` plus the jobs in flight.
    pub jobs_abandoned: u64,
    /// Calls of [`Npu::reset`](npu_compute::hal::Npu::reset).
    pub resets: u64,
}

impl SimStats {
    /// Busy cycles of one queue (0 for a queue that does not exist).
    pub fn busy(&self, queue: Queue) -> Cycles {
        queue_index(queue)
            .and_then(|i| self.busy_cycles.get(i).copied())
            .unwrap_or(0)
    }

    /// Jobs retired, successfully or not.
    pub fn jobs_retired(&self) -> u64 {
        self.jobs_completed + self.jobs_failed
    }
}
