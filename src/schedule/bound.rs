//! The lower bound on any schedule's makespan (the [module docs](super) give the argument for
//! each term).

use super::{check, units, ScheduleError, Task, TaskCost, Unit};
use crate::hal::{Cycles, MAX_EXECUTION_UNITS};

/// What no schedule of a set of tasks can beat, term by term.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LowerBound {
    /// The longest chain of dependencies, each task at its cheapest time on its best unit.
    pub critical_path: Cycles,
    /// Total work over the units' total throughput.
    pub work: Cycles,
    /// Total memory-port traffic over the shared bandwidth (with the CPU's time for tasks that
    /// can avoid the ports by running there).
    pub memory: Cycles,
    /// The weight pipeline's copies from flash over the NPU units that share it (with the
    /// CPU's time for tasks that can avoid the pipeline by running there): the
    /// [module docs](super) say why this is all that holds on several units.
    pub weight_copies: Cycles,
}

impl LowerBound {
    /// The largest term: the bound itself.
    pub fn max(&self) -> Cycles {
        self.critical_path
            .max(self.work)
            .max(self.memory)
            .max(self.weight_copies)
    }
}

/// The lower bound on the makespan of every schedule of `tasks` on `npu_units` NPU units and
/// the CPU, under the contention model of the [module docs](super).
///
/// Errors: those of [`schedule`](super::schedule), for the same inputs (`TASKS` sizes the
/// table the critical path is computed in).
pub fn lower_bound<const TASKS: usize>(
    tasks: &[Task],
    npu_units: u8,
) -> Result<LowerBound, ScheduleError> {
    check::<TASKS>(tasks, npu_units)?;
    let mut levels = [0; TASKS];
    bottom_levels(tasks, npu_units, &mut levels);
    Ok(LowerBound {
        critical_path: levels.iter().copied().max().unwrap_or(0),
        work: work(tasks, npu_units),
        memory: memory(tasks, npu_units),
        weight_copies: weight_copies(tasks, npu_units),
    })
}

/// The least time `cost` holds a unit, over the units in use; 0 if it runs nowhere.
fn cheapest(cost: &TaskCost, npu_units: u8) -> Cycles {
    units(npu_units)
        .filter_map(|u| cost.alone(u))
        .min()
        .unwrap_or(0)
}

/// Fills `levels[i]` with task `i`'s bottom level: its cheapest time plus the longest bottom
/// level among the tasks that depend on it. The largest is the critical path.
///
/// One backward pass: tasks are in topological order, so every task that depends on `i` comes
/// after it and is done when `i` is reached. `levels[i]` holds the largest successor level
/// until then. Dependencies that do not point backwards are ignored (callers check them).
pub(super) fn bottom_levels(tasks: &[Task], npu_units: u8, levels: &mut [Cycles]) {
    levels.fill(0);
    for (i, t) in tasks.iter().enumerate().rev() {
        let Some(slot) = levels.get_mut(i) else {
            continue;
        };
        let level = slot.saturating_add(cheapest(&t.cost, npu_units));
        *slot = level;
        for &d in &t.deps {
            if usize::from(d) < i {
                if let Some(l) = levels.get_mut(usize::from(d)) {
                    *l = (*l).max(level);
                }
            }
        }
    }
}

/// A resource the weighted bounds weigh: the NPU units `0..MAX_EXECUTION_UNITS`, then these.
const CPU: usize = MAX_EXECUTION_UNITS;
const SRAM: usize = MAX_EXECUTION_UNITS + 1;
const FLASH: usize = MAX_EXECUTION_UNITS + 2;
const RESOURCES: usize = MAX_EXECUTION_UNITS + 3;

/// Non-negative weights of the resources: any weights give a valid bound.
type Weights = [u64; RESOURCES];

/// The weight 1 in the fixed point the weights are in.
const ONE: u64 = 1 << 20;
/// The largest weight, so that products stay far inside `u128`.
const WEIGHT_MAX: u64 = 1 << 30;
/// Rounds of the weight search; each tries every move on every weight it may change.
const ROUNDS: usize = 12;

/// `Σ_i min_placement Σ_r w_r·use(i, placement, r) / Σ_r w_r`, rounded down.
///
/// Every resource is busy at most the makespan `T` (a unit runs one task at a time, a port's
/// reservations do not overlap), so the weighted sum of busy times is at most `T·Σ_r w_r`, and
/// each task adds at least its cheapest weighted use: on NPU unit `u`, `w_u` times the time it
/// holds the unit plus `w_sram·sram + w_flash·flash`; on the CPU, `w_cpu` times its cycles.
fn weighted(tasks: &[Task], npu_units: u8, w: &Weights) -> Cycles {
    let weight = |r: usize| u128::from(w.get(r).copied().unwrap_or(0));
    let total = (0..usize::from(npu_units))
        .chain([CPU, SRAM, FLASH])
        .map(weight)
        .sum::<u128>();
    if total == 0 {
        return 0;
    }
    let mut sum: u128 = 0;
    for t in tasks {
        let c = &t.cost;
        let ports =
            weight(SRAM) * u128::from(c.sram_cycles) + weight(FLASH) * u128::from(c.flash_cycles);
        let cheapest = units(npu_units)
            .filter_map(|u| {
                let held = u128::from(c.alone(u)?);
                Some(match u {
                    Unit::Npu(n) => weight(usize::from(n)) * held + ports,
                    Unit::Cpu => weight(CPU) * held,
                })
            })
            .min();
        // A task that runs nowhere has no schedule to bound; it adds nothing.
        sum = sum.saturating_add(cheapest.unwrap_or(0));
    }
    u64::try_from(sum / total).unwrap_or(u64::MAX)
}

/// The largest [`weighted`] bound found from `starts` by a small deterministic search that
/// moves only the weights in `free`: each round tries doubling, halving, ±25% and zeroing each
/// one (and waking a zero one at 1/64 of the largest), and keeps what raises the bound.
fn search(tasks: &[Task], npu_units: u8, starts: &[Weights], free: &[usize]) -> Cycles {
    let mut best_w = [0; RESOURCES];
    let mut best = 0;
    for s in starts {
        let b = weighted(tasks, npu_units, s);
        if b > best {
            best = b;
            best_w = *s;
        }
    }
    for _ in 0..ROUNDS {
        let mut improved = false;
        for &r in free {
            let Some(&now) = best_w.get(r) else { continue };
            let largest = best_w.iter().copied().max().unwrap_or(0);
            let moves = [
                now.saturating_mul(2),
                now / 2,
                now.saturating_add(now / 4),
                now.saturating_sub(now / 5),
                0,
                if now == 0 { largest / 64 } else { now },
            ];
            for to in moves {
                let to = to.min(WEIGHT_MAX);
                if to == now {
                    continue;
                }
                let mut w = best_w;
                if let Some(slot) = w.get_mut(r) {
                    *slot = to;
                }
                let b = weighted(tasks, npu_units, &w);
                if b > best {
                    best = b;
                    best_w = w;
                    improved = true;
                    break;
                }
            }
        }
        if !improved {
            break;
        }
    }
    best
}

/// Total work over total throughput: [`weighted`] over the units alone, from three weightings
/// (each unit's best relative speed `ŝ_u`, its average relative speed, all equal), refined.
fn work(tasks: &[Task], npu_units: u8) -> Cycles {
    let mut best_speed: Weights = [0; RESOURCES];
    let mut average_speed: Weights = [0; RESOURCES];
    let mut equal: Weights = [0; RESOURCES];
    let mut free: [usize; MAX_EXECUTION_UNITS + 1] = [0; MAX_EXECUTION_UNITS + 1];
    let mut n_free = 0;
    for u in units(npu_units) {
        let r = match u {
            Unit::Npu(n) => usize::from(n),
            Unit::Cpu => CPU,
        };
        let (mut best, mut cheapest_sum, mut held_sum) = (0u128, 0u128, 0u128);
        for t in tasks {
            let Some(held) = t.cost.alone(u) else {
                continue;
            };
            let r_i = u128::from(cheapest(&t.cost, npu_units));
            if held > 0 {
                best = best.max(r_i * u128::from(ONE) / u128::from(held));
            }
            cheapest_sum += r_i;
            held_sum += u128::from(held);
        }
        let average = (cheapest_sum * u128::from(ONE))
            .checked_div(held_sum)
            .unwrap_or(0);
        // Both ratios are at most 1 (r_i ≤ held), so at most ONE.
        let to_weight = |x: u128| u64::try_from(x).unwrap_or(ONE).min(WEIGHT_MAX);
        if let (Some(b), Some(a), Some(e)) = (
            best_speed.get_mut(r),
            average_speed.get_mut(r),
            equal.get_mut(r),
        ) {
            *b = to_weight(best);
            *a = to_weight(average);
            *e = ONE;
        }
        if let Some(f) = free.get_mut(n_free) {
            *f = r;
            n_free += 1;
        }
    }
    search(
        tasks,
        npu_units,
        &[best_speed, average_speed, equal],
        free.get(..n_free).unwrap_or(&[]),
    )
}

/// Total memory traffic over the shared bandwidth: [`weighted`] over the two ports and the
/// CPU (the only way around a port), from each port alone and each port with the CPU weighted
/// so that no task is cheaper on the CPU than on the port, refined.
fn memory(tasks: &[Task], npu_units: u8) -> Cycles {
    let cpu_weight = |port: fn(&TaskCost) -> Cycles| {
        let ratio = tasks
            .iter()
            .filter_map(|t| {
                let cpu = t.cost.cpu.filter(|&c| c > 0)?;
                // Rounded up: the CPU weight just high enough for the port to be the cheaper.
                Some((u128::from(port(&t.cost)) * u128::from(ONE)).div_ceil(u128::from(cpu)))
            })
            .max()
            .unwrap_or(0);
        u64::try_from(ratio).unwrap_or(WEIGHT_MAX).min(WEIGHT_MAX)
    };
    let alone = |port: usize| {
        let mut w = [0; RESOURCES];
        if let Some(slot) = w.get_mut(port) {
            *slot = ONE;
        }
        w
    };
    let mut sram_cpu = alone(SRAM);
    sram_cpu[CPU] = cpu_weight(|c| c.sram_cycles);
    let mut flash_cpu = alone(FLASH);
    flash_cpu[CPU] = cpu_weight(|c| c.flash_cycles);
    // The weight pipeline's copies are not a port's: they have a term of their own
    // ([`weight_copies`]), since on several units its timeline is not the units'.
    search(
        tasks,
        npu_units,
        &[alone(SRAM), alone(FLASH), sram_cpu, flash_cpu],
        &[SRAM, FLASH, CPU],
    )
}

/// The weight pipeline's copies over the NPU units: `Σ_i min(p_i, β·c_i) / (k + β)` for the
/// best `β ≥ 0` found, with `p_i` a task's [`prefetch_cycles`](TaskCost::prefetch_cycles)
/// where it can run on an NPU unit, `c_i` its CPU cycles where it can run there, and `k` the
/// NPU units.
///
/// Why it holds. The pipeline (module docs) copies weights back to back from cycle 0, so its
/// last copy ends at `D ≥ Σ p_i` over the tasks on NPU units, and its timeline ends at
/// `P ≥ D` (a task runs there after its copy has landed). It charges each NPU task the
/// cycles it adds to that timeline, so the charges sum to `P`, and a task holds its unit at
/// least its charge: `Σ_u busy_u ≥ P ≥ Σ_(i on NPU) p_i`, while each unit, and the CPU, is busy
/// at most the makespan `T`. Weighting the CPU by `β`: `(k + β)·T ≥ Σ_(i on NPU) p_i +
/// β·Σ_(i on CPU) c_i ≥ Σ_i min(p_i, β·c_i)`. The charges, not the copies, are spread over
/// the units: two units can each run a task while the pipeline charges the other its copy, so
/// on several units the copies bound the makespan only divided by `k`.
fn weight_copies(tasks: &[Task], npu_units: u8) -> Cycles {
    let k = u128::from(npu_units);
    // `beta` in the fixed point of ONE.
    let at = |beta: u64| -> Cycles {
        let one = u128::from(ONE);
        let beta = u128::from(beta);
        let sum = tasks
            .iter()
            .filter_map(|t| {
                let on_npu = (0..npu_units)
                    .any(|u| t.cost.cycles(Unit::Npu(u)).is_some())
                    .then(|| u128::from(t.cost.prefetch_cycles) * one);
                let on_cpu = t.cost.cpu.map(|c| u128::from(c) * beta);
                match (on_npu, on_cpu) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                }
            })
            .fold(0u128, u128::saturating_add);
        u64::try_from(sum / (k * one + beta).max(1)).unwrap_or(u64::MAX)
    };
    // β = 0 counts only the tasks the CPU cannot take; a larger β counts the others too but
    // spreads the sum over the CPU as well. Doubling from 1/64 finds the better side.
    let mut best = at(0);
    let mut beta = ONE / 64;
    while beta <= WEIGHT_MAX {
        best = best.max(at(beta));
        beta = beta.saturating_mul(2);
    }
    best
}
