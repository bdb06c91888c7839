//! How long a job runs: the Ethos-U55 layer model for layer ops when configured (its answers
//! cached, since the model searches block shapes), else the simple model of
//! [`SimConfig::job_cost`](crate::SimConfig::job_cost).

use npu_compute::hal::{Cycles, JobKind};

use crate::{cost, layer, SimNpu};

/// Layer costs already computed (the cost model searches block shapes, which is worth
/// remembering: a model runs the same layers every inference). 64 rather than a model's
/// layer count: a tuner times up to seven variants of a layer, each its own entry.
const LAYER_CACHE: usize = 64;

#[derive(Debug)]
pub(crate) struct LayerCache {
    entries: [Option<(cost::LayerDesc, cost::CostBreakdown)>; LAYER_CACHE],
    next: usize,
}

impl LayerCache {
    /// A cache with nothing computed yet.
    pub(crate) const fn new() -> Self {
        LayerCache {
            entries: [None; LAYER_CACHE],
            next: 0,
        }
    }

    /// The cost of a layer, from the cache when it was computed recently.
    pub(crate) fn cost(
        &mut self,
        desc: &cost::LayerDesc,
        cfg: &cost::U55Config,
    ) -> cost::CostBreakdown {
        if let Some((_, c)) = self.entries.iter().flatten().find(|(d, _)| d == desc) {
            return *c;
        }
        let c = cost::layer_cycles(desc, cfg);
        self.entries[self.next] = Some((*desc, c));
        self.next = (self.next + 1) % LAYER_CACHE;
        c
    }
}

impl<const JOBS: usize> SimNpu<'_, JOBS> {
    /// Cycles of a job: the Ethos-U55 layer model for layer ops when configured, else the
    /// simple model of [`SimConfig::job_cost`](crate::SimConfig::job_cost).
    pub(crate) fn job_cycles(&mut self, kind: &JobKind<'_>) -> Cycles {
        if let (
            JobKind::Compute {
                op,
                variant,
                inputs,
                ..
            },
            Some(pipeline),
            Some(cfg),
        ) = (kind, self.pipeline.as_mut(), self.config.layers.as_ref())
        {
            if let Some(desc) = layer::describe(op, *variant, inputs) {
                let cost = self.layer_cache.cost(&desc, cfg);
                return pipeline.push_cost(cost).total.max(1);
            }
        }
        self.config.job_cost(kind)
    }
}
