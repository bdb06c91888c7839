//! The README's "Using it in firmware": a model run on the NPU from flash.

use npu_compute::prelude::*;
use npu_sim::{SimConfig, SimNpu};

/// The model in flash, 16-byte aligned so that the NPU reads its weights in place.
static MODEL: &[u8] = npu_compute::include_aligned!("../../models/kws_dscnn/model.tflite");

/// Runs the keyword-spotting model on 49×10 int8 MFCC features; returns its 12 class scores.
///
/// `npu_arena` is the NPU's SRAM (the `.npu_arena` section of `memory.x`), `host_staging` the
/// DMA-capable RAM that transfers go through; both start on a 16-byte boundary.
/// `npu-sim plan` gives the bytes and capacities a model needs: for this one a 20,704-byte
/// arena, 5,216 bytes of host staging (512 at least), 12 operators and 43 tensors.
pub fn classify(
    npu_arena: &mut [u8],
    host_staging: &mut [u8],
    features: &[u8],
) -> Result<[u8; 12], GraphError> {
    // The board's NPU driver; here the software NPU.
    let npu: SimNpu = SimNpu::new(npu_arena, host_staging, SimConfig::default())?;
    let server: NpuServer<_> = NpuServer::new(npu, MemoryConfig::default())?;
    let channel: RefCellChannel<_> = RefCellChannel::new(server);
    let client = ComputeClient::new(&channel);

    // Prepared once (the weights stay in flash), then invoked as often as needed.
    let mut kws: Graph<'_, _, 16, 64> = Graph::prepare(client, MODEL)?;
    let mut scores = [0u8; 12];
    kws.invoke(&[features], &mut [&mut scores])?;
    Ok(scores)
}
