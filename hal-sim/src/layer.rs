//! What a compute job is, in the terms of the Ethos-U55 cost model ([`cost`](crate::cost)):
//! the [`LayerDesc`] of an [`Op`], from the layer its description gives
//! ([`Op::layer`]) and the address space of the job's operands (weights read from flash or
//! from SRAM).
//!
//! Ops without a layer (the f32 ops and the plain int8 elementwise ones) are costed by the
//! simple cycle model of [`SimConfig`](crate::SimConfig).

use npu_compute::hal::{Region, Space, Variant};
use npu_compute::ops::Op;

use crate::cost::LayerDesc;

fn in_flash(r: Option<&Region>) -> bool {
    matches!(r.map(|r| r.space), Some(Space::Flash(_)))
}

/// The layer a compute job runs as `variant`, if the cost model has one for its op.
///
/// The variant is part of the description, so the simulator's layer cache (keyed on the
/// whole [`LayerDesc`]) keeps each variant's cost apart.
pub fn describe(op: &Op, variant: Variant, inputs: &[Region]) -> Option<LayerDesc> {
    let l = op.layer()?;
    let operand = |i: Option<u8>| i.and_then(|i| inputs.get(usize::from(i)));
    let weights = operand(l.weights);
    Some(LayerDesc {
        kind: l.kind,
        ifm: l.ifm,
        ifm2: l.ifm2,
        ofm: l.ofm,
        kernel: l.kernel,
        stride: l.stride,
        dilation: l.dilation,
        axes: l.axes,
        weight_bytes: weights.map_or(0, |r| r.len),
        weights_in_flash: in_flash(weights),
        ifm2_in_flash: in_flash(operand(l.ifm2_operand)),
        variant,
        element_bits: l.element_bits,
    })
}
