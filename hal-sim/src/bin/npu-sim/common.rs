//! What several commands share: reading a model, input or table file, the model names of a
//! reference-model directory, and the memory-statistics line.
//!
//! Output: only [`print_memory`] prints (one line on stdout).
//!
//! Failure modes: a file that cannot be read (missing, unreadable, a directory) fails with
//! `PATH: the operating system's reason`, so the message names the file at fault; a
//! `figures.json` that is not JSON, not an array, or has a row without a `model` name fails
//! with what is wrong, since every benchmark over the directory depends on it.

use npu_compute::memory::MemoryStats;
use npu_sim::{runner, FaultPlan, SimConfig, UnitConfig};
use std::path::{Path, PathBuf};

/// The execution units of a `--units` spec (see [`npu_sim::parse_units`]), checked.
#[derive(Clone, Debug)]
pub struct Units(Vec<UnitConfig>);

impl Units {
    /// The default configuration with these execution units.
    pub fn config(&self) -> SimConfig {
        // `units_arg` built it from the same list.
        SimConfig::default().with_units(&self.0).unwrap_or_default()
    }
}

/// clap's value parser of `--units`, so that a bad spec is a usage error (status 2) naming
/// the bad item and the accepted names.
pub fn units_arg(spec: &str) -> Result<Units, String> {
    let units = npu_sim::parse_units(spec).map_err(|e| e.to_string())?;
    SimConfig::default()
        .with_units(&units)
        .map_err(|e| e.to_string())?;
    Ok(Units(units.to_vec()))
}

/// clap's value parser of `--faults`: the plan of a fault spec (see
/// [`npu_sim::parse_faults`]), so that a bad spec is a usage error (status 2) saying what is
/// wrong and how a spec is written.
pub fn faults_arg(spec: &str) -> Result<FaultPlan, String> {
    npu_sim::parse_faults(spec).map_err(|e| e.to_string())
}

/// The bytes of the file at `path`; errors name the file.
pub fn read_file(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// A model's bytes, copied into aligned memory that lives as long as the process (the
/// runner borrows models for `'static`).
pub fn read_model(path: &Path) -> Result<&'static [u8], String> {
    let bytes = read_file(path)?;
    Ok(runner::leak_aligned(&bytes))
}

/// The bytes of every input file, in order.
pub fn read_inputs(paths: &[PathBuf]) -> Result<Vec<Vec<u8>>, String> {
    paths.iter().map(|p| read_file(p)).collect()
}

/// The inputs in `paths`, or zeros of the sizes `model` takes when none are given (for the
/// commands whose figures do not depend on the data).
pub fn read_inputs_or_zeros(
    model: &'static [u8],
    paths: &[PathBuf],
) -> Result<Vec<Vec<u8>>, String> {
    if !paths.is_empty() {
        return read_inputs(paths);
    }
    let sizes = runner::input_sizes(model).map_err(|e| e.to_string())?;
    Ok(sizes.into_iter().map(|n| vec![0; n as usize]).collect())
}

/// The rows of a reference-model directory's `figures.json` (one object per model, with
/// its `model` name and the peers' figures).
pub fn read_figures(path: &Path) -> Result<Vec<serde_json::Value>, String> {
    let figures: serde_json::Value = read_file(path)
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| format!("{}: {e}", path.display())))?;
    match figures {
        serde_json::Value::Array(rows) => Ok(rows),
        _ => Err("figures.json: expected an array".into()),
    }
}

/// The model names of a reference-model directory: from its `figures.json`, or else every
/// subdirectory holding a `model.tflite` (the repository's `examples/models`), sorted.
pub fn model_names(dir: &Path) -> Result<Vec<String>, String> {
    let path = dir.join("figures.json");
    if !path.exists() {
        let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut names: Vec<String> = entries
            .filter_map(Result::ok)
            .filter(|e| e.path().join("model.tflite").exists())
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        names.sort();
        return Ok(names);
    }
    read_figures(&path)?
        .iter()
        .map(|row| {
            row["model"]
                .as_str()
                .map(String::from)
                .ok_or_else(|| "figures.json: model without a name".to_string())
        })
        .collect()
}

/// Prints the memory manager's statistics as one indented line.
pub fn print_memory(s: &MemoryStats) {
    outln!(
        "  memory: in use {} B (peak {} B), reserved {} B (peak {} B), {} chunks, {} allocations / {} deallocations, largest free block {} B",
        s.in_use, s.in_use_peak, s.reserved, s.reserved_peak, s.chunks, s.allocations, s.deallocations, s.largest_free
    );
}
