//! Graph execution: hand-computed results, errors that name what went wrong, several models
//! over one arena, weights in flash or copied, and the CPU fallback.

mod common;

use common::*;
use npu_compute::client::ComputeClient;
use npu_compute::graph::{Graph, GraphError};
use npu_compute::ops::{DType, OpKind, OpSet};

use npu_compute::model::BuiltinOp;
use npu_compute::Error;
use npu_sim::runner::{self, leak_aligned, SimGraph};
use npu_sim::SimConfig;

fn product(name: &str, file: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/examples/models/{name}/{file}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn model(name: &str) -> &'static [u8] {
    leak_aligned(&product(name, "model.tflite"))
}

/// Runs `f` with a client over a simulator of `arena` bytes.
fn with_client<R>(
    arena: usize,
    config: SimConfig,
    f: impl FnOnce(ComputeClient<'_, runner::ModelChannel<'_>>) -> R,
) -> R {
    let mut device = vec![0u128; arena / 16];
    let mut host = vec![0u128; 64 * 1024 / 16];
    let channel = runner::channel(&mut device, &mut host, config).unwrap();
    f(ComputeClient::new(&channel))
}

#[test]
fn hand_made_fully_connected_gives_the_hand_computed_bytes() {
    // Input scale 0.5, zero point -1; weights per channel 0.1 and 0.2; bias [1, 2]; output
    // scale 0.25, zero point 3; ReLU. For x = [1, 2, 3, 4]: x - zp = [2, 3, 4, 5].
    //   channel 0: 2·1 + 3·2 + 4·3 + 5·4 + 1 = 41, × 0.5·0.1/0.25 = 8.2 → 8, + 3 = 11
    //   channel 1: 2·5 + 3·6 + 4·7 + 5·8 + 2 = 98, × 0.5·0.2/0.25 = 39.2 → 39, + 3 = 42
    let bytes = leak_aligned(&Spec::fc().build());
    with_client(64 * 1024, SimConfig::default(), |client| {
        let mut graph: SimGraph = Graph::prepare(client, bytes).unwrap();
        let mut out = [0u8; 2];
        graph.invoke(&[&[1, 2, 3, 4]], &mut [&mut out]).unwrap();
        assert_eq!(out, [11, 42]);
        // ReLU clamps at the output zero point: x = -128 everywhere gives negative sums.
        graph.invoke(&[&[0x80; 4]], &mut [&mut out]).unwrap();
        assert_eq!(out, [3, 3]);
    });
}

#[test]
fn unsupported_operators_are_named_with_their_index() {
    let mut spec = Spec::fc();
    spec.opcodes = vec![opcode(15)]; // LSH_PROJECTION
    spec.operators = vec![operator(0, &[0], &[3], None)];
    let bytes = leak_aligned(&spec.build());
    with_client(64 * 1024, SimConfig::default(), |client| {
        let err = SimGraph::prepare(client, bytes).err().unwrap();
        assert_eq!(
            err,
            GraphError::Unsupported {
                op_index: 0,
                op: BuiltinOp::LshProjection,
                what: "operator"
            }
        );
        assert_eq!(
            err.to_string(),
            "operator 0 (LSH_PROJECTION): unsupported operator"
        );
    });
}

#[test]
fn quantized_dimensions_tflm_ignores_are_ignored() {
    // As in TFLM's person-detection example: a 1-D per-channel bias quantization naming
    // dimension 3, and a filter's naming one out of range. TFLM ignores both fields.
    let mut spec = Spec::fc();
    spec.tensors[1] = tensor(
        &[2, 4],
        INT8,
        2,
        "weights",
        Some(quant(&[0.1, 0.2], &[0, 0], 7)),
    );
    spec.tensors[2] = tensor(
        &[2],
        INT32,
        3,
        "bias",
        Some(quant(&[0.05, 0.1], &[0, 0], 3)),
    );
    let bytes = leak_aligned(&spec.build());
    with_client(64 * 1024, SimConfig::default(), |client| {
        let mut graph: SimGraph = Graph::prepare(client, bytes).unwrap();
        let mut out = [0u8; 2];
        graph.invoke(&[&[1, 2, 3, 4]], &mut [&mut out]).unwrap();
        assert_eq!(out, [11, 42]);
    });
    // Still refused: a filter with neither one scale nor one per output channel.
    spec.tensors[1] = tensor(
        &[2, 4],
        INT8,
        2,
        "weights",
        Some(quant(&[0.1; 4], &[0; 4], 1)),
    );
    let bytes = leak_aligned(&spec.build());
    with_client(64 * 1024, SimConfig::default(), |client| {
        let err = SimGraph::prepare(client, bytes).err().unwrap();
        assert!(
            matches!(err, GraphError::Unsupported { op_index: 0, .. }),
            "{err}"
        );
    });
}

#[test]
fn operators_nothing_reads_run_nothing_and_are_not_refused() {
    // A converter's dead shape arithmetic, here an operator the runtime lacks (LSH_PROJECTION)
    // whose output no one reads: the model runs without it.
    let mut spec = Spec::fc();
    spec.opcodes.push(opcode(15));
    spec.tensors.push(tensor(
        &[1, 4],
        INT8,
        0,
        "unread",
        Some(quant(&[0.5], &[-1], 0)),
    ));
    spec.operators.insert(0, operator(1, &[0], &[4], None));
    let bytes = leak_aligned(&spec.build());
    with_client(64 * 1024, SimConfig::default(), |client| {
        let mut graph: SimGraph = Graph::prepare(client, bytes).unwrap();
        assert_eq!(
            graph.operators().count(),
            1,
            "only the FULLY_CONNECTED runs"
        );
        let mut out = [0u8; 2];
        graph.invoke(&[&[1, 2, 3, 4]], &mut [&mut out]).unwrap();
        assert_eq!(out, [11, 42]);
    });
    // Read by the model's output: refused, naming it.
    spec.outputs.push(4);
    let bytes = leak_aligned(&spec.build());
    with_client(64 * 1024, SimConfig::default(), |client| {
        let err = SimGraph::prepare(client, bytes).err().unwrap();
        assert!(
            matches!(
                err,
                GraphError::Unsupported {
                    op_index: 0,
                    op: BuiltinOp::LshProjection,
                    ..
                }
            ),
            "{err}"
        );
    });
}

#[test]
fn an_operator_with_one_output_listing_two_is_refused() {
    // Operators are lowered once per output; one whose description computes a single output
    // refuses a second rather than computing it twice.
    let mut spec = Spec::fc();
    spec.tensors.push(tensor(
        &[1, 2],
        INT8,
        0,
        "second",
        Some(quant(&[0.25], &[3], 0)),
    ));
    spec.operators = vec![operator(
        0,
        &[0, 1, 2],
        &[3, 4],
        Some((FC_OPTIONS, table(vec![(0, F::I8(1))]))),
    )];
    let bytes = leak_aligned(&spec.build());
    with_client(64 * 1024, SimConfig::default(), |client| {
        let err = SimGraph::prepare(client, bytes).err().unwrap();
        assert_eq!(
            err,
            GraphError::Unsupported {
                op_index: 0,
                op: BuiltinOp::FullyConnected,
                what: "output count other than 1"
            }
        );
    });
}

#[test]
fn capacities_and_io_sizes_are_checked() {
    let convnet = model("convnet");
    with_client(256 * 1024, SimConfig::default(), |client| {
        let ops = Graph::<_, 4, 128>::prepare(client, convnet).err().unwrap();
        assert_eq!(
            ops,
            GraphError::CapacityExceeded {
                capacity: "OPS",
                limit: 4,
                needed: 8
            }
        );
        let tensors = Graph::<_, 64, 8>::prepare(client, convnet).err().unwrap();
        assert!(matches!(
            tensors,
            GraphError::CapacityExceeded {
                capacity: "TENSORS",
                limit: 8,
                ..
            }
        ));
        let mut graph: SimGraph = Graph::prepare(client, convnet).unwrap();
        let mut out = [0u8; 10];
        let err = graph.invoke(&[&[0u8; 5]], &mut [&mut out]).unwrap_err();
        assert_eq!(
            err,
            GraphError::BadIo {
                what: "input",
                index: 0,
                expected: 3072,
                actual: 5
            }
        );
        let err = graph.invoke(&[], &mut [&mut out]).unwrap_err();
        assert_eq!(
            err,
            GraphError::IoCount {
                what: "input",
                expected: 1,
                given: 0,
            }
        );
    });
}

#[test]
fn the_planned_arena_is_exactly_enough() {
    let convnet = model("convnet");
    let input = product("convnet", "input_0.bin");
    let want = product("convnet", "expected_tflm_0.bin");
    let report = with_client(64 * 1024, SimConfig::default(), |client| {
        let graph: SimGraph = Graph::prepare(client, convnet).unwrap();
        graph.arena()
    });
    assert!(report.activation_bytes >= report.lower_bound_bytes);
    assert!(
        report.constant_bytes > 0,
        "per-channel multipliers live in the arena"
    );
    let exact = report.arena_bytes() as usize;
    with_client(exact, SimConfig::default(), |client| {
        let mut graph: SimGraph = Graph::prepare(client, convnet).unwrap();
        let mut out = [0u8; 10];
        for _ in 0..2 {
            graph.invoke(&[&input], &mut [&mut out]).unwrap();
            assert_eq!(&out[..], &want[..]);
        }
    });
    // One alignment unit less fails when the pool is reserved, naming the bytes.
    with_client(exact - 16, SimConfig::default(), |client| {
        match Graph::<_, 64, 128>::prepare(client, convnet) {
            Err(GraphError::Compute {
                op_index: None,
                error:
                    Error::OutOfMemory {
                        requested, free, ..
                    },
            }) => {
                assert_eq!(requested, report.activation_bytes);
                assert_eq!(free, report.activation_bytes - 16);
            }
            other => panic!("{:?}", other.map(|g| g.arena())),
        }
    });
}

#[test]
fn several_models_share_one_arena() {
    let (kws, convnet) = (model("kws_dscnn"), model("convnet"));
    let kws_in = product("kws_dscnn", "input_1.bin");
    let kws_want = product("kws_dscnn", "expected_tflm_1.bin");
    let conv_in = product("convnet", "input_2.bin");
    let conv_want = product("convnet", "expected_tflm_2.bin");
    with_client(256 * 1024, SimConfig::default(), |client| {
        let mut a: SimGraph = Graph::prepare(client, kws).unwrap();
        let mut b: SimGraph = Graph::prepare(client, convnet).unwrap();
        assert!(a.weights_in_flash() && b.weights_in_flash());
        let (mut out_a, mut out_b) = (vec![0u8; kws_want.len()], vec![0u8; conv_want.len()]);
        for _ in 0..3 {
            a.invoke(&[&kws_in], &mut [&mut out_a]).unwrap();
            b.invoke(&[&conv_in], &mut [&mut out_b]).unwrap();
            assert_eq!(out_a, kws_want);
            assert_eq!(out_b, conv_want);
        }
        drop(a);
        b.invoke(&[&conv_in], &mut [&mut out_b]).unwrap();
        assert_eq!(out_b, conv_want);
        drop(b);
        assert_eq!(
            client.memory_stats().unwrap().in_use,
            0,
            "every constant released"
        );
    });
}

#[test]
fn weights_are_copied_when_the_npu_cannot_read_flash() {
    let kws = model("kws_dscnn");
    let input = product("kws_dscnn", "input_0.bin");
    let want = product("kws_dscnn", "expected_tflm_0.bin");
    let config = SimConfig {
        reads_flash: false,
        ..SimConfig::default()
    };
    with_client(256 * 1024, config, |client| {
        let mut graph: SimGraph = Graph::prepare(client, kws).unwrap();
        assert!(!graph.weights_in_flash());
        // The weights (about 24 KB) now live in the arena.
        assert!(client.memory_stats().unwrap().in_use > 20_000);
        let mut out = vec![0u8; want.len()];
        graph.invoke(&[&input], &mut [&mut out]).unwrap();
        assert_eq!(out, want);
    });
}

#[test]
fn operators_the_npu_lacks_run_on_the_cpu_with_the_same_bytes() {
    let kws = model("kws_dscnn");
    let input = product("kws_dscnn", "input_2.bin");
    let want = product("kws_dscnn", "expected_tflm_2.bin");
    let config = SimConfig {
        ops: OpSet::all()
            .without(OpKind::DepthwiseConv2d, DType::I8)
            .without(OpKind::Softmax, DType::I8),
        ..SimConfig::default()
    };
    with_client(256 * 1024, config, |client| {
        let mut graph: SimGraph = Graph::prepare(client, kws).unwrap();
        let on_cpu: Vec<_> = graph
            .operators()
            .filter(|p| !p.on_npu)
            .map(|p| p.builtin)
            .collect();
        assert_eq!(
            on_cpu.len(),
            5,
            "4 depthwise convolutions and the softmax: {on_cpu:?}"
        );
        let mut out = vec![0u8; want.len()];
        graph.invoke(&[&input], &mut [&mut out]).unwrap();
        assert_eq!(out, want);
        assert_eq!(client.stats().unwrap().cpu_ops, 5);
    });
}

/// `x → ADD(x, x) = a, MUL(x, x) = b → CONCATENATION(a, b) = y` with `x`, `a`, `b` of
/// `shape`, concatenated along `axis`; with `concat: false`, the model stops at `a` and `b`
/// (both outputs), which gives the bytes the concatenation must produce.
fn add_mul_concat(shape: &[i32], axis: i32, concat: bool) -> &'static [u8] {
    let q = || Some(quant(&[0.5], &[-3], 0));
    let mut out_shape = shape.to_vec();
    out_shape[axis as usize] *= 2;
    let mut spec = Spec::fc();
    spec.opcodes = vec![opcode(0), opcode(18), opcode(2)];
    spec.tensors = vec![
        tensor(shape, INT8, 0, "x", q()),
        tensor(shape, INT8, 0, "a", q()),
        tensor(shape, INT8, 0, "b", q()),
        tensor(&out_shape, INT8, 0, "y", q()),
    ];
    spec.operators = vec![
        operator(0, &[0, 0], &[1], None),
        operator(1, &[0, 0], &[2], None),
    ];
    spec.outputs = vec![1, 2];
    if concat {
        let options = table(vec![(0, F::I32(axis)), (1, F::I8(0))]);
        spec.operators
            .push(operator(2, &[1, 2], &[3], Some((CONCAT_OPTIONS, options))));
        spec.outputs = vec![3];
    }
    spec.buffers = vec![buffer(&[])];
    spec.inputs = vec![0];
    leak_aligned(&spec.build())
}

#[test]
fn concatenation_inputs_are_written_in_place_when_they_are_blocks_of_the_output() {
    let x: Vec<u8> = (0..16u8).map(|i| i.wrapping_mul(37)).collect();
    // (shape, axis, in place): along the outermost axis each input is one block of the output;
    // along the inner axis of [2, 8] the inputs interleave, so the concatenation copies.
    for (shape, axis, in_place) in [([1, 16], 0, true), ([2, 8], 1, false)] {
        let (mut a, mut b) = ([0u8; 16], [0u8; 16]);
        with_client(64 * 1024, SimConfig::default(), |client| {
            let mut parts: SimGraph =
                Graph::prepare(client, add_mul_concat(&shape, axis, false)).unwrap();
            parts.invoke(&[&x], &mut [&mut a, &mut b]).unwrap();
        });
        let want: Vec<u8> = if in_place {
            a.iter().chain(&b).copied().collect()
        } else {
            a.chunks(8)
                .zip(b.chunks(8))
                .flat_map(|(a, b)| a.iter().chain(b))
                .copied()
                .collect()
        };
        assert_ne!(
            a, b,
            "the two producers must differ for the test to see the order"
        );

        let report = with_client(64 * 1024, SimConfig::default(), |client| {
            let mut graph: SimGraph =
                Graph::prepare(client, add_mul_concat(&shape, axis, true)).unwrap();
            let mut y = [0u8; 32];
            // The first invoke job by job, the next two from the job plan: the host's read of
            // the output waits for producers that no job plan step names as writing it.
            for _ in 0..3 {
                graph.invoke(&[&x], &mut [&mut y]).unwrap();
                assert_eq!(&y[..], &want[..], "{shape:?} along {axis}");
            }
            assert!(graph.job_plan().is_some(), "the plan ran");
            graph.arena()
        });
        // Whole tensors: a, b and y are live together at the concatenation (64 bytes). In
        // place, MUL writes b over x, and ADD and MUL write a and b into y's halves: 32 bytes.
        assert_eq!(report.lower_bound_bytes, 64);
        assert_eq!(
            report.activation_bytes,
            if in_place { 32 } else { 64 },
            "{shape:?}"
        );
    }
}

/// Every error a program meets on the way to running a model converts into `GraphError`
/// with `?`, and everything into `Box<dyn Error>`, keeping the sentence that explains it.
#[test]
fn errors_convert_with_question_marks() {
    use npu_compute::hal::{HalError, SetupError, Space};
    use npu_compute::model::ModelError;
    use npu_sim::SimError;
    use std::error::Error as StdError;

    fn through_graph<E>(e: E) -> Result<(), GraphError>
    where
        GraphError: From<E>,
    {
        Err(e)?
    }
    fn boxed<E: StdError + 'static>(e: E) -> Result<(), Box<dyn StdError>> {
        Err(e)?
    }
    let cases: [(GraphError, String); 5] = [
        {
            let e = ModelError::UnsupportedVersion { version: 9 };
            (through_graph(e).unwrap_err(), e.to_string())
        },
        {
            let e = npu_compute::Error::ChannelBusy;
            (through_graph(e).unwrap_err(), e.to_string())
        },
        {
            let e = HalError::QueueFull { capacity: 4 };
            (through_graph(e).unwrap_err(), e.to_string())
        },
        {
            let e = SetupError::MisalignedMemory {
                space: Space::Device,
                alignment: 16,
            };
            (through_graph(e).unwrap_err(), e.to_string())
        },
        {
            let e = SimError::BadAlignment { alignment: 3 };
            (through_graph(e).unwrap_err(), e.to_string())
        },
    ];
    for (graph, inner) in cases {
        assert!(
            !inner.is_empty() && !inner.contains('{'),
            "a sentence: {inner}"
        );
        let text = graph.to_string();
        assert!(text.contains(&inner), "{text} keeps {inner}");
        let boxed = boxed(graph).unwrap_err();
        assert_eq!(boxed.to_string(), text);
    }
}

/// A chain of `ops` int8 ADDs, each adding its own constant of ones, all at one scale: the
/// output is the input plus `ops`, exactly. `ops + 1` activations and `ops` constants.
fn add_chain(ops: usize) -> Vec<u8> {
    const ADD_OPTIONS: u8 = 11;
    let q = || Some(quant(&[0.1], &[0], 0));
    let mut spec = Spec::fc();
    spec.opcodes = vec![opcode(0)];
    spec.tensors = vec![tensor(&[1, 8], INT8, 0, "input", q())];
    spec.buffers = vec![buffer(&[])];
    spec.operators = vec![];
    for k in 0..ops {
        let (c, out) = (spec.tensors.len() as i32, spec.tensors.len() as i32 + 1);
        spec.buffers.push(buffer(&[1; 8]));
        let buf = spec.buffers.len() as u32 - 1;
        spec.tensors
            .push(tensor(&[1, 8], INT8, buf, &format!("c{k}"), q()));
        spec.tensors
            .push(tensor(&[1, 8], INT8, 0, &format!("t{k}"), q()));
        let options = table(vec![(0, F::I8(0))]);
        spec.operators.push(operator(
            0,
            &[c - 1, c],
            &[out],
            Some((ADD_OPTIONS, options)),
        ));
    }
    spec.inputs = vec![0];
    spec.outputs = vec![spec.tensors.len() as i32 - 1];
    spec.build()
}

#[test]
fn the_runner_runs_models_beyond_its_small_stack_on_its_large_one() {
    // 70 operators and 141 tensors: beyond the small stack's OPS = 64 and TENSORS = 128.
    let model = leak_aligned(&add_chain(70));
    let input = [0u8, 1, 2, 3, 4, 5, 6, 7];
    let small = with_client(1 << 20, SimConfig::default(), |client| {
        SimGraph::prepare(client, model).err()
    });
    assert!(
        matches!(small, Some(GraphError::CapacityExceeded { .. })),
        "{small:?}"
    );
    let report = runner::run(model, &[&input], &runner::RunOptions::default()).unwrap();
    let expected: Vec<u8> = input.iter().map(|&x| x + 70).collect();
    assert_eq!(report.outputs, vec![expected]);
    assert_eq!(
        report.runtime_state_bytes,
        runner::LargeGraph::state_bytes(),
        "the figures are the large stack's"
    );
    // The model fits the small stack at 60 operators: that one runs it.
    let model = leak_aligned(&add_chain(60));
    let report = runner::run(model, &[&input], &runner::RunOptions::default()).unwrap();
    assert_eq!(report.runtime_state_bytes, SimGraph::state_bytes());
}
