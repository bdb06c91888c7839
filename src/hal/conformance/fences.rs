//! Fences: they increase, one queue's jobs complete in submission order and stay complete, and a
//! fence never issued is unknown.

use super::jobs::{build_op, compute, transfer};
use super::suite::{fail, Order, Step, Suite};
use super::{Answer, Problem};
use crate::hal::{Fence, HalError, Npu, Queue};

impl<N: Npu + ?Sized> Suite<'_, N> {
    /// [`Check::FenceOrder`](super::Check::FenceOrder).
    pub(super) fn fence_order(&mut self) -> Step {
        const STEP_DMA: &str =
            "submitted a big then two small transfers on the DMA queue and polled them newest first at every wait";
        const STEP_UNIT: &str =
            "submitted a big then two small compute jobs on one execution unit and polled them newest first at every wait";
        let l = self.layout;
        let big = transfer(l.x(), l.y(), &[]);
        let small = transfer(l.a(), l.b(), &[]);
        let fences = [
            self.submit(STEP_DMA, &big)?,
            self.submit(STEP_DMA, &small)?,
            self.submit(STEP_DMA, &small)?,
        ];
        self.observe(STEP_DMA, &fences, Order::Queue)?;
        if let Some(op) = self.unit_op {
            let (big_op, small_op) = (build_op(op, l.big), build_op(op, l.small));
            for unit in 0..self.caps.execution_units {
                let big = compute(&big_op, l.x(), l.y(), Queue::Unit(unit), &[]);
                let small = compute(&small_op, l.a(), l.b(), Queue::Unit(unit), &[]);
                let fences = [
                    self.submit(STEP_UNIT, &big)?,
                    self.submit(STEP_UNIT, &small)?,
                    self.submit(STEP_UNIT, &small)?,
                ];
                self.observe(STEP_UNIT, &fences, Order::Queue)?;
            }
        }
        Ok(())
    }

    /// [`Check::UnknownFence`](super::Check::UnknownFence).
    pub(super) fn unknown_fence(&mut self) -> Step {
        const STEP: &str =
            "polled fences never issued: the one after the newest, and Fence(u64::MAX)";
        let l = self.layout;
        let newest = self.submit(STEP, &transfer(l.a(), l.b(), &[]))?;
        self.wait(STEP, newest)?;
        for fence in [newest.0.checked_add(1), Some(u64::MAX)]
            .into_iter()
            .flatten()
        {
            let fence = Fence(fence);
            let expected = Answer::Error(HalError::UnknownFence(fence));
            let got = Answer::from(self.npu.poll(fence));
            if got != expected {
                return fail(
                    STEP,
                    Problem::Poll {
                        fence,
                        expected,
                        got,
                    },
                );
            }
        }
        Ok(())
    }
}
