//! Tests of the scheduler and the bound: hand-made cases with known answers, and random DAGs
//! whose schedules are checked against the contention model by replaying them as a runtime and
//! the simulator would.

use super::*;
use crate::hal::{Cycles, MAX_EXECUTION_UNITS};

const N: usize = 64;

/// xorshift64: deterministic, no crates.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// A cost on the first NPU units, as given, and nothing else.
fn npu(cycles: &[Cycles]) -> TaskCost {
    let mut c = TaskCost::NONE;
    for (slot, &x) in c.npu.iter_mut().zip(cycles) {
        *slot = Some(x);
    }
    c
}

fn task(deps: &[u16], cost: TaskCost) -> Task {
    Task::with_deps(deps, cost).unwrap()
}

/// A random DAG of `n` tasks for `units` NPU units: up to four dependencies each (mostly on
/// recent tasks, so there are chains and branches), each unit able to run a task most of the
/// time, the CPU often, port cycles from none to more than the compute, and the odd task of 0
/// cycles.
pub(super) fn random_tasks(rng: &mut Rng, n: usize, units: u8) -> heapless::Vec<Task, N> {
    let mut tasks = heapless::Vec::new();
    for i in 0..n {
        let mut deps = heapless::Vec::<u16, MAX_TASK_DEPS>::new();
        if i > 0 {
            for _ in 0..rng.below(5) {
                let back = 1 + rng.below(i.min(6) as u64) as usize;
                let d = (i - back) as u16;
                if !deps.contains(&d) {
                    deps.push(d).unwrap();
                }
            }
        }
        let mut cost = TaskCost::NONE;
        let base = 1 + rng.below(200);
        for u in 0..usize::from(units) {
            if rng.chance(85) {
                // Units differ: up to twice as slow as the base.
                cost.npu[u] = Some(base + rng.below(base + 1));
            }
        }
        if rng.chance(60) || cost.npu.iter().all(|c| c.is_none()) {
            cost.cpu = Some(base * (1 + rng.below(8)));
        }
        if rng.chance(70) {
            cost.sram_cycles = rng.below(base * 3 / 2 + 1);
        }
        if rng.chance(40) {
            cost.flash_cycles = rng.below(base + 1);
        }
        if rng.chance(4) {
            cost = TaskCost {
                cpu: Some(0),
                ..TaskCost::NONE
            };
        }
        tasks.push(Task { deps, cost }).unwrap();
    }
    tasks
}

/// Times `order` as the simulator does with a runtime that submits NPU tasks in that order and
/// computes CPU tasks itself when it reaches them: an NPU task starts at the latest of the
/// runtime's clock, its unit's free time and its dependencies' ends and reserves the ports in
/// submission order; a CPU task starts when the runtime reaches it and its inputs are done.
/// Port reservations are appended to `reservations` as (port, start, end, task).
fn replay(
    tasks: &[Task],
    order: &[u16],
    unit_of: impl Fn(usize) -> Unit,
    reservations: &mut heapless::Vec<(u8, Cycles, Cycles, u16), { 2 * N }>,
) -> [Placed; N] {
    let mut out = [Placed {
        unit: Unit::Cpu,
        start: 0,
        end: 0,
    }; N];
    let mut done = [false; N];
    let mut now = 0;
    let mut npu_free = [0; MAX_EXECUTION_UNITS];
    let (mut sram_free, mut flash_free) = (0, 0);
    for &t in order {
        let i = usize::from(t);
        let task = &tasks[i];
        let deps_end = task
            .deps
            .iter()
            .map(|&d| {
                assert!(
                    done[usize::from(d)],
                    "task {t} submitted before its dependency {d}"
                );
                out[usize::from(d)].end
            })
            .max()
            .unwrap_or(0);
        let unit = unit_of(i);
        let cycles = task.cost.cycles(unit).unwrap();
        out[i] = match unit {
            Unit::Cpu => {
                let start = now.max(deps_end);
                now = start + cycles;
                Placed {
                    unit,
                    start,
                    end: now,
                }
            }
            Unit::Npu(n) => {
                let start = now.max(npu_free[usize::from(n)]).max(deps_end);
                let mut end = start + cycles;
                for (port, len, free) in [
                    (0, task.cost.sram_cycles, &mut sram_free),
                    (1, task.cost.flash_cycles, &mut flash_free),
                ] {
                    if len > 0 {
                        let from = start.max(*free);
                        *free = from + len;
                        end = end.max(*free);
                        reservations.push((port, from, *free, t)).unwrap();
                    }
                }
                npu_free[usize::from(n)] = end;
                Placed { unit, start, end }
            }
        };
        done[i] = true;
    }
    out
}

/// Everything a schedule promises, checked from scratch.
fn check(tasks: &[Task], units: u8, s: &Schedule<N>) {
    assert_eq!(s.len(), tasks.len());
    assert_eq!(s.npu_units(), units);
    let p = s.placements();
    for (i, t) in tasks.iter().enumerate() {
        let pi = p[i];
        if let Unit::Npu(n) = pi.unit {
            assert!(n < units, "task {i} on a unit that does not exist");
        }
        let cycles = t.cost.cycles(pi.unit).expect("placed where it can run");
        let held = t.cost.alone(pi.unit).unwrap();
        assert!(pi.start + cycles <= pi.end && pi.start + held <= pi.end);
        for &d in &t.deps {
            assert!(
                pi.start >= p[usize::from(d)].end,
                "task {i} starts before dep {d} ends"
            );
        }
        for (j, pj) in p.iter().enumerate() {
            if i != j && pi.unit == pj.unit {
                assert!(
                    pi.end <= pj.start || pj.end <= pi.start,
                    "tasks {i} and {j} overlap on {}",
                    pi.unit
                );
            }
        }
    }
    // The order is a permutation that keeps dependencies and each unit's order.
    let order = s.order();
    assert_eq!(order.len(), tasks.len());
    let mut seen = [false; N];
    let mut last_end = [None::<Cycles>; MAX_EXECUTION_UNITS + 1];
    for &t in order {
        let i = usize::from(t);
        assert!(!seen[i], "task {t} twice in the order");
        for &d in &tasks[i].deps {
            assert!(
                seen[usize::from(d)],
                "task {t} ordered before its dependency {d}"
            );
        }
        seen[i] = true;
        let slot = match p[i].unit {
            Unit::Npu(n) => usize::from(n),
            Unit::Cpu => MAX_EXECUTION_UNITS,
        };
        if let Some(e) = last_end[slot] {
            assert!(
                p[i].start >= e,
                "the order breaks {}'s order at task {t}",
                p[i].unit
            );
        }
        last_end[slot] = Some(p[i].end);
    }
    // Replayed as the runtime and the simulator would, it takes exactly the planned cycles;
    // the ports are never reserved twice at once, and each task holds its unit to the end of
    // its reservations.
    let mut reservations = heapless::Vec::new();
    let replayed = replay(tasks, order, |i| p[i].unit, &mut reservations);
    assert_eq!(
        &replayed[..tasks.len()],
        p,
        "the replay differs from the plan"
    );
    for (k, &(port, from, to, t)) in reservations.iter().enumerate() {
        let pt = p[usize::from(t)];
        assert!(pt.start <= from && to <= pt.end);
        for &(port2, from2, to2, _) in &reservations[k + 1..] {
            assert!(
                port != port2 || to <= from2 || to2 <= from,
                "port {port} overlaps"
            );
        }
    }
    // Busy cycles add up.
    let busy = s.npu_busy();
    for u in 0..units {
        let sum: Cycles = p
            .iter()
            .filter(|x| x.unit == Unit::Npu(u))
            .map(|x| x.end - x.start)
            .sum();
        assert_eq!(busy[usize::from(u)], sum);
        assert_eq!(s.busy(Unit::Npu(u)), sum);
    }
    assert_eq!(s.makespan(), p.iter().map(|x| x.end).max().unwrap_or(0));
}

#[test]
fn cost_effective_beats_fastest_alone() {
    // Each task slightly faster on the NPU than on the CPU: the fastest-alone choice piles
    // them all on the NPU, the cost-effective one sends every other task to the idle CPU.
    let mut cost = npu(&[10]);
    cost.cpu = Some(12);
    let tasks = [(); 6].map(|_| Task::new(cost));
    let alone = schedule::<N>(&tasks, 1, Policy::FastestAlone).unwrap();
    let effective = schedule::<N>(&tasks, 1, Policy::CostEffective).unwrap();
    check(&tasks, 1, &alone);
    check(&tasks, 1, &effective);
    assert_eq!(alone.makespan(), 60);
    assert_eq!(alone.busy(Unit::Cpu), 0);
    assert_eq!(effective.makespan(), 36);
    assert_eq!(effective.busy(Unit::Npu(0)), 30);
    assert_eq!(effective.busy(Unit::Cpu), 36);
    // 36 is optimal: four on the NPU would take 40.
    let bound = lower_bound::<N>(&tasks, 1).unwrap();
    assert!(bound.max() <= 36 && bound.work >= 32, "{bound:?}");
}

#[test]
fn the_search_finds_what_greedy_placement_misses() {
    // On one NPU unit and the CPU: A (9 on the NPU, 35 on the CPU), B reads A (56 or 120),
    // C independent (103 or 216). Best: A then C on the NPU, B on the CPU as soon as A is
    // done, 129 cycles. Every greedy order either puts A on the CPU behind C's long NPU run, or
    // B on the NPU ahead of C.
    let cost = |npu_cycles, cpu| TaskCost {
        cpu: Some(cpu),
        ..npu(&[npu_cycles])
    };
    let mut b = cost(56, 120);
    b.sram_cycles = 15;
    let tasks = [
        Task::new(cost(9, 35)),
        task(&[0], b),
        Task::new(cost(103, 216)),
    ];
    let s = schedule::<N>(&tasks, 1, Policy::CostEffective).unwrap();
    check(&tasks, 1, &s);
    assert_eq!(s.makespan(), 129);
    assert_eq!(s.placed(1).unwrap().unit, Unit::Cpu);
    assert_eq!(
        schedule::<N>(&tasks, 1, Policy::FastestAlone)
            .unwrap()
            .makespan(),
        168
    );
}

#[test]
#[cfg_attr(
    miri,
    ignore = "over 30 s each under miri, which interprets every step (schedule searches, sweeps of many cases)"
)]
fn a_chain_takes_the_sum_of_its_costs() {
    let mut tasks = heapless::Vec::<Task, N>::new();
    let mut sum = 0;
    for i in 0..20u16 {
        let c = Cycles::from(i) * 7 + 3;
        sum += c;
        let deps: &[u16] = if i == 0 { &[] } else { &[i - 1] };
        tasks.push(task(deps, npu(&[c]))).unwrap();
    }
    for policy in [Policy::CostEffective, Policy::FastestAlone] {
        let s = schedule::<N>(&tasks, 1, policy).unwrap();
        check(&tasks, 1, &s);
        assert_eq!(s.makespan(), sum);
        assert_eq!(s.order(), &core::array::from_fn::<u16, 20, _>(|i| i as u16));
    }
    let bound = lower_bound::<N>(&tasks, 1).unwrap();
    assert_eq!(bound.critical_path, sum);
    assert_eq!(bound.max(), sum);
}

#[test]
fn a_memory_bound_operator_does_not_speed_up_split() {
    // Alone: 100 cycles, all of them on the SRAM port.
    let mut whole = npu(&[100, 100]);
    whole.sram_cycles = 100;
    let one = [Task::new(whole)];
    assert_eq!(
        schedule::<N>(&one, 2, Policy::CostEffective)
            .unwrap()
            .makespan(),
        100
    );
    // Split in two halves on two units: the port serialises them.
    let mut half = npu(&[50, 50]);
    half.sram_cycles = 50;
    let two = [Task::new(half), Task::new(half)];
    let s = schedule::<N>(&two, 2, Policy::CostEffective).unwrap();
    check(&two, 2, &s);
    assert_eq!(s.makespan(), 100);
    assert_eq!(lower_bound::<N>(&two, 2).unwrap().memory, 100);
    // A compute-bound one does: its port cycles interleave.
    let mut light = npu(&[50, 50]);
    light.sram_cycles = 10;
    light.flash_cycles = 5;
    let two = [Task::new(light), Task::new(light)];
    let s = schedule::<N>(&two, 2, Policy::CostEffective).unwrap();
    check(&two, 2, &s);
    assert_eq!(s.makespan(), 50);
    assert_ne!(s.placed(0).unwrap().unit, s.placed(1).unwrap().unit);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "over 30 s each under miri, which interprets every step (schedule searches, sweeps of many cases)"
)]
fn identical_and_related_units_reach_the_work_bound() {
    // Eight equal tasks on two equal units.
    let tasks = [(); 8].map(|_| Task::new(npu(&[10, 10])));
    let s = schedule::<N>(&tasks, 2, Policy::CostEffective).unwrap();
    check(&tasks, 2, &s);
    assert_eq!(s.makespan(), 40);
    assert_eq!(lower_bound::<N>(&tasks, 2).unwrap().work, 40);
    // Six tasks on a unit twice as fast as the other: four and two.
    let tasks = [(); 6].map(|_| Task::new(npu(&[10, 20])));
    let s = schedule::<N>(&tasks, 2, Policy::CostEffective).unwrap();
    check(&tasks, 2, &s);
    assert_eq!(s.makespan(), 40);
    assert_eq!(s.npu_busy()[..2], [40, 40]);
    assert_eq!(lower_bound::<N>(&tasks, 2).unwrap().work, 40);
    // Fastest alone puts them all on the fast unit.
    let s = schedule::<N>(&tasks, 2, Policy::FastestAlone).unwrap();
    assert_eq!(s.makespan(), 60);
}

#[test]
fn the_cpu_computes_while_the_npu_runs() {
    // A on the NPU, B (no NPU kernel) on the CPU at the same time, C reads both.
    let mut cpu_only = TaskCost::NONE;
    cpu_only.cpu = Some(80);
    let tasks = [
        Task::new(npu(&[100])),
        Task::new(cpu_only),
        task(&[0, 1], npu(&[50])),
    ];
    let s = schedule::<N>(&tasks, 1, Policy::CostEffective).unwrap();
    check(&tasks, 1, &s);
    assert_eq!(s.makespan(), 150);
    assert_eq!(
        s.placed(1),
        Some(Placed {
            unit: Unit::Cpu,
            start: 0,
            end: 80
        })
    );
    // A is submitted before the runtime computes B, C after.
    assert_eq!(s.order(), &[0, 1, 2]);
}

#[test]
fn npu_tasks_after_a_cpu_read_wait_for_the_runtime() {
    // A on the CPU (100), B on the NPU reads A, C on the NPU is free. Placing B first would
    // hold C until the runtime has computed A; placing C first runs it while A computes.
    let mut cpu_only = TaskCost::NONE;
    cpu_only.cpu = Some(100);
    let tasks = [
        Task::new(cpu_only),
        task(&[0], npu(&[10])),
        Task::new(npu(&[10])),
    ];
    let s = schedule::<N>(&tasks, 1, Policy::CostEffective).unwrap();
    check(&tasks, 1, &s);
    assert_eq!(s.makespan(), 110);
    assert_eq!(s.placed(2).unwrap().start, 0);
    assert_eq!(s.order(), &[2, 0, 1]);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "over 30 s each under miri, which interprets every step (schedule searches, sweeps of many cases)"
)]
fn random_dags_keep_every_promise() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for round in 0..90 {
        let units = 1 + (round % 3) as u8;
        let n = 1 + rng.below(N as u64) as usize;
        let tasks = random_tasks(&mut rng, n, units);
        let bound = lower_bound::<N>(&tasks, units).unwrap();
        let effective = schedule::<N>(&tasks, units, Policy::CostEffective).unwrap();
        let alone = schedule::<N>(&tasks, units, Policy::FastestAlone).unwrap();
        for s in [&effective, &alone] {
            check(&tasks, units, s);
            assert!(
                s.makespan() >= bound.max(),
                "round {round}: {} < {bound:?}",
                s.makespan()
            );
        }
        // Cost-effective tries the fastest-alone placements too.
        assert!(effective.makespan() <= alone.makespan());
        // Deterministic.
        if round % 10 == 0 {
            assert_eq!(
                schedule::<N>(&tasks, units, Policy::CostEffective).unwrap(),
                effective
            );
        }
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "over 30 s each under miri, which interprets every step (schedule searches, sweeps of many cases)"
)]
fn no_schedule_beats_the_bound() {
    // Random valid schedules (random units, random orders of placement, so random port
    // orders), timed under the contention model: none is below the bound.
    let mut rng = Rng(0xDEAD_BEEF_1234_5678);
    for round in 0..300 {
        let units = 1 + (round % 3) as u8;
        let n = 1 + rng.below(24) as usize;
        let tasks = random_tasks(&mut rng, n, units);
        let bound = lower_bound::<N>(&tasks, units).unwrap();
        for _ in 0..10 {
            let mut unit = [Unit::Cpu; N];
            for (i, t) in tasks.iter().enumerate() {
                let able = units_of(units).filter(|&u| t.cost.cycles(u).is_some());
                let k = rng.below(able.clone().count() as u64) as usize;
                unit[i] = able.clone().nth(k).unwrap();
            }
            // A random topological order.
            let mut order = heapless::Vec::<u16, N>::new();
            let mut placed = [false; N];
            while order.len() < n {
                let ready = (0..n).filter(|&i| {
                    !placed[i] && tasks[i].deps.iter().all(|&d| placed[usize::from(d)])
                });
                let k = rng.below(ready.clone().count() as u64) as usize;
                let i = ready.clone().nth(k).unwrap();
                placed[i] = true;
                order.push(i as u16).unwrap();
            }
            // Timed without the runtime's clock: every unit free to start at once.
            let mut free = [0; MAX_EXECUTION_UNITS + 1];
            let (mut sram, mut flash) = (0, 0);
            let mut end = [0; N];
            for &t in &order {
                let i = usize::from(t);
                let c = &tasks[i].cost;
                let ready = tasks[i].deps.iter().map(|&d| end[usize::from(d)]).max();
                let slot = match unit[i] {
                    Unit::Npu(u) => usize::from(u),
                    Unit::Cpu => MAX_EXECUTION_UNITS,
                };
                let start = free[slot].max(ready.unwrap_or(0));
                let mut e = start + c.cycles(unit[i]).unwrap();
                if unit[i] != Unit::Cpu {
                    for (len, port) in [(c.sram_cycles, &mut sram), (c.flash_cycles, &mut flash)] {
                        if len > 0 {
                            *port = start.max(*port) + len;
                            e = e.max(*port);
                        }
                    }
                }
                free[slot] = e;
                end[i] = e;
            }
            let makespan = end[..n].iter().copied().max().unwrap();
            assert!(
                makespan >= bound.max(),
                "round {round}: {makespan} < {bound:?}"
            );
        }
    }
}

fn units_of(npu_units: u8) -> impl Iterator<Item = Unit> + Clone {
    super::units(npu_units)
}

#[test]
#[cfg_attr(
    miri,
    ignore = "over 30 s each under miri, which interprets every step (schedule searches, sweeps of many cases)"
)]
fn the_work_bound_is_at_least_the_best_speed_bound() {
    // T ≥ Σ r_i / Σ_u ŝ_u, with ŝ_u = max_i r_i / c_iu: the weighted search starts from it.
    let mut rng = Rng(42);
    for round in 0..200 {
        let units = 1 + (round % 3) as u8;
        let n = 1 + rng.below(40) as usize;
        let tasks = random_tasks(&mut rng, n, units);
        let r = |t: &Task| {
            units_of(units)
                .filter_map(|u| t.cost.alone(u))
                .min()
                .unwrap()
        };
        let sum_r: f64 = tasks.iter().map(|t| r(t) as f64).sum();
        let sum_s: f64 = units_of(units)
            .map(|u| {
                tasks
                    .iter()
                    .filter_map(|t| {
                        let c = t.cost.alone(u)?;
                        (c > 0).then(|| r(t) as f64 / c as f64)
                    })
                    .fold(0.0, f64::max)
            })
            .sum();
        if sum_s == 0.0 {
            continue;
        }
        let classic = sum_r / sum_s;
        let work = lower_bound::<N>(&tasks, units).unwrap().work as f64;
        assert!(
            work + 1.0 >= classic * (1.0 - 1e-6),
            "round {round}: {work} < {classic}"
        );
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "over 30 s each under miri, which interprets every step (schedule searches, sweeps of many cases)"
)]
fn the_memory_bound_counts_tasks_that_could_run_on_the_cpu() {
    // Ten memory-bound tasks that the CPU could run, a hundred times slower: the port is the
    // bottleneck all the same.
    let mut cost = npu(&[50, 50]);
    cost.sram_cycles = 50;
    cost.cpu = Some(5000);
    let tasks = [(); 10].map(|_| Task::new(cost));
    let bound = lower_bound::<N>(&tasks, 2).unwrap();
    assert!(bound.memory >= 490 && bound.memory <= 500, "{bound:?}");
    let s = schedule::<N>(&tasks, 2, Policy::CostEffective).unwrap();
    check(&tasks, 2, &s);
    assert_eq!(s.makespan(), 500);
    // A port cost no task must pay gives no bound.
    let mut cheap_cpu = cost;
    cheap_cpu.cpu = Some(0);
    assert_eq!(
        lower_bound::<N>(&[Task::new(cheap_cpu)], 2).unwrap().memory,
        0
    );
}

#[test]
fn no_tasks_is_an_empty_schedule() {
    let s = schedule::<N>(&[], 2, Policy::CostEffective).unwrap();
    assert!(s.is_empty());
    assert_eq!(s.makespan(), 0);
    assert_eq!(s.order(), &[] as &[u16]);
    assert_eq!(lower_bound::<N>(&[], 2).unwrap(), LowerBound::default());
}

#[test]
fn bad_inputs_are_typed_errors() {
    let ok = Task::new(npu(&[10]));
    for units in [0, MAX_EXECUTION_UNITS as u8 + 1] {
        let e =
            schedule::<N>(core::slice::from_ref(&ok), units, Policy::CostEffective).unwrap_err();
        assert_eq!(e, ScheduleError::Units { found: units });
        assert_eq!(lower_bound::<N>(core::slice::from_ref(&ok), units), Err(e));
    }
    let five = [(); 5].map(|_| ok.clone());
    let e = schedule::<4>(&five, 1, Policy::CostEffective).unwrap_err();
    assert_eq!(
        e,
        ScheduleError::CapacityExceeded {
            capacity: Capacity::ScheduleTasks,
            limit: 4,
            tasks: 5
        }
    );
    let mut text = heapless::String::<200>::new();
    core::fmt::write(&mut text, format_args!("{e}")).unwrap();
    assert!(text.contains("the schedule's TASKS"), "{text}");
    assert_eq!(lower_bound::<4>(&five, 1), Err(e));

    for dep in [1, 2] {
        let tasks = [ok.clone(), task(&[0, dep], npu(&[1])), ok.clone()];
        assert_eq!(
            schedule::<N>(&tasks, 1, Policy::FastestAlone),
            Err(ScheduleError::BadDependency { task: 1, dep })
        );
    }
    // Runs only on NPU unit 1, and the schedule has one unit.
    let mut elsewhere = TaskCost::NONE;
    elsewhere.npu[1] = Some(5);
    let tasks = [ok.clone(), Task::new(elsewhere)];
    assert_eq!(
        schedule::<N>(&tasks, 1, Policy::CostEffective),
        Err(ScheduleError::Unrunnable { task: 1 })
    );
    assert!(schedule::<N>(&tasks, 2, Policy::CostEffective).is_ok());
    assert!(Task::with_deps(&[0; MAX_TASK_DEPS + 1], TaskCost::NONE).is_none());
}

/// [`random_tasks`] with weights copied ahead of most tasks, from half their cycles to four
/// and a half times them (the weight-bound layers of a keyword-spotting model).
fn random_tasks_with_copies(rng: &mut Rng, n: usize, units: u8) -> heapless::Vec<Task, N> {
    let mut tasks = random_tasks(rng, n, units);
    for t in &mut tasks {
        let base = t.cost.npu.iter().flatten().copied().min().unwrap_or(0);
        if base > 0 && rng.chance(80) {
            t.cost.prefetch_cycles = base / 2 + rng.below(4 * base);
        }
    }
    tasks
}

#[test]
#[cfg_attr(
    miri,
    ignore = "over 30 s each under miri, which interprets every step (schedule searches, sweeps of many cases)"
)]
fn no_schedule_beats_the_weight_copy_bound() {
    // Random valid schedules timed with the weight pipeline as the scheduler and the simulator
    // run it (one weight DMA copying in submission order, the pipeline charging each NPU task
    // what it adds to its own timeline), and the scheduler's own: none is below the bound.
    let mut rng = Rng(0x0123_4567_89AB_CDEF);
    let mut copies_decided = 0;
    for round in 0..300 {
        let units = 1 + (round % 3) as u8;
        let n = 1 + rng.below(24) as usize;
        let tasks = random_tasks_with_copies(&mut rng, n, units);
        let bound = lower_bound::<N>(&tasks, units).unwrap();
        if bound.weight_copies == bound.max() && bound.weight_copies > 0 {
            copies_decided += 1;
        }
        for policy in [Policy::CostEffective, Policy::FastestAlone] {
            let s = schedule::<N>(&tasks, units, policy).unwrap();
            assert!(
                s.makespan() >= bound.max(),
                "round {round}: {s:?} < {bound:?}"
            );
        }
        for _ in 0..10 {
            let mut unit = [Unit::Cpu; N];
            for (i, t) in tasks.iter().enumerate() {
                let able = units_of(units).filter(|&u| t.cost.cycles(u).is_some());
                let k = rng.below(able.clone().count() as u64) as usize;
                unit[i] = able.clone().nth(k).unwrap();
            }
            let mut order = heapless::Vec::<u16, N>::new();
            let mut placed = [false; N];
            while order.len() < n {
                let ready = (0..n).filter(|&i| {
                    !placed[i] && tasks[i].deps.iter().all(|&d| placed[usize::from(d)])
                });
                let k = rng.below(ready.clone().count() as u64) as usize;
                let i = ready.clone().nth(k).unwrap();
                placed[i] = true;
                order.push(i as u16).unwrap();
            }
            let mut free = [0; MAX_EXECUTION_UNITS + 1];
            let (mut sram, mut flash, mut dma, mut pipe) = (0, 0, 0, 0);
            let mut end = [0; N];
            for &t in &order {
                let i = usize::from(t);
                let c = &tasks[i].cost;
                let ready = tasks[i].deps.iter().map(|&d| end[usize::from(d)]).max();
                let slot = match unit[i] {
                    Unit::Npu(u) => usize::from(u),
                    Unit::Cpu => MAX_EXECUTION_UNITS,
                };
                let start = free[slot].max(ready.unwrap_or(0));
                let mut cycles = c.cycles(unit[i]).unwrap();
                if unit[i] != Unit::Cpu {
                    let landed = if c.prefetch_cycles > 0 {
                        dma += c.prefetch_cycles;
                        dma
                    } else {
                        0
                    };
                    let pipe_end = pipe.max(landed) + cycles;
                    cycles = pipe_end - pipe;
                    pipe = pipe_end;
                }
                let mut e = start + cycles;
                if unit[i] != Unit::Cpu {
                    for (len, port) in [(c.sram_cycles, &mut sram), (c.flash_cycles, &mut flash)] {
                        if len > 0 {
                            *port = start.max(*port) + len;
                            e = e.max(*port);
                        }
                    }
                }
                free[slot] = e;
                end[i] = e;
            }
            let makespan = end[..n].iter().copied().max().unwrap();
            assert!(
                makespan >= bound.max(),
                "round {round}: {makespan} < {bound:?}"
            );
        }
    }
    // The term is what decides the bound in a good share of the rounds, so they test it.
    assert!(copies_decided >= 30, "{copies_decided} rounds");
}

#[test]
fn weight_copies_bound_one_unit_whole_and_several_units_divided() {
    // Four weight-bound tasks in a chain: 100 cycles of copy, 10 of compute, on each unit.
    let mut cost = npu(&[10, 10]);
    cost.prefetch_cycles = 100;
    let tasks = [
        Task::new(cost),
        task(&[0], cost),
        task(&[1], cost),
        task(&[2], cost),
    ];
    assert_eq!(lower_bound::<N>(&tasks, 1).unwrap().weight_copies, 400);
    assert_eq!(
        schedule::<N>(&tasks, 1, Policy::CostEffective)
            .unwrap()
            .makespan(),
        410
    );
    assert_eq!(lower_bound::<N>(&tasks, 2).unwrap().weight_copies, 200);
    // A task the CPU can take instead, much slower, still counts, spread over the CPU too.
    let mut either = cost;
    either.cpu = Some(10_000);
    let b = lower_bound::<N>(&[Task::new(either)], 1)
        .unwrap()
        .weight_copies;
    assert!((98..=100).contains(&b), "{b}");
    // One the CPU takes for nothing adds nothing.
    either.cpu = Some(0);
    assert_eq!(
        lower_bound::<N>(&[Task::new(either)], 1)
            .unwrap()
            .weight_copies,
        0
    );
}

#[test]
fn the_steady_invoke_copies_under_the_last_one() {
    // A copies 100 cycles of weights and runs 10; B copies nothing and runs 50. From an
    // empty pipeline: 100 + 10 + 50. Run again, A's copy starts when the first run's last
    // copy ended, under A's and B's 60 cycles, so it waits only 40 for it.
    let mut a = npu(&[10]);
    a.prefetch_cycles = 100;
    let tasks = [Task::new(a), task(&[0], npu(&[50]))];
    let s = schedule::<N>(&tasks, 1, Policy::CostEffective).unwrap();
    assert_eq!(s.makespan(), 160);
    assert_eq!(s.steady_makespan(&tasks), 100);
    // With no copies, every run is the first.
    let plain = [Task::new(npu(&[10])), task(&[0], npu(&[50]))];
    let p = schedule::<N>(&plain, 1, Policy::CostEffective).unwrap();
    assert_eq!(p.steady_makespan(&plain), p.makespan());
}
