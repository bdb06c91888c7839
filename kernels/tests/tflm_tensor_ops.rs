//! Layer-by-layer comparison with TensorFlow Lite Micro for the matrix and tensor operators:
//! FULLY_CONNECTED (per-channel and per-tensor weights), BATCH_MATMUL, TRANSPOSE, RESHAPE and
//! CONCATENATION.
//!
//! `tests/tflm/fixtures/tensor_ops/*.bin` hold those layers of the non-MLPerf reference models
//! (convnet, kws_dscnn, inception, tiny_transformer): the operator's options, shapes and
//! quantization, its inputs (TFLM's own intermediate tensors for the model's `input_0.bin`),
//! weights, bias and the output TFLM's reference kernels produced. They were written by
//! `tests/tflm/extract_fixtures.py` with the `tflite-micro` PyPI package. Every output byte
//! must match.
//!
//! `NPU_KERNELS_TFLM_FIXTURES=<dir>` runs the layers of `<dir>/tensor_ops/` instead (for
//! example MLPerf layers extracted outside the repository for a local check).

mod common;

use std::path::{Path, PathBuf};

use common::*;
use npu_kernels::int8::{
    batch_matmul, channel_multipliers, check_same_quant, concatenation, fully_connected,
    fully_connected_per_channel, reshape, transpose, Activation, BatchMatmulParams,
    ChannelMultiplier, ConcatParams, FcParams, FcPerChannelParams, TransposeParams,
};
use npu_kernels::FcShape;

/// The fixture directory, and whether it is the repository's own.
fn fixture_dir() -> (PathBuf, bool) {
    match std::env::var_os("NPU_KERNELS_TFLM_FIXTURES") {
        Some(dir) => (PathBuf::from(dir).join("tensor_ops"), false),
        None => (
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tflm/fixtures/tensor_ops"),
            true,
        ),
    }
}

/// Runs every fixture of operator `op` (the file name's suffix) through `run`, which returns
/// the kernel's output; compares it with TFLM's. Returns how many layers ran.
fn check_layers(op: &str, mut run: impl FnMut(&str, &Fixture) -> Vec<i8>) -> usize {
    let (dir, own) = fixture_dir();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "bin")
                && p.file_stem()
                    .is_some_and(|s| s.to_string_lossy().ends_with(&format!("_{op}")))
        })
        .collect();
    paths.sort();
    for path in &paths {
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let fx = Fixture::load(path);
        let expected = fx.i8("expected");
        let out = run(&name, &fx);
        assert_eq!(out.len(), expected.len(), "{name}: output length");
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
        eprintln!("{name}: {} outputs match TFLM", out.len());
    }
    // Every kernel is covered by at least one real layer of the committed fixtures.
    assert!(!own || !paths.is_empty(), "no fixture for {op}");
    paths.len()
}

#[test]
fn fully_connected_layers_match_tflm() {
    let mut per_channel = 0;
    check_layers("fully_connected", |name, fx| {
        let (input_q, output_q) = (fx.quant("input"), fx.quant("output"));
        let o = fx.u32s("options");
        let act = activation(o[0]);
        let fshape = fx.u32s("filter_shape");
        let (out_features, in_features) = (fshape[0], fshape[1]);
        let expected_len = fx.i8("expected").len() as u32;
        // Input [..][in_features] and output [..][out_features] of any rank: TFLM's batches
        // are the output's outer elements.
        let shape = FcShape {
            batches: expected_len / out_features,
            in_features,
            out_features,
        };
        let mut out = vec![0_i8; expected_len as usize];
        let scales = fx.f32("filter_scale");
        if scales.len() > 1 {
            // TFLM's per-channel path: one multiplier per output feature.
            per_channel += 1;
            let p = FcPerChannelParams::new(input_q, output_q, act).unwrap();
            let mut mults = vec![ChannelMultiplier::default(); out_features as usize];
            channel_multipliers(input_q.scale, scales, output_q.scale, &mut mults).unwrap();
            fully_connected_per_channel(
                &p,
                shape,
                &mults,
                fx.i8("input"),
                fx.i8("filter"),
                fx.i32("bias"),
                &mut out,
            )
            .unwrap_or_else(|e| panic!("{name}: {e:?}"));
        } else {
            let p = FcParams::new(input_q, scales[0], output_q, act).unwrap();
            fully_connected(
                &p,
                shape,
                fx.i8("input"),
                fx.i8("filter"),
                fx.i32("bias"),
                &mut out,
            )
            .unwrap_or_else(|e| panic!("{name}: {e:?}"));
        }
        out
    });
    if fixture_dir().1 {
        // convnet, kws_dscnn, inception and tiny_transformer quantize their FC weights per
        // channel.
        assert!(per_channel >= 4, "{per_channel} per-channel layers");
    }
}

#[test]
fn batch_matmul_layers_match_tflm() {
    check_layers("batch_matmul", |name, fx| {
        let o = fx.u32s("options");
        let p = BatchMatmulParams::new(
            &fx.u32s("input_shape"),
            &fx.u32s("rhs_shape"),
            o[0] != 0,
            o[1] != 0,
            fx.quant("input"),
            fx.quant("rhs"),
            fx.quant("output"),
        )
        .unwrap_or_else(|e| panic!("{name}: {e:?}"));
        assert_eq!(
            p.output_shape().as_slice(),
            fx.u32s("output_shape").as_slice(),
            "{name}"
        );
        let mut out = vec![0_i8; p.lens().2];
        batch_matmul(&p, fx.i8("input"), fx.i8("rhs"), &mut out).unwrap();
        out
    });
}

#[test]
fn transpose_layers_match_tflm() {
    let mut perms = Vec::new();
    check_layers("transpose", |name, fx| {
        let perm = fx.i32("perm").unwrap();
        perms.push(perm.to_vec());
        let p = TransposeParams::new(&fx.u32s("input_shape"), perm)
            .unwrap_or_else(|e| panic!("{name}: {e:?}"));
        assert_eq!(
            p.output_shape().as_slice(),
            fx.u32s("output_shape").as_slice(),
            "{name}"
        );
        let mut out = vec![0_i8; p.elements()];
        transpose(&p, fx.i8("input"), &mut out).unwrap();
        out
    });
    if fixture_dir().1 {
        // tiny_transformer splits heads ([1,16,2,16] → [1,2,16,16]) and merges them back.
        assert!(perms.iter().any(|p| p == &[0, 2, 1, 3]), "{perms:?}");
    }
}

#[test]
fn reshape_layers_match_tflm() {
    check_layers("reshape", |_, fx| {
        let input = fx.i8("input");
        // RESHAPE keeps the quantization.
        assert_eq!(fx.quant("input"), fx.quant("output"));
        let mut out = vec![0_i8; fx.u32s("output_shape").iter().product::<u32>() as usize];
        reshape(input, &mut out).unwrap();
        out
    });
}

#[test]
fn concatenation_layers_match_tflm() {
    check_layers("concatenation", |name, fx| {
        let o = fx.u32s("options");
        let (axis, act, count) = (o[0] as i32, o[1], o[2] as usize);
        assert_eq!(activation(act), Activation::None, "{name}");
        let mut shapes = vec![fx.u32s("input_shape")];
        let mut quants = vec![fx.quant("input")];
        let mut data = vec![fx.i8("input")];
        for k in 1..count {
            shapes.push(fx.u32s(&format!("input{k}_shape")));
            quants.push(fx.quant(&format!("input{k}")));
            data.push(fx.i8(&format!("input{k}")));
        }
        check_same_quant(&quants, fx.quant("output")).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        let shape_refs: Vec<&[u32]> = shapes.iter().map(Vec::as_slice).collect();
        let p = ConcatParams::new(&shape_refs, axis).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        assert_eq!(
            p.output_shape().as_slice(),
            fx.u32s("output_shape").as_slice(),
            "{name}"
        );
        let mut out = vec![0_i8; p.output_len()];
        concatenation(&p, &data, &mut out).unwrap();
        out
    });
}
