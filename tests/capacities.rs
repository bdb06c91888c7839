//! The capacities `npu-sim plan` prints are what a model needs: a stack built with exactly
//! those capacities and that much host memory runs the model to TFLM's bytes from its job
//! plan; with one less, it fails naming the capacity (`OPS`), runs job by job (a job plan's
//! handles, chunk slots and tensors), or has transfers wait for earlier ones to free their
//! staging blocks (staging blocks and bytes), always to the same bytes.

use npu_compute::channel::RefCellChannel;
use npu_compute::client::ComputeClient;
use npu_compute::graph::{Graph, GraphError, Optimise};
use npu_compute::memory::{ChunkSliceMemory, MemoryConfig};
use npu_compute::server::NpuServer;
use npu_compute::tune::{TuneConfig, TuneMode};
use npu_compute::Error;
use npu_sim::{runner, AlignedMemory, SimConfig, SimNpu};

static MODEL: &[u8] = npu_compute::include_aligned!("../examples/models/kws_dscnn/model.tflite");
const INPUT: &[u8] = include_bytes!("../examples/models/kws_dscnn/input_0.bin");
const EXPECTED: &[u8] = include_bytes!("../examples/models/kws_dscnn/expected_tflm_0.bin");

/// What a run of the model gave.
#[derive(Debug, PartialEq)]
struct Outcome {
    output: [u8; 12],
    /// Whether the second invoke ran from the graph's job plan.
    planned: bool,
    /// The most staging blocks at once, and the highest byte of host memory they reached.
    staging: (u32, u32),
}

/// Builds a stack with the given capacities and `host` bytes of staging memory, prepares the
/// model and invokes it twice (job by job, then from its job plan where it can).
fn run<
    const CHUNKS: usize,
    const HANDLES: usize,
    const STAGING: usize,
    const OPS: usize,
    const TENSORS: usize,
>(
    host: usize,
) -> Result<Outcome, GraphError> {
    let mut device = AlignedMemory::<65536>::new();
    let mut host_memory = AlignedMemory::<8192>::new();
    let npu: SimNpu = SimNpu::new(
        device.as_mut_slice(),
        &mut host_memory.as_mut_slice()[..host],
        SimConfig::default(),
    )?;
    let server: NpuServer<_, ChunkSliceMemory<CHUNKS>, HANDLES, STAGING> =
        NpuServer::new(npu, MemoryConfig::default())?;
    let channel: RefCellChannel<_, HANDLES> = RefCellChannel::new(server);
    let client = ComputeClient::new(&channel);
    let mut graph: Graph<_, OPS, TENSORS> = Graph::prepare(client, MODEL)?;
    let mut output = [0u8; 12];
    graph.invoke(&[INPUT], &mut [&mut output])?;
    graph.invoke(&[INPUT], &mut [&mut output])?;
    Ok(Outcome {
        output,
        planned: graph.job_plan().is_some(),
        staging: client
            .stats()
            .map(|s| (s.staging_blocks_peak, s.staging_bytes_peak))?,
    })
}

#[test]
fn kws_dscnn_runs_with_exactly_the_measured_capacities() {
    let caps = runner::capacities(MODEL, SimConfig::default(), Optimise::Cycles).unwrap();
    // The const generics below are these figures: if the measurement moves, this fails and the
    // figures in the README and BENCHMARKS.md move with it.
    assert_eq!(
        (
            caps.ops,
            caps.tensors,
            caps.handles,
            caps.chunks,
            caps.staging_blocks
        ),
        (12, 43, 44, 24, 12),
        "{caps:?}"
    );
    assert_eq!(caps.plan_jobs, 12);
    let host = caps.host_staging_bytes as usize;
    let exact = run::<24, 44, 12, 12, 43>(host).unwrap();
    assert_eq!(&exact.output, EXPECTED);
    assert!(exact.planned, "the measured capacities hold the job plan");

    // One operator less cannot hold the model.
    assert!(matches!(
        run::<24, 44, 12, 11, 43>(host),
        Err(GraphError::CapacityExceeded {
            capacity: "OPS",
            limit: 11,
            needed: 12
        })
    ));
    // One tensor handle, chunk slot or graph tensor less cannot hold the job plan: the graph
    // keeps running job by job, to the same bytes.
    for smaller in [
        run::<24, 43, 12, 12, 43>(host),
        run::<23, 44, 12, 12, 43>(host),
        run::<24, 44, 12, 12, 42>(host),
    ] {
        let smaller = smaller.unwrap();
        assert_eq!(&smaller.output, EXPECTED);
        assert!(!smaller.planned);
    }
    // One staging block less: a transfer waits for an earlier one to free its block.
    let fewer_blocks = run::<24, 44, 11, 12, 43>(host).unwrap();
    assert_eq!(&fewer_blocks.output, EXPECTED);
    assert!(fewer_blocks.planned);
    assert_eq!(exact.staging.0, 12);
    assert_eq!(fewer_blocks.staging.0, 11);
}

#[test]
fn the_host_staging_figures_bound_the_host_memory() {
    let caps = runner::capacities(MODEL, SimConfig::default(), Optimise::Cycles).unwrap();
    let (peak, min) = (
        caps.host_staging_bytes as usize,
        caps.host_staging_min_bytes as usize,
    );
    assert!(min <= peak, "{caps:?}");
    // The least host memory runs the model, transfers waiting on each other; one alignment
    // unit less cannot hold the largest transfer.
    let least = run::<64, 64, 16, 64, 128>(min).unwrap();
    assert_eq!(&least.output, EXPECTED);
    let ample = run::<64, 64, 16, 64, 128>(peak).unwrap();
    assert_eq!(&ample.output, EXPECTED);
    assert_eq!(ample.staging.1, caps.host_staging_bytes);
    assert_eq!(least.staging.1, caps.host_staging_min_bytes);
    assert!(matches!(
        run::<64, 64, 16, 64, 128>(min - 16),
        Err(GraphError::Compute {
            error: Error::StagingExhausted { .. },
            ..
        })
    ));
}

#[test]
fn the_tuning_entries_are_the_layer_shapes_a_table_holds() {
    let caps = runner::capacities(MODEL, SimConfig::default(), Optimise::Cycles).unwrap();
    let mut device = AlignedMemory::<65536>::new();
    let mut host = AlignedMemory::<8192>::new();
    let npu: SimNpu = SimNpu::new(
        device.as_mut_slice(),
        host.as_mut_slice(),
        SimConfig::default(),
    )
    .unwrap();
    let server: NpuServer<_> = NpuServer::new(npu, MemoryConfig::default())
        .unwrap()
        .with_tuning(TuneMode::Tune, TuneConfig::default());
    let channel: RefCellChannel<_> = RefCellChannel::new(server);
    let client = ComputeClient::new(&channel);
    let mut graph: Graph<_> = Graph::prepare(client, MODEL).unwrap();
    let mut out = [0u8; 12];
    graph.invoke(&[INPUT], &mut [&mut out]).unwrap();
    assert_eq!(out, EXPECTED);
    let tune = client.tune_stats().unwrap();
    assert_eq!(tune.tuning_runs, caps.tune_entries);
    assert!(caps.tune_entries > 0);
}
