//! The checks: one rule of the [`Npu`] contract each, with its name and the rule in a sentence.

use core::fmt;

#[cfg(doc)]
use super::run;
#[cfg(doc)]
use crate::hal::{Capabilities, HalError, Npu};

/// One rule of the [`Npu`] contract that the suite checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Check {
    /// [`Npu::capabilities`] is consistent with itself and with [`Npu::host_memory`].
    Capabilities,
    /// Fences increase; one queue's jobs complete in submission order.
    FenceOrder,
    /// A unit job that depends on a DMA transfer never completes before it.
    DependencyDmaToUnit,
    /// A job on unit 1 that depends on a job of unit 0 never completes before it.
    DependencyUnitToUnit,
    /// Dependent jobs read the bytes their dependencies wrote.
    DependencyData,
    /// Host → device → host transfers give back the same bytes.
    TransferRoundTrip,
    /// A device → device transfer copies the bytes.
    DeviceCopy,
    /// [`Npu::map_flash`] answers as [`Capabilities::reads_flash`] says, mapped bytes are
    /// readable and an unmapped segment is refused.
    FlashMapping,
    /// Misaligned regions are refused with [`HalError::Misaligned`].
    Misaligned,
    /// Regions past the end of their memory are refused with [`HalError::OutOfBounds`].
    OutOfBounds,
    /// A unit that does not exist is refused with [`HalError::NoSuchUnit`], a compute job on
    /// the DMA queue with [`HalError::Unsupported`].
    BadQueue,
    /// An operator the driver does not declare is refused with [`HalError::Unsupported`].
    UnsupportedOp,
    /// A flash segment that is not mapped is refused with [`HalError::FlashNotMapped`].
    FlashNotMapped,
    /// Host → host transfers, writes into flash, transfers of unequal lengths and compute jobs
    /// on host memory are refused with [`HalError::WrongSpace`].
    WrongSpace,
    /// Overlapping source and destination are refused with [`HalError::Overlap`].
    Overlap,
    /// After refusing jobs the driver accepts and completes valid ones.
    UsableAfterRefusal,
    /// [`Npu::on_interrupt`] with nothing pending is harmless.
    SpuriousInterrupt,
    /// Completion is observed through [`Npu::wait_for_event`], [`Npu::on_interrupt`] and
    /// [`Npu::poll`].
    InterruptCompletion,
    /// [`Npu::wait_for_event`] returns when nothing is in flight.
    IdleWait,
    /// One job more than [`Capabilities::max_in_flight`] is refused with
    /// [`HalError::QueueFull`] (or accepted after the driver retired some), and submission
    /// works again after a wait.
    QueueFull,
    /// Polling a fence never issued answers [`HalError::UnknownFence`].
    UnknownFence,
}

impl Check {
    /// Number of checks.
    pub const COUNT: usize = 21;

    /// Every check, in the order [`run`] runs them.
    pub const ALL: [Check; Check::COUNT] = [
        Check::Capabilities,
        Check::FenceOrder,
        Check::DependencyDmaToUnit,
        Check::DependencyUnitToUnit,
        Check::DependencyData,
        Check::TransferRoundTrip,
        Check::DeviceCopy,
        Check::FlashMapping,
        Check::Misaligned,
        Check::OutOfBounds,
        Check::BadQueue,
        Check::UnsupportedOp,
        Check::FlashNotMapped,
        Check::WrongSpace,
        Check::Overlap,
        Check::UsableAfterRefusal,
        Check::SpuriousInterrupt,
        Check::InterruptCompletion,
        Check::IdleWait,
        Check::QueueFull,
        Check::UnknownFence,
    ];

    /// A short name, as reports print it.
    pub const fn name(self) -> &'static str {
        match self {
            Check::Capabilities => "capabilities",
            Check::FenceOrder => "fence order",
            Check::DependencyDmaToUnit => "dependency DMA -> unit",
            Check::DependencyUnitToUnit => "dependency unit -> unit",
            Check::DependencyData => "dependency data",
            Check::TransferRoundTrip => "transfer round trip",
            Check::DeviceCopy => "device copy",
            Check::FlashMapping => "flash mapping",
            Check::Misaligned => "misaligned regions",
            Check::OutOfBounds => "out-of-bounds regions",
            Check::BadQueue => "bad queue",
            Check::UnsupportedOp => "unsupported operator",
            Check::FlashNotMapped => "unmapped flash",
            Check::WrongSpace => "wrong space",
            Check::Overlap => "overlap",
            Check::UsableAfterRefusal => "usable after refusal",
            Check::SpuriousInterrupt => "spurious interrupt",
            Check::InterruptCompletion => "interrupt completion",
            Check::IdleWait => "idle wait",
            Check::QueueFull => "queue full",
            Check::UnknownFence => "unknown fence",
        }
    }

    /// The rule the check holds the driver to, in a sentence.
    pub const fn rule(self) -> &'static str {
        match self {
            Check::Capabilities => "capabilities() is stable and consistent: alignments are powers of two, 1 to 8 execution units, at least one job in flight, and host_memory() is as long as declared and starts on the alignment",
            Check::FenceOrder => "fences increase, and jobs on one queue complete in submission order (a later fence done implies every earlier one done), and stay done",
            Check::DependencyDmaToUnit => "a job on execution unit 0 that depends on a DMA transfer never completes before the transfer",
            Check::DependencyUnitToUnit => "a job on execution unit 1 that depends on a job of unit 0 never completes before it",
            Check::DependencyData => "a dependent job reads the bytes its dependency wrote (DMA -> unit 0 -> unit 1 -> DMA)",
            Check::TransferRoundTrip => "a host -> device transfer and a device -> host transfer give back the same bytes",
            Check::DeviceCopy => "a device -> device transfer copies the bytes",
            Check::FlashMapping => "map_flash answers FlashUnreadable when the NPU reads no flash; otherwise a mapped segment's bytes reach device memory, and after unmap_flash the segment is refused with FlashNotMapped",
            Check::Misaligned => "a region whose offset is not a multiple of the alignment is refused with Misaligned",
            Check::OutOfBounds => "a region past the end of device or host memory, or past 2^32, is refused with OutOfBounds",
            Check::BadQueue => "a job on a unit that does not exist is refused with NoSuchUnit, a compute job on the DMA queue with Unsupported",
            Check::UnsupportedOp => "a compute job whose operator the driver does not declare is refused with Unsupported",
            Check::FlashNotMapped => "a region in a flash segment that is not mapped is refused with FlashNotMapped (or FlashUnreadable on an NPU that reads no flash)",
            Check::WrongSpace => "host -> host transfers, writes into flash, transfers of unequal lengths and compute jobs on host memory are refused with WrongSpace",
            Check::Overlap => "a transfer or a compute job whose output overlaps its input is refused with Overlap",
            Check::UsableAfterRefusal => "after refusing jobs, the driver accepts and completes valid ones with increasing fences",
            Check::SpuriousInterrupt => "on_interrupt with nothing pending is harmless: completed fences stay completed and new jobs complete",
            Check::InterruptCompletion => "a job's completion is observed through wait_for_event, on_interrupt and poll, and on_interrupt while it runs is harmless",
            Check::IdleWait => "wait_for_event returns at once when nothing is in flight",
            Check::QueueFull => "one job more than max_in_flight is refused with QueueFull carrying the declared capacity (or accepted with a new fence after the driver retired finished jobs), and submission works again after a wait",
            Check::UnknownFence => "polling a fence never issued answers UnknownFence with that fence",
        }
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
