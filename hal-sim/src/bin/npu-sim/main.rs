//! `npu-sim`: the host command line of the simulator.
//!
//! This file holds the clap definitions, `main` and the exit status; each command is one
//! module, each benchmark one module of [`bench`](mod@bench), and what several share is in
//! [`common`].
//!
//! `--units SPEC` (on `run`, `tune`, `plan`, `trace` and `bench pipeline`) gives the simulated part's
//! execution units, a comma-separated list of `u55-128` and `u55-256` (default `u55-128`),
//! which share the memory ports ([`npu_sim::SimConfig`]).
//!
//! `--faults SPEC` (on `run`) makes the simulated NPU inject hardware faults
//! ([`npu_sim::faults`], whose docs give the syntax): rules separated by `;`, each a kind
//! (`dma`, `bus`, `hang`, `spurious-irq`, `lost-irq`, `overrun=4x`, `overrun=+1000`) and,
//! after `@`, conditions that must all hold (`job=N`, `op=Conv2d`, `p=0.01,seed=7`, `max=N`,
//! `region=device:0x100+64`), e.g. `dma@job=12` or `lost-irq@job=3;overrun=4x@op=DepthwiseConv2d`.
//! Job indices count every job the NPU accepts from 0, the prepare's uploads included. A
//! spec that does not parse is a usage error (status 2) saying what is wrong.
//!
//! Commands:
//! - `npu-sim demo` ([`demo`]): runs the stack's main job on the simulated NPU (the static
//!   conv net and the transformer through client, channel, server and simulator) and prints
//!   results, virtual cycles and memory statistics.
//! - `npu-sim run MODEL.tflite --input IN.bin --output OUT.bin [--arena BYTES] [--host BYTES]
//!   [--stats F.json] [--repeat N] [--optimise cycles|memory] [--tune-table TABLE |
//!   --autotune] [--units SPEC] [--faults SPEC]`
//!   ([`run`]): runs a TensorFlow Lite model on the simulated NPU.
//! - `npu-sim tune MODEL.tflite --export TABLE [--input IN.bin] [--arena BYTES] [--units SPEC]` ([`tune`]):
//!   times each layer shape's kernel variants, keeps the fastest, writes a tuning table (and
//!   fails, writing nothing, when `--arena` has no room to measure every layer).
//! - `npu-sim trace MODEL.tflite --svg FILE [--accesses FILE.json] [--input IN.bin] [--arena BYTES]` ([`trace`]):
//!   runs the model twice as firmware does and draws the second invoke as a Gantt chart in
//!   SVG (each execution unit, DMA and the CPU over cycles, the arena's occupancy beneath);
//!   prints the makespan, each lane's busy cycles and the peak occupancy. `--accesses`
//!   writes the second invoke's tensor access list as JSON (`--svg` may then be left out).
//! - `npu-sim inspect MODEL.tflite` ([`inspect`]): tensors, quantization, and where each
//!   operator runs.
//! - `npu-sim plan MODEL.tflite [--json] [--optimise cycles|memory] [--units SPEC]
//!   [--schedule FILE]` ([`plan`]): the exact
//!   arena bytes the model needs (the size to give the firmware's arena section), from the
//!   arena plan made at prepare, and the host staging bytes and fixed capacities it needs,
//!   measured by running it.
//! - `npu-sim plan MODEL.tflite --budget BYTES [--slow BYTES] [--json]` ([`budget`]): the
//!   activations planned into a fast arena of `BYTES` beside a slow memory tier (each whole,
//!   swapped out between accesses, or in the slow tier), with the cycles predicted and the
//!   smallest budget the planner meets.
//! - `npu-sim compile MODEL.tflite --output FILE [--json]` ([`compile`]): the model compiled
//!   for a device's CPU (`npu_compute::compiled`): its operators' packed parameters, arena
//!   offsets and constants as one image; prints its size and the arena it runs in.
//! - `npu-sim bench memory` ([`bench::memory`]): the peak-memory table of the Burn-Compute
//!   study, and the guided rows.
//! - `npu-sim bench models DIR` ([`bench::models`]): every model of a reference-model
//!   directory: conformance, host time, NPU cycles and arena bytes next to the peers'
//!   figures, and the transfers of one invoke.
//! - `npu-sim bench tune DIR` ([`bench::tune`]): NPU cycles per model with each kernel
//!   variant fixed and tuned, and the one-time tuning cost.
//! - `npu-sim bench schedule DIR` ([`bench::schedule`]): static schedules against dynamic
//!   dispatch and one operator at a time, on one, two and mixed execution units.
//! - `npu-sim bench dispatch` ([`bench::dispatch`]): host nanoseconds per `execute` of a
//!   tiny op.
//! - `npu-sim bench chain` ([`bench::chain`]): a chain of 1,000 dependent tiny jobs: virtual
//!   time against the sum of the jobs' own times, idle gaps from the trace, CPU waits, host
//!   time per job.
//! - `npu-sim bench pipeline MODEL.tflite` ([`bench::pipeline`]): a stream of frames with a
//!   fixed host preprocessing cost each, run one after another and pipelined: how busy the
//!   NPU stays.
//! - `npu-sim bench faults MODEL.tflite [--invokes N] [--fault-rate R] [--seed S] [--units SPEC]`
//!   ([`bench::faults`]): invokes under injected faults of every kind; one JSON object of
//!   faults injected, invokes failed and recovered, wrong outputs and leaks; fails if any
//!   output is wrong, any fault unreported, or anything leaked.
//!
//! Exit status (also in `npu-sim --help`), each class tested in `tests/cli.rs`:
//! - 0: the command succeeded; also `--help`, `help` and `--version`, which clap prints on
//!   stdout.
//! - 1: the command failed: it returned an error, printed on stderr as `npu-sim: error:
//!   MESSAGE` (`ExitCode::FAILURE`): a file that cannot be read or written (the message names
//!   it), a malformed model, `--input` files that are not one per model input of its tensor's
//!   size, an arena or host memory too small for the model (or, for `tune`, for measuring it),
//!   a benchmark directory with no model, a failed check. Whatever the command printed before
//!   the failure stays printed: `bench models` and `bench tune` print their tables, then fail
//!   if an output differs from TFLM's (or, for `bench tune`, a check fails).
//! - 2: the command line is wrong, and nothing ran: clap prints the error (naming the option
//!   and the value) and the usage on stderr. An unknown command or option, a missing argument,
//!   subcommand or option value, a value that does not parse (a `--units` spec naming an
//!   unknown unit or a `--faults` spec that is not one, a size or count that is not a whole number), a value out of range (a
//!   memory size beyond what the simulator addresses, 4294967295 bytes, for `--arena` and
//!   `--host`; a count of 0 for `--repeat`, `--jobs`, `--batches`, `--per-batch` and
//!   `--inferences`; fewer than 3 `--frames`), or options that exclude each other
//!   (`--tune-table` with `--autotune`).
//! - Stdout closing early (`npu-sim bench memory | head -1`) ends the command quietly with
//!   status 0 ([`output`]). A panic (status 101) or an abort (134) is a bug.

/// `println!` to stdout, through [`output::write`].
#[macro_export]
macro_rules! outln {
    () => {
        $crate::output::write(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::output::write(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` to stdout, through [`output::write`].
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::write(format_args!($($arg)*))
    };
}

mod bench;
mod budget;
mod common;
mod compile;
mod demo;
mod inspect;
mod output;
mod plan;
mod run;
mod trace;
mod tune;

use clap::{Parser, Subcommand};
use npu_compute::graph::{Optimise, Scheduling};
use std::path::PathBuf;
use std::process::ExitCode;

/// The exit status, as `--help` gives it (the module docs say more).
const EXIT_STATUS: &str = "Exit status:
  0  the command succeeded (also --help and --version)
  1  the command failed: the reason is on stderr as `npu-sim: error: MESSAGE`
  2  the command line is wrong (unknown command or option, missing or malformed value, value \
out of range): the usage is on stderr and nothing ran";

#[derive(Parser)]
#[command(
    name = "npu-sim",
    version,
    about = "Deterministic software NPU for npu-compute",
    after_help = EXIT_STATUS
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the main job on the simulated NPU and print results, cycles and memory statistics.
    Demo,
    /// Run a .tflite model on the simulated NPU: write the raw output bytes, print the
    /// predicted class, cycles and arena bytes.
    Run {
        /// The model.
        model: PathBuf,
        /// Raw bytes of the input tensor (repeat for models with several inputs).
        #[arg(long, required = true)]
        input: Vec<PathBuf>,
        /// Where to write the raw bytes of the output tensor (repeat for several outputs).
        #[arg(long)]
        output: Vec<PathBuf>,
        /// Bytes of NPU arena (device memory), at most 4294967295. Default 1 MiB, or the
        /// model's planned arena if it needs more.
        #[arg(long, value_name = "BYTES", value_parser = common::bytes_arg)]
        arena: Option<usize>,
        /// Bytes of host staging memory (DMA-capable host memory the driver is given), at
        /// most 4294967295. Default 256 KiB, or twice the model's largest input or output if
        /// more.
        #[arg(long, value_name = "BYTES", value_parser = common::bytes_arg)]
        host: Option<usize>,
        /// Write the run's figures as JSON to this file.
        #[arg(long)]
        stats: Option<PathBuf>,
        /// Timed invocations for host_us (median), at least 1.
        #[arg(long, default_value_t = 1, value_name = "N", value_parser = common::count_arg)]
        repeat: usize,
        /// `memory`: the smallest arena (layers run in stripes where it helps); `cycles`: the
        /// fewest cycles (whole tensors).
        #[arg(long, value_enum, default_value_t = OptimiseArg::Cycles)]
        optimise: OptimiseArg,
        /// Run each layer as this tuning table (from `npu-sim tune`) says, measuring nothing.
        #[arg(long, conflicts_with = "autotune")]
        tune_table: Option<PathBuf>,
        /// Tune every layer shape in an untimed first invoke, then report the next one.
        #[arg(long)]
        autotune: bool,
        /// The execution units: a comma-separated list of u55-128 and u55-256 (at most 8),
        /// e.g. `u55-256,u55-128`. The CPU is always there besides.
        #[arg(long = "units", value_name = "SPEC", default_value = "u55-128", value_parser = common::units_arg)]
        units: common::Units,
        /// How operators are spread over the units: `static` (a schedule planned at
        /// prepare), `dynamic` (round robin at dispatch) or `op-by-op` (one operator at a
        /// time, split over every unit).
        #[arg(long, value_enum, default_value_t = ScheduleArg::Static)]
        schedule: ScheduleArg,
        /// Hardware faults for the simulated NPU to inject: rules separated by `;`, each
        /// KIND[@COND,COND...]. KIND: dma, bus, hang, spurious-irq, lost-irq, overrun=Nx,
        /// overrun=+CYCLES, overrun=Nx+CYCLES. COND (all must hold): job=N (the N-th job the
        /// NPU accepts, from 0, the prepare's included), op=NAME (an operator family, e.g.
        /// Conv2d), p=PROBABILITY (0.01 or 1%) with seed=N, max=N (at most N times),
        /// region=device:OFFSET+LEN. E.g. `dma@job=12`, `bus@op=Conv2d,max=1`,
        /// `hang@p=0.01,seed=7`, `lost-irq@job=3;overrun=4x@op=DepthwiseConv2d`. A DMA or bus
        /// fault fails the run with the faulted job's error; a hang blocks it unless the
        /// runtime's watchdog ends it.
        #[arg(long, value_name = "SPEC", value_parser = common::faults_arg)]
        faults: Option<common::Faults>,
        /// Bytes of a slow memory tier beside the arena (PSRAM, HyperRAM; the simulator's
        /// default rate): the activations `--arena` cannot hold are kept there, chosen as
        /// `--policy` says. One execution unit, whole tensors (`--optimise cycles`).
        #[arg(long, value_name = "BYTES", value_parser = common::bytes_arg, requires = "arena")]
        slow: Option<usize>,
        /// How the activations kept in the slow tier are chosen: `guided` (planned from a
        /// measured run, the fewest predicted cycles for the arena) or `passive` (those the
        /// unconstrained plan lays out past the arena's end, whatever they cost).
        #[arg(long, value_enum, default_value_t = PolicyArg::Guided)]
        policy: PolicyArg,
    },
    /// Tune a .tflite model on the simulated NPU: time each layer shape's kernel variants
    /// once, keep the fastest, and write the choices as a tuning table.
    Tune {
        /// The model.
        model: PathBuf,
        /// Where to write the tuning table.
        #[arg(long)]
        export: PathBuf,
        /// The execution units: a comma-separated list of u55-128 and u55-256 (at most 8),
        /// e.g. `u55-256,u55-128`. The CPU is always there besides.
        #[arg(long = "units", value_name = "SPEC", default_value = "u55-128", value_parser = common::units_arg)]
        units: common::Units,
        /// Raw bytes of the input tensor (repeat for several; default zeros: cycles do not
        /// depend on the data).
        #[arg(long)]
        input: Vec<PathBuf>,
        /// Bytes of NPU arena (device memory), at most 4294967295: room for the model and
        /// for measuring each layer beside it (a scratch output, kernel scratch). Default 1
        /// MiB, or what the model and its measuring need if more.
        #[arg(long, value_name = "BYTES", value_parser = common::bytes_arg)]
        arena: Option<usize>,
    },
    /// Run a .tflite model twice (the first invoke job by job, the second from its job plan)
    /// and draw the second invoke as a Gantt chart in SVG: each execution unit, DMA and the
    /// CPU over cycles, with the arena's occupancy beneath.
    Trace {
        /// The model.
        model: PathBuf,
        /// Where to write the chart (an SVG document). Required unless --accesses is given.
        #[arg(long, required_unless_present = "accesses")]
        svg: Option<PathBuf>,
        /// Where to write the second invoke's tensor access list as JSON: every activation's
        /// reads and writes by operator with their cycles, idle gaps and live interval, and
        /// the live bytes over cycles with their peak (`npu_sim::access_list`).
        #[arg(long, value_name = "FILE")]
        accesses: Option<PathBuf>,
        /// Raw bytes of the input tensor (repeat for several; default zeros: the schedule
        /// does not depend on the data).
        #[arg(long)]
        input: Vec<PathBuf>,
        /// Bytes of NPU arena (device memory), at most 4294967295. Default: the model's
        /// planned arena plus a small margin.
        #[arg(long, value_name = "BYTES", value_parser = common::bytes_arg)]
        arena: Option<usize>,
        /// The execution units: a comma-separated list of u55-128 and u55-256 (at most 8),
        /// e.g. `u55-256,u55-128`.
        #[arg(long = "units", value_name = "SPEC", default_value = "u55-128", value_parser = common::units_arg)]
        units: common::Units,
    },
    /// Describe a .tflite model: tensors, quantization, and where each operator runs.
    Inspect {
        /// The model.
        model: PathBuf,
    },
    /// Print the exact arena bytes a model needs (an arena of that size runs it, one
    /// alignment unit less does not), and the host staging bytes and fixed capacities it
    /// needs.
    Plan {
        /// The model.
        model: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// The execution units: a comma-separated list of u55-128 and u55-256 (at most 8),
        /// e.g. `u55-256,u55-128`. The CPU is always there besides.
        #[arg(long = "units", value_name = "SPEC", default_value = "u55-128", value_parser = common::units_arg)]
        units: common::Units,
        /// `memory`: the smallest arena (layers run in stripes where it helps); `cycles`: the
        /// fewest cycles (whole tensors).
        #[arg(long, value_enum, default_value_t = OptimiseArg::Cycles)]
        optimise: OptimiseArg,
        /// Also write the static schedule planned for these units to this file, for firmware
        /// to follow (`PrepareOptions::schedule_table`).
        #[arg(long, value_name = "FILE")]
        schedule: Option<PathBuf>,
        /// Plan the activations into a fast arena of this many bytes, with a slow memory tier
        /// beside it: each whole, swapped out between accesses, or in the slow tier, and the
        /// cycles predicted (one U55-128; the other options do not apply).
        #[arg(long, value_name = "BYTES", value_parser = common::bytes_arg, conflicts_with_all = ["schedule", "optimise"])]
        budget: Option<usize>,
        /// The slow tier's bytes for `--budget` (default 8 MiB, a common PSRAM).
        #[arg(long, value_name = "BYTES", value_parser = common::bytes_arg, requires = "budget", default_value = "8388608")]
        slow: usize,
    },
    /// Compile a .tflite model for a device that runs it on its CPU: write its operators'
    /// packed parameters, arena offsets and constants as one image, and print its size and
    /// the arena it runs in.
    Compile {
        /// The model.
        model: PathBuf,
        /// Where to write the compiled model.
        #[arg(long)]
        output: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        which: Bench,
    },
}

/// What the arena plan optimises (`npu_compute::graph::Optimise`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum OptimiseArg {
    /// The fewest cycles.
    Cycles,
    /// The smallest arena.
    Memory,
}

impl From<OptimiseArg> for Optimise {
    fn from(o: OptimiseArg) -> Self {
        match o {
            OptimiseArg::Cycles => Optimise::Cycles,
            OptimiseArg::Memory => Optimise::Memory,
        }
    }
}

/// How `run --slow` chooses the activations kept in the slow tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum PolicyArg {
    /// Planned from a measured run: the fewest predicted cycles for the arena.
    Guided,
    /// Those the unconstrained plan lays out past the arena's end.
    Passive,
}

/// How operators are spread over the execution units (`npu_compute::graph::Scheduling`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ScheduleArg {
    /// A static schedule planned at prepare.
    Static,
    /// Round robin at dispatch.
    Dynamic,
    /// One operator at a time, split over every unit.
    OpByOp,
}

impl From<ScheduleArg> for Scheduling {
    fn from(s: ScheduleArg) -> Self {
        match s {
            ScheduleArg::Static => Scheduling::Static,
            ScheduleArg::Dynamic => Scheduling::Dynamic,
            ScheduleArg::OpByOp => Scheduling::OpByOp,
        }
    }
}

#[derive(Subcommand)]
enum Bench {
    /// Peak arena bytes of Burn's strategy: deallocation period x slice ratio, two workloads.
    Memory {
        /// Inferences per workload run (at least 1).
        #[arg(long, default_value_t = 48, value_name = "N", value_parser = common::count_arg)]
        inferences: usize,
    },
    /// Every model of a reference-model directory (each `NAME/model.tflite` with
    /// `input_K.bin` and `expected_tflm_K.bin`, and `figures.json`): checks the outputs, and
    /// prints host time, NPU cycles and arena bytes next to the peers' figures.
    Models {
        /// The directory (e.g. ../shared/models).
        dir: PathBuf,
        /// Timed invocations per input (the median over all is reported), at least 1.
        #[arg(long, default_value_t = 30, value_name = "N", value_parser = common::count_arg)]
        repeat: usize,
    },
    /// Every model of a reference-model directory (as `bench models`): NPU cycles with each
    /// kernel variant fixed, tuned (a table made by tuning, imported into a fresh simulator),
    /// the one-time tuning cost, and the measurements a run from the table takes (none). Fails
    /// if a tuned model is slower than its best fixed choice, a run from the table measures,
    /// or an output differs from TFLM's.
    Tune {
        /// The directory (e.g. examples/models or ../shared/models).
        dir: PathBuf,
    },
    /// Static schedules against dynamic dispatch and one operator at a time, on one, two and
    /// mixed execution units, per model of a directory.
    Schedule {
        /// The directory (e.g. examples/models or ../shared/models).
        dir: PathBuf,
    },
    /// Host nanoseconds per `execute` of a tiny op through client, channel, server, simulator.
    Dispatch {
        /// Timed batches (the median is reported), at least 1.
        #[arg(long, default_value_t = 101, value_name = "N", value_parser = common::count_arg)]
        batches: usize,
        /// Executes per batch, at least 1.
        #[arg(long, default_value_t = 1000, value_name = "N", value_parser = common::count_arg)]
        per_batch: usize,
    },
    /// A chain of dependent tiny jobs submitted with no read in between, then one read:
    /// virtual cycles against the sum of the jobs' costs, idle gaps, CPU waits, host ns/job.
    Chain {
        /// Jobs in the chain, at least 1.
        #[arg(long, default_value_t = 1000, value_name = "N", value_parser = common::count_arg)]
        jobs: usize,
        /// Virtual cycles the CPU spends per `execute` (advanced on the simulator's clock).
        #[arg(long, default_value_t = 30)]
        host_cycles: u64,
        /// Timed runs (the median host time is reported), at least 1.
        #[arg(long, default_value_t = 11, value_name = "N", value_parser = common::count_arg)]
        repeat: usize,
    },
    /// Frames of one model with a fixed host preprocessing cost each, one after another and
    /// pipelined over two sets of pinned buffers: NPU busy fraction in the steady state.
    Pipeline {
        /// The model (one input, one output).
        model: PathBuf,
        /// The input frame (default: `input_0.bin` beside the model).
        #[arg(long)]
        input: Option<PathBuf>,
        /// Frames per run, at least 3 (the first and the last are left out of the steady
        /// state).
        #[arg(long, default_value_t = 20, value_name = "N", value_parser = common::frames_arg)]
        frames: usize,
        /// Preprocessing cycles per frame, repeatable (default: a quarter, a half and nine
        /// tenths of one inference's cycles).
        #[arg(long)]
        cpu_cycles: Vec<u64>,
        /// The execution units: a comma-separated list of u55-128 and u55-256 (at most 8),
        /// e.g. `u55-256,u55-128`. The CPU is always there besides.
        #[arg(long = "units", value_name = "SPEC", default_value = "u55-128", value_parser = common::units_arg)]
        units: common::Units,
    },
    /// Invokes of one model while the simulator injects faults of every kind (DMA and bus
    /// errors, hangs, overruns, spurious and lost interrupts) on a fraction of the jobs: one
    /// JSON object of faults, failed and recovered invokes, wrong outputs and leaks. Fails if
    /// an output is wrong, a fault goes unreported or anything leaks.
    Faults {
        /// The model (its folder's `input_K.bin` and `expected_tflm_K.bin` are used).
        model: PathBuf,
        /// Invokes under faults.
        #[arg(long, default_value_t = 1000)]
        invokes: u64,
        /// The fraction of jobs faulted: `0.01` or `1%`.
        #[arg(long, default_value = "1%", value_parser = bench::faults::fault_rate_arg)]
        fault_rate: u32,
        /// The seed of the fault draws.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// The execution units: a comma-separated list of u55-128 and u55-256 (at most 8).
        #[arg(long = "units", value_name = "SPEC", default_value = "u55-128", value_parser = common::units_arg)]
        units: common::Units,
    },
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Demo => demo::run().map_err(|e| e.to_string()),
        Command::Run {
            model,
            input,
            output,
            arena,
            host,
            stats,
            repeat,
            optimise,
            tune_table,
            autotune,
            units,
            schedule,
            faults,
            slow,
            policy,
        } => run::run(
            &model,
            &input,
            &output,
            (arena, host),
            stats.as_deref(),
            repeat,
            optimise.into(),
            tune_table.as_deref(),
            autotune,
            npu_sim::SimConfig {
                faults: faults.map(|f| f.plan()).unwrap_or_default(),
                ..units.config()
            },
            schedule.into(),
            slow.map(|bytes| (bytes, policy == PolicyArg::Guided)),
        ),
        Command::Tune {
            model,
            export,
            input,
            arena,
            units,
        } => tune::run(&model, &export, &input, arena, units.config()),
        Command::Trace {
            model,
            svg,
            accesses,
            input,
            arena,
            units,
        } => trace::run(
            &model,
            (svg.as_deref(), accesses.as_deref()),
            &input,
            arena,
            units.config(),
        ),
        Command::Inspect { model } => inspect::run(&model),
        Command::Compile {
            model,
            output,
            json,
        } => compile::run(&model, &output, json),
        Command::Plan {
            model,
            json,
            budget: Some(budget),
            slow,
            ..
        } => budget::run(&model, budget as u32, slow as u32, json),
        Command::Plan {
            model,
            json,
            optimise,
            units,
            schedule,
            ..
        } => plan::run(
            &model,
            json,
            optimise.into(),
            units.config(),
            schedule.as_deref(),
        ),
        Command::Bench {
            which: Bench::Memory { inferences },
        } => bench::memory::run(inferences).map_err(|e| e.to_string()),
        Command::Bench {
            which: Bench::Models { dir, repeat },
        } => bench::models::run(&dir, repeat),
        Command::Bench {
            which: Bench::Tune { dir },
        } => bench::tune::run(&dir),
        Command::Bench {
            which: Bench::Schedule { dir },
        } => bench::schedule::run(&dir),
        Command::Bench {
            which: Bench::Dispatch { batches, per_batch },
        } => bench::dispatch::run(batches, per_batch).map_err(|e| e.to_string()),
        Command::Bench {
            which:
                Bench::Chain {
                    jobs,
                    host_cycles,
                    repeat,
                },
        } => bench::chain::run(jobs, host_cycles, repeat),
        Command::Bench {
            which:
                Bench::Pipeline {
                    model,
                    input,
                    frames,
                    cpu_cycles,
                    units,
                },
        } => bench::pipeline::run(
            &model,
            input.as_deref(),
            frames,
            &cpu_cycles,
            units.config(),
        ),
        Command::Bench {
            which:
                Bench::Faults {
                    model,
                    invokes,
                    fault_rate,
                    seed,
                    units,
                },
        } => bench::faults::run(&model, invokes, fault_rate, seed, units.config()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("npu-sim: error: {e}");
            ExitCode::FAILURE
        }
    }
}
