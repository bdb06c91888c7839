//! A null NPU: an [`Npu`] driver that does the bookkeeping of a real one and nothing else.
//!
//! # Why
//!
//! The dispatch measurement ([`crate::dispatch_cost`]) counts the CPU instructions one job costs
//! on its way from the client to the driver. The software NPU (`npu-sim`) would add its cycle
//! model and run every kernel on the CPU when a job retires, which is the NPU's work, not the
//! dispatch cost. This driver does what an Ethos-U-style driver does on the CPU for a job, and
//! no more:
//!
//! - [`Npu::submit`] validates the job trivially (the queue exists, the operator is supported,
//!   the in-flight table has room), stores its fence and queue in a fixed ring and returns the
//!   next fence. A real driver would then write the command stream's base pointers and ring the
//!   doorbell: a handful of register writes.
//! - [`Npu::poll`] compares a fence with the newest retired one.
//! - [`Npu::on_interrupt`] and [`Npu::wait_for_event`] retire everything in the ring, as if the
//!   NPU had just finished all of it and raised its completion interrupt.
//!
//! It never reads or writes device memory (there is none behind it: the arena it declares is
//! only the address range the server plans in), so results are meaningless; only the cost of
//! getting jobs to it is.

use npu_compute::hal::{
    Capabilities, Cycles, Fence, HalError, Job, JobKind, Npu, Queue, MAX_QUEUES,
};
use npu_compute::ops::{DType, OpKind, OpSet};

/// Jobs in flight at once (the ring's size; a power of two so the index wraps with a mask).
pub const IN_FLIGHT: usize = 32;
/// Execution units: one, as on an Ethos-U55.
const UNITS: u8 = 1;
/// Bytes of the arena the server plans offsets in. Nothing backs it.
const DEVICE_BYTES: u32 = 64 * 1024;
/// Region alignment, as Ethos-U base pointers need.
const ALIGNMENT: u32 = 16;

const _: () = assert!(IN_FLIGHT.is_power_of_two() && IN_FLIGHT <= u16::MAX as usize);

/// Every operator in int8, none in f32: what an Ethos-U55 runs (the f32 ones would go to the
/// server's CPU fallback).
pub const OPS: OpSet = int8_ops();

/// The set of every operator in int8 (see [`OPS`]).
const fn int8_ops() -> OpSet {
    let mut set = OpSet::EMPTY;
    let mut i = 0;
    while i < OpKind::ALL.len() {
        set = set.with(OpKind::ALL[i], DType::I8);
        i += 1;
    }
    set
}

/// One job in flight, as the driver remembers it until its completion interrupt.
#[derive(Clone, Copy, Debug)]
struct Slot {
    /// The job's fence.
    fence: Fence,
    /// The queue it runs on.
    queue: Queue,
}

/// The null NPU (see the module documentation). `'a` is the lifetime of its host memory.
pub struct NullNpu<'a> {
    /// DMA-capable host memory handed to the server for staging.
    host: &'a mut [u8],
    /// In-flight jobs, oldest at `head`.
    ring: [Slot; IN_FLIGHT],
    /// Index of the oldest in-flight job in `ring`.
    head: usize,
    /// Jobs in flight.
    len: usize,
    /// The fence the next job gets.
    next: u64,
    /// Every fence below this has completed.
    retired: u64,
    /// Jobs completed per queue ([`Queue::index`]).
    completed: [u32; MAX_QUEUES],
    /// The clock [`Npu::now`] reads: one tick per submit and per retired job.
    clock: Cycles,
    /// The operators it runs ([`OPS`] unless [`with_ops`](NullNpu::with_ops) says otherwise).
    ops: OpSet,
}

impl<'a> NullNpu<'a> {
    /// A null NPU whose host (staging) memory is `host`; it should be 16-byte aligned.
    pub fn new(host: &'a mut [u8]) -> Self {
        NullNpu {
            host,
            ring: [Slot {
                fence: Fence(0),
                queue: Queue::Dma,
            }; IN_FLIGHT],
            head: 0,
            len: 0,
            next: 0,
            retired: 0,
            completed: [0; MAX_QUEUES],
            clock: 0,
            ops: OPS,
        }
    }

    /// The same null NPU running only `ops`: the server runs the others on its CPU fallback.
    pub fn with_ops(self, ops: OpSet) -> Self {
        NullNpu { ops, ..self }
    }

    /// Jobs submitted so far.
    pub fn submitted(&self) -> u64 {
        self.next
    }

    /// Jobs completed so far on `queue`.
    pub fn completed(&self, queue: Queue) -> u32 {
        self.completed.get(queue.index()).copied().unwrap_or(0)
    }

    /// The completion interrupt of every job in the ring: walk it oldest first, as a driver's
    /// IRQ handler walks its job list, and mark each fence done.
    fn retire_all(&mut self) {
        while self.len > 0 {
            let slot = self.ring[self.head];
            self.retired = slot.fence.0 + 1;
            if let Some(n) = self.completed.get_mut(slot.queue.index()) {
                *n = n.wrapping_add(1);
            }
            self.head = (self.head + 1) % IN_FLIGHT;
            self.len -= 1;
            self.clock += 1;
        }
    }

    /// The trivial checks: the queue exists and, for a compute job, the NPU runs the operator.
    fn validate(&self, job: &Job<'_>) -> Result<(), HalError> {
        if let Queue::Unit(unit) = job.queue {
            if unit >= UNITS {
                return Err(HalError::NoSuchUnit { unit, units: UNITS });
            }
        }
        if let JobKind::Compute { op, .. } = &job.kind {
            if job.queue == Queue::Dma || !self.ops.runs(op) {
                return Err(HalError::Unsupported {
                    op: op.kind(),
                    dtype: op.dtype(),
                });
            }
        }
        Ok(())
    }
}

impl Npu for NullNpu<'_> {
    /// Ethos-U55-like: 16-byte alignment, one execution unit, [`IN_FLIGHT`] jobs in flight,
    /// every int8 operator, no reads from flash.
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            device_memory_bytes: DEVICE_BYTES,
            host_memory_bytes: u32::try_from(self.host.len()).unwrap_or(u32::MAX),
            slow_memory_bytes: 0,
            alignment: ALIGNMENT,
            execution_units: UNITS,
            max_in_flight: IN_FLIGHT as u16,
            ops: self.ops,
            reads_flash: false,
            flash_alignment: ALIGNMENT,
        }
    }

    /// Validates, stores the job's fence and queue in the ring, returns the fence.
    /// [`HalError::QueueFull`] when [`IN_FLIGHT`] jobs are in flight.
    fn submit(&mut self, job: &Job<'_>) -> Result<Fence, HalError> {
        self.validate(job)?;
        if self.len == IN_FLIGHT {
            return Err(HalError::QueueFull {
                capacity: IN_FLIGHT as u16,
            });
        }
        let fence = Fence(self.next);
        self.ring[(self.head + self.len) % IN_FLIGHT] = Slot {
            fence,
            queue: job.queue,
        };
        self.len += 1;
        self.next += 1;
        self.clock += 1;
        Ok(fence)
    }

    /// `Ok` once retired, `WouldBlock` while in the ring, `UnknownFence` if never issued.
    fn poll(&mut self, fence: Fence) -> nb::Result<(), HalError> {
        if fence.0 >= self.next {
            Err(nb::Error::Other(HalError::UnknownFence(fence)))
        } else if fence.0 < self.retired {
            Ok(())
        } else {
            Err(nb::Error::WouldBlock)
        }
    }

    /// The NPU "finishes" everything at once: retires the whole ring.
    fn wait_for_event(&mut self) {
        self.retire_all();
    }

    /// Retires the whole ring (see [`NullNpu::retire_all`]).
    fn on_interrupt(&mut self) {
        self.retire_all();
    }

    /// The event counter (see [`NullNpu::clock`]): no real time passes on a null NPU.
    fn now(&self) -> Cycles {
        self.clock
    }

    /// The host memory given to [`NullNpu::new`].
    fn host_memory(&mut self) -> &mut [u8] {
        self.host
    }

    /// This NPU reads no flash: constants are copied to the device by the server.
    fn map_flash(&mut self, _bytes: &'static [u8]) -> Result<u8, HalError> {
        Err(HalError::FlashUnreadable)
    }

    /// Nothing is ever mapped.
    fn unmap_flash(&mut self, _segment: u8) {}
}
