//! Compiled models ([`npu_compute::compiled`]): a model prepared on the host and run over one
//! arena with nothing of the stack but the operators. Every model of the repository whose
//! operators all have a packed form gives TFLM's bytes from its compiled image; images that
//! are cut short, damaged, made by another operator set, or given too small or misaligned an
//! arena are refused with the reason; and no damaged image makes the reader or an invoke
//! panic.

use std::path::{Path, PathBuf};

use npu_compute::compiled::{format, CompiledError, CompiledModel};
use npu_sim::runner;

/// A buffer aligned as firmware aligns an arena or an included image.
fn aligned(bytes: &[u8]) -> Vec<u128> {
    let mut words = vec![0u128; bytes.len().div_ceil(16).max(1)];
    bytemuck::cast_slice_mut::<u128, u8>(&mut words)[..bytes.len()].copy_from_slice(bytes);
    words
}

fn as_bytes(words: &[u128], len: usize) -> &[u8] {
    &bytemuck::cast_slice(words)[..len]
}

/// One invoke's inputs and TFLM's outputs for them.
type Run = (Vec<Vec<u8>>, Vec<Vec<u8>>);

/// Model folders: the examples and the operator cases, each with its runs.
struct Case {
    name: String,
    model: Vec<u8>,
    runs: Vec<Run>,
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn cases() -> Vec<Case> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut cases = Vec::new();
    for name in ["kws_dscnn", "convnet", "inception", "tiny_transformer"] {
        let dir = root.join("examples/models").join(name);
        let runs = (0..3)
            .map(|k| {
                let input = read(&dir.join(format!("input_{k}.bin")));
                let expected = read(&dir.join(format!("expected_tflm_{k}.bin")));
                (vec![input], vec![expected])
            })
            .collect();
        let model = read(&dir.join("model.tflite"));
        cases.push(Case {
            name: name.into(),
            model,
            runs,
        });
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root.join("tests/models/ops"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("case.json").exists())
        .collect();
    dirs.sort();
    for dir in dirs {
        let meta: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("case.json")).unwrap()).unwrap();
        let n = |k: &str| meta[k].as_u64().unwrap() as usize;
        let runs = (0..n("runs"))
            .map(|r| {
                let ins = (0..n("inputs"))
                    .map(|i| read(&dir.join(format!("input_{r}_{i}.bin"))))
                    .collect();
                let outs = (0..n("outputs"))
                    .map(|o| read(&dir.join(format!("expected_{r}_{o}.bin"))))
                    .collect();
                (ins, outs)
            })
            .collect();
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        cases.push(Case {
            name,
            model: read(&dir.join("model.tflite")),
            runs,
        });
    }
    cases
}

/// Runs `image` over every run of `case` on one session; panics on a difference from TFLM.
fn check(case: &Case, image: &[u8]) {
    let words = aligned(image);
    let model = CompiledModel::new(as_bytes(&words, image.len()))
        .unwrap_or_else(|e| panic!("{}: {e}", case.name));
    let mut arena = vec![0u128; (model.arena_bytes() as usize).div_ceil(16).max(1)];
    let arena: &mut [u8] =
        &mut bytemuck::cast_slice_mut(&mut arena)[..model.arena_bytes() as usize];
    let mut session = model.session(arena).unwrap();
    for (r, (inputs, expected)) in case.runs.iter().enumerate() {
        for (k, input) in inputs.iter().enumerate() {
            session.input_mut(k).unwrap().copy_from_slice(input);
        }
        session
            .invoke()
            .unwrap_or_else(|e| panic!("{} run {r}: {e}", case.name));
        for (k, want) in expected.iter().enumerate() {
            let got = session.output(k).unwrap();
            assert!(
                got == want.as_slice(),
                "{} run {r} output {k}: differs from TFLM at byte {:?}",
                case.name,
                got.iter().zip(want).position(|(a, b)| a != b)
            );
        }
    }
}

fn kws() -> (Case, Vec<u8>) {
    let case = cases().into_iter().find(|c| c.name == "kws_dscnn").unwrap();
    let image = runner::compile(runner::leak_aligned(&case.model)).unwrap();
    (case, image)
}

/// Every model and operator case of the repository compiles, and its image gives TFLM's bytes
/// on every run.
#[test]
fn compiled_models_give_tflms_bytes() {
    let mut compiled = 0;
    for case in cases() {
        let image = runner::compile(runner::leak_aligned(&case.model))
            .unwrap_or_else(|e| panic!("{}: {e}", case.name));
        check(&case, &image);
        compiled += 1;
    }
    println!("compiled and matched TFLM: {compiled} models and cases");
    assert!(compiled > 200, "{compiled} cases");
}

#[test]
fn an_image_is_smaller_than_its_model_and_its_arena_the_graphs() {
    let (case, image) = kws();
    let model = runner::leak_aligned(&case.model);
    let plan = runner::plan(model, npu_sim::SimConfig::default(), Default::default()).unwrap();
    let words = aligned(&image);
    let compiled = CompiledModel::new(as_bytes(&words, image.len())).unwrap();
    assert_eq!(compiled.arena_bytes(), plan.activation_bytes);
    assert!(image.len() < case.model.len(), "{} bytes", image.len());
    assert_eq!(compiled.steps(), 12);
    assert_eq!(compiled.input_bytes(0), Some(490));
    assert_eq!(compiled.output_bytes(0), Some(12));
    assert_eq!(compiled.input_bytes(1), None);
}

#[test]
fn cut_damaged_and_foreign_images_are_refused() {
    let (_, image) = kws();
    let words = aligned(&image);
    let good = as_bytes(&words, image.len());
    for len in [0, 10, 47, 48, image.len() - 1] {
        let e = CompiledModel::new(&good[..len]).unwrap_err();
        assert!(
            matches!(
                e,
                CompiledError::Truncated { .. } | CompiledError::BadFormat
            ),
            "{len} bytes: {e}"
        );
    }
    let mut bad = image.clone();
    bad[0] = b'X';
    let w = aligned(&bad);
    assert_eq!(
        CompiledModel::new(as_bytes(&w, bad.len())).unwrap_err(),
        CompiledError::BadFormat
    );
    let mut bad = image.clone();
    bad[8] ^= 1;
    let w = aligned(&bad);
    assert!(matches!(
        CompiledModel::new(as_bytes(&w, bad.len())).unwrap_err(),
        CompiledError::OtherRegistry { .. }
    ));
    let mut bad = image.clone();
    let last = bad.len() - 1;
    bad[last] ^= 0x40;
    let w = aligned(&bad);
    assert_eq!(
        CompiledModel::new(as_bytes(&w, bad.len())).unwrap_err(),
        CompiledError::Checksum
    );
    // An image one byte off its alignment.
    let mut shifted = vec![0u128; image.len().div_ceil(16) + 1];
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut shifted);
    bytes[1..=image.len()].copy_from_slice(&image);
    assert!(matches!(
        CompiledModel::new(&bytes[1..=image.len()]).unwrap_err(),
        CompiledError::Misaligned { what: "image", .. }
    ));
}

/// Header counts at their largest (255 inputs, outputs and variables, with the CRC made to
/// match) are refused as tables that run past the image, not an overflow: the case the
/// fuzzer found, when the input and output counts were added as bytes.
#[test]
fn the_largest_header_counts_are_refused() {
    let (_, image) = kws();
    for counts in [[255, 255, 255], [255, 255, 0], [0, 255, 255]] {
        let mut bad = image.clone();
        bad[24..27].copy_from_slice(&counts);
        let crc = crc32(&bad[48..]);
        bad[40..44].copy_from_slice(&crc.to_le_bytes());
        let words = aligned(&bad);
        let e = CompiledModel::new(as_bytes(&words, bad.len())).unwrap_err();
        assert!(
            matches!(
                e,
                CompiledError::BadRegion { .. }
                    | CompiledError::BadStep { .. }
                    | CompiledError::BadFormat
            ),
            "{counts:?}: {e}"
        );
    }
}

#[test]
fn too_small_or_misaligned_arenas_are_refused() {
    let (_, image) = kws();
    let words = aligned(&image);
    let model = CompiledModel::new(as_bytes(&words, image.len())).unwrap();
    let n = model.arena_bytes() as usize;
    let mut arena = vec![0u128; n / 16 + 2];
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut arena);
    assert_eq!(
        model.session(&mut bytes[..n - 1]).unwrap_err(),
        CompiledError::ArenaTooSmall {
            needed: n as u32,
            len: n as u32 - 1
        }
    );
    assert!(matches!(
        model.session(&mut bytes[4..n + 4]).unwrap_err(),
        CompiledError::Misaligned { what: "arena", .. }
    ));
}

/// With the CRC made to match, every flipped bit of the image is either refused or runs
/// without panicking: the reader takes nothing on trust that the CRC vouched for.
#[test]
fn no_damaged_image_panics() {
    let (case, image) = kws();
    // Every byte of the header and the tables, then a sample of the constants.
    let tables = image.len().min(2048);
    let positions = (0..tables).chain((tables..image.len()).step_by(97));
    let (tried, accepted) = damage(&case, &image, positions);
    println!(
        "{tried} damaged images, {accepted} accepted (weights, or parameters a layer could have)"
    );
    assert!(tried > 6000);
}

/// Cases of every operator family: one of each parameter type, and of each direction or mode
/// (broadcasts of rank 6, reductions of rank 5, an arg max with ties, strided and negative
/// slices, constant and mirror pads, both space-batch moves, both resizes, both LSTM and SVDF
/// state types).
const DAMAGED_OPERATOR_CASES: [&str; 46] = [
    "abs_int8",
    "add_int16_relu6",
    "add_int8_broadcast_rank6",
    "arg_max_int8_ties",
    "cast_float32_to_int8_saturate",
    "hard_swish_int8",
    "l2_normalization_int8_4d",
    "leaky_relu_int8_negative_alpha",
    "log_softmax_int8_rows",
    "logistic_int16",
    "logistic_int8",
    "mean_int8_rank5",
    "minimum_int8_broadcast_rank5",
    "mul_int16_broadcast",
    "mul_int8_broadcast_rank6",
    "prelu_int8_channel_alpha",
    "quantize_int8_to_int16",
    "reduce_max_int8_mixed",
    "relu6_int8",
    "softmax_int16",
    "squared_difference_int8_broadcast_both",
    "sub_int8_broadcast_rank6",
    "batch_to_space_nd_int8_crop",
    "conv_2d_int16_dilated",
    "depth_to_space_int8_2",
    "depthwise_conv_2d_int16_multiplier2_stride2",
    "fully_connected_int16_per_tensor",
    "gather_int8_batch_dims",
    "lstm_int16_seq",
    "lstm_int8_cell_clip",
    "mirror_pad_int8_reflect",
    "pack_int16_axis1",
    "pad_int8_rank5",
    "padv2_int8_value",
    "resize_bilinear_int8_half_pixel",
    "resize_nearest_int16_2x",
    "shape_int8_rank3",
    "space_to_batch_nd_int8",
    "space_to_depth_int8_3",
    "split_v_int8_sizes",
    "strided_slice_int8_neg_stride",
    "svdf_int8_rank2",
    "svdf_int8_state16",
    "transpose_conv_int8_same_s2_bias",
    "unpack_int8_axis1",
    "slice_int16_box",
];

/// Every bit flipped in the header, the tables and the parameters of single-operator images
/// of each operator group's cases (with the CRC made to match) is refused or runs without
/// panicking.
#[test]
fn no_damaged_operator_image_panics() {
    let (mut tried, mut accepted) = (0, 0);
    for case in cases()
        .into_iter()
        .filter(|c| DAMAGED_OPERATOR_CASES.contains(&c.name.as_str()))
    {
        let image = runner::compile(runner::leak_aligned(&case.model))
            .unwrap_or_else(|e| panic!("{}: {e}", case.name));
        // Everything but the constants, which only change the bytes computed.
        let positions = 0..image.len().min(2048);
        let (t, a) = damage(&case, &image, positions);
        tried += t;
        accepted += a;
    }
    println!("{tried} damaged operator images, {accepted} accepted");
    assert!(tried > DAMAGED_OPERATOR_CASES.len() * 48 * 3);
}

/// Flips bits 0, 3 and 7 of each byte of `image` at `positions` (the CRC's own bytes
/// excepted), fixes up the CRC, and reads each damaged image, and runs it on `case`'s first
/// inputs when the damage is in its header or tables (damaged constants are other weights
/// for the same kernels, which the reader checks the sizes of, not the values):
/// `(images tried, images accepted)`. Panics if any of it panics.
fn damage(case: &Case, image: &[u8], positions: impl Iterator<Item = usize>) -> (usize, usize) {
    let header = 48;
    let constants = u32::from_le_bytes(image[28..32].try_into().unwrap()) as usize;
    let mut tried = 0;
    let mut accepted = 0;
    for at in positions {
        for bit in [0, 3, 7] {
            let mut bad = image.to_vec();
            bad[at] ^= 1 << bit;
            if (40..44).contains(&at) {
                continue;
            }
            let crc = crc32(&bad[header..]);
            bad[40..44].copy_from_slice(&crc.to_le_bytes());
            let words = aligned(&bad);
            tried += 1;
            if let Ok(model) = CompiledModel::new(as_bytes(&words, bad.len())) {
                accepted += 1;
                let n = model.arena_bytes() as usize;
                if n > 1 << 20 || at >= constants {
                    continue;
                }
                let mut arena = vec![0u128; n.div_ceil(16).max(1)];
                let arena: &mut [u8] = &mut bytemuck::cast_slice_mut(&mut arena)[..n];
                let Ok(mut session) = model.session(arena) else {
                    continue;
                };
                for (k, given) in case.runs[0].0.iter().enumerate() {
                    if let Some(input) = session.input_mut(k) {
                        let len = input.len().min(given.len());
                        input[..len].copy_from_slice(&given[..len]);
                    }
                }
                let _ = session.invoke();
            }
        }
    }
    (tried, accepted)
}

/// A stateful model's variables start from their initial bytes again after
/// `Session::reset_state`: its runs, invoked once more on the same session, give TFLM's bytes
/// only after a reset (the state the first pass left changes what they give).
#[test]
fn stateful_cases_start_again_after_reset_state() {
    let stateful = |name: &str| name.starts_with("svdf") || name.starts_with("lstm");
    let mut checked = 0;
    for case in cases().into_iter().filter(|c| stateful(&c.name)) {
        let Ok(image) = runner::compile(runner::leak_aligned(&case.model)) else {
            continue;
        };
        let words = aligned(&image);
        let model = CompiledModel::new(as_bytes(&words, image.len())).unwrap();
        let n = model.arena_bytes() as usize;
        let mut arena = vec![0u128; n.div_ceil(16).max(1)];
        let arena: &mut [u8] = &mut bytemuck::cast_slice_mut(&mut arena)[..n];
        let mut session = model.session(arena).unwrap();
        let pass = |session: &mut npu_compute::compiled::Session<'_, '_>| {
            let mut same = true;
            for (inputs, expected) in &case.runs {
                for (k, input) in inputs.iter().enumerate() {
                    session.input_mut(k).unwrap().copy_from_slice(input);
                }
                session.invoke().unwrap();
                same &= session.output(0).unwrap() == expected[0].as_slice();
            }
            same
        };
        assert!(pass(&mut session), "{}: first pass", case.name);
        assert!(!pass(&mut session), "{}: state carried over", case.name);
        session.reset_state();
        assert!(pass(&mut session), "{}: after reset_state", case.name);
        checked += 1;
    }
    assert!(checked >= 10, "{checked} stateful cases compiled");
}

/// CRC-32 (IEEE), as the image's header holds it.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn the_registry_fingerprint_is_stable_within_a_build() {
    assert_eq!(format::registry(), format::registry());
    assert_ne!(
        format::registry(),
        0x811c_9dc5,
        "the registry has operators"
    );
}

/// The compiled models the firmwares flash are what `npu-sim compile` makes of their models
/// now: kws_dscnn (`examples/firmware-min/kws_dscnn.npuc`, also run by the counting firmwares)
/// and the one-ADD model the minimal firmware must refuse (`add_int8.npuc`). Regenerate them
/// from `examples/firmware-min` after a change to the format, an operator's packed form or the
/// operator set:
///
/// ```sh
/// cargo run --release -p npu-sim --features std --manifest-path ../../Cargo.toml -- \
///     compile ../models/kws_dscnn/model.tflite --output kws_dscnn.npuc
/// cargo run --release -p npu-sim --features std --manifest-path ../../Cargo.toml -- \
///     compile ../../tests/models/ops/add_int8_broadcast_rank1/model.tflite --output add_int8.npuc
/// ```
#[test]
fn the_firmwares_compiled_models_are_current() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (model, image) in [
        ("examples/models/kws_dscnn/model.tflite", "kws_dscnn.npuc"),
        (
            "tests/models/ops/add_int8_broadcast_rank1/model.tflite",
            "add_int8.npuc",
        ),
    ] {
        let made = runner::compile(runner::leak_aligned(&read(&root.join(model)))).unwrap();
        let committed = read(&root.join("examples/firmware-min").join(image));
        assert!(
            committed == made,
            "examples/firmware-min/{image} is stale: compile it again (see this test's docs)"
        );
    }
}
