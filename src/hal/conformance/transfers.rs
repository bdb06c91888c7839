//! Transfers move the right bytes: host to device and back, device to device, and from a mapped
//! flash segment (which is refused once unmapped).

use super::jobs::transfer;
use super::layout::{FlashProbe, FLASH_PROBE, PROBE_BYTES, PROBE_SEED};
use super::suite::{fail, skip, Step, Suite};
use super::{Problem, Skip};
use crate::hal::{HalError, Npu, Region};

impl<N: Npu + ?Sized> Suite<'_, N> {
    /// [`Check::TransferRoundTrip`](super::Check::TransferRoundTrip).
    pub(super) fn transfer_round_trip(&mut self) -> Step {
        const STEP: &str =
            "copied host H0 -> device X -> host H1 on the DMA queue and compared H1 with H0";
        self.needs_bytes()?;
        let l = self.layout;
        let (seed, stale) = (self.next_seed(), self.next_seed());
        self.fill(STEP, l.h0(l.big), seed)?;
        self.fill(STEP, l.h1(l.big), stale)?;
        self.submit(STEP, &transfer(l.h0(l.big), l.x(), &[]))?;
        let back = self.submit(STEP, &transfer(l.x(), l.h1(l.big), &[]))?;
        self.wait(STEP, back)?;
        self.compare(STEP, l.h1(l.big), seed)
    }

    /// [`Check::DeviceCopy`](super::Check::DeviceCopy).
    pub(super) fn device_copy(&mut self) -> Step {
        const STEP: &str = "copied host H0 -> device X -> device Y -> host H1 on the DMA queue and compared H1 with H0";
        self.needs_bytes()?;
        let l = self.layout;
        let (seed, stale) = (self.next_seed(), self.next_seed());
        self.fill(STEP, l.h0(l.big), seed)?;
        self.fill(STEP, l.h1(l.big), stale)?;
        self.submit(STEP, &transfer(l.h0(l.big), l.x(), &[]))?;
        self.submit(STEP, &transfer(l.x(), l.y(), &[]))?;
        let back = self.submit(STEP, &transfer(l.y(), l.h1(l.big), &[]))?;
        self.wait(STEP, back)?;
        self.compare(STEP, l.h1(l.big), seed)
    }

    /// [`Check::FlashMapping`](super::Check::FlashMapping).
    pub(super) fn flash_mapping(&mut self) -> Step {
        const UNREADABLE: &str =
            "called map_flash on a driver whose capabilities say reads_flash = false";
        const MAP: &str = "called map_flash with a 64-byte aligned static of 64 bytes";
        if !self.caps.reads_flash {
            return match self.npu.map_flash(&FLASH_PROBE.0) {
                Err(HalError::FlashUnreadable) => Ok(()),
                got => {
                    if let Ok(segment) = got {
                        self.npu.unmap_flash(segment);
                    }
                    fail(
                        UNREADABLE,
                        Problem::MapFlash {
                            expected: Some(HalError::FlashUnreadable),
                            got,
                        },
                    )
                }
            };
        }
        self.needs_bytes()?;
        let l = self.layout;
        let alignment = self.caps.alignment.max(self.caps.flash_alignment);
        if alignment as usize > core::mem::align_of::<FlashProbe>()
            || l.small as usize > PROBE_BYTES
        {
            return skip(Skip::FlashAlignment { alignment });
        }
        let segment = match self.npu.map_flash(&FLASH_PROBE.0) {
            Ok(segment) => segment,
            Err(HalError::FlashSegmentsFull { .. }) => return skip(Skip::FlashSegmentsFull),
            Err(e) => {
                return fail(
                    MAP,
                    Problem::MapFlash {
                        expected: None,
                        got: Err(e),
                    },
                )
            }
        };
        let read = self.read_flash(segment);
        // The segment's jobs must be over before it is unmapped.
        let drained = self.drain();
        self.npu.unmap_flash(segment);
        read?;
        drained?;
        if self.options.validates_regions {
            const UNMAPPED: &str = "after unmap_flash, submitted a transfer from the unmapped segment to device memory";
            let flash = Region::flash(segment, 0, l.small);
            self.refuse_exactly(
                UNMAPPED,
                &transfer(flash, l.a(), &[]),
                HalError::FlashNotMapped { segment },
            )?;
        }
        Ok(())
    }

    /// Copies the mapped probe through device memory back to host memory and compares it.
    fn read_flash(&mut self, segment: u8) -> Step {
        const STEP: &str =
            "copied a mapped flash segment -> device A -> host H1 and compared H1 with the static";
        let l = self.layout;
        let stale = self.next_seed();
        self.fill(STEP, l.h1(l.small), stale)?;
        let flash = Region::flash(segment, 0, l.small);
        self.submit(STEP, &transfer(flash, l.a(), &[]))?;
        let back = self.submit(STEP, &transfer(l.a(), l.h1(l.small), &[]))?;
        self.wait(STEP, back)?;
        self.compare(STEP, l.h1(l.small), PROBE_SEED)
    }
}
