//! The runtime's state built where a firmware keeps it: a server made inside its channel
//! (`NpuServer::unset`) and given its memories there (`NpuServer::setup`), a graph made empty
//! (`Graph::unprepared`) and prepared where it lies (`Graph::prepare_in_place`). They give
//! what `NpuServer::new` and `Graph::prepare` give, refuse what would pull memory from under
//! tensors, and a graph prepared again releases what it held. Also: a HAL declaring more
//! execution units than the build holds is refused with an error naming the feature.

use npu_compute::graph::Optimise;
use npu_compute::hal::{
    Capabilities, CpuOnly, Cycles, Fence, HalError, Job, SetupError, MAX_EXECUTION_UNITS,
};
use npu_compute::prelude::*;

static KWS: &[u8] = npu_compute::include_aligned!("../examples/models/kws_dscnn/model.tflite");
static ADD: &[u8] =
    npu_compute::include_aligned!("models/ops/add_int8_broadcast_rank1/model.tflite");
const KWS_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/models/kws_dscnn");
const ADD_DIR: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/models/ops/add_int8_broadcast_rank1"
);

type Server<'a> = NpuServer<CpuOnly<'a>>;

fn read(path: String) -> Vec<u8> {
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Word-aligned device and host memories for `CpuOnly`, as a firmware's statics are.
fn memories() -> (Vec<u32>, Vec<u32>) {
    (vec![0u32; 16 * 1024], vec![0u32; 4 * 1024])
}

fn cpu<'a>(device: &'a mut [u32], host: &'a mut [u32]) -> CpuOnly<'a> {
    CpuOnly::new(
        bytemuck::cast_slice_mut(device),
        bytemuck::cast_slice_mut(host),
    )
}

/// kws_dscnn's scores on its first input through `graph`.
fn kws_scores<C: ComputeChannel>(graph: &mut Graph<'_, C>) -> [u8; 12] {
    let input = read(format!("{KWS_DIR}/input_0.bin"));
    let mut scores = [0u8; 12];
    graph.invoke(&[&input], &mut [&mut scores]).unwrap();
    scores
}

#[test]
fn a_server_set_up_in_its_channel_and_a_graph_prepared_in_place_give_tflm_bytes() {
    let (mut device, mut host) = memories();
    let channel: RefCellChannel<Server<'_>> =
        RefCellChannel::new(NpuServer::unset(cpu(&mut device, &mut host)));
    let client = ComputeClient::new(&channel);
    // Unset, the server has no arena: a tensor cannot be made.
    assert_eq!(client.memory_stats().unwrap().largest_free, 0);
    assert!(client.empty(16).is_err());
    channel
        .with(|s| s.setup(MemoryConfig::default()))
        .unwrap()
        .unwrap();
    assert_eq!(
        client.memory_stats().unwrap().largest_free,
        (device_bytes(&channel)) as u32
    );
    let mut graph: Graph<'_, _> = Graph::unprepared(client);
    graph.prepare_in_place(KWS, Optimise::Cycles).unwrap();
    let expected = read(format!("{KWS_DIR}/expected_tflm_0.bin"));
    for _ in 0..2 {
        assert_eq!(kws_scores(&mut graph)[..], expected[..]);
    }
}

/// The arena the server manages: all of the HAL's device memory.
fn device_bytes(channel: &RefCellChannel<Server<'_>>) -> usize {
    channel
        .with(|s| s.capabilities().device_memory_bytes as usize)
        .unwrap()
}

#[test]
fn setup_refuses_a_server_that_has_served_a_request() {
    let (mut device, mut host) = memories();
    let channel: RefCellChannel<Server<'_>> =
        RefCellChannel::new(NpuServer::unset(cpu(&mut device, &mut host)));
    let client = ComputeClient::new(&channel);
    let setup = || channel.with(|s| s.setup(MemoryConfig::default())).unwrap();
    setup().unwrap();
    // Set up again before any request: nothing refers to the memories yet.
    setup().unwrap();
    let tensor = client.empty(64).unwrap();
    match setup() {
        Err(Error::Setup(SetupError::OutOfRange { value, .. })) => assert_eq!(value, 1),
        other => panic!("setup under a live tensor: {other:?}"),
    }
    // The tensor is untouched: still readable, its memory still the server's.
    client.write(&tensor, &[7; 64]).unwrap();
    let mut back = [0u8; 64];
    client.read(&tensor, &mut back).unwrap();
    assert_eq!(back, [7; 64]);
}

#[test]
fn a_graph_prepared_again_in_place_releases_the_model_it_held() {
    let (mut device, mut host) = memories();
    let server: Server<'_> =
        NpuServer::new(cpu(&mut device, &mut host), MemoryConfig::default()).unwrap();
    let channel: RefCellChannel<_> = RefCellChannel::new(server);
    let client = ComputeClient::new(&channel);
    let live = || channel.with(|s| s.live_tensors()).unwrap();
    let mut graph: Graph<'_, _> = Graph::unprepared(client);
    assert_eq!(live(), 0);
    graph.prepare_in_place(KWS, Optimise::Cycles).unwrap();
    let kws_live = live();
    assert!(kws_live > 0);

    // Another model in its place: kws_dscnn's tensors are released, the ADD runs.
    graph.prepare_in_place(ADD, Optimise::Cycles).unwrap();
    assert!(live() < kws_live, "{} tensors left of {kws_live}", live());
    let (a, b) = (
        read(format!("{ADD_DIR}/input_0_0.bin")),
        read(format!("{ADD_DIR}/input_0_1.bin")),
    );
    let expected = read(format!("{ADD_DIR}/expected_0_0.bin"));
    let mut out = vec![0u8; expected.len()];
    graph.invoke(&[&a, &b], &mut [&mut out]).unwrap();
    assert_eq!(out, expected);

    // Bytes that are no model: the error, and nothing held.
    static NOT_A_MODEL: [u8; 64] = [0xA5; 64];
    assert!(graph
        .prepare_in_place(&NOT_A_MODEL, Optimise::Cycles)
        .is_err());
    assert_eq!(live(), 0);

    // kws_dscnn again, as the first time.
    graph.prepare_in_place(KWS, Optimise::Cycles).unwrap();
    assert_eq!(live(), kws_live);
    let expected = read(format!("{KWS_DIR}/expected_tflm_0.bin"));
    assert_eq!(kws_scores(&mut graph)[..], expected[..]);
    drop(graph);
    assert_eq!(live(), 0);
}

/// `CpuOnly` declaring `units` execution units.
struct Units<'a> {
    inner: CpuOnly<'a>,
    units: u8,
}

impl Npu for Units<'_> {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            execution_units: self.units,
            ..self.inner.capabilities()
        }
    }
    fn submit(&mut self, job: &Job<'_>) -> Result<Fence, HalError> {
        self.inner.submit(job)
    }
    fn poll(&mut self, fence: Fence) -> nb::Result<(), HalError> {
        self.inner.poll(fence)
    }
    fn wait_for_event(&mut self) {
        self.inner.wait_for_event()
    }
    fn on_interrupt(&mut self) {
        self.inner.on_interrupt()
    }
    fn now(&self) -> Cycles {
        self.inner.now()
    }
    fn host_memory(&mut self) -> &mut [u8] {
        self.inner.host_memory()
    }
    fn device_memory(&mut self) -> Option<&mut [u8]> {
        self.inner.device_memory()
    }
    fn map_flash(&mut self, bytes: &'static [u8]) -> Result<u8, HalError> {
        self.inner.map_flash(bytes)
    }
    fn unmap_flash(&mut self, segment: u8) {
        self.inner.unmap_flash(segment)
    }
}

#[test]
fn a_hal_with_more_units_than_the_build_holds_is_refused_naming_the_feature() {
    let (mut device, mut host) = memories();
    let most = MAX_EXECUTION_UNITS as u8;
    let npu = Units {
        inner: cpu(&mut device, &mut host),
        units: most + 1,
    };
    let refused = |e: Error| match e {
        Error::Setup(SetupError::OutOfRange {
            parameter,
            value,
            expected,
        }) => {
            assert_eq!(parameter, "Capabilities::execution_units");
            assert_eq!(value, usize::from(most) + 1);
            assert!(
                expected.contains(&format!("MAX_EXECUTION_UNITS ({most}")),
                "{expected}"
            );
            // The default build holds the most; a smaller one names the feature to enable.
            assert!(
                most == 8 || expected.contains("units-8"),
                "{expected} names no feature"
            );
        }
        other => panic!("{other:?}"),
    };
    let made: Result<NpuServer<_>, _> = NpuServer::new(npu, MemoryConfig::default());
    refused(made.err().expect("a server over too many units"));

    // The same from setup, the server left without memories.
    {
        let npu = Units {
            inner: cpu(&mut device, &mut host),
            units: most + 1,
        };
        let mut server: NpuServer<_> = NpuServer::unset(npu);
        refused(server.setup(MemoryConfig::default()).unwrap_err());
        assert_eq!(server.memory_stats().largest_free, 0);
    }

    // As many as the build holds: set up.
    let npu = Units {
        inner: cpu(&mut device, &mut host),
        units: most,
    };
    let mut server: NpuServer<_> = NpuServer::unset(npu);
    server.setup(MemoryConfig::default()).unwrap();
    assert!(server.memory_stats().largest_free > 0);
}
