//! A driver over another that changes only what a test says: the rest of the HAL is forwarded.
//!
//! Tests that need a misbehaving or observed driver (one that cannot reset, one whose forced
//! variant computes wrong bytes, one that logs every job, one that lends its device memory)
//! implement [`Shim`] for their small
//! type and hand [`Shimmed`] of it to the server. Every HAL method is forwarded, the defaults
//! included, so such a driver differs from the one it wraps only where the test says.

use npu_compute::hal::{
    Capabilities, Cycles, Estimate, ExecutionUnit, Fence, HalError, Job, Npu, Variant,
};
use npu_compute::ops::Op;

/// What a test changes of the driver it wraps; each method defaults to the inner driver's.
pub trait Shim {
    /// The driver wrapped.
    type Inner: Npu;
    /// [`Npu::RUNS_OPS`].
    const RUNS_OPS: bool = Self::Inner::RUNS_OPS;
    /// The driver wrapped.
    fn inner(&self) -> &Self::Inner;
    /// The driver wrapped.
    fn inner_mut(&mut self) -> &mut Self::Inner;
    /// [`Npu::submit`].
    fn submit(&mut self, job: &Job<'_>) -> Result<Fence, HalError> {
        self.inner_mut().submit(job)
    }
    /// [`Npu::reset`].
    fn reset(&mut self) -> Result<(), HalError> {
        self.inner_mut().reset()
    }
    /// [`Npu::device_memory`].
    fn device_memory(&mut self) -> Option<&mut [u8]> {
        self.inner_mut().device_memory()
    }
}

/// A [`Shim`] as a driver.
pub struct Shimmed<S>(pub S);

impl<S: Shim> Npu for Shimmed<S> {
    const RUNS_OPS: bool = S::RUNS_OPS;
    fn capabilities(&self) -> Capabilities {
        self.0.inner().capabilities()
    }
    fn submit(&mut self, job: &Job<'_>) -> Result<Fence, HalError> {
        self.0.submit(job)
    }
    fn poll(&mut self, fence: Fence) -> nb::Result<(), HalError> {
        self.0.inner_mut().poll(fence)
    }
    fn wait_for_event(&mut self) {
        self.0.inner_mut().wait_for_event()
    }
    fn on_interrupt(&mut self) {
        self.0.inner_mut().on_interrupt()
    }
    fn now(&self) -> Cycles {
        self.0.inner().now()
    }
    fn host_memory(&mut self) -> &mut [u8] {
        self.0.inner_mut().host_memory()
    }
    fn device_memory(&mut self) -> Option<&mut [u8]> {
        self.0.device_memory()
    }
    fn map_flash(&mut self, bytes: &'static [u8]) -> Result<u8, HalError> {
        self.0.inner_mut().map_flash(bytes)
    }
    fn unmap_flash(&mut self, segment: u8) {
        self.0.inner_mut().unmap_flash(segment)
    }
    fn supports_variant(&self, op: &Op, variant: Variant) -> bool {
        self.0.inner().supports_variant(op, variant)
    }
    fn tuning_fingerprint(&self) -> u64 {
        self.0.inner().tuning_fingerprint()
    }
    fn host_compute(&mut self, op: &Op) {
        self.0.inner_mut().host_compute(op)
    }
    fn execution_unit(&self, unit: u8) -> ExecutionUnit {
        self.0.inner().execution_unit(unit)
    }
    fn estimate(&mut self, job: &Job<'_>) -> Option<Estimate> {
        self.0.inner_mut().estimate(job)
    }
    fn estimate_host_compute(&self, op: &Op) -> Option<Cycles> {
        self.0.inner().estimate_host_compute(op)
    }
    fn clock_counts_cpu(&self) -> bool {
        self.0.inner().clock_counts_cpu()
    }
    fn reset(&mut self) -> Result<(), HalError> {
        self.0.reset()
    }
}
