//! Layer-by-layer comparison of ADD, SUB, MUL, RSQRT and MEAN with TensorFlow Lite Micro.
//!
//! `tests/tflm/fixtures/elementwise/*.bin` hold, for a selection of those operators of
//! tiny_transformer (ADD without broadcasting and with a scalar, SUB with a `[1, 16, 1]`
//! operand, MUL of a tensor by itself, by a `[1, 16, 1]` tensor and by a scalar, MEAN over the
//! last axis with `keep_dims` and over axis 1 without, RSQRT), the operator's shapes, options
//! and quantization, its inputs (TFLM's own intermediate tensors for the model's `input_0.bin`)
//! and the output TFLM's reference kernels produced. The spatial MEANs of convnet and
//! inception in `tests/tflm/fixtures/` are run through [`MeanParams::for_axes`] as well. They
//! were written by `tests/tflm/extract_fixtures.py` with the `tflite-micro` PyPI package. Every
//! output byte must match.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use npu_kernels::int8::{
    add_broadcast, dequantize, mean, mul_broadcast, quantize_f32, requantize, rsqrt, sub_broadcast,
    AddParams, BroadcastShape, MeanParams, MulParams, RequantizeParams, RsqrtParams, SubParams,
};

/// Runs one fixture; returns the operator name (the file name after `<model>_<index>_`), or
/// `None` for a fixture of another test's operator.
fn run(path: &Path) -> Option<String> {
    let fx = Fixture::load(path);
    let name = path.file_stem().unwrap().to_string_lossy().into_owned();
    let op = name.rsplit(|c: char| c.is_ascii_digit()).next().unwrap()[1..].to_string();
    // QUANTIZE and DEQUANTIZE occur in no reference model; synthetic_fixtures.py makes some.
    if op == "dequantize" {
        let input = fx.i8("input");
        let expected = fx.f32("expected_f32");
        let mut out = vec![0_f32; expected.len()];
        dequantize(fx.quant("input"), input, &mut out).unwrap();
        for (i, (o, e)) in out.iter().zip(expected).enumerate() {
            assert_eq!(o.to_bits(), e.to_bits(), "{name}[{i}]: {o} != {e}");
        }
        return Some(name);
    }
    if op == "quantize" && fx.is_f32("input") {
        let expected = fx.i8("expected");
        let mut out = vec![0_i8; expected.len()];
        quantize_f32(fx.quant("output"), fx.f32("input"), &mut out).unwrap();
        assert_eq!(out, expected, "{name}");
        return Some(name);
    }
    let (input_q, output_q) = (fx.quant("input"), fx.quant("output"));
    let input = fx.i8("input");
    let expected = fx.i8("expected");
    let mut out = vec![0_i8; expected.len()];
    let in_shape = fx.u32s("input_shape");
    match op.as_str() {
        "add" | "sub" | "mul" => {
            let act = activation(fx.u32s("options")[0]);
            let q2 = fx.quant("input2");
            let shape = BroadcastShape::new(
                &in_shape,
                &fx.u32s("input2_shape"),
                &fx.u32s("output_shape"),
            )
            .unwrap();
            let b = fx.i8("input2");
            match op.as_str() {
                "add" => {
                    let p = AddParams::new(input_q, q2, output_q, act).unwrap();
                    add_broadcast(&p, &shape, input, b, &mut out).unwrap();
                }
                "sub" => {
                    let p = SubParams::new(input_q, q2, output_q, act).unwrap();
                    sub_broadcast(&p, &shape, input, b, &mut out).unwrap();
                }
                _ => {
                    let p = MulParams::new(input_q, q2, output_q, act).unwrap();
                    mul_broadcast(&p, &shape, input, b, &mut out).unwrap();
                }
            }
        }
        "mean" => {
            // The spatial-mean fixtures of tflm_layers.rs have no axes record: they are
            // [N, H, W, C] over axes 1 and 2 by construction.
            let axes = if fx.has("axes") {
                fx.i32("axes").unwrap().to_vec()
            } else {
                vec![1, 2]
            };
            let p = MeanParams::for_axes(&in_shape, &axes, input_q, output_q).unwrap();
            assert_eq!(p.lens(), (input.len(), expected.len()), "{name}");
            mean(&p, input, &mut out).unwrap();
        }
        "quantize" => {
            let p = RequantizeParams::new(input_q, output_q).unwrap();
            requantize(&p, input, &mut out).unwrap();
        }
        "rsqrt" => {
            let p = RsqrtParams::new(input_q, output_q).unwrap();
            rsqrt(&p, input, &mut out).unwrap();
        }
        _ => return None,
    }
    let diffs = out.iter().zip(expected).filter(|(a, b)| a != b).count();
    assert_eq!(
        diffs,
        0,
        "{name}: {diffs} of {} outputs differ from TFLM (first: {:?})",
        out.len(),
        out.iter()
            .zip(expected)
            .enumerate()
            .find(|(_, (a, b))| a != b)
    );
    Some(name)
}

fn bins(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<_> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "bin"))
        .collect();
    paths.sort();
    paths
}

#[test]
fn elementwise_layers_match_tflm() {
    // NPU_KERNELS_TFLM_FIXTURES points at another fixture directory (for example MLPerf
    // layers extracted outside the repository for a local check).
    let custom = std::env::var_os("NPU_KERNELS_TFLM_FIXTURES");
    let dir = custom.as_ref().map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tflm/fixtures"),
        PathBuf::from,
    );
    let mut paths = bins(&dir.join("elementwise"));
    // The spatial MEANs of the layer fixtures, through the general-axes constructor.
    paths.extend(
        bins(&dir)
            .into_iter()
            .filter(|p| p.to_string_lossy().ends_with("_mean.bin")),
    );
    let names: Vec<String> = paths.iter().filter_map(|p| run(p)).collect();
    println!("{} layers match: {names:?}", names.len());
    if custom.is_some() {
        return;
    }
    // The committed selection covers every kernel and each broadcasting pattern of the model.
    for name in [
        "tiny_transformer_07_mul",  // [1, 2, 16, 16] · scalar
        "tiny_transformer_16_add",  // equal shapes
        "tiny_transformer_17_mean", // [1, 16, 32] over axis 2, keep_dims
        "tiny_transformer_18_sub",  // [1, 16, 32] − [1, 16, 1]
        "tiny_transformer_19_mul",  // a tensor times itself
        "tiny_transformer_21_add",  // [1, 16, 1] + scalar
        "tiny_transformer_22_rsqrt",
        "tiny_transformer_23_mul",  // [1, 16, 32] · [1, 16, 1]
        "tiny_transformer_34_mean", // [1, 16, 32] over axis 1
        "convnet_05_mean",          // [1, 8, 8, 64] over axes 1 and 2
        "inception_16_mean",
    ] {
        assert!(
            names.iter().any(|n| n == name),
            "no fixture {name}: {names:?}"
        );
    }
}
