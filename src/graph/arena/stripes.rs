//! Choosing the tiled chains of [`Optimise::Memory`](crate::graph::Optimise::Memory): greedy
//! rounds over the chains of row-local steps (see the [`tile`](super::super::tile) module),
//! each kept if it shrinks the arena. Built with the cargo feature `striping`.

use super::super::tile::{self, Tile};
use super::super::{Graph, GraphError, Step, MAX_TILES};
use crate::channel::ComputeChannel;
use crate::ops::Op;

impl<C: ComputeChannel, const OPS: usize, const TENSORS: usize> Graph<'_, C, OPS, TENSORS> {
    /// Whether steps `si` and `si + 1` can run in one tiled chain: both row-local, and the
    /// second reads the first's output, which nothing else reads.
    fn chainable(&self, si: usize, alignment: u32) -> bool {
        let (Some(s), Some(next)) = (self.steps.get(si), self.steps.get(si + 1)) else {
            return false;
        };
        let local = |st: &Step| st.op.as_ref().is_some_and(|op| is_row_local(op, alignment));
        local(s)
            && local(next)
            && self.chain_input(si + 1) == Some(s.output)
            && usize::from(self.tensors[usize::from(s.output)].last_use) == si + 1
    }
    /// Arena bytes of the plan under `tiles` (`None`: some tile cannot be cut).
    fn planned_size(&self, tiles: &[Tile], alignment: u32) -> Option<u32> {
        let b = self.buffers(tiles, alignment, true)?;
        crate::memory::plan_arena::<TENSORS>(&b.lifetimes, alignment, 0)
            .ok()
            .map(|p| p.size())
    }
    /// Picks tiled chains greedily: each round tries every chain of chainable steps that does
    /// not overlap a chosen one, in stripes of 1, 2, 4, ... rows, and keeps the one giving the
    /// smallest arena (fewest recomputed multiply-accumulates on a tie), while the arena
    /// shrinks.
    pub(in crate::graph) fn choose_tiles(&mut self, alignment: u32) -> Result<(), GraphError> {
        let n = self.steps.len();
        let mut tiles: heapless::Vec<Tile, MAX_TILES> = heapless::Vec::new();
        let Some(mut best) = self.planned_size(&tiles, alignment) else {
            return Ok(());
        };
        while !tiles.is_full() {
            let mut found: Option<(u32, u64, Tile)> = None;
            for a in 0..n {
                for b in a + 1..n.min(a + tile::MAX_CHAIN) {
                    if !self.chainable(b - 1, alignment) {
                        break;
                    }
                    if tiles
                        .iter()
                        .any(|t| usize::from(t.first) <= b && a <= usize::from(t.last))
                    {
                        continue;
                    }
                    let height = self
                        .chain_op(a, b - a)
                        .and_then(tile::shapes)
                        .map_or(0, |(_, o)| o.height);
                    // Stripes of 1, 2, 4, ... rows, each with and without streaming in place.
                    let heights = (0..16).map(|p| 1u32 << p).take_while(|&r| r < height);
                    for (rows, in_place) in heights.flat_map(|r| [(r, false), (r, true)]) {
                        let tile = Tile {
                            first: a as u16,
                            last: b as u16,
                            rows: rows as u16,
                            in_place,
                        };
                        let Some(cost) = self.tile_cost(&tile) else {
                            continue;
                        };
                        let _ = tiles.push(tile);
                        let size = self.planned_size(&tiles, alignment);
                        tiles.pop();
                        if let Some(size) = size {
                            let key = (size, cost.extra_macs);
                            if found.is_none_or(|(s, m, _)| key < (s, m)) {
                                found = Some((size, cost.extra_macs, tile));
                            }
                        }
                    }
                }
            }
            match found {
                Some((size, _, tile)) if size < best => {
                    best = size;
                    let _ = tiles.push(tile);
                }
                _ => break,
            }
        }
        self.tiles = tiles;
        Ok(())
    }
}

/// Whether `op` can be a member of a chain on an arena aligned to `alignment`.
fn is_row_local(op: &Op, alignment: u32) -> bool {
    tile::shapes(op).is_some_and(|(i, o)| {
        i.batches == 1
            && o.batches == 1
            && tile::row_bytes(i).is_multiple_of(alignment)
            && tile::row_bytes(o).is_multiple_of(alignment)
    })
}
