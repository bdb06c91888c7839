//! Calibration of the Ethos-U55-128 cycle model (`npu_sim::cost`) against Arm Vela 5.2's
//! estimates.
//!
//! For every operator of a reference model (read with the product's own `.tflite` reader) the
//! test builds a [`LayerDesc`] from the operator's shapes, options and constant operands
//! (constant weights live in flash, as Vela's default places them) and compares:
//!
//! - the network total, from a [`Pipeline`] (the simulated cycles per inference), with Vela's
//!   total (`vela_u55_128_cycles`, which is also the sum of `vela_per_layer.csv`): within
//!   ±[`TOLERANCE_PCT`]% on every model;
//! - [`layer_cycles`] of each `CONV_2D` and `DEPTHWISE_CONV_2D` with Vela's figure for that
//!   operator (its CSV rows grouped by `tflite_op_index`): at least [`MIN_LAYER_HIT_PCT`]% of
//!   them within ±[`TOLERANCE_PCT`]%.
//!
//! The product's own models are in `examples/models/`. The MLPerf Tiny models must not be
//! copied into the repository: `mlperf_models_match_vela` reads them from the shared model
//! directory (`NPU_SHARED_MODELS`, default `/work/shared/models`) and fails if they are missing.
//! Run it with `cargo test -p npu-sim --test cost_calibration -- --ignored --nocapture`.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use npu_compute::model::{BuiltinOp, BuiltinOptions, Model, SubGraph, TensorInfo};
use npu_sim::cost::{layer_cycles, LayerDesc, LayerKind, Pipeline, U55Config};

/// Allowed deviation from Vela, in percent, for totals and for a layer to count as a hit.
const TOLERANCE_PCT: u64 = 25;
/// Minimum share of `CONV_2D` / `DEPTHWISE_CONV_2D` layers within the tolerance, in percent.
const MIN_LAYER_HIT_PCT: u64 = 80;

/// Vela's `vela_u55_128_cycles` (`FIGURES.md`) for the models the product ships.
const PRODUCT_MODELS: [(&str, u64); 4] = [
    ("convnet", 62_759),
    ("inception", 255_238),
    ("kws_dscnn", 89_716),
    ("tiny_transformer", 52_580),
];

/// Vela's `vela_u55_128_cycles` for the MLPerf Tiny models (read from the shared directory).
const MLPERF_MODELS: [(&str, u64); 5] = [
    ("mlperf_ad", 201_184),
    ("mlperf_ic", 201_747),
    ("mlperf_kws", 89_900),
    ("mlperf_vww", 220_870),
    ("mlperf_ww", 59_693),
];

/// One operator of a model and what the model and Vela say it costs.
struct OpRow {
    index: u32,
    op: BuiltinOp,
    /// `layer_cycles(..).total`.
    alone: u64,
    /// The cycles the operator adds to the inference in the pipeline.
    charged: u64,
    /// Vela's `op_cycles`, summed over the operator's NPU layers.
    vela: u64,
}

/// The outcome for one model.
struct ModelResult {
    name: &'static str,
    pipeline_total: u64,
    sum_alone: u64,
    vela_total: u64,
    rows: Vec<OpRow>,
}

impl ModelResult {
    /// `(hits, layers)` over the `CONV_2D` and `DEPTHWISE_CONV_2D` operators.
    fn conv_hits(&self) -> (u64, u64) {
        let convs = self
            .rows
            .iter()
            .filter(|r| matches!(r.op, BuiltinOp::Conv2d | BuiltinOp::DepthwiseConv2d));
        convs.fold((0, 0), |(hits, n), r| {
            (hits + u64::from(within(r.alone, r.vela)), n + 1)
        })
    }
}

/// `ours` within ±TOLERANCE_PCT% of `reference`.
fn within(ours: u64, reference: u64) -> bool {
    ours * 100 >= reference * (100 - TOLERANCE_PCT)
        && ours * 100 <= reference * (100 + TOLERANCE_PCT)
}

fn ratio(ours: u64, reference: u64) -> f64 {
    ours as f64 / reference.max(1) as f64
}

/// A TFLite shape as 4-D NHWC: lower ranks are padded at the front, like Vela does.
fn nhwc(dims: &[u32]) -> [u32; 4] {
    let mut out = [1u32; 4];
    let rank = dims.len().min(4);
    out[4 - rank..].copy_from_slice(&dims[dims.len() - rank..]);
    out
}

fn tensor<'a>(graph: &SubGraph<'a>, index: Option<u16>, what: &str) -> TensorInfo<'a> {
    let index = index.unwrap_or_else(|| panic!("operator without {what}"));
    graph
        .tensor(index)
        .expect("tensor index validated by Model::parse")
}

fn positive(v: i32) -> u32 {
    u32::try_from(v).unwrap_or(0).max(1)
}

/// The [`LayerDesc`] of operator `op`, from its tensors and options only.
fn describe(graph: &SubGraph<'_>, op: &npu_compute::model::OperatorInfo<'_>) -> LayerDesc {
    let input = tensor(graph, op.input(0), "an input");
    let output = tensor(graph, op.output(0), "an output");
    let ifm = nhwc(input.shape.dims());
    let ofm = nhwc(output.shape.dims());
    let options = op.options.clone().or_default_for(op.builtin);
    let with_weights = |kind: LayerKind| {
        let filter = tensor(graph, op.input(1), "weights");
        LayerDesc {
            weight_bytes: filter.byte_size.unwrap_or(0),
            weights_in_flash: filter.is_constant(),
            ..LayerDesc::new(kind, ifm, ofm)
        }
    };
    let kernel_of = |filter: &TensorInfo<'_>| {
        let d = filter.shape.dims();
        (
            d.get(1).copied().unwrap_or(1),
            d.get(2).copied().unwrap_or(1),
        )
    };
    match op.builtin {
        BuiltinOp::Conv2d | BuiltinOp::DepthwiseConv2d => {
            let filter = tensor(graph, op.input(1), "weights");
            let (stride, dilation) = match options {
                BuiltinOptions::Conv2d(o) => (
                    (positive(o.stride_h), positive(o.stride_w)),
                    (positive(o.dilation_h_factor), positive(o.dilation_w_factor)),
                ),
                BuiltinOptions::DepthwiseConv2d(o) => (
                    (positive(o.stride_h), positive(o.stride_w)),
                    (positive(o.dilation_h_factor), positive(o.dilation_w_factor)),
                ),
                other => panic!("convolution with options {other:?}"),
            };
            let kind = if op.builtin == BuiltinOp::Conv2d {
                LayerKind::Conv2d
            } else {
                LayerKind::DepthwiseConv2d
            };
            LayerDesc {
                kernel: kernel_of(&filter),
                stride,
                dilation,
                ..with_weights(kind)
            }
        }
        BuiltinOp::FullyConnected => with_weights(LayerKind::FullyConnected),
        BuiltinOp::AveragePool2d | BuiltinOp::MaxPool2d => {
            let BuiltinOptions::Pool2d(o) = options else {
                panic!("pooling with options {options:?}")
            };
            let kind = if op.builtin == BuiltinOp::MaxPool2d {
                LayerKind::MaxPool
            } else {
                LayerKind::AveragePool
            };
            LayerDesc {
                kernel: (positive(o.filter_height), positive(o.filter_width)),
                stride: (positive(o.stride_h), positive(o.stride_w)),
                ..LayerDesc::new(kind, ifm, ofm)
            }
        }
        BuiltinOp::Add | BuiltinOp::Sub | BuiltinOp::Mul => {
            let kind = match op.builtin {
                BuiltinOp::Add => LayerKind::Add,
                BuiltinOp::Sub => LayerKind::Sub,
                _ => LayerKind::Mul,
            };
            let second = tensor(graph, op.input(1), "a second input");
            // A constant operand goes second, as Vela orders commutative operands.
            let (first, second) = if input.is_constant() && !second.is_constant() {
                (second, input)
            } else {
                (input, second)
            };
            LayerDesc {
                ifm2: Some(nhwc(second.shape.dims())),
                ifm2_in_flash: second.is_constant(),
                ..LayerDesc::new(kind, nhwc(first.shape.dims()), ofm)
            }
        }
        BuiltinOp::Mean => {
            let axes = tensor(graph, op.input(1), "axes");
            let data = axes.data.expect("constant MEAN axes");
            let rank = input.shape.dims().len() as i64;
            let mut mask = 0u8;
            for chunk in data.chunks_exact(4) {
                let axis = i64::from(i32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]));
                let axis = if axis < 0 { axis + rank } else { axis };
                let dim = 4 - rank + axis;
                assert!((0..4).contains(&dim), "MEAN axis {axis} of rank {rank}");
                mask |= 1 << dim;
            }
            LayerDesc {
                axes: mask,
                ..LayerDesc::new(LayerKind::Mean, ifm, ofm)
            }
        }
        BuiltinOp::BatchMatmul => {
            let rhs = tensor(graph, op.input(1), "a right operand");
            LayerDesc {
                ifm2: Some(nhwc(rhs.shape.dims())),
                ifm2_in_flash: rhs.is_constant(),
                ..LayerDesc::new(LayerKind::BatchMatmul, ifm, ofm)
            }
        }
        other => {
            let kind = match other {
                BuiltinOp::Softmax => LayerKind::Softmax,
                BuiltinOp::Rsqrt => LayerKind::Rsqrt,
                BuiltinOp::Logistic => LayerKind::Logistic,
                BuiltinOp::Tanh => LayerKind::Tanh,
                BuiltinOp::Relu | BuiltinOp::Relu6 | BuiltinOp::ReluN1To1 => LayerKind::Relu,
                BuiltinOp::Transpose => LayerKind::Transpose,
                BuiltinOp::Concatenation => LayerKind::Concatenation,
                BuiltinOp::Reshape | BuiltinOp::Squeeze | BuiltinOp::ExpandDims => {
                    LayerKind::Reshape
                }
                BuiltinOp::Quantize => LayerKind::Quantize,
                unknown => panic!("no cost model for {}", unknown.name()),
            };
            LayerDesc::new(kind, ifm, ofm)
        }
    }
}

/// Vela's `op_cycles` per TFLite operator: the rows of `vela_per_layer.csv` grouped by
/// `tflite_op_index` (a fused pair like `21|22` counts for its first operator).
fn vela_per_op(csv: &str) -> BTreeMap<u32, u64> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().expect("CSV header").split(',').collect();
    let column = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("CSV without column {name}"))
    };
    let (index_col, cycles_col) = (column("tflite_op_index"), column("op_cycles"));
    let mut per_op = BTreeMap::new();
    for line in lines.filter(|l| !l.trim().is_empty()) {
        let fields: Vec<&str> = line.split(',').collect();
        let index: u32 = fields[index_col]
            .split('|')
            .next()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("bad tflite_op_index in {line}"));
        let cycles: u64 = fields[cycles_col]
            .parse()
            .unwrap_or_else(|_| panic!("bad op_cycles in {line}"));
        *per_op.entry(index).or_insert(0) += cycles;
    }
    per_op
}

fn read(path: &Path) -> Vec<u8> {
    fs::read(path).unwrap_or_else(|e| {
        panic!(
            "cannot read {} ({e}): the calibration needs the model and Vela's figures",
            path.display()
        )
    })
}

fn calibrate(name: &'static str, dir: &Path, vela_total: u64) -> ModelResult {
    let bytes = read(&dir.join("model.tflite"));
    let csv = String::from_utf8(read(&dir.join("vela_per_layer.csv"))).expect("UTF-8 CSV");
    let vela = vela_per_op(&csv);
    let csv_total: u64 = vela.values().sum();
    assert_eq!(
        csv_total, vela_total,
        "{name}: vela_per_layer.csv does not add up to Vela's total"
    );

    let model = Model::parse(&bytes).expect("a valid model");
    let graph = model.subgraph();
    let cfg = U55Config::ETHOS_U55_128;
    let mut pipeline = Pipeline::new(cfg);
    let mut rows = Vec::new();
    let mut sum_alone = 0;
    for op in graph.operators() {
        let op = op.expect("operators validated by Model::parse");
        let desc = describe(&graph, &op);
        let alone = layer_cycles(&desc, &cfg);
        let charged = pipeline.push_cost(alone);
        sum_alone += alone.total;
        rows.push(OpRow {
            index: op.index,
            op: op.builtin,
            alone: alone.total,
            charged: charged.total,
            vela: vela.get(&op.index).copied().unwrap_or(0),
        });
    }
    ModelResult {
        name,
        pipeline_total: pipeline.total(),
        sum_alone,
        vela_total,
        rows,
    }
}

/// Prints the per-layer and summary tables (visible with `--nocapture`) and checks the
/// tolerances.
fn report_and_check(results: &[ModelResult]) {
    for r in results {
        println!("\n{} — per operator (cycles)", r.name);
        println!(
            "{:>4}  {:<18} {:>9} {:>9} {:>9} {:>6}",
            "op", "kind", "alone", "charged", "vela", "ratio"
        );
        for row in &r.rows {
            println!(
                "{:>4}  {:<18} {:>9} {:>9} {:>9} {:>6.2}",
                row.index,
                row.op.name(),
                row.alone,
                row.charged,
                row.vela,
                ratio(row.alone, row.vela)
            );
        }
    }
    println!(
        "\n{:<18} {:>9} {:>9} {:>9} {:>6}  conv/dw within {TOLERANCE_PCT}%",
        "model", "ours", "Σ alone", "vela", "ratio"
    );
    let (mut hits, mut layers) = (0, 0);
    let mut failures = Vec::new();
    for r in results {
        let (h, n) = r.conv_hits();
        hits += h;
        layers += n;
        println!(
            "{:<18} {:>9} {:>9} {:>9} {:>6.3}  {h}/{n}",
            r.name,
            r.pipeline_total,
            r.sum_alone,
            r.vela_total,
            ratio(r.pipeline_total, r.vela_total)
        );
        if !within(r.pipeline_total, r.vela_total) {
            failures.push(format!(
                "{}: {} cycles vs Vela's {} (ratio {:.3})",
                r.name,
                r.pipeline_total,
                r.vela_total,
                ratio(r.pipeline_total, r.vela_total)
            ));
        }
    }
    println!(
        "conv/dw layers within {TOLERANCE_PCT}% of Vela: {hits}/{layers} ({:.0}%)",
        100.0 * hits as f64 / layers.max(1) as f64
    );
    assert!(
        failures.is_empty(),
        "totals outside ±{TOLERANCE_PCT}%: {failures:?}"
    );
    assert!(
        hits * 100 >= MIN_LAYER_HIT_PCT * layers,
        "only {hits} of {layers} conv/dw layers within ±{TOLERANCE_PCT}% (want {MIN_LAYER_HIT_PCT}%)"
    );
}

#[test]
fn product_models_match_vela() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/models");
    let results: Vec<_> = PRODUCT_MODELS
        .iter()
        .map(|&(name, total)| calibrate(name, &root.join(name), total))
        .collect();
    report_and_check(&results);
}

#[test]
#[ignore = "reads the MLPerf Tiny models from the shared directory (never copied into the repo)"]
fn mlperf_models_match_vela() {
    let root = PathBuf::from(
        std::env::var("NPU_SHARED_MODELS").unwrap_or_else(|_| "/work/shared/models".into()),
    );
    let results: Vec<_> = MLPERF_MODELS
        .iter()
        .map(|&(name, total)| calibrate(name, &root.join(name), total))
        .collect();
    report_and_check(&results);
}
