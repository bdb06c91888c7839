//! The arena plan against the peers' figures, on every shared model (issue 4's targets).
//!
//! - Planned for cycles (whole tensors): the activations fit in the whole-tensor lower bound,
//!   and in less than TFLM's arena head wherever TFLM is above that bound.
//! - Planned for memory (layers in stripes): the activations fit in Vela's SRAM figure when
//!   it optimises for size, and in the lower bound.
//!
//! The lower bound and TFLM's head come from each model's `manifest.json`; Vela's figures from
//! `../shared/models/figures.json` (copied below for the models made for this product, which
//! run without `../shared`). Outputs in both modes are checked byte for byte by
//! `tests/conformance.rs`.

use std::path::{Path, PathBuf};

use npu_compute::graph::Optimise;
use npu_sim::{runner, SimConfig};

/// `vela_u55_128_size_sram_bytes` of `../shared/models/FIGURES.md`.
const VELA_SIZE_SRAM: [(&str, u32); 9] = [
    ("mlperf_kws", 15995),
    ("mlperf_vww", 49152),
    ("mlperf_ic", 35840),
    ("mlperf_ad", 768),
    ("mlperf_ww", 5908),
    ("convnet", 9216),
    ("kws_dscnn", 15995),
    ("tiny_transformer", 9339),
    ("inception", 98304),
];

fn check(dir: &Path) {
    let name = dir.file_name().unwrap().to_str().unwrap();
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    let bound = manifest["activations"]["lower_bound_bytes"]
        .as_u64()
        .unwrap() as u32;
    let head = manifest["tflm"]["recording_allocator"]["head"]
        .as_u64()
        .unwrap() as u32;
    let vela = VELA_SIZE_SRAM.iter().find(|(n, _)| *n == name).unwrap().1;
    let model = runner::leak_aligned(&std::fs::read(dir.join("model.tflite")).unwrap());
    let config = SimConfig::default();

    let whole = runner::plan(model, config, Optimise::Cycles).unwrap();
    assert!(
        whole.activation_bytes <= bound,
        "{name}: {} activation bytes, lower bound {bound}",
        whole.activation_bytes
    );
    if head > bound {
        assert!(whole.activation_bytes < head, "{name}: TFLM head {head}");
    }
    assert_eq!(whole.tiled_chains, 0);

    let striped = runner::plan(model, config, Optimise::Memory).unwrap();
    assert!(
        striped.activation_bytes <= vela.min(bound),
        "{name}: {} activation bytes in stripes, Vela {vela}, lower bound {bound}",
        striped.activation_bytes
    );
    assert!(striped.activation_bytes <= whole.activation_bytes);
}

fn product(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/models")
        .join(name)
}

#[test]
fn product_models_meet_the_arena_targets() {
    for name in ["convnet", "kws_dscnn", "tiny_transformer", "inception"] {
        check(&product(name));
    }
}

#[test]
#[ignore = "reads the MLPerf models from ../shared (run by .ci/run)"]
fn mlperf_models_meet_the_arena_targets() {
    let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/models");
    for name in [
        "mlperf_kws",
        "mlperf_vww",
        "mlperf_ic",
        "mlperf_ad",
        "mlperf_ww",
    ] {
        check(&shared.join(name));
    }
}
