//! Data movement on hand-made models: hand-computed bytes, and malformed parameters refused at
//! prepare with an error (never a panic). TFLM's own outputs are checked in
//! `tests/operators.rs`; these are the cases a converter does not make.

mod common;

use common::*;
use npu_compute::client::ComputeClient;
use npu_compute::graph::GraphError;
use npu_sim::runner::{self, leak_aligned, SimGraph};
use npu_sim::SimConfig;

const STRIDED_SLICE: i32 = 45;
const PAD: i32 = 34;
const SPLIT: i32 = 49;
const PACK: i32 = 83;
const MIRROR_PAD: i32 = 100;
const STRIDED_SLICE_OPTIONS: u8 = 32;
const PACK_OPTIONS: u8 = 59;
const MIRROR_PAD_OPTIONS: u8 = 77;
const INT64: i8 = 4;

fn q() -> Option<V> {
    Some(quant(&[0.5], &[0], 0))
}

fn i32s(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A model of one operator `code` on int8 input tensor 0 of `shape`, constant int32
/// parameter tensors `params` (shape, values), int8 outputs of `outputs` shapes.
fn model(
    code: i32,
    shape: &[i32],
    params: &[(&[i32], &[i32])],
    outputs: &[&[i32]],
    options: Option<(u8, V)>,
) -> Spec {
    let mut tensors = vec![tensor(shape, INT8, 0, "input", q())];
    let mut buffers = vec![buffer(&[])];
    let mut inputs = vec![0];
    for (i, (s, v)) in params.iter().enumerate() {
        tensors.push(tensor(
            s,
            INT32,
            buffers.len() as u32,
            &format!("p{i}"),
            None,
        ));
        buffers.push(buffer(&i32s(v)));
        inputs.push(i as i32 + 1);
    }
    let mut outs = vec![];
    for s in outputs {
        outs.push(tensors.len() as i32);
        tensors.push(tensor(s, INT8, 0, "output", q()));
    }
    Spec {
        version: 3,
        opcodes: vec![opcode(code)],
        tensors,
        operators: vec![operator(0, &inputs, &outs, options)],
        buffers,
        inputs: vec![0],
        outputs: outs,
        extra_subgraphs: vec![],
    }
}

fn strided_options(begin: i32, end: i32, shrink: i32) -> Option<(u8, V)> {
    Some((
        STRIDED_SLICE_OPTIONS,
        table(vec![
            (0, F::I32(begin)),
            (1, F::I32(end)),
            (4, F::I32(shrink)),
        ]),
    ))
}

/// Prepares `spec` on the simulated NPU; runs it on `input` when it prepares.
fn run(spec: &Spec, input: &[u8], outputs: &mut [&mut [u8]]) -> Result<(), GraphError> {
    let bytes = leak_aligned(&spec.build());
    let mut device = vec![0u128; 64 * 1024 / 16];
    let mut host = vec![0u128; 64 * 1024 / 16];
    let channel = runner::channel(&mut device, &mut host, SimConfig::default()).unwrap();
    let client = ComputeClient::new(&channel);
    let mut graph: SimGraph = SimGraph::prepare(client, bytes)?;
    graph.invoke(&[input], outputs).unwrap();
    Ok(())
}

fn refused(spec: &Spec, what: &str) {
    let mut out = vec![0u8; 64];
    let err = run(spec, &[0; 64], &mut [&mut out]).err();
    assert!(
        matches!(
            err,
            Some(GraphError::Unsupported { .. } | GraphError::Kernel { .. })
        ),
        "{what}: {err:?}"
    );
}

#[test]
fn strided_slice_backwards_with_masks_gives_the_hand_computed_bytes() {
    // [2, 4] = 0..8; rows backwards (begin and end masks, stride -1), columns 3 down to 1 by
    // -2.
    let spec = model(
        STRIDED_SLICE,
        &[2, 4],
        &[(&[2], &[0, 3]), (&[2], &[0, 0]), (&[2], &[-1, -2])],
        &[&[2, 2]],
        strided_options(1, 1, 0),
    );
    let mut out = [0u8; 4];
    run(&spec, &[0, 1, 2, 3, 4, 5, 6, 7], &mut [&mut out]).unwrap();
    assert_eq!(out, [7, 5, 3, 1]);
}

/// A STRIDED_SLICE's begin, end and strides: (shape, values) each.
type Params = [(&'static [i32], &'static [i32]); 3];

#[test]
fn malformed_strided_slices_are_refused() {
    let good: Params = [(&[2], &[0, 0]), (&[2], &[2, 4]), (&[2], &[1, 1])];
    let with = |i: usize, p: (&'static [i32], &'static [i32])| {
        let mut params = good;
        params[i] = p;
        params
    };
    let cases: [(&str, Params, &[i32], i32); 5] = [
        ("stride 0", with(2, (&[2], &[1, 0])), &[2, 4], 0),
        ("begin of one entry", with(0, (&[1], &[0])), &[2, 4], 0),
        ("output shape", good, &[2, 3], 0),
        ("shrink past the end", with(0, (&[2], &[2, 0])), &[4], 1),
        ("shrink backwards", with(2, (&[2], &[-1, 1])), &[4], 1),
    ];
    for (what, params, out, shrink) in cases {
        let spec = model(
            STRIDED_SLICE,
            &[2, 4],
            &params,
            &[out],
            strided_options(0, 0, shrink),
        );
        refused(&spec, what);
    }
}

#[test]
fn pad_uses_the_output_zero_point_and_refuses_bad_paddings() {
    let mut spec = model(PAD, &[2], &[(&[1, 2], &[1, 2])], &[&[5]], None);
    spec.tensors[2] = tensor(&[5], INT8, 0, "output", Some(quant(&[0.5], &[-7], 0)));
    let mut out = [0u8; 5];
    run(&spec, &[1, 2], &mut [&mut out]).unwrap();
    assert_eq!(out, [0xf9, 1, 2, 0xf9, 0xf9]);

    refused(
        &model(PAD, &[2], &[(&[1, 2], &[-1, 2])], &[&[3]], None),
        "negative padding",
    );
    refused(
        &model(PAD, &[2], &[(&[2], &[1, 2])], &[&[5]], None),
        "paddings of shape [2]",
    );
    refused(
        &model(PAD, &[2], &[(&[1, 2], &[1, 2])], &[&[6]], None),
        "output shape",
    );
    let mut int64 = model(PAD, &[2], &[(&[1, 2], &[1, 2])], &[&[5]], None);
    int64.tensors[1] = tensor(&[1, 2], INT64, 1, "p0", None);
    int64.buffers[1] = buffer(&[1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0]);
    refused(&int64, "int64 paddings (TFLM reads them as int32)");
}

#[test]
fn mirror_pad_refuses_paddings_past_the_reflection() {
    let reflect = || Some((MIRROR_PAD_OPTIONS, table(vec![(0, F::I8(0))])));
    let spec = model(MIRROR_PAD, &[3], &[(&[1, 2], &[2, 2])], &[&[7]], reflect());
    let mut out = [0u8; 7];
    run(&spec, &[1, 2, 3], &mut [&mut out]).unwrap();
    assert_eq!(out, [3, 2, 1, 2, 3, 2, 1]);
    refused(
        &model(MIRROR_PAD, &[3], &[(&[1, 2], &[3, 0])], &[&[6]], reflect()),
        "reflect padding of the whole axis",
    );
}

#[test]
fn split_outputs_are_slices_and_an_uneven_split_is_refused() {
    // SPLIT's axis is input 0 and the tensor input 1: build it by hand.
    let mut spec = model(SPLIT, &[2, 4], &[(&[], &[1])], &[&[2, 2], &[2, 2]], None);
    spec.operators = vec![operator(0, &[1, 0], &[2, 3], None)];
    let (mut a, mut b) = ([0u8; 4], [0u8; 4]);
    run(&spec, &[0, 1, 2, 3, 4, 5, 6, 7], &mut [&mut a, &mut b]).unwrap();
    assert_eq!((a, b), ([0, 1, 4, 5], [2, 3, 6, 7]));

    let mut uneven = model(SPLIT, &[2, 3], &[(&[], &[1])], &[&[2, 1], &[2, 1]], None);
    uneven.operators = vec![operator(0, &[1, 0], &[2, 3], None)];
    refused(&uneven, "split of 3 in 2");
}

#[test]
fn pack_of_more_than_max_inputs_is_refused() {
    let n = 9;
    let mut spec = model(PACK, &[2], &[], &[&[n, 2]], None);
    spec.operators = vec![operator(
        0,
        &vec![0; n as usize],
        &[1],
        Some((PACK_OPTIONS, table(vec![(0, F::I32(n)), (1, F::I32(0))]))),
    )];
    let bytes = leak_aligned(&spec.build());
    let mut device = vec![0u128; 64 * 1024 / 16];
    let mut host = vec![0u128; 64 * 1024 / 16];
    let channel = runner::channel(&mut device, &mut host, SimConfig::default()).unwrap();
    let err = SimGraph::prepare(ComputeClient::new(&channel), bytes)
        .err()
        .unwrap();
    assert!(err.to_string().contains("MAX_INPUTS"), "{err}");
}
