//! The operator coverage table of BENCHMARKS.md: every operator TensorFlow Lite Micro's op
//! resolver registers, in each element type, as this runtime runs it (on the simulated
//! Ethos-U55, on the CPU fallback, or not, and why), generated from the operator registry
//! (`ops::LOWERINGS`) and the simulator's NPU set (`npu_sim::ETHOS_U55_OPS`).
//! `UPDATE_BENCHMARKS=1 cargo test --test coverage` rewrites it.

use std::path::PathBuf;

use npu_compute::ops::{DType, OpKind, LOWERINGS};

/// The builtins `tflite::MicroMutableOpResolver` can register (TFLM's
/// `micro_mutable_op_resolver.h`), but CUSTOM.
const TFLM_BUILTINS: &[&str] = &[
    "ABS",
    "ADD",
    "ADD_N",
    "ARG_MAX",
    "ARG_MIN",
    "ASSIGN_VARIABLE",
    "AVERAGE_POOL_2D",
    "BATCH_MATMUL",
    "BATCH_TO_SPACE_ND",
    "BROADCAST_ARGS",
    "BROADCAST_TO",
    "CALL_ONCE",
    "CAST",
    "CEIL",
    "CONCATENATION",
    "CONV_2D",
    "COS",
    "CUMSUM",
    "DEPTHWISE_CONV_2D",
    "DEPTH_TO_SPACE",
    "DEQUANTIZE",
    "DIV",
    "DYNAMIC_UPDATE_SLICE",
    "ELU",
    "EMBEDDING_LOOKUP",
    "EQUAL",
    "EXP",
    "EXPAND_DIMS",
    "FILL",
    "FLOOR",
    "FLOOR_DIV",
    "FLOOR_MOD",
    "FULLY_CONNECTED",
    "GATHER",
    "GATHER_ND",
    "GREATER",
    "GREATER_EQUAL",
    "HARD_SWISH",
    "IF",
    "L2_NORMALIZATION",
    "L2_POOL_2D",
    "LEAKY_RELU",
    "LESS",
    "LESS_EQUAL",
    "LOG",
    "LOGICAL_AND",
    "LOGICAL_NOT",
    "LOGICAL_OR",
    "LOGISTIC",
    "LOG_SOFTMAX",
    "MAXIMUM",
    "MAX_POOL_2D",
    "MEAN",
    "MINIMUM",
    "MIRROR_PAD",
    "MUL",
    "NEG",
    "NOT_EQUAL",
    "PACK",
    "PAD",
    "PADV2",
    "PRELU",
    "QUANTIZE",
    "READ_VARIABLE",
    "REDUCE_ALL",
    "REDUCE_MAX",
    "REDUCE_MIN",
    "RELU",
    "RELU6",
    "RESHAPE",
    "RESIZE_BILINEAR",
    "RESIZE_NEAREST_NEIGHBOR",
    "REVERSE_V2",
    "ROUND",
    "RSQRT",
    "SELECT_V2",
    "SHAPE",
    "SIN",
    "SLICE",
    "SOFTMAX",
    "SPACE_TO_BATCH_ND",
    "SPACE_TO_DEPTH",
    "SPLIT",
    "SPLIT_V",
    "SQRT",
    "SQUARE",
    "SQUARED_DIFFERENCE",
    "SQUEEZE",
    "STRIDED_SLICE",
    "SUB",
    "SUM",
    "SVDF",
    "TANH",
    "TRANSPOSE",
    "TRANSPOSE_CONV",
    "UNIDIRECTIONAL_SEQUENCE_LSTM",
    "UNPACK",
    "VAR_HANDLE",
    "WHILE",
    "ZEROS_LIKE",
];

/// Builtins this runtime does not run in any element type for a reason other than work not
/// yet done.
const WHY_NOT: &[(&str, &str)] = &[
    ("ASSIGN_VARIABLE", "resource variables: not implemented"),
    (
        "CALL_ONCE",
        "control flow and resource variables: not implemented",
    ),
    ("IF", "control flow (subgraphs): not implemented"),
    ("WHILE", "control flow (subgraphs): not implemented"),
    ("READ_VARIABLE", "resource variables: not implemented"),
    ("VAR_HANDLE", "resource variables: not implemented"),
];

/// (builtin, element type) pairs TFLM has no kernel for (read from the type switches of
/// TFLM's `tensorflow/lite/micro/kernels/*.cc`): nothing to be bit-exact with.
const TFLM_LACKS: &[(&str, &[&str])] = &[
    ("ADD_N", &["int16"]),
    ("ARG_MAX", &["int16"]),
    ("ARG_MIN", &["int16"]),
    ("BATCH_TO_SPACE_ND", &["int16"]),
    ("CEIL", &["int8", "int16"]),
    ("COS", &["int8", "int16"]),
    ("CUMSUM", &["int16"]),
    ("DEPTH_TO_SPACE", &["int16"]),
    ("DIV", &["int16"]),
    ("ELU", &["int16"]),
    ("EMBEDDING_LOOKUP", &["int16"]),
    ("EXP", &["int8", "int16"]),
    ("FLOOR", &["int8", "int16"]),
    ("FLOOR_DIV", &["int8", "int16"]),
    ("FLOOR_MOD", &["int8", "int16"]),
    ("GATHER", &["int16"]),
    ("GATHER_ND", &["int16"]),
    ("HARD_SWISH", &["int16"]),
    ("L2_NORMALIZATION", &["int16"]),
    ("L2_POOL_2D", &["int8", "int16"]),
    ("LOG", &["int8", "int16"]),
    ("LOG_SOFTMAX", &["int16"]),
    ("MIRROR_PAD", &["int16"]),
    ("NEG", &["int8", "int16"]),
    ("RESIZE_BILINEAR", &["int16"]),
    ("ROUND", &["int8", "int16"]),
    ("SIN", &["int8", "int16"]),
    ("SPACE_TO_BATCH_ND", &["int16"]),
    ("SPACE_TO_DEPTH", &["int16"]),
    ("SQRT", &["int8", "int16"]),
    ("SQUARE", &["int8", "int16"]),
    ("SVDF", &["int16"]),
    ("ZEROS_LIKE", &["int16"]),
];

/// The element types of the table's columns.
const COLUMNS: [(DType, &str); 3] = [
    (DType::I8, "int8"),
    (DType::I16, "int16"),
    (DType::F32, "float32"),
];

fn cell(builtin: &str, dtype: DType) -> Option<&'static str> {
    let lowering = LOWERINGS.iter().find(|l| l.builtin.name() == builtin)?;
    if lowering.ops.is_empty() {
        return Some("alias");
    }
    // An operator whose only dtype is int32 (SHAPE: its output's, whatever the input's) runs
    // for inputs of every type.
    let any_input = lowering.ops.iter().all(|o| o.dtype == DType::I32);
    let kinds: Vec<OpKind> = lowering
        .ops
        .iter()
        .filter(|o| o.dtype == dtype || any_input)
        .map(|o| o.kind)
        .collect();
    if kinds.is_empty() {
        return None;
    }
    let op_dtype = if any_input { DType::I32 } else { dtype };
    let on_npu =
        |k: &OpKind| *k == OpKind::Reshape || npu_sim::ETHOS_U55_OPS.contains(*k, op_dtype);
    Some(match kinds.iter().filter(|k| on_npu(k)).count() {
        n if n == kinds.len() => "NPU",
        0 => "CPU",
        // Lowered to an NPU family where Vela's constraints hold, to a CPU one otherwise.
        _ => "NPU¹",
    })
}

/// Why each element type not run is not: TFLM has no kernel for it, float32 is out of scope,
/// or the work is not done yet.
fn reasons(builtin: &str, cells: &[Option<&str>]) -> String {
    let lacks = TFLM_LACKS
        .iter()
        .find(|(b, _)| *b == builtin)
        .map_or(&[][..], |(_, d)| *d);
    let mut missing: Vec<(&str, &str)> = Vec::new();
    for (cell, &(_, name)) in cells.iter().zip(&COLUMNS) {
        if cell.is_some() {
            continue;
        }
        let why = if lacks.contains(&name) {
            "TFLM has none"
        } else if name == "float32" {
            "out of scope (an int8 / int16 runtime)"
        } else {
            "not implemented yet"
        };
        missing.push((name, why));
    }
    // One reason for several types: "int8, int16: TFLM has none".
    let mut parts: Vec<String> = Vec::new();
    for why in [
        "TFLM has none",
        "not implemented yet",
        "out of scope (an int8 / int16 runtime)",
    ] {
        let names: Vec<&str> = missing.iter().filter(|m| m.1 == why).map(|m| m.0).collect();
        if !names.is_empty() {
            parts.push(format!("{}: {why}", names.join(", ")));
        }
    }
    parts.join("; ")
}

/// The generated section.
fn coverage_section() -> String {
    let mut text = String::from(
        "| TFLite operator | int8 | int16 | float32 | where not, why |\n|---|---|---|---|---|\n",
    );
    let (mut npu, mut cpu, mut none) = (0, 0, 0);
    for &builtin in TFLM_BUILTINS {
        let cells: Vec<Option<&str>> = COLUMNS.iter().map(|&(d, _)| cell(builtin, d)).collect();
        let why = match WHY_NOT.iter().find(|(b, _)| *b == builtin) {
            Some((_, why)) => why.to_string(),
            None => reasons(builtin, &cells),
        };
        for c in &cells {
            match c {
                Some("NPU") | Some("NPU¹") | Some("alias") => npu += 1,
                Some(_) => cpu += 1,
                None => none += 1,
            }
        }
        let shown: Vec<&str> = cells.iter().map(|c| c.unwrap_or("—")).collect();
        text += &format!("| `{builtin}` | {} | {why} |\n", shown.join(" | "));
    }
    text += &format!(
        "\nNPU¹: on the NPU where Vela's constraints on the operator's parameters and types hold (checked \
         when it is lowered), on the CPU fallback otherwise.\n\n{} operators × {} element types: \
         {npu} on the NPU (or aliases, which run nothing), {cpu} on the CPU fallback, {none} not \
         run.\n",
        TFLM_BUILTINS.len(),
        COLUMNS.len()
    );
    text
}

#[test]
fn the_coverage_table_is_generated_from_the_registry() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("BENCHMARKS.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let (begin, end) = ("<!-- coverage: begin -->\n", "<!-- coverage: end -->");
    let start = text
        .find(begin)
        .expect("BENCHMARKS.md has no coverage section")
        + begin.len();
    let stop = start + text[start..].find(end).expect("no coverage end marker");
    let generated = coverage_section();
    if text[start..stop] == generated {
        return;
    }
    if std::env::var_os("UPDATE_BENCHMARKS").is_some() {
        let mut updated = text.clone();
        updated.replace_range(start..stop, &generated);
        std::fs::write(&path, updated).unwrap();
        return;
    }
    panic!(
        "BENCHMARKS.md's coverage table is not current: run \
         `UPDATE_BENCHMARKS=1 cargo test --test coverage`. It should read:\n{generated}"
    );
}

#[test]
fn every_lowered_builtin_is_in_tflm_s_list() {
    for l in LOWERINGS {
        assert!(
            TFLM_BUILTINS.contains(&l.builtin.name()),
            "{} is lowered but not in TFLM's resolver list",
            l.builtin.name()
        );
    }
}
