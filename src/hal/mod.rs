//! The hardware abstraction: the one trait a board integrator implements.
//!
//! # Design
//!
//! The compute server never touches NPU registers, caches or device memory bytes itself. It
//! describes work as [`Job`]s over [`Region`]s (offsets into an address [`Space`]) and hands them
//! to an [`Npu`]. Everything is non-blocking: [`Npu::submit`] returns a [`Fence`] at once and
//! [`Npu::poll`] answers `nb::Error::WouldBlock` until the job is done. The only way the CPU waits
//! is [`Npu::wait_for_event`], which on hardware is a `WFI` until the completion interrupt and in
//! the simulator jumps the virtual clock to the next job end.
//!
//! Two address spaces exist:
//! - [`Space::Device`]: the NPU arena, the fixed region the firmware gave to the driver (usually
//!   the NPU-reachable SRAM section of `memory.x`). The server plans offsets in it; only jobs
//!   read and write it. This keeps the CPU from aliasing memory the NPU owns (on a cached core
//!   that aliasing is exactly the stale-cache bug drivers fight).
//! - [`Space::Host`]: DMA-capable host memory the CPU may write and read directly
//!   ([`Npu::host_memory`]): staging (and later pinned) buffers. Host↔device copies are
//!   [`JobKind::Transfer`] jobs on the DMA queue.
//!
//! Jobs carry their dependencies ([`Job::deps`]): a job starts only after every fence it lists has
//! completed. Jobs on the same queue run in submission order. The server computes the
//! dependencies, so the CPU never has to wait between dependent jobs.
//!
//! # Mapping an Ethos-U-style driver
//!
//! | HAL | Ethos-U driver |
//! |---|---|
//! | [`Capabilities::alignment`] = 16 | base-pointer regions must be 16-byte aligned |
//! | [`Npu::submit`] | clean (flush) the D-cache over the job's input regions, write the command stream and base pointers (`BASEP0..7` = arena base + region offsets), ring `CMD`; queue the job when the NPU is busy and chain it in the IRQ |
//! | [`Job::deps`] | the driver starts a queued job only when its dependencies have raised their IRQ (one NPU core executes in order, so same-queue dependencies are free) |
//! | [`Npu::on_interrupt`] | the NPU IRQ handler: read `STATUS`, acknowledge with `CMD.clear_irq`, invalidate the D-cache over the finished job's output regions, mark its fence done, start the next queued job |
//! | [`Npu::poll`] | compare the fence with the last completed sequence number |
//! | [`Npu::wait_for_event`] | `cortex_m::asm::wfi()` |
//! | [`Npu::now`] | DWT `CYCCNT` or a free-running timer, in CPU cycles |
//! | [`Capabilities::reads_flash`] | the NPU's AXI1 port reaches flash: weights stay in place |
//!
//! A board that shares the server with an interrupt handler puts it in a
//! [`CriticalSectionChannel`](crate::channel::CriticalSectionChannel) and calls
//! [`ComputeChannel::on_interrupt`](crate::channel::ComputeChannel::on_interrupt) from the ISR.

use npu_kernels::int8::{AddParams, FcParams, MulParams, ReluParams};
use npu_kernels::FcShape;

/// Time in cycles of the HAL's clock (CPU cycles on hardware, virtual cycles in the simulator).
pub type Cycles = u64;

/// Most inputs a compute job reads.
pub const MAX_JOB_INPUTS: usize = 3;
/// Most execution units a HAL may declare.
pub const MAX_EXECUTION_UNITS: usize = 8;
/// Number of hardware queues at most: every execution unit plus the DMA engine.
pub const MAX_QUEUES: usize = MAX_EXECUTION_UNITS + 1;
/// Most dependencies one job carries: one per queue is always enough, because jobs on one queue
/// complete in order, so the newest fence of a queue stands for all older ones.
pub const MAX_JOB_DEPS: usize = MAX_QUEUES;

/// Identifies a submitted job. Fences are issued in increasing order and never reused, so a
/// fence compares older-than another by value; their absolute values carry no meaning.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Fence(pub u64);

/// An address space a job can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Space {
    /// The NPU arena: device memory planned by the server, reached only by jobs.
    Device,
    /// DMA-capable host memory the CPU reads and writes through [`Npu::host_memory`].
    Host,
}

/// A byte range in one address space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Region {
    /// Which address space.
    pub space: Space,
    /// Offset from the start of that space, in bytes.
    pub offset: u32,
    /// Length in bytes.
    pub len: u32,
}

impl Region {
    /// A region of device memory.
    pub const fn device(offset: u32, len: u32) -> Self {
        Region {
            space: Space::Device,
            offset,
            len,
        }
    }

    /// A region of host memory.
    pub const fn host(offset: u32, len: u32) -> Self {
        Region {
            space: Space::Host,
            offset,
            len,
        }
    }

    /// One past the last byte, widened so it cannot overflow.
    pub const fn end(&self) -> u64 {
        self.offset as u64 + self.len as u64
    }

    /// Whether two regions share at least one byte.
    pub fn overlaps(&self, other: &Region) -> bool {
        self.space == other.space
            && (self.offset as u64) < other.end()
            && (other.offset as u64) < self.end()
            && self.len != 0
            && other.len != 0
    }
}

/// Element types a job computes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DType {
    /// IEEE 754 single precision, little-endian.
    F32,
    /// Signed 8-bit, affine quantized.
    I8,
}

impl DType {
    /// Bytes per element.
    pub const fn size(self) -> u32 {
        match self {
            DType::F32 => 4,
            DType::I8 => 1,
        }
    }
}

/// Operator families, for capability queries and error messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum OpKind {
    /// Elementwise addition.
    Add,
    /// Elementwise multiplication.
    Mul,
    /// Rectified linear unit.
    Relu,
    /// Fully connected layer / matrix multiplication.
    FullyConnected,
}

impl OpKind {
    /// Every operator family, in bit order of [`OpSet`].
    pub const ALL: [OpKind; 4] = [
        OpKind::Add,
        OpKind::Mul,
        OpKind::Relu,
        OpKind::FullyConnected,
    ];
}

/// A compute operation with its shape and precomputed parameters.
///
/// Operand order in [`JobKind::Compute::inputs`]: binary ops `[a, b]`, unary ops `[input]`,
/// fully connected `[input, weights]` or `[input, weights, bias]` (bias is f32 for f32 and
/// little-endian i32 for int8).
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Op {
    /// `out = a + b` on `len` f32 elements.
    AddF32 {
        /// Elements.
        len: u32,
    },
    /// `out = a * b` on `len` f32 elements.
    MulF32 {
        /// Elements.
        len: u32,
    },
    /// `out = max(0, x)` on `len` f32 elements.
    ReluF32 {
        /// Elements.
        len: u32,
    },
    /// f32 fully connected.
    FullyConnectedF32 {
        /// Shape.
        shape: FcShape,
    },
    /// int8 `out = a + b`, TFLM arithmetic.
    AddI8 {
        /// Elements.
        len: u32,
        /// Requantization parameters.
        params: AddParams,
    },
    /// int8 `out = a * b`, TFLM arithmetic.
    MulI8 {
        /// Elements.
        len: u32,
        /// Requantization parameters.
        params: MulParams,
    },
    /// int8 ReLU, TFLM arithmetic.
    ReluI8 {
        /// Elements.
        len: u32,
        /// Requantization parameters.
        params: ReluParams,
    },
    /// int8 fully connected, TFLM arithmetic.
    FullyConnectedI8 {
        /// Shape.
        shape: FcShape,
        /// Requantization parameters.
        params: FcParams,
    },
}

impl Op {
    /// The operator family.
    pub const fn kind(&self) -> OpKind {
        match self {
            Op::AddF32 { .. } | Op::AddI8 { .. } => OpKind::Add,
            Op::MulF32 { .. } | Op::MulI8 { .. } => OpKind::Mul,
            Op::ReluF32 { .. } | Op::ReluI8 { .. } => OpKind::Relu,
            Op::FullyConnectedF32 { .. } | Op::FullyConnectedI8 { .. } => OpKind::FullyConnected,
        }
    }

    /// The element type.
    pub const fn dtype(&self) -> DType {
        match self {
            Op::AddF32 { .. }
            | Op::MulF32 { .. }
            | Op::ReluF32 { .. }
            | Op::FullyConnectedF32 { .. } => DType::F32,
            _ => DType::I8,
        }
    }

    /// Multiply-accumulates (for elementwise ops: elements), the unit of the compute cost model.
    pub fn macs(&self) -> u64 {
        match *self {
            Op::AddF32 { len } | Op::MulF32 { len } | Op::ReluF32 { len } => len as u64,
            Op::AddI8 { len, .. } | Op::MulI8 { len, .. } | Op::ReluI8 { len, .. } => len as u64,
            Op::FullyConnectedF32 { shape } | Op::FullyConnectedI8 { shape, .. } => (shape.batches
                as u64)
                .saturating_mul(shape.in_features as u64)
                .saturating_mul(shape.out_features as u64),
        }
    }

    /// Bytes each operand must have, in operand order, and the output's bytes.
    /// `None` for an operand slot the op does not use. Errors if a size overflows `u32`.
    pub fn operand_bytes(&self, with_bias: bool) -> Option<([Option<u32>; MAX_JOB_INPUTS], u32)> {
        let e = self.dtype().size();
        let elems = |len: u32| len.checked_mul(e);
        match *self {
            Op::AddF32 { len }
            | Op::MulF32 { len }
            | Op::AddI8 { len, .. }
            | Op::MulI8 { len, .. } => {
                let b = elems(len)?;
                Some(([Some(b), Some(b), None], b))
            }
            Op::ReluF32 { len } | Op::ReluI8 { len, .. } => {
                let b = elems(len)?;
                Some(([Some(b), None, None], b))
            }
            Op::FullyConnectedF32 { shape } | Op::FullyConnectedI8 { shape, .. } => {
                let input = elems(shape.batches.checked_mul(shape.in_features)?)?;
                let weights = elems(shape.out_features.checked_mul(shape.in_features)?)?;
                let out = elems(shape.batches.checked_mul(shape.out_features)?)?;
                // Bias is f32 or i32: four bytes per output feature either way.
                let bias = if with_bias {
                    Some(shape.out_features.checked_mul(4)?)
                } else {
                    None
                };
                Some(([Some(input), Some(weights), bias], out))
            }
        }
    }
}

/// What a job does.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum JobKind {
    /// A DMA copy of `src.len` bytes (`src.len == dst.len`), host↔device or device↔device.
    Transfer {
        /// Where the bytes come from.
        src: Region,
        /// Where they go.
        dst: Region,
    },
    /// An operator on the NPU.
    Compute {
        /// The operator.
        op: Op,
        /// Input regions in operand order (see [`Op`]).
        inputs: heapless::Vec<Region, MAX_JOB_INPUTS>,
        /// Output region.
        output: Region,
    },
}

/// Which hardware queue a job runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Queue {
    /// The DMA engine (transfers).
    Dma,
    /// Execution unit `n` (`n < Capabilities::execution_units`).
    Unit(u8),
}

impl Queue {
    /// A dense index: DMA is 0, unit `n` is `n + 1`. Below [`MAX_QUEUES`] for valid queues.
    pub const fn index(self) -> usize {
        match self {
            Queue::Dma => 0,
            Queue::Unit(n) => n as usize + 1,
        }
    }
}

/// A unit of work for the NPU.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Job {
    /// What to do.
    pub kind: JobKind,
    /// Where to run it.
    pub queue: Queue,
    /// Fences that must complete before this job starts.
    pub deps: heapless::Vec<Fence, MAX_JOB_DEPS>,
}

/// A set of (operator, dtype) pairs, as a bitset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct OpSet(pub u32);

impl OpSet {
    /// No operator.
    pub const EMPTY: OpSet = OpSet(0);

    const fn bit(op: OpKind, dtype: DType) -> u32 {
        let d = match dtype {
            DType::F32 => 0,
            DType::I8 => 1,
        };
        1 << (op as u32 * 2 + d)
    }

    /// Every operator this crate knows, in every dtype.
    pub const fn all() -> OpSet {
        let mut bits = 0;
        let mut i = 0;
        while i < OpKind::ALL.len() {
            bits |= Self::bit(OpKind::ALL[i], DType::F32) | Self::bit(OpKind::ALL[i], DType::I8);
            i += 1;
        }
        OpSet(bits)
    }

    /// This set plus one pair.
    pub const fn with(self, op: OpKind, dtype: DType) -> OpSet {
        OpSet(self.0 | Self::bit(op, dtype))
    }

    /// This set less one pair.
    pub const fn without(self, op: OpKind, dtype: DType) -> OpSet {
        OpSet(self.0 & !Self::bit(op, dtype))
    }

    /// Whether the pair is in the set.
    pub const fn contains(self, op: OpKind, dtype: DType) -> bool {
        self.0 & Self::bit(op, dtype) != 0
    }
}

/// What an NPU can do, as its driver declares it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Capabilities {
    /// Bytes of device memory (the arena) jobs can address.
    pub device_memory_bytes: u32,
    /// Bytes of DMA-capable host memory ([`Npu::host_memory`]).
    pub host_memory_bytes: u32,
    /// Required alignment of every region, in bytes (a power of two; 16 on Ethos-U).
    pub alignment: u32,
    /// Independent execution units (compute queues), at most [`MAX_EXECUTION_UNITS`].
    pub execution_units: u8,
    /// Jobs that can be in flight at once; one more is refused with [`HalError::QueueFull`].
    pub max_in_flight: u16,
    /// Operators and dtypes the NPU runs; the rest run on the CPU fallback kernels.
    pub ops: OpSet,
    /// Whether the NPU reads constant data (weights) directly from flash.
    pub reads_flash: bool,
}

/// Why the HAL refused or failed a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum HalError {
    /// Too many jobs in flight; retry after one completes.
    QueueFull {
        /// The driver's in-flight capacity.
        capacity: u16,
    },
    /// The NPU does not run this operator in this dtype.
    Unsupported {
        /// The operator.
        op: OpKind,
        /// The dtype.
        dtype: DType,
    },
    /// A region lies outside its address space.
    OutOfBounds {
        /// The region.
        region: Region,
        /// Size of its address space.
        space_bytes: u32,
    },
    /// A region's offset is not a multiple of the required alignment.
    Misaligned {
        /// The region.
        region: Region,
        /// Required alignment.
        alignment: u32,
    },
    /// A region's length does not match what the operation needs.
    BadLength {
        /// Operand index (inputs in order, then the output as `MAX_JOB_INPUTS`).
        operand: u8,
        /// Bytes needed.
        expected: u32,
        /// Bytes given.
        actual: u32,
    },
    /// The output region overlaps an input region (in-place execution is not offered).
    Overlap {
        /// The overlapping input's index.
        operand: u8,
    },
    /// A compute job names a region outside device memory (the NPU computes only on
    /// [`Space::Device`]), or a transfer's two regions differ in length.
    WrongSpace {
        /// The offending region.
        region: Region,
    },
    /// The queue names an execution unit that does not exist.
    NoSuchUnit {
        /// Requested unit.
        unit: u8,
        /// Units present.
        units: u8,
    },
    /// A fence that was never issued by this NPU.
    UnknownFence(Fence),
    /// The job failed on the device (bus error, kernel rejected its parameters, ...).
    JobFailed {
        /// The failed job's fence.
        fence: Fence,
        /// Driver-specific code.
        code: u32,
    },
}

/// A non-blocking NPU driver.
///
/// Contract:
/// - `submit` validates the job (regions in bounds and aligned, op supported, unit exists) and
///   returns at once. A job starts after all of `deps` and after earlier jobs on its queue.
/// - `poll(f)` returns `Ok(())` once the job of `f` and everything it depends on has taken
///   effect in memory, `Err(WouldBlock)` before, and the job's error if it failed. A job whose
///   dependency failed does not run and fails too, so polling the last fence of a chain reports
///   a failure anywhere in it. A driver remembers failures for a bounded number of jobs (the
///   simulator: 16); polling an older failed fence may answer `Ok`.
/// - Jobs on one queue complete in submission order (the server relies on it).
/// - Transfers copy host↔device or device↔device (host→host is [`HalError::WrongSpace`]);
///   overlapping source and destination is [`HalError::Overlap`]. A compute job on
///   [`Queue::Dma`] is [`HalError::Unsupported`].
/// - `wait_for_event` blocks the CPU until at least one in-flight job may have completed (or
///   returns at once if none is in flight).
/// - `on_interrupt` is the completion interrupt's entry point; it must not block.
pub trait Npu {
    /// What this NPU can do.
    fn capabilities(&self) -> Capabilities;
    /// Queue a job; returns its fence without waiting.
    fn submit(&mut self, job: &Job) -> Result<Fence, HalError>;
    /// Whether the job behind `fence` has completed.
    fn poll(&mut self, fence: Fence) -> nb::Result<(), HalError>;
    /// Sleep until a job may have completed (`WFI` on hardware).
    fn wait_for_event(&mut self);
    /// Completion interrupt entry point: retire finished jobs. Callable from an ISR.
    fn on_interrupt(&mut self);
    /// The cycle time source.
    fn now(&self) -> Cycles;
    /// CPU view of DMA-capable host memory ([`Space::Host`]).
    fn host_memory(&mut self) -> &mut [u8];
}
