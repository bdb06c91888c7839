//! Layer-by-layer comparison with TensorFlow Lite Micro.
//!
//! `tests/tflm/fixtures/*.bin` hold, for operators (CONV_2D, DEPTHWISE_CONV_2D, AVERAGE_POOL_2D,
//! MAX_POOL_2D, SOFTMAX, MEAN over H and W) of the non-MLPerf reference models
//! (convnet, kws_dscnn, inception, tiny_transformer), the operator's options and quantization,
//! its input (TFLM's own intermediate tensor for the model's `input_0.bin`), weights, bias and
//! the output TFLM's reference kernels produced. They were written by
//! `tests/tflm/extract_fixtures.py` with the `tflite-micro` PyPI package. Every output byte
//! must match.

mod common;

use std::path::Path;

use common::*;
use npu_kernels::int8::{
    average_pool2d, channel_multipliers, conv2d, depthwise_conv2d, max_pool2d, mean_hw, softmax,
    ChannelMultiplier, Conv2dParams, Conv2dShape, DepthwiseParams, DepthwiseShape, MeanParams,
    PoolParams, PoolShape, SoftmaxParams, Window2d,
};

/// Runs one fixture; returns the operator name.
fn run(path: &Path) -> String {
    let fx = Fixture::load(path);
    let name = path.file_stem().unwrap().to_string_lossy().into_owned();
    let (input_q, output_q) = (fx.quant("input"), fx.quant("output"));
    let input = fx.i8("input");
    let expected = fx.i8("expected");
    let mut out = vec![0_i8; expected.len()];
    let op = name.splitn(3, '_').last().unwrap_or_default().to_string();
    if name.contains("conv_2d") {
        let o = fx.u32s("options");
        let fshape = fx.u32s("filter_shape");
        let window = Window2d {
            filter_height: fshape[1],
            filter_width: fshape[2],
            stride_height: o[1],
            stride_width: o[2],
            dilation_height: o[3],
            dilation_width: o[4],
            padding: padding(o[0]),
        };
        let in_shape = fx.nhwc("input_shape");
        let out_shape = fx.nhwc("output_shape");
        let mut mults = vec![ChannelMultiplier::default(); out_shape.channels as usize];
        channel_multipliers(
            input_q.scale,
            fx.f32("filter_scale"),
            output_q.scale,
            &mut mults,
        )
        .unwrap();
        let act = activation(o[5]);
        if name.contains("depthwise") {
            let mult = if o[6] == 0 {
                out_shape.channels / in_shape.channels
            } else {
                o[6]
            };
            let shape = DepthwiseShape {
                input: in_shape,
                depth_multiplier: mult,
                window,
            };
            let p = DepthwiseParams::new(shape, input_q, output_q, act).unwrap();
            assert_eq!(p.output_shape(), out_shape, "{name}");
            depthwise_conv2d(&p, &mults, input, fx.i8("filter"), fx.i32("bias"), &mut out).unwrap();
        } else {
            let shape = Conv2dShape {
                input: in_shape,
                out_channels: fshape[0],
                filter_depth: fshape[3],
                window,
            };
            let p = Conv2dParams::new(shape, input_q, output_q, act).unwrap();
            assert_eq!(p.output_shape(), out_shape, "{name}");
            conv2d(&p, &mults, input, fx.i8("filter"), fx.i32("bias"), &mut out).unwrap();
        }
    } else if name.contains("pool_2d") {
        let o = fx.u32s("options");
        let shape = PoolShape {
            input: fx.nhwc("input_shape"),
            filter_height: o[3],
            filter_width: o[4],
            stride_height: o[1],
            stride_width: o[2],
            padding: padding(o[0]),
        };
        let p = PoolParams::new(shape, input_q, output_q, activation(o[5])).unwrap();
        assert_eq!(p.output_shape(), fx.nhwc("output_shape"), "{name}");
        if name.contains("average") {
            average_pool2d(&p, input, &mut out).unwrap();
        } else {
            max_pool2d(&p, input, &mut out).unwrap();
        }
    } else if name.contains("mean") {
        let p = MeanParams::new(fx.nhwc("input_shape"), input_q, output_q).unwrap();
        mean_hw(&p, input, &mut out).unwrap();
    } else if name.contains("softmax") {
        let depth = *fx.u32s("input_shape").last().unwrap() as usize;
        let p = SoftmaxParams::new(input_q, fx.f32("beta")[0], output_q).unwrap();
        softmax(&p, depth, input, &mut out).unwrap();
    } else {
        panic!("unknown fixture {name}");
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
    op
}

#[test]
fn layers_match_tflm() {
    // NPU_KERNELS_TFLM_FIXTURES points at another fixture directory (for example MLPerf
    // layers extracted outside the repository for a local check).
    let dir = std::env::var_os("NPU_KERNELS_TFLM_FIXTURES").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tflm/fixtures"),
        std::path::PathBuf::from,
    );
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "bin"))
        .collect();
    paths.sort();
    let mut ops: Vec<String> = paths.iter().map(|p| run(p)).collect();
    ops.sort();
    ops.dedup();
    if std::env::var_os("NPU_KERNELS_TFLM_FIXTURES").is_some() {
        return;
    }
    // Every kernel is covered by at least one real layer.
    for op in [
        "conv_2d",
        "depthwise_conv_2d",
        "average_pool_2d",
        "max_pool_2d",
        "softmax",
        "mean",
    ] {
        assert!(
            ops.iter().any(|o| o.ends_with(op)),
            "no fixture for {op}: {ops:?}"
        );
    }
}
