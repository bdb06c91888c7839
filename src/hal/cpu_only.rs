//! The HAL of a part without an NPU: [`CpuOnly`] (its documentation explains the design).

use super::{
    Capabilities, Cycles, Fence, HalError, Job, JobKind, Npu, Queue, Region, Space,
    MAX_FLASH_SEGMENTS,
};
use crate::ops::OpSet;

/// The driver's job table: a job is in it only while [`Npu::submit`] performs it, so one
/// more is never refused.
const MAX_IN_FLIGHT: u16 = 1;

/// The driver of a part without an NPU: every operator runs on the server's CPU fallback.
///
/// # Why
///
/// The runtime reaches memory only through an [`Npu`]: the server plans the arena as device
/// memory, moves bytes with transfer jobs, and runs an operator the NPU lacks on the CPU
/// fallback kernels (`server::fallback`). A microcontroller with no
/// NPU, or a product that keeps its NPU for another model, runs a model on the CPU alone with
/// the same runtime and the same arena plan: [`CpuOnly`] is that board's driver. It declares no
/// operator ([`OpSet::EMPTY`]), so every compute job takes the CPU fallback (and says so at
/// build time, [`Npu::RUNS_OPS`], so the server carries no code to submit one), and it performs
/// transfers with the CPU at [`Npu::submit`] (a `memcpy`): a job is complete when it is
/// submitted, so the server never waits and [`Npu::wait_for_event`] has nothing to sleep for.
///
/// # Memories
///
/// - **Device memory** is a slice of ordinary RAM the firmware gives it (a `static`): the
///   arena, planned exactly as on an NPU board. It holds the activations and the constants
///   the runtime prepares (per-channel multipliers, biases); the graph's
///   [`arena`](crate::graph::Graph::arena) report (and `npu-sim plan`) gives its size.
/// - **Host memory** carries only the transfers a program makes: a graph's inputs written
///   and outputs read, the constants it prepares (per-channel multipliers, biases) on their
///   way into the arena. The fallback computes in device memory in place
///   ([`Npu::device_memory`]: there is no NPU to own it), so no operator's operands are
///   copied. Its size is the largest such transfer, with its alignment padding:
///   [`ServerStats::staging_bytes_peak`](crate::server::ServerStats) after an invoke (for
///   kws_dscnn its 490-byte input).
/// - **Flash** is read in place: [`Npu::map_flash`] keeps the model's `&'static [u8]`, its
///   constants are bound there and the kernels read them where they lie.
///
/// Device and host regions need [`CpuOnly::ALIGNMENT`] (4 bytes, what the kernels' `i32` and
/// `f32` views need); flash regions need none (an operator with a flash operand the kernels
/// cannot view where it lies, an `i32` bias at an odd address, is computed over copies in
/// host staging instead).
///
/// # Time
///
/// There is no NPU clock: [`Npu::now`] counts the jobs completed, which is all the server's
/// watchdog and tuner could compare (neither is on by default; leave them off on this HAL).
///
/// `'a` is the lifetime of its device and host memories.
pub struct CpuOnly<'a> {
    /// Device memory: the arena the server plans in.
    device: &'a mut [u8],
    /// Host memory: staging for the transfers a program makes.
    host: &'a mut [u8],
    /// Mapped flash segments.
    flash: [Option<&'static [u8]>; MAX_FLASH_SEGMENTS],
    /// The fence of the next job; every fence below it has completed.
    next: u64,
}

impl<'a> CpuOnly<'a> {
    /// The alignment every device and host region needs: the widest element the fallback
    /// kernels view operands as (`i32` biases and multipliers, `f32`).
    pub const ALIGNMENT: u32 = 4;

    /// A driver over `device` (the arena) and `host` (staging) memories. Both should start
    /// on an [`CpuOnly::ALIGNMENT`] boundary (a `static` of `u32`s or a 16-byte aligned array does);
    /// region offsets are relative to their starts. Memories beyond `u32::MAX` bytes are
    /// declared as `u32::MAX` bytes.
    pub fn new(device: &'a mut [u8], host: &'a mut [u8]) -> Self {
        CpuOnly {
            device,
            host,
            flash: [None; MAX_FLASH_SEGMENTS],
            next: 0,
        }
    }

    /// The bytes of `space`; [`HalError::FlashNotMapped`] for a segment not mapped.
    fn space(&self, space: Space) -> Result<&[u8], HalError> {
        match space {
            Space::Device => Ok(self.device),
            Space::Host => Ok(self.host),
            Space::Flash(segment) => self.segment(segment),
            // No slow tier: every region in it but an empty one is out of bounds.
            Space::Slow => Ok(&[]),
        }
    }

    /// Mapped flash segment `segment`; [`HalError::FlashNotMapped`] if it is not.
    fn segment(&self, segment: u8) -> Result<&'static [u8], HalError> {
        self.flash
            .get(usize::from(segment))
            .copied()
            .flatten()
            .ok_or(HalError::FlashNotMapped { segment })
    }

    /// `region`'s bytes in its space: mapped, in bounds and aligned, or the contract's error.
    fn check(&self, region: &Region) -> Result<core::ops::Range<usize>, HalError> {
        let bytes = self.space(region.space)?;
        let end = usize::try_from(region.end())
            .ok()
            .filter(|&end| end <= bytes.len())
            .ok_or(HalError::OutOfBounds {
                region: *region,
                space_bytes: len_u32(bytes),
            })?;
        let alignment = match region.space {
            Space::Flash(_) => 1,
            Space::Device | Space::Host | Space::Slow => Self::ALIGNMENT,
        };
        if !region.offset.is_multiple_of(alignment) {
            return Err(HalError::Misaligned {
                region: *region,
                alignment,
            });
        }
        Ok(region.offset as usize..end)
    }

    /// A transfer, validated as the contract says (host↔device, device↔device or
    /// flash→host/device, equal lengths, no overlap), then copied.
    fn transfer(&mut self, src: &Region, dst: &Region) -> Result<(), HalError> {
        if (src.space == Space::Host && dst.space == Space::Host)
            || matches!(dst.space, Space::Flash(_))
            || src.len != dst.len
        {
            return Err(HalError::WrongSpace { region: *dst });
        }
        let from = self.check(src)?;
        let to = self.check(dst)?;
        if src.overlaps(dst) {
            return Err(HalError::Overlap { operand: 0 });
        }
        match (src.space, dst.space) {
            // Only empty regions of the slow tier pass the checks: nothing to copy.
            (Space::Slow, _) | (_, Space::Slow) => {}
            (Space::Device, Space::Device) => self.device.copy_within(from, to.start),
            (Space::Device, _) => self.host[to].copy_from_slice(&self.device[from]),
            (Space::Host, _) => self.device[to].copy_from_slice(&self.host[from]),
            (Space::Flash(segment), _) => {
                let flash = self.segment(segment)?;
                let into: &mut [u8] = match dst.space {
                    Space::Device => self.device,
                    _ => self.host,
                };
                into[to].copy_from_slice(&flash[from]);
            }
        }
        Ok(())
    }
}

/// A memory's length as the HAL declares it.
fn len_u32(bytes: &[u8]) -> u32 {
    u32::try_from(bytes.len()).unwrap_or(u32::MAX)
}

impl Npu for CpuOnly<'_> {
    /// It declares no operator: the server leaves its compute-job path out of the build.
    const RUNS_OPS: bool = false;

    /// No operator, one (idle) execution unit, no slow tier, [`CpuOnly::ALIGNMENT`], flash read
    /// in place.
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            device_memory_bytes: len_u32(self.device),
            host_memory_bytes: len_u32(self.host),
            slow_memory_bytes: 0,
            alignment: Self::ALIGNMENT,
            execution_units: 1,
            max_in_flight: MAX_IN_FLIGHT,
            ops: OpSet::EMPTY,
            reads_flash: true,
            flash_alignment: 1,
        }
    }

    /// Performs a transfer at once; refuses a compute job ([`HalError::Unsupported`]: the
    /// server runs it on the CPU fallback instead).
    fn submit(&mut self, job: &Job<'_>) -> Result<Fence, HalError> {
        if let Queue::Unit(unit) = job.queue {
            if unit >= 1 {
                return Err(HalError::NoSuchUnit { unit, units: 1 });
            }
        }
        if let Some(&dep) = job.deps.iter().find(|d| d.0 >= self.next) {
            return Err(HalError::UnknownFence(dep));
        }
        match &job.kind {
            JobKind::Compute { op, .. } => {
                return Err(HalError::Unsupported {
                    op: op.kind(),
                    dtype: op.dtype(),
                })
            }
            JobKind::Transfer { src, dst } => self.transfer(src, dst)?,
        }
        let fence = Fence(self.next);
        self.next += 1;
        Ok(fence)
    }

    /// Every issued fence has completed; a later one is [`HalError::UnknownFence`].
    fn poll(&mut self, fence: Fence) -> nb::Result<(), HalError> {
        if fence.0 < self.next {
            Ok(())
        } else {
            Err(nb::Error::Other(HalError::UnknownFence(fence)))
        }
    }

    /// Nothing is ever in flight: returns at once.
    fn wait_for_event(&mut self) {}

    /// There is no interrupt.
    fn on_interrupt(&mut self) {}

    /// Jobs completed so far (there is no NPU clock).
    fn now(&self) -> Cycles {
        self.next
    }

    /// The staging memory given to [`CpuOnly::new`].
    fn host_memory(&mut self) -> &mut [u8] {
        self.host
    }

    /// The arena itself: the CPU fallback computes in it in place.
    fn device_memory(&mut self) -> Option<&mut [u8]> {
        Some(self.device)
    }

    /// Keeps `bytes` as the first free segment; [`HalError::FlashSegmentsFull`] when all
    /// [`MAX_FLASH_SEGMENTS`] are mapped.
    fn map_flash(&mut self, bytes: &'static [u8]) -> Result<u8, HalError> {
        let (segment, slot) = self
            .flash
            .iter_mut()
            .enumerate()
            .find(|(_, slot)| slot.is_none())
            .ok_or(HalError::FlashSegmentsFull {
                capacity: MAX_FLASH_SEGMENTS as u8,
            })?;
        *slot = Some(bytes);
        Ok(segment as u8)
    }

    /// Forgets the segment (an unknown one is ignored).
    fn unmap_flash(&mut self, segment: u8) {
        if let Some(slot) = self.flash.get_mut(usize::from(segment)) {
            *slot = None;
        }
    }
}
