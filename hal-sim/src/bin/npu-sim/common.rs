//! What several commands share: parsing the option values clap cannot check alone (memory
//! sizes, counts, `--units`), reading a model, input or table file, the model names of a
//! reference-model directory, and the memory-statistics line.
//!
//! Output: only [`print_memory`] prints (one line on stdout).
//!
//! Failure modes: a value parser's error is a usage error (status 2, clap prints it with the
//! option and the value): a memory size that is not a whole number or is more than the
//! simulator addresses, a count below its minimum, a `--units` spec naming no known unit. A
//! file that cannot be read (missing, unreadable, a directory) fails with `PATH: the
//! operating system's reason`, so the message names the file at fault; `--input` files are
//! checked against the model's inputs, their number and then each one's size (naming the
//! file), before anything runs; a model file past 4 GiB is refused unread; a `figures.json`
//! that is not JSON, not an array, or has a row without a `model` name fails with what is
//! wrong, since every benchmark over the directory depends on it, and so does a directory
//! with no model.

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

/// The plan of a `--faults` spec (see [`npu_sim::parse_faults`]), checked; boxed, since a
/// plan is a few hundred bytes and the other options a few dozen.
#[derive(Clone, Debug)]
pub struct Faults(Box<FaultPlan>);

impl Faults {
    /// The plan.
    pub fn plan(&self) -> FaultPlan {
        *self.0
    }
}

/// clap's value parser of `--faults`, so that a bad spec is a usage error (status 2) saying
/// what is wrong and how a spec is written.
pub fn faults_arg(spec: &str) -> Result<Faults, String> {
    let plan = npu_sim::parse_faults(spec).map_err(|e| e.to_string())?;
    Ok(Faults(Box::new(plan)))
}

/// clap's value parser of a memory size in bytes (`--arena`, `--host`): a whole number no
/// larger than the simulator addresses ([`runner::MAX_MEMORY_BYTES`]). A size it cannot
/// address is thus a usage error (status 2) naming the option, the value and the limit,
/// before anything is allocated.
pub fn bytes_arg(text: &str) -> Result<usize, String> {
    let digits = whole_number(text).ok_or_else(|| {
        format!("`{text}` is not a number of bytes: give a whole number, such as 1048576")
    })?;
    let limit = runner::MAX_MEMORY_BYTES;
    match digits.parse::<usize>() {
        Ok(bytes) if bytes <= limit => Ok(bytes),
        // Past the limit, or even past what the host counts.
        _ => Err(format!(
            "{digits} bytes is more than the simulator can address: its memories have at most \
             {limit} bytes (32-bit offsets); give at most {limit} (`npu-sim plan MODEL` gives \
             the arena a model needs)"
        )),
    }
}

/// `text` without surrounding blanks if it is a whole number in decimal digits.
fn whole_number(text: &str) -> Option<&str> {
    let digits = text.trim();
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then_some(digits)
}

/// clap's value parser of a count of at least 1 (`--repeat`, `--jobs`, `--batches`...):
/// none would measure nothing, and a figure of nothing (a median of no times: 0 µs) would
/// read as a result. A usage error (status 2) otherwise.
pub fn count_arg(text: &str) -> Result<usize, String> {
    at_least(text, 1, "none measures nothing")
}

/// clap's value parser of `--frames`: at least 3, since the first and the last frame are
/// left out of the steady state.
pub fn frames_arg(text: &str) -> Result<usize, String> {
    at_least(
        text,
        3,
        "the first and the last frame are left out of the steady state",
    )
}

/// A whole number of at least `min`; `why` says why fewer is refused.
fn at_least(text: &str, min: usize, why: &str) -> Result<usize, String> {
    let digits = whole_number(text)
        .ok_or_else(|| format!("`{text}` is not a count: give a whole number of at least {min}"))?;
    let n: usize = digits.parse().map_err(|_| {
        format!(
            "{digits} is more than this host counts (at most {})",
            usize::MAX
        )
    })?;
    if n < min {
        return Err(format!("{n} is too few: it must be at least {min} ({why})"));
    }
    Ok(n)
}

/// The bytes of the file at `path`; errors name the file.
pub fn read_file(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// The bytes of the file at `path`, reading no more than `limit` + 1 of them (a device such as
/// `/dev/zero` never ends): a longer file's are cut there. Errors name the file.
fn read_at_most(path: &Path, limit: u64) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let named = |e: std::io::Error| format!("{}: {e}", path.display());
    let file = std::fs::File::open(path).map_err(named)?;
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(named)?;
    Ok(bytes)
}

/// A model's bytes, copied into aligned memory that lives as long as the process (the
/// runner borrows models for `'static`). A file past 4 GiB, which flatbuffer offsets cannot
/// span, is refused before it is read.
pub fn read_model(path: &Path) -> Result<&'static [u8], String> {
    let limit = u64::from(u32::MAX);
    let too_large = std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() > limit);
    let bytes = if too_large {
        Vec::new()
    } else {
        read_at_most(path, limit)?
    };
    if too_large || bytes.len() as u64 > limit {
        return Err(format!(
            "{}: more than {limit} bytes, too large to be a TensorFlow Lite model (its offsets \
             are 32-bit)",
            path.display()
        ));
    }
    Ok(runner::leak_aligned(&bytes))
}

/// The bytes of every `--input` file, in order, checked against `model`'s inputs before
/// anything runs: one file per model input (a wrong number is a count, not a size), each of
/// its input tensor's bytes (the message names the file).
pub fn read_inputs(model: &'static [u8], paths: &[PathBuf]) -> Result<Vec<Vec<u8>>, String> {
    let sizes = runner::input_sizes(model).map_err(|e| e.to_string())?;
    if paths.len() != sizes.len() {
        let listed: Vec<String> = sizes
            .iter()
            .enumerate()
            .map(|(k, n)| format!("input {k}: {n} bytes"))
            .collect();
        return Err(format!(
            "the model has {} input{}, {} --input file{} given: give one --input per model \
             input, in order ({})",
            sizes.len(),
            if sizes.len() == 1 { "" } else { "s" },
            paths.len(),
            if paths.len() == 1 { " was" } else { "s were" },
            listed.join(", ")
        ));
    }
    let mut inputs = Vec::with_capacity(paths.len());
    for (k, (path, &want)) in paths.iter().zip(&sizes).enumerate() {
        // One byte past the tensor's tells a longer file, without reading a huge one whole.
        let bytes = read_at_most(path, u64::from(want))?;
        if bytes.len() as u64 != u64::from(want) {
            let size = match std::fs::metadata(path) {
                Ok(m) if m.is_file() => format!("{} bytes", m.len()),
                _ if bytes.len() as u64 > u64::from(want) => format!("more than {want} bytes"),
                _ => format!("{} bytes", bytes.len()),
            };
            return Err(format!(
                "{}: {size}, but model input {k} has {want}: give the raw bytes of the input \
                 tensor",
                path.display()
            ));
        }
        inputs.push(bytes);
    }
    Ok(inputs)
}

/// The inputs in `paths` (see [`read_inputs`]), or zeros of the sizes `model` takes when none
/// are given (for the commands whose figures do not depend on the data).
pub fn read_inputs_or_zeros(
    model: &'static [u8],
    paths: &[PathBuf],
) -> Result<Vec<Vec<u8>>, String> {
    if !paths.is_empty() {
        return read_inputs(model, paths);
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
/// subdirectory holding a `model.tflite` (the repository's `examples/models`), sorted. A
/// directory with no model is an error: a benchmark of nothing would print empty tables and
/// pass.
pub fn model_names(dir: &Path) -> Result<Vec<String>, String> {
    let path = dir.join("figures.json");
    let names = if path.exists() {
        read_figures(&path)?
            .iter()
            .map(|row| {
                row["model"]
                    .as_str()
                    .map(String::from)
                    .ok_or_else(|| "figures.json: model without a name".to_string())
            })
            .collect::<Result<Vec<_>, _>>()?
    } else {
        let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut names: Vec<String> = entries
            .filter_map(Result::ok)
            .filter(|e| e.path().join("model.tflite").is_file())
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        names.sort();
        names
    };
    if names.is_empty() {
        return Err(no_models(dir));
    }
    Ok(names)
}

/// The error of a reference-model directory that holds no model.
pub fn no_models(dir: &Path) -> String {
    format!(
        "{}: no models: a model directory has a subdirectory per model, NAME/model.tflite with \
         input_0.bin and expected_tflm_0.bin, and may list them in figures.json (as \
         examples/models or ../shared/models)",
        dir.display()
    )
}

/// Prints the memory manager's statistics as one indented line.
pub fn print_memory(s: &MemoryStats) {
    outln!(
        "  memory: in use {} B (peak {} B), reserved {} B (peak {} B), {} chunks, {} allocations / {} deallocations, largest free block {} B",
        s.in_use, s.in_use_peak, s.reserved, s.reserved_peak, s.chunks, s.allocations, s.deallocations, s.largest_free
    );
}
