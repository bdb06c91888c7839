//! Tests of the zero-copy TFLite reader (`npu_compute::model`).
//!
//! - The four product models in `examples/models/` (copied from the shared reference set) are
//!   parsed and compared field by field with their `manifest.json`.
//! - The MLPerf Tiny models are read from `../shared/models` (they must not be committed here);
//!   that test fails with a clear message if the directory is missing.
//! - Malformed input: every truncation, thousands of deterministic random mutations, and hand-made
//!   files (built with a small flatbuffer writer below) for each validation rule.

use std::num::Wrapping;
use std::path::{Path, PathBuf};

use npu_compute::model::{
    Activation, BuiltinOp, BuiltinOptions, DataType, Model, ModelError, Padding, MAX_RANK,
};
use serde_json::Value;

mod common;
use common::*;

// ---------------------------------------------------------------------------------------------
// Walking every accessor
// ---------------------------------------------------------------------------------------------

/// Calls every accessor of a parsed model; returns a checksum so nothing is optimized away.
/// After a successful `parse` none of these may fail.
fn walk(m: &Model<'_>) -> Result<u64, ModelError> {
    let mut sum = Wrapping(0u64)
        + Wrapping(u64::from(m.version()) + m.description().map_or(0, |d| d.len() as u64));
    for i in 0..m.opcode_count() {
        let c = m.opcode(i)?;
        sum += Wrapping(c.builtin.code() as u64 + c.builtin.name().len() as u64);
    }
    for i in 0..m.buffer_count() {
        sum += Wrapping(m.buffer(i)?.map_or(0, |d| d.len() as u64));
    }
    for s in 0..m.subgraph_count() {
        let g = m.subgraph_at(s)?;
        sum += Wrapping(g.name().map_or(0, |n| n.len() as u64));
        for t in g.tensors() {
            let t = t?;
            sum += Wrapping(t.name.len() as u64 + u64::from(t.shape.num_elements()));
            sum += Wrapping(t.shape.dims().iter().map(|&d| u64::from(d)).sum::<u64>());
            sum += Wrapping(u64::from(t.byte_size.unwrap_or(0)) + t.dtype.name().len() as u64);
            if let (Some(d), Some(size)) = (t.data, t.byte_size) {
                assert!(
                    d.len() as u64 == u64::from(size) || d.len() as u32 == t.shape.num_elements()
                );
            }
            if let Some(q) = t.quantization {
                assert!(!q.is_empty());
                for i in 0..q.len() {
                    sum += Wrapping(q.scale(i).expect("scale in range").to_bits() as u64);
                    sum += Wrapping(q.zero_point(i).expect("zero point in range") as u64);
                }
                assert_eq!(q.scales().count(), q.len());
                assert_eq!(q.zero_points().count(), q.len());
                if let Some(axis) = q.quantized_dimension() {
                    assert_eq!(t.shape.dim(axis), Some(q.len() as u32));
                }
            }
        }
        for op in g.operators() {
            let op = op?;
            sum += Wrapping(op.builtin.code() as u64 + op.opcode_index as u64);
            for &i in op.inputs.iter().chain(op.outputs.iter()).flatten() {
                sum += Wrapping(u64::from(g.tensor(i)?.index));
            }
            sum += Wrapping(match &op.options {
                BuiltinOptions::Reshape(r) => r.new_shape.as_ref().map_or(0, |s| s.len() as u64),
                other => format!("{other:?}").len() as u64,
            });
            sum += Wrapping(op.custom_options.map_or(0, |c| c.len() as u64));
        }
        for i in g.inputs().chain(g.outputs()) {
            sum += Wrapping(u64::from(g.tensor(i)?.index));
        }
        assert_eq!(g.inputs().count(), g.inputs().len());
        assert_eq!(g.outputs().count(), g.outputs().len());
    }
    Ok(sum.0)
}

/// Parses; if that succeeds, walking every accessor must succeed too.
fn parse_and_walk(bytes: &[u8]) -> Result<u64, ModelError> {
    let m = Model::parse(bytes)?;
    Ok(walk(&m).unwrap_or_else(|e| panic!("accessor failed after a successful parse: {e:?}")))
}

// ---------------------------------------------------------------------------------------------
// Real models against their manifests
// ---------------------------------------------------------------------------------------------

const PRODUCT_MODELS: [&str; 4] = ["convnet", "kws_dscnn", "tiny_transformer", "inception"];

fn repo_models() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/models")
}

fn shared_models() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/models")
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn as_i64s(v: &Value) -> Vec<i64> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|x| x.as_i64().expect("integer"))
        .collect()
}

/// Compares a tensor with its manifest entry (shape, dtype, size, constness, quantization).
fn check_tensor(model: &str, t: &npu_compute::model::TensorInfo<'_>, j: &Value) {
    let ctx = format!("{model} tensor {}", t.index);
    if let Some(name) = j.get("name") {
        assert_eq!(t.name, name.as_str().unwrap(), "{ctx}: name");
    }
    let shape: Vec<i64> = t.shape.dims().iter().map(|&d| i64::from(d)).collect();
    assert_eq!(shape, as_i64s(&j["shape"]), "{ctx}: shape");
    assert_eq!(t.dtype.name(), j["dtype"].as_str().unwrap(), "{ctx}: dtype");
    if let Some(bytes) = j.get("bytes") {
        assert_eq!(t.byte_size.map(u64::from), bytes.as_u64(), "{ctx}: bytes");
    }
    if let Some(c) = j.get("const") {
        assert_eq!(t.is_constant(), c.as_bool().unwrap(), "{ctx}: const");
        if let Some(d) = t.data {
            assert_eq!(Some(d.len() as u32), t.byte_size, "{ctx}: data length");
        }
    }
    if let Some(scales) = j.get("scale") {
        let scales: Vec<f64> = scales
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_f64().unwrap())
            .collect();
        let zps = as_i64s(&j["zero_point"]);
        match t.quantization {
            None => assert!(scales.is_empty() && zps.is_empty(), "{ctx}: quantization"),
            Some(q) => {
                assert_eq!(q.len(), scales.len(), "{ctx}: scale count");
                for (i, s) in scales.iter().enumerate() {
                    let got = f64::from(q.scale(i).unwrap());
                    assert!(
                        (got - s).abs() <= s.abs() * 1e-7,
                        "{ctx}: scale {i}: {got} vs {s}"
                    );
                    assert_eq!(q.zero_point(i), Some(zps[i]), "{ctx}: zero point {i}");
                }
            }
        }
    }
    if let Some(n) = j.get("n_scales") {
        let q = t
            .quantization
            .unwrap_or_else(|| panic!("{ctx}: no quantization"));
        assert_eq!(q.len() as u64, n.as_u64().unwrap(), "{ctx}: n_scales");
        let qd = j["quantized_dimension"].as_u64().unwrap() as usize;
        if q.len() > 1 {
            assert_eq!(
                q.quantized_dimension(),
                Some(qd),
                "{ctx}: quantized_dimension"
            );
        }
    }
}

/// The options variant an operator must carry.
fn options_match(op: BuiltinOp, options: &BuiltinOptions) -> bool {
    use BuiltinOp as B;
    use BuiltinOptions as O;
    matches!(
        (op, options),
        (B::Conv2d, O::Conv2d(_))
            | (B::DepthwiseConv2d, O::DepthwiseConv2d(_))
            | (B::MaxPool2d | B::AveragePool2d, O::Pool2d(_))
            | (B::FullyConnected, O::FullyConnected(_))
            | (B::Softmax, O::Softmax(_))
            | (B::Concatenation, O::Concatenation(_))
            | (B::Add, O::Add(_))
            | (B::Sub, O::Sub(_))
            | (B::Mul, O::Mul(_))
            | (B::Reshape, O::Reshape(_))
            | (B::Mean, O::Reducer(_))
            | (B::BatchMatmul, O::BatchMatMul(_))
            | (B::Transpose, O::Transpose)
            | (_, O::None)
    )
}

/// Parses `dir/model.tflite` and compares it with `dir/manifest.json`.
fn check_model_dir(dir: &Path) {
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    let bytes = read(&dir.join("model.tflite"));
    let manifest: Value = serde_json::from_slice(&read(&dir.join("manifest.json"))).unwrap();
    assert_eq!(
        bytes.len() as u64,
        manifest["tflite_bytes"].as_u64().unwrap()
    );

    let model = Model::parse(&bytes).unwrap_or_else(|e| panic!("{name}: {e:?}"));
    walk(&model).unwrap();
    assert_eq!(model.version(), 3);
    assert_eq!(model.subgraph_count(), 1, "{name}: subgraphs");
    let g = model.subgraph();

    // Tensors.
    let tensors = manifest["tensors"].as_array().unwrap();
    assert_eq!(
        usize::from(g.tensor_count()),
        tensors.len(),
        "{name}: tensor count"
    );
    assert_eq!(
        manifest["num_tensors"].as_u64().unwrap(),
        u64::from(g.tensor_count())
    );
    for (t, j) in g.tensors().zip(tensors) {
        let t = t.unwrap();
        assert_eq!(u64::from(t.index), j["index"].as_u64().unwrap());
        check_tensor(&name, &t, j);
    }
    let consts = g.tensors().filter(|t| t.unwrap().is_constant()).count();
    assert_eq!(
        consts as u64,
        manifest["num_const_tensors"].as_u64().unwrap()
    );

    // Operators, in order.
    let ops = manifest["operators"].as_array().unwrap();
    assert_eq!(
        g.operator_count() as usize,
        ops.len(),
        "{name}: operator count"
    );
    for (op, j) in g.operators().zip(ops) {
        let op = op.unwrap();
        let ctx = format!("{name} op {}", op.index);
        assert_eq!(u64::from(op.index), j["index"].as_u64().unwrap());
        assert_eq!(op.builtin.name(), j["op"].as_str().unwrap(), "{ctx}: op");
        let idx =
            |l: &[Option<u16>]| -> Vec<i64> { l.iter().map(|i| i.map_or(-1, i64::from)).collect() };
        assert_eq!(idx(&op.inputs), as_i64s(&j["inputs"]), "{ctx}: inputs");
        assert_eq!(idx(&op.outputs), as_i64s(&j["outputs"]), "{ctx}: outputs");
        assert!(
            options_match(op.builtin, &op.options),
            "{ctx}: options {:?}",
            op.options
        );
        // Operators with a fused activation always carry their options in these models
        // (RESHAPE, TRANSPOSE, RSQRT, ... may have none).
        use BuiltinOp as B;
        if matches!(
            op.builtin,
            B::Conv2d
                | B::DepthwiseConv2d
                | B::MaxPool2d
                | B::AveragePool2d
                | B::FullyConnected
                | B::Softmax
                | B::Concatenation
                | B::Add
                | B::Sub
                | B::Mul
        ) {
            assert_ne!(op.options, BuiltinOptions::None, "{ctx}: options missing");
        }
    }

    // Graph inputs and outputs, and the sample files' sizes.
    for (list, key, prefix) in [
        (g.inputs(), "inputs", "input_"),
        (g.outputs(), "outputs", "expected_tflm_"),
    ] {
        let js = manifest[key].as_array().unwrap();
        assert_eq!(list.len(), js.len(), "{name}: {key}");
        for (i, j) in list.zip(js) {
            assert_eq!(u64::from(i), j["index"].as_u64().unwrap(), "{name}: {key}");
            let t = g.tensor(i).unwrap();
            check_tensor(&name, &t, j);
            for k in 0..3 {
                let sample = dir.join(format!("{prefix}{k}.bin"));
                if sample.exists() {
                    assert_eq!(
                        Some(read(&sample).len() as u32),
                        t.byte_size,
                        "{}",
                        sample.display()
                    );
                }
            }
        }
    }
}

#[test]
fn product_models_match_their_manifests() {
    for m in PRODUCT_MODELS {
        check_model_dir(&repo_models().join(m));
    }
}

#[test]
#[ignore = "reads ../shared/models; .ci/run runs it with --ignored"]
fn product_model_copies_match_shared_reference() {
    // The in-repo copies must stay byte-identical to the reference set.
    let shared = shared_models();
    assert!(shared.is_dir(), "{} is missing", shared.display());
    for m in PRODUCT_MODELS {
        for f in ["model.tflite", "manifest.json"] {
            assert_eq!(
                read(&repo_models().join(m).join(f)),
                read(&shared.join(m).join(f)),
                "{m}/{f}"
            );
        }
    }
}

#[test]
#[ignore = "reads the mlperf_* models from ../shared/models; .ci/run runs it with --ignored"]
fn mlperf_models_from_shared_match_their_manifests() {
    let shared = shared_models();
    assert!(
        shared.is_dir(),
        "the MLPerf Tiny reference models are read from {} (not committed to this repo); \
         check out the shared reference set next to the workspace",
        shared.display()
    );
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&shared)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("mlperf_"))
                && p.join("model.tflite").exists()
        })
        .collect();
    dirs.sort();
    assert!(
        dirs.len() >= 5,
        "expected the five mlperf_* models, found {dirs:?}"
    );
    for dir in dirs {
        check_model_dir(&dir);
    }
}

#[test]
fn conv_options_are_decoded() {
    let bytes = read(&repo_models().join("convnet/model.tflite"));
    let m = Model::parse(&bytes).unwrap();
    let op = m.subgraph().operator(0).unwrap();
    assert_eq!(op.builtin, BuiltinOp::Conv2d);
    match op.options {
        BuiltinOptions::Conv2d(c) => {
            assert_eq!((c.stride_w, c.stride_h), (1, 1));
            assert_eq!((c.dilation_w_factor, c.dilation_h_factor), (1, 1));
            assert_eq!(c.padding, Padding::Same);
            assert_eq!(c.activation, Activation::Relu);
        }
        other => panic!("{other:?}"),
    }
    let pool = m.subgraph().operator(1).unwrap();
    match pool.options {
        BuiltinOptions::Pool2d(p) => {
            assert_eq!((p.filter_width, p.filter_height), (2, 2));
            assert_eq!((p.stride_w, p.stride_h), (2, 2));
        }
        other => panic!("{other:?}"),
    }
    // Zero copy: constant data points into the file.
    let w = m.subgraph().tensor(op.input(1).unwrap()).unwrap();
    let d = w.data.unwrap();
    let range = bytes.as_ptr_range();
    assert!(range.contains(&d.as_ptr()));
    assert_eq!(w.dtype, DataType::Int8);
}

// ---------------------------------------------------------------------------------------------
// Malformed input: truncation and mutation of real models
// ---------------------------------------------------------------------------------------------

#[test]
fn every_truncation_of_every_product_model_is_rejected() {
    for m in PRODUCT_MODELS {
        let bytes = read(&repo_models().join(m).join("model.tflite"));
        for len in 0..bytes.len() {
            let prefix = &bytes[..len];
            assert!(
                parse_and_walk(prefix).is_err(),
                "{m}: the {len}-byte prefix parsed"
            );
        }
        assert!(parse_and_walk(&bytes).is_ok());
    }
}

/// xorshift64*: deterministic pseudo-random numbers.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn random_mutations_never_panic() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (mut ok, mut err) = (0u32, 0u32);
    for m in PRODUCT_MODELS {
        let original = read(&repo_models().join(m).join("model.tflite"));
        // The flatbuffer's tables and vectors sit before the big weight buffers or between them;
        // mutate anywhere, but favour the first 4 KiB where the metadata is dense.
        for _ in 0..3000 {
            let mut bytes = original.clone();
            let edits = 1 + rng.below(4);
            for _ in 0..edits {
                let at = if rng.below(2) == 0 {
                    rng.below(bytes.len().min(4096))
                } else {
                    rng.below(bytes.len())
                };
                match rng.below(4) {
                    0 => bytes[at] ^= 1 << rng.below(8),
                    1 => bytes[at] = rng.next() as u8,
                    2 => bytes[at] = [0x00, 0xFF, 0x7F, 0x80][rng.below(4)],
                    _ => {
                        // A random 32-bit value, aligned, as offsets and lengths are.
                        let at = at & !3;
                        if at + 4 <= bytes.len() {
                            let v = [0u32, 1, 4, 0x7FFF_FFFF, 0xFFFF_FFFF, rng.next() as u32]
                                [rng.below(6)];
                            bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
                        }
                    }
                }
            }
            match parse_and_walk(&bytes) {
                Ok(_) => ok += 1,
                Err(_) => err += 1,
            }
        }
    }
    eprintln!("mutations: {ok} parsed, {err} rejected");
    // Both outcomes must occur, or the mutations are not exercising anything.
    assert!(ok > 0 && err > 0, "ok {ok}, err {err}");
}

// ---------------------------------------------------------------------------------------------
// Hand-made models (built with the writer in tests/common)
// ---------------------------------------------------------------------------------------------

trait ParseErr {
    fn parse_err(&self) -> ModelError;
}

impl ParseErr for Spec {
    fn parse_err(&self) -> ModelError {
        let bytes = self.build();
        match parse_and_walk(&bytes) {
            Ok(_) => panic!("parsed"),
            Err(e) => e,
        }
    }
}

#[test]
fn handmade_model_parses() {
    let bytes = Spec::fc().build();
    let m = Model::parse(&bytes).unwrap();
    walk(&m).unwrap();
    assert_eq!(m.description(), Some("hand made"));
    let g = m.subgraph();
    assert_eq!(g.name(), Some("main"));
    assert_eq!(g.tensor_count(), 4);
    assert_eq!(g.inputs().collect::<Vec<_>>(), [0]);
    assert_eq!(g.outputs().collect::<Vec<_>>(), [3]);
    let w = g.tensor(1).unwrap();
    assert_eq!(w.name, "weights");
    assert_eq!(w.shape.dims(), [2, 4]);
    assert_eq!(w.data, Some(&[1u8, 2, 3, 4, 5, 6, 7, 8][..]));
    let q = w.quantization.unwrap();
    assert_eq!(q.quantized_dimension(), Some(0));
    assert_eq!(
        (q.scale(1), q.zero_point(1), q.scale(2)),
        (Some(0.2), Some(0), None)
    );
    assert!(g.tensor(0).unwrap().data.is_none());
    assert!(g.tensor(3).unwrap().data.is_none(), "buffer 0 is empty");
    let op = g.operator(0).unwrap();
    assert_eq!(op.builtin, BuiltinOp::FullyConnected);
    assert_eq!(op.version, 1, "version defaults to 1");
    assert_eq!(&op.inputs[..], [Some(0), Some(1), Some(2)]);
    match op.options {
        BuiltinOptions::FullyConnected(o) => {
            assert_eq!(o.activation, Activation::Relu);
            assert!(!o.keep_num_dims);
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        g.tensor(4),
        Err(ModelError::BadIndex {
            index: 4,
            len: 4,
            ..
        })
    ));
    assert!(matches!(g.operator(1), Err(ModelError::BadIndex { .. })));
}

#[test]
fn every_truncation_of_the_handmade_model_is_rejected() {
    let bytes = Spec::fc().build();
    for len in 0..bytes.len() {
        assert!(parse_and_walk(&bytes[..len]).is_err(), "{len}-byte prefix");
    }
}

#[test]
fn optional_inputs_are_none() {
    let mut s = Spec::fc();
    s.operators = vec![operator(
        0,
        &[0, 1, -1],
        &[3],
        Some((FC_OPTIONS, table(vec![]))),
    )];
    let bytes = s.build();
    let m = Model::parse(&bytes).unwrap();
    let op = m.subgraph().operator(0).unwrap();
    assert_eq!(&op.inputs[..], [Some(0), Some(1), None]);
    assert_eq!(op.input(2), None);
}

#[test]
fn absent_option_fields_take_schema_defaults() {
    let mut s = Spec::fc();
    s.opcodes = vec![opcode(3)];
    s.operators = vec![operator(
        0,
        &[0, 1, 2],
        &[3],
        Some((CONV_OPTIONS, table(vec![(1, F::I32(2)), (2, F::I32(2))]))),
    )];
    let bytes = s.build();
    let m = Model::parse(&bytes).unwrap();
    match m.subgraph().operator(0).unwrap().options {
        BuiltinOptions::Conv2d(c) => {
            assert_eq!((c.stride_w, c.stride_h), (2, 2));
            assert_eq!((c.dilation_w_factor, c.dilation_h_factor), (1, 1));
            assert_eq!(c.padding, Padding::Same);
            assert_eq!(c.activation, Activation::None);
        }
        other => panic!("{other:?}"),
    }
    // A float field.
    s.opcodes = vec![opcode(25)];
    s.operators = vec![operator(
        0,
        &[0],
        &[3],
        Some((9, table(vec![(0, F::F32(0.5))]))),
    )];
    let bytes = s.build();
    let m = Model::parse(&bytes).unwrap();
    assert_eq!(
        m.subgraph().operator(0).unwrap().options,
        BuiltinOptions::Softmax(npu_compute::model::SoftmaxOptions { beta: 0.5 })
    );
    // No options table at all: `None`, and `or_default_for` gives the schema defaults.
    s.opcodes = vec![opcode(3)];
    s.operators = vec![operator(0, &[0, 1, 2], &[3], None)];
    let bytes = s.build();
    let m = Model::parse(&bytes).unwrap();
    let op = m.subgraph().operator(0).unwrap();
    assert_eq!(op.options, BuiltinOptions::None);
    match op.options.or_default_for(op.builtin) {
        BuiltinOptions::Conv2d(c) => assert_eq!(c.dilation_w_factor, 1),
        other => panic!("{other:?}"),
    }
}

#[test]
fn builtin_code_is_the_max_of_both_fields() {
    let mut s = Spec::fc();
    // Old files: only the deprecated byte.
    s.opcodes = vec![table(vec![(0, F::I8(9))])];
    let bytes = s.build();
    let m = Model::parse(&bytes).unwrap();
    assert_eq!(m.opcode(0).unwrap().builtin, BuiltinOp::FullyConnected);
    // New codes: deprecated byte is PLACEHOLDER_FOR_GREATER_OP_CODES (127).
    s.opcodes = vec![table(vec![(0, F::I8(127)), (3, F::I32(150))])];
    s.operators = vec![operator(0, &[0], &[3], None)];
    let bytes = s.build();
    let m = Model::parse(&bytes).unwrap();
    assert_eq!(m.opcode(0).unwrap().builtin, BuiltinOp::Gelu);
    // Codes newer than this reader.
    s.opcodes = vec![opcode(5000)];
    let bytes = s.build();
    let m = Model::parse(&bytes).unwrap();
    assert_eq!(m.opcode(0).unwrap().builtin, BuiltinOp::Other(5000));
    // Negative codes are invalid.
    s.opcodes = vec![table(vec![(0, F::I8(-3)), (3, F::I32(-5))])];
    assert!(matches!(
        s.parse_err(),
        ModelError::BadEnum { value: -3, .. }
    ));
}

#[test]
fn wrong_identifier_is_rejected() {
    let mut bytes = Spec::fc().build();
    bytes[4..8].copy_from_slice(b"TFL2");
    assert_eq!(
        Model::parse(&bytes).unwrap_err(),
        ModelError::BadIdentifier { found: *b"TFL2" }
    );
}

#[test]
fn wrong_version_is_rejected() {
    let mut s = Spec::fc();
    s.version = 2;
    assert_eq!(s.parse_err(), ModelError::UnsupportedVersion { version: 2 });
}

#[test]
fn vtable_offset_out_of_range_is_rejected() {
    let mut s = Spec::fc();
    s.buffers[2] = V::Table(vec![], Some(-0x1000_0000));
    assert!(matches!(s.parse_err(), ModelError::BadVtable { .. }));
    s.buffers[2] = V::Table(vec![], Some(i32::MAX));
    assert!(matches!(s.parse_err(), ModelError::BadVtable { .. }));
    s.buffers[2] = V::Table(vec![], Some(i32::MIN));
    assert!(matches!(s.parse_err(), ModelError::BadVtable { .. }));
    // The root offset pointing past the end, and to an unaligned position.
    let mut bytes = Spec::fc().build();
    bytes[0..4].copy_from_slice(&0xFFFF_FFF0u32.to_le_bytes());
    assert!(matches!(
        Model::parse(&bytes),
        Err(ModelError::BadOffset { .. })
    ));
    bytes[0..4].copy_from_slice(&10u32.to_le_bytes());
    assert!(matches!(
        Model::parse(&bytes),
        Err(ModelError::Misaligned { .. })
    ));
}

#[test]
fn huge_vector_length_is_rejected() {
    for len in [0x10_0000, 0x4000_0000, u32::MAX] {
        let mut s = Spec::fc();
        s.tensors[0] = table(vec![(0, F::Off(V::BadLen(len))), (1, F::I8(INT8))]);
        assert!(
            matches!(
                s.parse_err(),
                ModelError::OutOfBounds {
                    what: "Tensor.shape",
                    ..
                }
            ),
            "{len}"
        );
    }
    let mut s = Spec::fc();
    s.buffers[2] = table(vec![(0, F::Off(V::BadLen(u32::MAX)))]);
    assert!(matches!(s.parse_err(), ModelError::OutOfBounds { .. }));
}

#[test]
fn tensor_index_out_of_range_is_rejected() {
    let mut s = Spec::fc();
    s.operators = vec![operator(0, &[0, 1, 4], &[3], None)];
    assert_eq!(
        s.parse_err(),
        ModelError::BadIndex {
            what: "Operator.inputs",
            item: 0,
            index: 4,
            len: 4
        }
    );
    s.operators = vec![operator(0, &[0, 1, -2], &[3], None)];
    assert!(matches!(
        s.parse_err(),
        ModelError::BadIndex { index: -2, .. }
    ));
    s.operators = vec![operator(0, &[0, 1, 2], &[70000], None)];
    assert!(matches!(
        s.parse_err(),
        ModelError::BadIndex {
            what: "Operator.outputs",
            ..
        }
    ));
    let mut s = Spec::fc();
    s.outputs = vec![9];
    assert!(matches!(
        s.parse_err(),
        ModelError::BadIndex {
            what: "SubGraph.outputs",
            ..
        }
    ));
    s.outputs = vec![-1];
    assert!(matches!(
        s.parse_err(),
        ModelError::BadIndex {
            what: "SubGraph.outputs",
            ..
        }
    ));
}

#[test]
fn opcode_index_out_of_range_is_rejected() {
    let mut s = Spec::fc();
    s.operators = vec![operator(1, &[0, 1, 2], &[3], None)];
    assert_eq!(
        s.parse_err(),
        ModelError::BadIndex {
            what: "Operator.opcode_index",
            item: 0,
            index: 1,
            len: 1
        }
    );
}

#[test]
fn buffer_index_out_of_range_is_rejected() {
    let mut s = Spec::fc();
    s.tensors[3] = tensor(&[1, 2], INT8, 4, "output", None);
    assert!(matches!(
        s.parse_err(),
        ModelError::BadIndex {
            what: "Tensor.buffer",
            item: 3,
            index: 4,
            len: 4
        }
    ));
}

#[test]
fn bad_shapes_are_rejected() {
    let mut s = Spec::fc();
    s.tensors[3] = tensor(&[1, -2], INT8, 0, "output", None);
    assert_eq!(
        s.parse_err(),
        ModelError::BadDimension {
            tensor: 3,
            axis: 1,
            value: -2
        }
    );
    s.tensors[3] = tensor(&[1; MAX_RANK + 1], INT8, 0, "output", None);
    assert!(matches!(
        s.parse_err(),
        ModelError::CapacityExceeded {
            capacity: "MAX_RANK",
            ..
        }
    ));
    // 2^16 * 2^16 elements overflow u32; 2^15 * 2^15 int32 is 2^32 bytes.
    s.tensors[3] = tensor(&[65536, 65536], INT8, 0, "output", None);
    assert_eq!(s.parse_err(), ModelError::TensorTooLarge { tensor: 3 });
    s.tensors[3] = tensor(&[32768, 32768], INT32, 0, "output", None);
    assert_eq!(s.parse_err(), ModelError::TensorTooLarge { tensor: 3 });
    // Zero-sized and scalar tensors are fine.
    s.tensors[3] = tensor(&[0, 3], INT8, 0, "output", None);
    assert!(Model::parse(&s.build()).is_ok());
    s.tensors[3] = tensor(&[], INT8, 0, "output", None);
    let bytes = s.build();
    let m = Model::parse(&bytes).unwrap();
    let t = m.subgraph().tensor(3).unwrap();
    assert_eq!(
        (t.shape.rank(), t.shape.num_elements(), t.byte_size),
        (0, 1, Some(1))
    );
}

#[test]
fn bad_enums_are_rejected() {
    let mut s = Spec::fc();
    s.tensors[3] = tensor(&[1, 2], 99, 0, "output", None);
    assert_eq!(
        s.parse_err(),
        ModelError::BadEnum {
            what: "Tensor.type",
            value: 99
        }
    );
    let mut s = Spec::fc();
    s.operators = vec![operator(
        0,
        &[0, 1, 2],
        &[3],
        Some((FC_OPTIONS, table(vec![(0, F::I8(6))]))),
    )];
    assert!(matches!(
        s.parse_err(),
        ModelError::BadEnum {
            what: "FullyConnectedOptions.fused_activation_function",
            value: 6
        }
    ));
    s.operators = vec![operator(0, &[0, 1, 2], &[3], Some((200, table(vec![]))))];
    assert!(matches!(
        s.parse_err(),
        ModelError::BadEnum {
            what: "Operator.builtin_options_type",
            value: 200
        }
    ));
    s.opcodes = vec![opcode(3)];
    s.operators = vec![operator(
        0,
        &[0, 1, 2],
        &[3],
        Some((CONV_OPTIONS, table(vec![(0, F::I8(2))]))),
    )];
    assert!(matches!(
        s.parse_err(),
        ModelError::BadEnum {
            what: "Conv2DOptions.padding",
            value: 2
        }
    ));
}

#[test]
fn union_type_mismatch_is_rejected() {
    let mut s = Spec::fc();
    s.operators = vec![operator(
        0,
        &[0, 1, 2],
        &[3],
        Some((CONV_OPTIONS, table(vec![]))),
    )];
    assert_eq!(
        s.parse_err(),
        ModelError::OptionsMismatch {
            operator: 0,
            builtin: 9,
            options_type: CONV_OPTIONS
        }
    );
    // An operator that takes no decoded table carrying one of them.
    s.opcodes = vec![opcode(19)]; // RELU
    s.operators = vec![operator(0, &[0], &[3], Some((FC_OPTIONS, table(vec![]))))];
    assert!(matches!(s.parse_err(), ModelError::OptionsMismatch { .. }));
    // A tag without its table.
    let mut s = Spec::fc();
    s.operators = vec![table(vec![
        (0, F::U32(0)),
        (1, F::Off(V::I32s(vec![0, 1, 2]))),
        (2, F::Off(V::I32s(vec![3]))),
        (3, F::U8(FC_OPTIONS)),
    ])];
    assert!(matches!(s.parse_err(), ModelError::MissingField { .. }));
    // Other tables are validated but not decoded.
    s.opcodes = vec![opcode(22)]; // RESHAPE... with SqueezeOptions (30)? mismatch.
    s.operators = vec![operator(0, &[0], &[3], Some((30, table(vec![]))))];
    assert!(matches!(s.parse_err(), ModelError::OptionsMismatch { .. }));
    s.opcodes = vec![opcode(48)]; // TOPK_V2 with TopKV2Options
    s.operators = vec![operator(0, &[0], &[3], Some((34, table(vec![]))))];
    let bytes = s.build();
    let m = Model::parse(&bytes).unwrap();
    assert_eq!(
        m.subgraph().operator(0).unwrap().options,
        BuiltinOptions::Other { options_type: 34 }
    );
}

#[test]
fn external_buffers_are_supported_and_checked() {
    let mut s = Spec::fc();
    // Placeholder first to learn the flatbuffer's size, then append the data after it.
    s.buffers[2] = table(vec![(1, F::U64(0)), (2, F::U64(8))]);
    let base = s.build().len() as u64;
    s.buffers[2] = table(vec![(1, F::U64(base)), (2, F::U64(8))]);
    let mut bytes = s.build();
    assert_eq!(bytes.len() as u64, base);
    bytes.extend_from_slice(&[9, 8, 7, 6, 5, 4, 3, 2]);
    let m = Model::parse(&bytes).unwrap();
    walk(&m).unwrap();
    assert_eq!(
        m.subgraph().tensor(1).unwrap().data,
        Some(&[9u8, 8, 7, 6, 5, 4, 3, 2][..])
    );
    // Past the end of the file.
    assert!(matches!(
        Model::parse(&bytes[..bytes.len() - 1]),
        Err(ModelError::ExternalBufferOutOfBounds { buffer: 2, .. })
    ));
    s.buffers[2] = table(vec![(1, F::U64(u64::MAX - 2)), (2, F::U64(8))]);
    assert!(matches!(
        s.parse_err(),
        ModelError::ExternalBufferOutOfBounds { buffer: 2, .. }
    ));
    // Both inline data and an external range.
    s.buffers[2] = table(vec![
        (0, F::Off(V::Bytes(vec![1; 8]))),
        (1, F::U64(16)),
        (2, F::U64(8)),
    ]);
    assert_eq!(
        s.parse_err(),
        ModelError::ConflictingBufferData { buffer: 2 }
    );
}

#[test]
fn buffer_size_must_match_the_tensor() {
    let mut s = Spec::fc();
    s.buffers[3] = buffer(&[1, 0, 0, 0]);
    assert_eq!(
        s.parse_err(),
        ModelError::BufferSizeMismatch {
            tensor: 2,
            expected: 8,
            actual: 4
        }
    );
}

#[test]
fn quantization_lengths_are_checked() {
    let mut s = Spec::fc();
    s.tensors[0] = tensor(&[1, 4], INT8, 1, "input", Some(quant(&[0.5], &[], 0)));
    assert!(matches!(
        s.parse_err(),
        ModelError::BadQuantization { tensor: 0, .. }
    ));
    // A quantized_dimension that is out of range, or names a dimension of another size, is
    // ignored as TFLM ignores it: the pairs are kept, with no axis.
    for qd in [0, 2, -1, 1000] {
        s.tensors[0] = tensor(
            &[1, 4],
            INT8,
            1,
            "input",
            Some(quant(&[0.5, 0.25], &[0, 0], qd)),
        );
        let bytes = s.build();
        let m = Model::parse(&bytes).unwrap_or_else(|e| panic!("qd {qd}: {e}"));
        let q = m.subgraph().tensor(0).unwrap().quantization.unwrap();
        assert_eq!((q.len(), q.quantized_dimension()), (2, None), "qd {qd}");
        assert!(q.is_per_channel());
        assert_eq!(q.scale(1), Some(0.25));
    }
    s.tensors[0] = tensor(
        &[1, 4],
        INT8,
        1,
        "input",
        Some(quant(&[0.5; 4], &[0; 4], 1)),
    );
    assert!(Model::parse(&s.build()).is_ok());
    // min/max only: not quantized.
    s.tensors[0] = tensor(&[1, 4], INT8, 1, "input", Some(quant(&[], &[], 0)));
    let bytes = s.build();
    let m = Model::parse(&bytes).unwrap();
    assert!(m.subgraph().tensor(0).unwrap().quantization.is_none());
}

#[test]
fn bad_strings_are_rejected() {
    let mut s = Spec::fc();
    s.tensors[0] = table(vec![
        (0, F::Off(V::I32s(vec![1, 4]))),
        (1, F::I8(INT8)),
        (3, F::Off(V::Str(vec![0xFF, 0xFE], true))),
    ]);
    assert!(matches!(
        s.parse_err(),
        ModelError::InvalidUtf8 {
            what: "Tensor.name",
            ..
        }
    ));
    s.tensors[0] = table(vec![
        (0, F::Off(V::I32s(vec![1, 4]))),
        (1, F::I8(INT8)),
        (3, F::Off(V::Str(b"abcd".to_vec(), false))),
    ]);
    // The next object's bytes follow the string, so its terminator is whatever comes next.
    let e = s.parse_err();
    assert!(matches!(e, ModelError::NotNulTerminated { .. }), "{e:?}");
}

#[test]
fn custom_ops_need_a_name() {
    let mut s = Spec::fc();
    s.opcodes = vec![opcode(32)];
    s.operators = vec![operator(0, &[0], &[3], None)];
    assert_eq!(
        s.parse_err(),
        ModelError::MissingField {
            table: "OperatorCode",
            field: "custom_code"
        }
    );
    s.opcodes = vec![table(vec![
        (0, F::I8(32)),
        (1, F::Off(V::Str(b"ethos-u".to_vec(), true))),
        (2, F::I32(1)),
    ])];
    s.operators = vec![table(vec![
        (0, F::U32(0)),
        (1, F::Off(V::I32s(vec![0]))),
        (2, F::Off(V::I32s(vec![3]))),
        (5, F::Off(V::Bytes(vec![1, 2, 3]))),
    ])];
    let bytes = s.build();
    let m = Model::parse(&bytes).unwrap();
    let op = m.subgraph().operator(0).unwrap();
    assert_eq!(op.builtin, BuiltinOp::Custom);
    assert_eq!(op.custom_code, Some("ethos-u"));
    assert_eq!(op.custom_options, Some(&[1u8, 2, 3][..]));
}

#[test]
fn operator_input_capacity_is_enforced() {
    let mut s = Spec::fc();
    s.opcodes = vec![opcode(2)];
    s.operators = vec![operator(0, &[0; 25], &[3], None)];
    assert!(matches!(
        s.parse_err(),
        ModelError::CapacityExceeded {
            capacity: "MAX_OP_INPUTS",
            limit: 24,
            actual: 25,
            ..
        }
    ));
}

#[test]
fn subgraphs_are_all_validated() {
    let mut s = Spec::fc();
    let mut second = Spec::fc();
    second.inputs = vec![0];
    s.extra_subgraphs = vec![second.subgraph()];
    let bytes = s.build();
    let m = Model::parse(&bytes).unwrap();
    assert_eq!(m.subgraph_count(), 2);
    assert_eq!(m.subgraph_at(1).unwrap().index(), 1);
    assert!(m.subgraph_at(2).is_err());
    second.outputs = vec![17];
    s.extra_subgraphs = vec![second.subgraph()];
    assert!(matches!(
        s.parse_err(),
        ModelError::BadIndex {
            what: "SubGraph.outputs",
            item: 1,
            ..
        }
    ));
    // No subgraph at all.
    let bytes = build(table(vec![(0, F::U32(3))]));
    assert_eq!(
        Model::parse(&bytes).unwrap_err(),
        ModelError::MissingField {
            table: "Model",
            field: "subgraphs"
        }
    );
}

#[test]
fn sparse_tensors_are_unsupported() {
    let mut s = Spec::fc();
    s.tensors[3] = table(vec![
        (0, F::Off(V::I32s(vec![1, 2]))),
        (1, F::I8(INT8)),
        (6, F::Off(table(vec![]))),
    ]);
    assert_eq!(
        s.parse_err(),
        ModelError::Unsupported {
            what: "Tensor.sparsity"
        }
    );
}

#[test]
fn misaligned_fields_are_rejected() {
    // A vtable entry pointing a u32 field at an odd offset inside its table.
    let mut bytes = Spec::fc().build();
    assert!(Model::parse(&bytes).is_ok());
    // Root table: its vtable entry for `version` (slot 0) is at vtable + 4.
    let root = u32::from_le_bytes(bytes[0..4].try_into().unwrap()) as usize;
    let so = i32::from_le_bytes(bytes[root..root + 4].try_into().unwrap());
    let vt = (root as i64 - i64::from(so)) as usize;
    let field = u16::from_le_bytes(bytes[vt + 4..vt + 6].try_into().unwrap());
    bytes[vt + 4..vt + 6].copy_from_slice(&(field + 1).to_le_bytes());
    assert!(matches!(
        Model::parse(&bytes),
        Err(ModelError::Misaligned {
            what: "Model.version",
            ..
        }) | Err(ModelError::BadVtable { .. })
    ));
}

/// Small valid hand-made models; `fuzz/seed.sh` sets `NPU_FUZZ_SEED_DIR` to add them to the
/// fuzzer's seed corpus (small complete files let it explore every table quickly).
#[test]
fn handmade_fuzz_seeds() {
    let mut seeds = vec![("fc", Spec::fc())];
    let mut conv = Spec::fc();
    conv.opcodes = vec![opcode(3), opcode(25), opcode(22)];
    conv.operators = vec![
        operator(
            0,
            &[0, 1, -1],
            &[3],
            Some((
                CONV_OPTIONS,
                table(vec![(0, F::I8(1)), (1, F::I32(1)), (3, F::I8(3))]),
            )),
        ),
        operator(1, &[3], &[3], Some((9, table(vec![(0, F::F32(1.0))])))),
        operator(
            2,
            &[3, 2],
            &[3],
            Some((17, table(vec![(0, F::Off(V::I32s(vec![1, -1])))]))),
        ),
    ];
    seeds.push(("conv_softmax_reshape", conv));
    let dir = std::env::var_os("NPU_FUZZ_SEED_DIR");
    for (name, spec) in seeds {
        let bytes = spec.build();
        parse_and_walk(&bytes).unwrap();
        if let Some(dir) = &dir {
            let path = Path::new(dir).join(format!("handmade_{name}.tflite"));
            std::fs::write(&path, &bytes).unwrap();
        }
    }
}
