//! Invalid regions are refused with the contract's error: misaligned, out of bounds, in an
//! unmapped flash segment, in the wrong memory, overlapping.

use super::jobs::{build_op, compute, transfer};
use super::suite::{skip, Step, Suite};
use super::Skip;
use crate::hal::{HalError, Npu, Queue, Region, MAX_FLASH_SEGMENTS};

impl<N: Npu + ?Sized> Suite<'_, N> {
    /// [`Check::Misaligned`](super::Check::Misaligned).
    pub(super) fn misaligned(&mut self) -> Step {
        self.needs_validation()?;
        let l = self.layout;
        if l.align == 1 {
            return skip(Skip::AlignmentOne);
        }
        let alignment = l.align;
        // One byte past an aligned offset, inside X: in bounds and overlapping nothing.
        let device = Region::device(l.x().offset + 1, l.small);
        let host = Region::host(1, l.small);
        self.refuse_exactly(
            "submitted a transfer into device memory at an offset one byte past an aligned one",
            &transfer(l.h0(l.small), device, &[]),
            HalError::Misaligned {
                region: device,
                alignment,
            },
        )?;
        self.refuse_exactly(
            "submitted a transfer from host memory at an offset one byte past an aligned one",
            &transfer(host, l.a(), &[]),
            HalError::Misaligned {
                region: host,
                alignment,
            },
        )?;
        if let Some(op) = self.unit_op {
            let small = build_op(op, l.small);
            self.refuse_exactly(
                "submitted a compute job on unit 0 whose input is one byte past an aligned offset",
                &compute(&small, device, l.b(), Queue::Unit(0), &[]),
                HalError::Misaligned {
                    region: device,
                    alignment,
                },
            )?;
        }
        Ok(())
    }

    /// [`Check::OutOfBounds`](super::Check::OutOfBounds).
    pub(super) fn out_of_bounds(&mut self) -> Step {
        self.needs_validation()?;
        let l = self.layout;
        let (device_bytes, host_bytes) =
            (self.caps.device_memory_bytes, self.caps.host_memory_bytes);
        if let Some(offset) = l.past_end(device_bytes, l.small) {
            let region = Region::device(offset, l.small);
            let expected = HalError::OutOfBounds {
                region,
                space_bytes: device_bytes,
            };
            self.refuse_exactly(
                "submitted a transfer into device memory whose region crosses the end of device memory",
                &transfer(l.h0(l.small), region, &[]),
                expected,
            )?;
            if let Some(op) = self.unit_op {
                let small = build_op(op, l.small);
                self.refuse_exactly(
                    "submitted a compute job on unit 0 whose output crosses the end of device memory",
                    &compute(&small, l.a(), region, Queue::Unit(0), &[]),
                    expected,
                )?;
            }
        }
        if let Some(offset) = l.past_end(host_bytes, l.small) {
            let region = Region::host(offset, l.small);
            self.refuse_exactly(
                "submitted a transfer from host memory whose region crosses the end of host memory",
                &transfer(region, l.a(), &[]),
                HalError::OutOfBounds {
                    region,
                    space_bytes: host_bytes,
                },
            )?;
        }
        let region = Region::device(l.wrapping(), l.small);
        self.refuse_exactly(
            "submitted a transfer into device memory whose offset + length overflows a u32",
            &transfer(l.h0(l.small), region, &[]),
            HalError::OutOfBounds {
                region,
                space_bytes: device_bytes,
            },
        )
    }

    /// [`Check::FlashNotMapped`](super::Check::FlashNotMapped).
    pub(super) fn flash_not_mapped(&mut self) -> Step {
        self.needs_validation()?;
        let l = self.layout;
        let segment = MAX_FLASH_SEGMENTS as u8;
        let flash = Region::flash(segment, 0, l.small);
        let expected = HalError::FlashNotMapped { segment };
        // An NPU that reads no flash has nothing mapped and may say so.
        let unreadable = !self.caps.reads_flash;
        let also = |e: &HalError| unreadable && *e == HalError::FlashUnreadable;
        self.refuse(
            "submitted a transfer from a flash segment that is not mapped",
            &transfer(flash, l.a(), &[]),
            expected,
            also,
        )?;
        if let Some(op) = self.unit_op {
            let small = build_op(op, l.small);
            self.refuse(
                "submitted a compute job on unit 0 reading a flash segment that is not mapped",
                &compute(&small, flash, l.b(), Queue::Unit(0), &[]),
                expected,
                also,
            )?;
        }
        Ok(())
    }

    /// [`Check::WrongSpace`](super::Check::WrongSpace).
    pub(super) fn wrong_space(&mut self) -> Step {
        self.needs_validation()?;
        let l = self.layout;
        let (src, dst) = (l.h0(l.small), l.h1(l.small));
        // The contract names "the offending region"; of two it may be either.
        let either = |a: Region, b: Region| {
            move |e: &HalError| {
                *e == HalError::WrongSpace { region: a } || *e == HalError::WrongSpace { region: b }
            }
        };
        self.refuse(
            "submitted a host -> host transfer",
            &transfer(src, dst, &[]),
            HalError::WrongSpace { region: dst },
            either(src, dst),
        )?;
        let flash = Region::flash(0, 0, l.small);
        self.refuse_exactly(
            "submitted a transfer from device memory into flash",
            &transfer(l.a(), flash, &[]),
            HalError::WrongSpace { region: flash },
        )?;
        let longer = Region::device(l.x().offset, 2 * l.small);
        self.refuse(
            "submitted a transfer whose destination is twice as long as its source",
            &transfer(src, longer, &[]),
            HalError::WrongSpace { region: longer },
            either(src, longer),
        )?;
        if let Some(op) = self.unit_op {
            let small = build_op(op, l.small);
            self.refuse_exactly(
                "submitted a compute job on unit 0 whose output is in host memory",
                &compute(&small, l.a(), dst, Queue::Unit(0), &[]),
                HalError::WrongSpace { region: dst },
            )?;
            self.refuse_exactly(
                "submitted a compute job on unit 0 whose input is in host memory",
                &compute(&small, src, l.b(), Queue::Unit(0), &[]),
                HalError::WrongSpace { region: src },
            )?;
        }
        Ok(())
    }

    /// [`Check::Overlap`](super::Check::Overlap).
    pub(super) fn overlap(&mut self) -> Step {
        self.needs_validation()?;
        let l = self.layout;
        let x = l.x().offset;
        let (src, dst) = (
            Region::device(x, 2 * l.small),
            Region::device(x + l.small, 2 * l.small),
        );
        let any_operand = |e: &HalError| matches!(e, HalError::Overlap { .. });
        self.refuse(
            "submitted a device -> device transfer whose destination overlaps its source",
            &transfer(src, dst, &[]),
            HalError::Overlap { operand: 0 },
            any_operand,
        )?;
        if let Some(op) = self.unit_op {
            let small = build_op(op, l.small);
            self.refuse(
                "submitted a compute job on unit 0 whose output is its input (the operator does not run in place)",
                &compute(&small, l.a(), l.a(), Queue::Unit(0), &[]),
                HalError::Overlap { operand: 0 },
                any_operand,
            )?;
        }
        Ok(())
    }
}
