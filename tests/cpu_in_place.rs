//! The CPU fallback in place: on a HAL that lends the CPU its device memory
//! (`Npu::device_memory`), an operator the NPU lacks is computed where its operands lie, with
//! no host staging, after exactly the jobs a job on the NPU would wait for. Checked on the
//! simulator behind a driver that lends its device memory: a job's effects land there only
//! when the simulated NPU has finished it and the server has waited, so a CPU that read an
//! input before its writer ended, or wrote an output a job still read, would give other bytes.

mod common;

use common::chain::{add, bytes, relu, relu_on_cpu, LEN};
use common::shim::{Shim, Shimmed};
use npu_compute::channel::RefCellChannel;
use npu_compute::client::{ComputeClient, JobPlan};
use npu_compute::graph::Graph;
use npu_compute::hal::Npu;
use npu_compute::memory::{ChunkSliceMemory, MemoryConfig, DEFAULT_CHUNKS};
use npu_compute::ops::{DType, OpKind, OpSet};
use npu_compute::server::{NpuServer, ServerStats};
use npu_sim::runner::leak_aligned;
use npu_sim::{AlignedMemory, SimConfig, SimNpu, ETHOS_U55_OPS};

/// The simulator, lending its device memory to the CPU (the part's arena in plain SRAM).
struct Lending(SimNpu<'static>);

impl Shim for Lending {
    type Inner = SimNpu<'static>;
    fn inner(&self) -> &Self::Inner {
        &self.0
    }
    fn inner_mut(&mut self) -> &mut Self::Inner {
        &mut self.0
    }
    fn device_memory(&mut self) -> Option<&mut [u8]> {
        Some(self.0.device_memory_mut())
    }
}

type Channel<H> = RefCellChannel<NpuServer<H, ChunkSliceMemory<DEFAULT_CHUNKS>>>;

fn sim(config: SimConfig, device: usize) -> SimNpu<'static> {
    let device =
        &mut Box::leak(Box::new(AlignedMemory::<{ 256 * 1024 }>::new())).as_mut_slice()[..device];
    let host = Box::leak(Box::new(AlignedMemory::<65536>::new()));
    SimNpu::new(device, host.as_mut_slice(), config).unwrap()
}

fn channel<H: Npu>(npu: H) -> Channel<H> {
    RefCellChannel::new(NpuServer::new(npu, MemoryConfig::default()).unwrap())
}

/// The bytes of `z` and `w` of each run of [`chain`].
type Runs = Vec<(Vec<u8>, Vec<u8>)>;

/// `y = add(x, c)` (NPU), `z = relu(y)` (CPU), `u = add(x, c)`, `w = add(z, u)` (NPU), job by
/// job (`plan`: false) or from a job plan run three times over fresh inputs; the bytes of
/// `z` and `w` of each run, and the server's counters.
fn chain<H: Npu>(ch: &Channel<H>, plan: bool) -> (Runs, ServerStats) {
    let client = ComputeClient::new(ch);
    let c = client.create(&bytes(2)).unwrap();
    let x = client.empty(LEN).unwrap();
    let [y, z, u, w] = [0; 4].map(|_| client.empty(LEN).unwrap());
    let (add, relu) = (add(), relu());
    let mut jobs: JobPlan<_, 8, 8> = client.job_plan();
    if plan {
        jobs.push(&add, &[&x, &c], &y).unwrap();
        jobs.push(&relu, &[&y], &z).unwrap();
        jobs.push(&add, &[&x, &c], &u).unwrap();
        jobs.push(&add, &[&z, &u], &w).unwrap();
    }
    let mut runs = Vec::new();
    for run in 0..3 {
        // Written just before, without a sync: the first job waits for the upload, and the
        // CPU for the first job.
        client.write(&x, &bytes(10 + run)).unwrap();
        if plan {
            jobs.run(&[&add, &relu, &add, &add]).unwrap();
        } else {
            client.execute(add, &[&x, &c], &y).unwrap();
            client.execute(relu, &[&y], &z).unwrap();
            client.execute(add, &[&x, &c], &u).unwrap();
            client.execute(add, &[&z, &u], &w).unwrap();
        }
        let (mut zb, mut wb) = (vec![0; LEN as usize], vec![0; LEN as usize]);
        client.read(&z, &mut zb).unwrap();
        client.read(&w, &mut wb).unwrap();
        runs.push((zb, wb));
    }
    (runs, client.stats().unwrap())
}

#[test]
fn a_cpu_operator_in_place_waits_for_the_npu_job_writing_its_input() {
    for plan in [false, true] {
        let (staged, via_staging) = chain(&channel(sim(relu_on_cpu(1), 65536)), plan);
        let (in_place, lent) = chain(&channel(Shimmed(Lending(sim(relu_on_cpu(1), 65536)))), plan);
        assert_eq!(in_place, staged, "plan: {plan}");
        assert_eq!((lent.cpu_ops, via_staging.cpu_ops), (3, 3));
        // Through staging each ReLU downloads its input and uploads its output; in place
        // the only transfers are the program's: x written, z and w read, per run.
        assert_eq!(via_staging.downloads - lent.downloads, 3, "plan: {plan}");
        assert_eq!(via_staging.uploads - lent.uploads, 3, "plan: {plan}");
        assert_eq!(lent.downloads, 6);
    }
}

/// The simulator lending its device memory, behind a driver that says it runs no compute job
/// (`Npu::RUNS_OPS`), whatever its capabilities declare.
struct NoCompute(Lending);

impl Shim for NoCompute {
    type Inner = SimNpu<'static>;
    const RUNS_OPS: bool = false;
    fn inner(&self) -> &Self::Inner {
        &self.0 .0
    }
    fn inner_mut(&mut self) -> &mut Self::Inner {
        &mut self.0 .0
    }
    fn device_memory(&mut self) -> Option<&mut [u8]> {
        self.0.device_memory()
    }
}

#[test]
fn a_driver_that_runs_no_compute_job_has_every_operator_on_the_cpu_with_the_same_bytes() {
    for plan in [false, true] {
        let (staged, _) = chain(&channel(sim(relu_on_cpu(1), 65536)), plan);
        // The simulator declares ADD, but the driver says it runs nothing.
        let ch = channel(Shimmed(NoCompute(Lending(sim(relu_on_cpu(1), 65536)))));
        let (on_cpu, stats) = chain(&ch, plan);
        assert_eq!(on_cpu, staged, "plan: {plan}");
        // Four operators per run, three runs: every one on the CPU, no compute job.
        assert_eq!((stats.cpu_ops, stats.compute_jobs), (12, 0), "plan: {plan}");
        // The server reports no operator, as it runs none on the NPU.
        let caps = ComputeClient::new(&ch).capabilities().unwrap();
        assert_eq!(caps.ops, OpSet::EMPTY);
    }
}

#[test]
fn a_cpu_operator_in_place_waits_for_the_npu_jobs_reading_what_it_overwrites() {
    let ch = channel(Shimmed(Lending(sim(relu_on_cpu(1), 65536))));
    let client = ComputeClient::new(&ch);
    let (x, c, v) = (
        client.create(&bytes(3)).unwrap(),
        client.create(&bytes(4)).unwrap(),
        client.create(&bytes(5)).unwrap(),
    );
    let y = client.empty(LEN).unwrap();
    // The NPU reads x; the CPU then overwrites x at once. Had it not waited for the ADD,
    // the ADD (finishing later on the simulated clock) would read the ReLU's bytes.
    client.execute(add(), &[&x, &c], &y).unwrap();
    client.execute(relu(), &[&v], &x).unwrap();
    let (mut yb, mut xb) = (vec![0; LEN as usize], vec![0; LEN as usize]);
    client.read(&y, &mut yb).unwrap();
    client.read(&x, &mut xb).unwrap();

    let reference = channel(sim(SimConfig::default(), 65536));
    let client = ComputeClient::new(&reference);
    let (x, c, v) = (
        client.create(&bytes(3)).unwrap(),
        client.create(&bytes(4)).unwrap(),
        client.create(&bytes(5)).unwrap(),
    );
    let (y, r) = (client.empty(LEN).unwrap(), client.empty(LEN).unwrap());
    client.execute(add(), &[&x, &c], &y).unwrap();
    client.execute(relu(), &[&v], &r).unwrap();
    let (mut want_y, mut want_x) = (vec![0; LEN as usize], vec![0; LEN as usize]);
    client.read(&y, &mut want_y).unwrap();
    client.read(&r, &mut want_x).unwrap();
    assert_eq!((yb, xb), (want_y, want_x));
}

#[test]
fn a_graph_with_cpu_operators_in_place_gives_tflms_bytes_with_no_operand_in_staging() {
    let model = |file: &str| {
        std::fs::read(format!(
            "{}/examples/models/kws_dscnn/{file}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    };
    let kws = leak_aligned(&model("model.tflite"));
    // Depthwise convolutions and the softmax on the CPU, between convolutions on the NPU.
    let config = SimConfig {
        ops: ETHOS_U55_OPS
            .without(OpKind::DepthwiseConv2d, DType::I8)
            .without(OpKind::Softmax, DType::I8),
        ..SimConfig::default()
    };
    let ch = channel(Shimmed(Lending(sim(config, 256 * 1024))));
    let client = ComputeClient::new(&ch);
    let mut graph: Graph<_> = Graph::prepare(client, kws).unwrap();
    for invoke in 0..6 {
        let k = invoke % 3;
        let input = model(&format!("input_{k}.bin"));
        let want = model(&format!("expected_tflm_{k}.bin"));
        let mut out = vec![0u8; want.len()];
        graph.invoke(&[&input], &mut [&mut out]).unwrap();
        assert_eq!(out, want, "invoke {invoke}");
    }
    assert_eq!(graph.job_plan().map(|p| p.cpu_steps), Some(5));
    let stats = client.stats().unwrap();
    assert_eq!(stats.cpu_ops, 30);
    // The only downloads are the six invokes' scores, and no staging block was larger than
    // the largest transfer the program made (a constant the graph prepared, or the input):
    // no operator's operands went through staging (a depthwise layer's are 8 kB).
    assert_eq!((stats.downloads, stats.download_bytes), (6, 6 * 12));
    assert!(stats.staging_largest_bytes <= 512, "{stats:?}");
}
