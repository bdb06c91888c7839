//! `npu-sim compile MODEL --output FILE [--json]`: compiles a model for a device that runs it
//! on its CPU ([`npu_compute::compiled`]).
//!
//! Prepares the model as the runtime does (whole tensors, one execution unit, every operator
//! on the CPU fallback) and writes what an invoke does as a compiled model: each operator's
//! packed parameters, the arena plan's offsets and the constants the operators read. Firmware
//! includes the file (`include_aligned!`), checks it with `CompiledModel::new` and runs it in
//! an arena of the size printed, with no model reader, graph or server in its flash. The image
//! is read back and checked here before it is written.
//!
//! Output: the image to `--output`, and on stdout one line (the image's bytes, the arena's,
//! the steps), or with `--json` one object with the fields `image_bytes`, `arena_bytes`,
//! `arena_alignment`, `steps`, `inputs` and `outputs` (bytes of each).
//!
//! Failure modes (status 1, nothing written): the model cannot be read or the image cannot be
//! written (the message names the file); the model is malformed, or has an operator without a
//! packed form yet (the message names it), with the graph's reason.

use crate::common::read_model;
use npu_compute::compiled::CompiledModel;
use npu_sim::runner;
use std::path::Path;

/// `npu-sim compile MODEL --output FILE`.
pub fn run(model: &Path, output: &Path, json: bool) -> Result<(), String> {
    let bytes = read_model(model)?;
    let image = runner::compile(bytes).map_err(|e| e.to_string())?;
    let aligned = runner::leak_aligned(&image);
    let compiled = CompiledModel::new(aligned).map_err(|e| format!("the image made: {e}"))?;
    std::fs::write(output, &image).map_err(|e| format!("{}: {e}", output.display()))?;
    let sizes = |f: &dyn Fn(usize) -> Option<u32>| -> Vec<String> {
        (0..).map_while(f).map(|b| b.to_string()).collect()
    };
    let inputs = sizes(&|k| compiled.input_bytes(k));
    let outputs = sizes(&|k| compiled.output_bytes(k));
    if json {
        outln!(
            "{{\n  \"image_bytes\": {},\n  \"arena_bytes\": {},\n  \"arena_alignment\": {},\n  \"steps\": {},\n  \"inputs\": [{}],\n  \"outputs\": [{}]\n}}",
            image.len(),
            compiled.arena_bytes(),
            compiled.arena_alignment(),
            compiled.steps(),
            inputs.join(", "),
            outputs.join(", ")
        );
    } else {
        outln!(
            "compiled model: {} bytes ({} steps); arena: {} bytes aligned to {}; inputs {} bytes, outputs {} bytes",
            image.len(),
            compiled.steps(),
            compiled.arena_bytes(),
            compiled.arena_alignment(),
            inputs.join(" + "),
            outputs.join(" + ")
        );
    }
    Ok(())
}
