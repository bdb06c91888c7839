//! Networks: a driver that prefetches weights on the flash port while the NPU computes. Kept
//! apart from the per-layer model because it moves no layer's figure, only when each layer
//! can start; it is the one part of the model that holds state across layers.

use core::cmp::max;

use super::{layer_cycles, CostBreakdown, LayerDesc, U55Config};

/// Chains layers the way a driver that prefetches weights runs a network (see the
/// [module docs](super)): one DMA channel on the flash port copies each layer's weights and
/// scales ([`CostBreakdown::prefetch`]) into a weight buffer of
/// [`U55Config::weight_buffer_bytes`], in layer order and as early as the buffer has room; a
/// layer starts when the previous one has finished and its copy has landed, and then runs for
/// [`CostBreakdown::prefetched`].
///
/// Deterministic and allocation-free: the buffer remembers at most [`PIPELINE_SLOTS`] layers
/// in flight (more stall the prefetch until the oldest finishes).
#[derive(Clone, Copy, Debug)]
pub struct Pipeline {
    cfg: U55Config,
    npu_end: u64,
    dma_end: u64,
    /// `(end cycle of the consuming layer, bytes held)` of prefetched, not yet consumed layers.
    slots: [(u64, u64); PIPELINE_SLOTS],
    used: usize,
}

/// Layers whose prefetched weights a [`Pipeline`] keeps track of at once.
pub const PIPELINE_SLOTS: usize = 16;

impl Pipeline {
    /// An empty pipeline at cycle 0.
    pub const fn new(cfg: U55Config) -> Self {
        Self {
            cfg,
            npu_end: 0,
            dma_end: 0,
            slots: [(0, 0); PIPELINE_SLOTS],
            used: 0,
        }
    }

    /// Runs `desc` after the layers pushed so far. Returns [`layer_cycles`] of the layer with
    /// `total` replaced by the cycles the layer adds to the inference (its run time plus any
    /// wait for its weights).
    pub fn push(&mut self, desc: &LayerDesc) -> CostBreakdown {
        let cost = layer_cycles(desc, &self.cfg);
        self.push_cost(cost)
    }

    /// [`push`](Self::push) for a cost computed already.
    pub fn push_cost(&mut self, cost: CostBreakdown) -> CostBreakdown {
        let staged_cycles = cost.prefetch;
        // The buffer holds about what the flash port moved (its latency counts as a few bytes).
        let staged_bytes =
            staged_cycles.saturating_mul(u64::from(self.cfg.flash_bytes_per_cycle.max(1)));
        let budget = u64::from(self.cfg.weight_buffer_bytes);
        let mut dma_start = self.dma_end;
        if staged_cycles > 0 {
            loop {
                self.retire(dma_start);
                let live = self.slots[..self.used]
                    .iter()
                    .fold(0u64, |acc, s| acc.saturating_add(s.1));
                let full = self.used == PIPELINE_SLOTS;
                if self.used == 0 || (!full && live.saturating_add(staged_bytes) <= budget) {
                    break;
                }
                // Wait until the earliest layer holding buffer space has finished.
                let earliest = self.slots[..self.used]
                    .iter()
                    .map(|s| s.0)
                    .min()
                    .unwrap_or(dma_start);
                dma_start = max(dma_start, earliest);
            }
            self.dma_end = dma_start.saturating_add(staged_cycles);
        }
        let start = max(
            self.npu_end,
            if staged_cycles > 0 { self.dma_end } else { 0 },
        );
        let end = start.saturating_add(cost.prefetched);
        if staged_cycles > 0 && self.used < PIPELINE_SLOTS {
            self.slots[self.used] = (end, staged_bytes);
            self.used += 1;
        }
        let charged = end.saturating_sub(self.npu_end);
        self.npu_end = end;
        CostBreakdown {
            total: charged,
            ..cost
        }
    }

    /// Cycles from the start of the first layer to the end of the last one pushed.
    pub fn total(&self) -> u64 {
        self.npu_end
    }

    /// Frees the buffer space of layers that have finished by `now`.
    fn retire(&mut self, now: u64) {
        let mut i = 0;
        while i < self.used {
            if self.slots[i].0 <= now {
                self.used -= 1;
                self.slots[i] = self.slots[self.used];
            } else {
                i += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::fixtures::{conv, CFG};
    use crate::cost::LayerKind;

    #[test]
    fn pipeline_hides_weights_under_compute() {
        let big = conv([1, 32, 32, 32], [1, 32, 32, 32], 3, 9216);
        let fc = LayerDesc {
            weight_bytes: 16384,
            weights_in_flash: true,
            ..LayerDesc::new(LayerKind::FullyConnected, [1, 1, 1, 128], [1, 1, 1, 128])
        };
        let (a, b) = (layer_cycles(&big, &CFG), layer_cycles(&fc, &CFG));
        // Nothing overlapped: every copy, then every layer.
        let serial = a.prefetch + a.prefetched + b.prefetch + b.prefetched;
        let mut pipe = Pipeline::new(CFG);
        let charged = pipe.push(&big).total + pipe.push(&fc).total;
        assert_eq!(charged, pipe.total());
        assert!(pipe.total() < serial);
        // Never faster than the NPU's work or the flash port's.
        assert!(pipe.total() >= a.compute + b.compute);
        assert!(pipe.total() >= a.prefetch + b.prefetch);
    }
}
