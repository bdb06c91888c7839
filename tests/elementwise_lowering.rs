//! The elementwise operators' lowering on hand-made one-operator models: what it accepts, and
//! that every unsupported or malformed parameter is a `LowerError`, never a panic.

mod common;

use common::*;
use npu_compute::model::Model;
use npu_compute::ops::{lower, LowerCtx, LowerError, Lowered, Op};

const FLOAT32: i8 = 0;
const LEAKY_RELU_OPTIONS: u8 = 75;

/// `code` on int8 tensors of `shapes` (inputs, then the output), every one quantized
/// `(scale, zero_point)`, with `options`.
fn model(code: i32, shapes: &[&[i32]], ty: i8, zp: i64, options: Option<(u8, V)>) -> Vec<u8> {
    let n = shapes.len();
    let q = || (ty != FLOAT32).then(|| quant(&[0.05], &[zp], 0));
    Spec {
        version: 3,
        opcodes: vec![opcode(code)],
        tensors: shapes
            .iter()
            .enumerate()
            .map(|(i, s)| tensor(s, ty, 0, &format!("t{i}"), q()))
            .collect(),
        operators: vec![operator(
            0,
            &(0..n as i32 - 1).collect::<Vec<_>>(),
            &[n as i32 - 1],
            options,
        )],
        buffers: vec![buffer(&[])],
        inputs: (0..n as i32 - 1).collect(),
        outputs: vec![n as i32 - 1],
        extra_subgraphs: vec![],
    }
    .build()
}

fn lowered(bytes: &[u8]) -> Result<Op, LowerError> {
    let m = Model::parse(bytes).unwrap();
    let sub = m.subgraph();
    let info = sub.operator(0).unwrap();
    match lower(&LowerCtx::new(&sub, &info))? {
        Lowered::Compute { op, .. } => Ok(op),
        Lowered::Alias { .. } => panic!("an alias"),
    }
}

const NEG: i32 = 59;
const MAXIMUM: i32 = 55;
const MINIMUM: i32 = 57;
const PRELU: i32 = 54;
const SQUARED_DIFFERENCE: i32 = 99;
const LEAKY_RELU: i32 = 98;
const RELU: i32 = 19;
const RELU6: i32 = 21;
const ABS: i32 = 101;
const HARD_SWISH: i32 = 117;

#[test]
fn neg_is_float32_only() {
    let f = model(NEG, &[&[2, 3], &[2, 3]], FLOAT32, 0, None);
    assert!(matches!(lowered(&f), Ok(Op::NegF32(n)) if n.len == 6));
    let i = model(NEG, &[&[2, 3], &[2, 3]], INT8, 0, None);
    assert!(matches!(lowered(&i), Err(LowerError::Unsupported(_))));
    let bad = model(NEG, &[&[2, 3], &[5]], FLOAT32, 0, None);
    assert!(matches!(
        lowered(&bad),
        Err(LowerError::ShapeMismatch { .. })
    ));
}

#[test]
fn binary_shapes_must_broadcast_to_the_output() {
    for code in [MAXIMUM, MINIMUM, PRELU, SQUARED_DIFFERENCE] {
        let ok = model(code, &[&[2, 1, 3], &[4, 1], &[2, 4, 3]], INT8, 0, None);
        assert!(lowered(&ok).is_ok(), "{code}");
        let no = model(code, &[&[2, 3], &[4], &[2, 4]], INT8, 0, None);
        assert!(matches!(lowered(&no), Err(LowerError::Kernel(_))), "{code}");
        let wrong_out = model(code, &[&[2, 3], &[3], &[2, 4]], INT8, 0, None);
        assert!(
            matches!(lowered(&wrong_out), Err(LowerError::Kernel(_))),
            "{code}"
        );
        let float = model(code, &[&[3], &[3], &[3]], FLOAT32, 0, None);
        assert!(
            matches!(lowered(&float), Err(LowerError::Unsupported(_))),
            "{code}"
        );
    }
}

#[test]
fn unary_activations_lower_and_refuse_bad_quantization() {
    let alpha = Some((LEAKY_RELU_OPTIONS, table(vec![(0, F::F32(0.25))])));
    let leaky = model(LEAKY_RELU, &[&[1, 4, 4], &[1, 4, 4]], INT8, 3, alpha);
    assert!(matches!(lowered(&leaky), Ok(Op::LeakyReluI8(o)) if o.len == 16));
    let nan = Some((LEAKY_RELU_OPTIONS, table(vec![(0, F::F32(f32::NAN))])));
    let leaky_nan = model(LEAKY_RELU, &[&[4], &[4]], INT8, 0, nan);
    assert!(matches!(lowered(&leaky_nan), Err(LowerError::Kernel(_))));
    for (code, check) in [
        (RELU, "ReluI8"),
        (RELU6, "Relu6I8"),
        (ABS, "AbsI8"),
        (HARD_SWISH, "HardSwishI8"),
        (LEAKY_RELU, "LeakyReluI8"),
    ] {
        let ok = model(code, &[&[2, 5], &[10]], INT8, -4, None);
        let op = lowered(&ok).unwrap();
        assert!(format!("{op:?}").starts_with(check), "{op:?}");
        let zp = model(code, &[&[2, 5], &[10]], INT8, 300, None);
        assert!(lowered(&zp).is_err(), "{check}");
        let count = model(code, &[&[2, 5], &[9]], INT8, 0, None);
        assert!(matches!(
            lowered(&count),
            Err(LowerError::ShapeMismatch { .. })
        ));
    }
}
