//! Bad input as a new user gives it, each a typed error whose message says what was wrong:
//! the wrong number of a model's inputs, of an operator's operands, an operator whose sizes
//! overflow, an output of the wrong size, and a released tensor passed as input and output.

use npu_compute::channel::{ComputeChannel, RefCellChannel};
use npu_compute::client::ComputeClient;
use npu_compute::graph::{Graph, GraphError};
use npu_compute::memory::MemoryConfig;
use npu_compute::ops::{AddF32, FullyConnectedF32, Op, OpKind, ReluF32};
use npu_compute::server::{ComputeServer, NpuServer};
use npu_compute::Error;
use npu_kernels::FcShape;
use npu_sim::{AlignedMemory, SimConfig, SimNpu};

type Server = NpuServer<SimNpu<'static>>;

fn memory<const N: usize>() -> &'static mut [u8] {
    Box::leak(Box::new(AlignedMemory::<N>::new())).as_mut_slice()
}

fn channel() -> RefCellChannel<Server> {
    let npu = SimNpu::new(memory::<65536>(), memory::<65536>(), SimConfig::default()).unwrap();
    RefCellChannel::new(NpuServer::new(npu, MemoryConfig::default()).unwrap())
}

/// convnet has one input (3,072 bytes) and one output (10 bytes).
static CONVNET: &[u8] = npu_compute::include_aligned!("../examples/models/convnet/model.tflite");

#[test]
fn a_wrong_number_of_model_inputs_is_a_count_not_a_size() {
    let channel = channel();
    let mut graph: Graph<_> = Graph::prepare(ComputeClient::new(&channel), CONVNET).unwrap();
    let input = [0u8; 3072];
    let mut out = [0u8; 10];

    let two = graph
        .invoke(&[&input, &input], &mut [&mut out])
        .unwrap_err();
    assert_eq!(
        two,
        GraphError::IoCount {
            what: "input",
            expected: 1,
            given: 2
        }
    );
    let text = two.to_string();
    assert!(
        text.contains("the model has 1 input, 2 were given"),
        "{text}"
    );
    assert!(!text.contains("bytes"), "a count is not a size: {text}");

    let none = graph.invoke(&[], &mut [&mut out]).unwrap_err();
    assert_eq!(
        none,
        GraphError::IoCount {
            what: "input",
            expected: 1,
            given: 0
        }
    );
    assert!(
        none.to_string()
            .contains("the model has 1 input, 0 were given"),
        "{none}"
    );

    let mut spare = [0u8; 10];
    let outputs = graph
        .invoke(&[&input], &mut [&mut out, &mut spare])
        .unwrap_err();
    assert_eq!(
        outputs,
        GraphError::IoCount {
            what: "output",
            expected: 1,
            given: 2
        }
    );
    // A buffer of the wrong length is still a size, named by its position.
    let short = graph.invoke(&[&input[..5]], &mut [&mut out]).unwrap_err();
    assert_eq!(
        short.to_string(),
        "input 0: expected 3072 bytes, got 5",
        "{short:?}"
    );
    // Nothing ran: a right invoke afterwards works.
    graph.invoke(&[&input], &mut [&mut out]).unwrap();
}

#[test]
fn a_wrong_number_of_operands_is_a_count_with_the_operator() {
    let channel = channel();
    let client = ComputeClient::new(&channel);
    let a = client.create_f32(&[1.0; 4]).unwrap();
    let out = client.empty(16).unwrap();
    let add = Op::AddF32(AddF32 { len: 4 });

    let one = client.execute(add, &[&a], &out).unwrap_err();
    assert_eq!(
        one,
        Error::OperandCount {
            op: OpKind::Add,
            min: 2,
            max: 2,
            given: 1
        }
    );
    let text = one.to_string();
    assert!(
        text.starts_with("Add takes 2 inputs, 1 was given"),
        "{text}"
    );
    assert!(!text.contains("bytes"), "a count is not a size: {text}");

    let three = client.execute(add, &[&a, &a, &a], &out).unwrap_err();
    assert!(
        matches!(three, Error::OperandCount { given: 3, .. }),
        "{three:?}"
    );
    // More inputs than a job can carry: a count too, not "the output must have 0 bytes".
    let nine = [&a; 9];
    let many = client.execute(add, &nine, &out).unwrap_err();
    assert_eq!(
        many,
        Error::OperandCount {
            op: OpKind::Add,
            min: 2,
            max: 2,
            given: 9
        }
    );
    // The same through a job plan.
    let mut plan: npu_compute::client::JobPlan<'_, _, 4, 8> = client.job_plan();
    assert!(matches!(
        plan.push(&add, &[&a], &out),
        Err(Error::OperandCount { given: 1, .. })
    ));

    // An optional trailing input (the bias): the range is given.
    let fc = Op::FullyConnectedF32(FullyConnectedF32 {
        shape: FcShape {
            batches: 1,
            in_features: 4,
            out_features: 1,
        },
    });
    let y = client.empty(4).unwrap();
    let err = client.execute(fc, &[&a], &y).unwrap_err();
    assert_eq!(
        err,
        Error::OperandCount {
            op: OpKind::FullyConnected,
            min: 2,
            max: 3,
            given: 1
        }
    );
    assert!(
        err.to_string()
            .starts_with("FullyConnected takes 2 to 3 inputs, 1 was given"),
        "{err}"
    );
}

#[test]
fn the_output_is_called_the_output() {
    let channel = channel();
    let client = ComputeClient::new(&channel);
    let a = client.create_f32(&[1.0; 4]).unwrap();
    let out = client.empty(12).unwrap();
    let err = client
        .execute(Op::AddF32(AddF32 { len: 4 }), &[&a, &a], &out)
        .unwrap_err();
    assert_eq!(
        err,
        Error::BadOperands {
            op: OpKind::Add,
            operand: Error::OUTPUT_OPERAND,
            expected: 16,
            actual: 12
        }
    );
    assert_eq!(
        err.to_string(),
        "Add: the output must have 16 bytes, it has 12"
    );
    // An input of the wrong size is named by its position among the inputs.
    let b = client.create_f32(&[1.0; 3]).unwrap();
    let err = client
        .execute(Op::AddF32(AddF32 { len: 4 }), &[&a, &b], &out)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Add: input 1 must have 16 bytes, it has 12"
    );
}

#[test]
fn sizes_that_overflow_are_reported_as_such() {
    let channel = channel();
    let client = ComputeClient::new(&channel);
    let a = client.create_f32(&[1.0; 4]).unwrap();
    let out = client.empty(16).unwrap();
    // u32::MAX elements of 4 bytes: no byte count in a u32 holds them.
    let relu = Op::ReluF32(ReluF32 { len: u32::MAX });
    let err = client.execute(relu, &[&a], &out).unwrap_err();
    assert_eq!(err, Error::OperandTooLarge { op: OpKind::Relu });
    let text = err.to_string();
    assert!(!text.contains("must have"), "no bogus byte count: {text}");
    assert!(text.contains("more than 4294967295 bytes"), "{text}");
    // Checked before the count: the operator's own sizes are what is wrong.
    assert_eq!(
        client.execute(relu, &[&a, &a], &out),
        Err(Error::OperandTooLarge { op: OpKind::Relu })
    );
}

#[test]
fn a_released_tensor_is_stale_even_when_it_is_also_the_output() {
    let channel = channel();
    let client = ComputeClient::new(&channel);
    let a = client.create_f32(&[1.0; 4]).unwrap();
    let id = a.id();
    drop(a);
    let relu = Op::ReluF32(ReluF32 { len: 4 });
    let err = channel
        .with(|s| ComputeServer::execute(s, &relu, &[id], id))
        .unwrap();
    assert_eq!(err, Err(Error::StaleHandle { index: id.index() }));
    // A live tensor as its own input and output is still refused as aliasing.
    let b = client.create_f32(&[1.0; 4]).unwrap();
    assert_eq!(
        client.execute(relu, &[&b], &b),
        Err(Error::OutputAliasesInput { op: OpKind::Relu })
    );
}

static KWS: &[u8] = npu_compute::include_aligned!("../examples/models/kws_dscnn/model.tflite");

/// The runner refuses a memory the simulator cannot address before allocating it (an arena of
/// `usize::MAX` bytes panicked with "capacity overflow").
#[test]
fn the_runner_refuses_memories_it_cannot_address() {
    use npu_sim::runner::{self, RunError, RunOptions, MAX_MEMORY_BYTES};
    let input = [0u8; 490];
    for (opts, what) in [
        (
            RunOptions {
                arena_bytes: usize::MAX,
                ..RunOptions::default()
            },
            "arena",
        ),
        (
            RunOptions {
                host_bytes: MAX_MEMORY_BYTES + 1,
                ..RunOptions::default()
            },
            "host staging memory",
        ),
    ] {
        let err = runner::run(KWS, &[&input], &opts).unwrap_err();
        assert!(
            matches!(err, RunError::MemoryTooLarge { what: w, limit: MAX_MEMORY_BYTES, .. } if w == what),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(text.contains(&MAX_MEMORY_BYTES.to_string()), "{text}");
        assert!(matches!(
            runner::tune(KWS, &[&input], &opts),
            Err(RunError::MemoryTooLarge { .. })
        ));
    }
}

/// Tuning in an arena with room for the model but not for measuring beside it says so
/// (`TuneStats::starved`) instead of finishing with nothing tuned; the arena
/// `runner::tuning_arena` gives tunes every layer shape, as a large one does.
#[test]
fn tuning_in_a_short_arena_counts_what_starved() {
    use npu_sim::runner::{self, RunOptions};
    let input = [0u8; 490];
    let short = RunOptions {
        arena_bytes: 20704, // kws_dscnn's planned arena
        ..RunOptions::default()
    };
    let (_, stats) = runner::tune(KWS, &[&input], &short).unwrap();
    assert!(stats.starved > 0, "{stats:?}");
    assert!(stats.starved_bytes > 0, "{stats:?}");
    assert!(stats.tuning_runs < 6, "{stats:?}");
    let (_, large) = runner::tune(KWS, &[&input], &RunOptions::default()).unwrap();
    assert_eq!((large.starved, large.starved_bytes), (0, 0), "{large:?}");
    let needed = runner::tuning_arena(KWS, &[&input], &short).unwrap();
    assert!(needed > short.arena_bytes && needed < RunOptions::default().arena_bytes);
    let enough = RunOptions {
        arena_bytes: needed,
        ..short
    };
    let (table, stats) = runner::tune(KWS, &[&input], &enough).unwrap();
    assert_eq!(stats.starved, 0, "{stats:?}");
    assert_eq!(
        (stats.tuning_runs, stats.measurements),
        (large.tuning_runs, large.measurements)
    );
    assert!(!table.is_empty());
}

/// The simulator's refusal of a memory it cannot address says the limit, whichever type
/// carries it (it printed as `Sim(MemoryTooLarge { space: Device })`).
#[test]
fn a_memory_too_large_says_the_limit() {
    use npu_compute::hal::{SetupError, Space};
    let sim = npu_sim::SimError::MemoryTooLarge {
        space: Space::Device,
    };
    let setup = SetupError::from(sim);
    assert_eq!(
        setup,
        SetupError::MemoryTooLarge {
            space: Space::Device,
            limit: u64::from(u32::MAX)
        }
    );
    for text in [
        sim.to_string(),
        setup.to_string(),
        Error::from(sim).to_string(),
        GraphError::from(sim).to_string(),
    ] {
        assert!(text.contains("4294967295 bytes"), "{text}");
        assert!(!text.contains("MemoryTooLarge"), "{text}");
    }
}
