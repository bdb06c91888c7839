//! Dependencies across queues: a dependent job never completes before its dependency (DMA to a
//! unit, one unit to another) and reads the bytes its dependency wrote.

use super::jobs::{build_op, compute, transfer};
use super::suite::{skip, Order, Step, Suite};
use super::Skip;
use crate::hal::{Npu, Queue};

impl<N: Npu + ?Sized> Suite<'_, N> {
    /// [`Check::DependencyDmaToUnit`](super::Check::DependencyDmaToUnit).
    pub(super) fn dependency_dma_to_unit(&mut self) -> Step {
        const STEP: &str = "behind big transfers on the DMA queue, submitted a transfer host -> device, then a job on unit 0 that depends on it, and polled the dependent job first at every wait";
        let op = self.needs_unit_op()?;
        let l = self.layout;
        self.busy_dma(STEP)?;
        let upload = self.submit(STEP, &transfer(l.h0(l.small), l.a(), &[]))?;
        let small = build_op(op, l.small);
        let dependent = self.submit(
            STEP,
            &compute(&small, l.a(), l.b(), Queue::Unit(0), &[upload]),
        )?;
        self.observe(STEP, &[upload, dependent], Order::Dependency)
    }

    /// [`Check::DependencyUnitToUnit`](super::Check::DependencyUnitToUnit).
    pub(super) fn dependency_unit_to_unit(&mut self) -> Step {
        const STEP: &str = "behind big jobs on unit 0, submitted a small job on unit 0, then a job on unit 1 that depends on it, and polled the dependent job first at every wait";
        let op = self.needs_unit_op()?;
        if self.caps.execution_units < 2 {
            return skip(Skip::OneExecutionUnit);
        }
        let l = self.layout;
        self.busy_unit(STEP, op, 0)?;
        let small = build_op(op, l.small);
        let first = self.submit(STEP, &compute(&small, l.a(), l.b(), Queue::Unit(0), &[]))?;
        let dependent = self.submit(
            STEP,
            &compute(&small, l.b(), l.c(), Queue::Unit(1), &[first]),
        )?;
        self.observe(STEP, &[first, dependent], Order::Dependency)
    }

    /// [`Check::DependencyData`](super::Check::DependencyData).
    pub(super) fn dependency_data(&mut self) -> Step {
        const SETUP: &str = "wrote old data into device blocks A, B and C (host -> device)";
        const STEP: &str = "behind big transfers on the DMA queue, ran the chain host -> A (DMA), A -> B (unit 0), B -> C (unit 1, with 2+ units), C -> host (DMA), each depending on the one before, and read the result back";
        self.needs_bytes()?;
        let op = self.needs_unit_op()?;
        let l = self.layout;
        // Old data in A, B and C, so that a job that runs too early copies something else.
        let old = self.next_seed();
        self.fill(SETUP, l.h0(3 * l.small), old)?;
        let setup = self.submit(SETUP, &transfer(l.h0(3 * l.small), l.abc(), &[]))?;
        self.wait(SETUP, setup)?;

        let seed = self.next_seed();
        self.fill(STEP, l.h0(l.small), seed)?;
        let stale = self.next_seed();
        self.fill(STEP, l.h1(l.small), stale)?;
        self.busy_dma(STEP)?;
        let small = build_op(op, l.small);
        let upload = self.submit(STEP, &transfer(l.h0(l.small), l.a(), &[]))?;
        let mut last = self.submit(
            STEP,
            &compute(&small, l.a(), l.b(), Queue::Unit(0), &[upload]),
        )?;
        let mut result = l.b();
        if self.caps.execution_units >= 2 {
            last = self.submit(
                STEP,
                &compute(&small, l.b(), l.c(), Queue::Unit(1), &[last]),
            )?;
            result = l.c();
        }
        let download = self.submit(STEP, &transfer(result, l.h1(l.small), &[last]))?;
        self.wait(STEP, download)?;
        self.compare(STEP, l.h1(l.small), seed)
    }
}
