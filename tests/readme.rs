//! The README is checked against the code it describes:
//!
//! - its host program and its firmware code are `examples/run_model.rs` and
//!   `examples/firmware/src/readme.rs`, quoted whole (the build and CI run those files);
//! - its layer drawing lists every folder and file of `src/`, each importing only from the
//!   layers drawn below it;
//! - its table of supported operators is the one generated from the operator descriptions
//!   (`UPDATE_README=1 cargo test --test readme` rewrites it);
//! - its table of capacities gives the defaults the code has.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn readme() -> String {
    std::fs::read_to_string(root().join("README.md")).unwrap()
}

/// Where the text between the lines `<!-- NAME: begin -->` and `<!-- NAME: end -->` lies.
fn section_range(text: &str, name: &str) -> std::ops::Range<usize> {
    let begin = format!("<!-- {name}: begin -->\n");
    let end = format!("<!-- {name}: end -->");
    let start = text.find(&begin).unwrap_or_else(|| panic!("no {begin}")) + begin.len();
    let len = text[start..]
        .find(&end)
        .unwrap_or_else(|| panic!("no {end}"));
    start..start + len
}

/// The text between the lines `<!-- NAME: begin -->` and `<!-- NAME: end -->`.
fn section<'a>(text: &'a str, name: &str) -> &'a str {
    &text[section_range(text, name)]
}

#[test]
fn the_readme_quotes_its_programs_whole() {
    let readme = readme();
    for file in ["examples/run_model.rs", "examples/firmware/src/readme.rs"] {
        let code = std::fs::read_to_string(root().join(file)).unwrap();
        assert!(
            readme.contains(&format!("```rust\n{code}```\n")),
            "README.md does not quote {file} whole, as it now is"
        );
    }
}

/// The modules of `src/` a file imports (`crate::NAME` outside comments).
fn imports(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for line in code.lines() {
        let line = line.trim_start();
        if line.starts_with("//") {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            if rest.starts_with('{') {
                // `use crate::{a::X, b};`: every path in the braces.
                let inner = &rest[1..rest.find('}').unwrap_or(rest.len())];
                for path in inner.split(',') {
                    let name: String = path
                        .trim()
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if !name.is_empty() {
                        found.insert(name);
                    }
                }
            } else {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                found.insert(name);
            }
        }
    }
    found
}

/// Every `.rs` file under `path` (or `path` itself).
fn sources(path: &Path) -> Vec<PathBuf> {
    if path.is_file() {
        return vec![path.to_path_buf()];
    }
    let mut files = Vec::new();
    for entry in std::fs::read_dir(path).unwrap() {
        files.extend(sources(&entry.unwrap().path()));
    }
    files
}

#[test]
fn the_layer_drawing_is_the_imports() {
    let readme = readme();
    let drawing = section(&readme, "layers");
    // Layers top down: the first word of each line that starts with one.
    let layers: Vec<String> = drawing
        .lines()
        .filter(|l| !l.starts_with(' ') && !l.starts_with("```") && !l.is_empty())
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect();
    let name = |layer: &str| {
        layer
            .trim_end_matches('/')
            .trim_end_matches(".rs")
            .to_string()
    };
    let names: Vec<String> = layers.iter().map(|l| name(l)).collect();

    // Every folder and file of src/ (but the crate root) is drawn.
    let src = root().join("src");
    let mut on_disk = BTreeSet::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let file = entry.unwrap().file_name().into_string().unwrap();
        if file != "lib.rs" {
            on_disk.insert(file);
        }
    }
    let drawn: BTreeSet<String> = layers
        .iter()
        .map(|l| l.trim_end_matches('/').to_string())
        .collect();
    assert_eq!(
        drawn, on_disk,
        "README.md's layers against the entries of src/"
    );

    // Each layer imports only from itself and the layers below it.
    for (k, layer) in layers.iter().enumerate() {
        let below: BTreeSet<&String> = names[k..].iter().collect();
        for file in sources(&src.join(layer.trim_end_matches('/'))) {
            let code = std::fs::read_to_string(&file).unwrap();
            for import in imports(&code) {
                assert!(
                    below.contains(&import) || !names.contains(&import),
                    "{} imports crate::{import}, which README.md draws above {layer}",
                    file.display()
                );
            }
        }
    }
}

/// The supported-operators section, from the registry in `src/ops/mod.rs`.
fn operators_section() -> String {
    use npu_compute::ops::{OperatorInfo, LOWERINGS, OPERATORS};
    let names = |ops: &[OperatorInfo]| {
        ops.iter()
            .map(|o| format!("`{}`", o.name))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut text = String::from(
        "| TFLite operator | runs as | element type (of the input) |\n|---|---|---|\n",
    );
    for lowering in LOWERINGS {
        let mut dtypes: Vec<String> = Vec::new();
        for op in lowering.ops {
            let dtype = op.dtype.to_string();
            if !dtypes.contains(&dtype) {
                dtypes.push(dtype);
            }
        }
        let (runs, dtypes) = if lowering.ops.is_empty() {
            (
                "nothing: its output shares its input's memory".to_string(),
                "any (the same in and out)".to_string(),
            )
        } else {
            (names(lowering.ops), dtypes.join(", "))
        };
        text += &format!("| `{}` | {runs} | {dtypes} |\n", lowering.builtin.name());
    }
    let lowered: Vec<&str> = LOWERINGS
        .iter()
        .flat_map(|l| l.ops.iter().map(|o| o.name))
        .collect();
    let by_hand: Vec<String> = OPERATORS
        .iter()
        .filter(|o| !lowered.contains(&o.name))
        .map(|o| format!("`{}` ({})", o.name, o.dtype))
        .collect();
    text += &format!(
        "\nOf the {} operators, these have no TFLite operator lowered to them and run in jobs a \
         program submits itself (`client.execute`): {}.\n",
        OPERATORS.len(),
        by_hand.join(", ")
    );
    text
}

#[test]
fn the_operator_table_is_generated_from_the_descriptions() {
    let path = root().join("README.md");
    let readme = readme();
    let range = section_range(&readme, "operators");
    let generated = operators_section();
    if readme[range.clone()] == generated {
        return;
    }
    if std::env::var_os("UPDATE_README").is_some() {
        let mut updated = readme.clone();
        updated.replace_range(range, &generated);
        std::fs::write(&path, updated).unwrap();
        return;
    }
    panic!(
        "README.md's table of supported operators is not current: run \
         `UPDATE_README=1 cargo test --test readme`. It should read:\n{generated}"
    );
}

/// The default column of the README's capacity table, by capacity name.
fn capacity_defaults(readme: &str) -> Vec<(String, String)> {
    readme
        .lines()
        .skip_while(|l| !l.starts_with("| capacity | where | default |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.split(" | ").collect();
            (
                cells[0].trim_start_matches("| ").to_string(),
                cells[2].to_string(),
            )
        })
        .collect()
}

#[test]
fn the_capacity_table_gives_the_defaults_of_the_code() {
    use npu_compute::hal::{Npu, MAX_EXECUTION_UNITS, MAX_FLASH_SEGMENTS, MAX_JOB_INPUTS};
    use npu_compute::{graph, memory, server, tune};
    use npu_sim::{AlignedMemory, SimConfig, SimNpu};

    let mut device = AlignedMemory::<64>::new();
    let mut host = AlignedMemory::<64>::new();
    let sim: SimNpu = SimNpu::new(
        device.as_mut_slice(),
        host.as_mut_slice(),
        SimConfig::default(),
    )
    .unwrap();
    let code = [
        ("`OPS`", graph::DEFAULT_OPS),
        ("`TENSORS`", graph::DEFAULT_TENSORS),
        ("`HANDLES`", server::DEFAULT_HANDLES),
        ("`N`", server::DEFAULT_HANDLES),
        ("`CHUNKS`", memory::DEFAULT_CHUNKS),
        ("`STAGING`", server::DEFAULT_STAGING),
        ("`TUNE`", tune::DEFAULT_TUNE_ENTRIES),
        ("`JOBS`", usize::from(sim.capabilities().max_in_flight)),
        ("`MAX_IO`", graph::MAX_IO),
        ("`MAX_TILES`", graph::MAX_TILES),
        ("`MAX_JOB_INPUTS`", MAX_JOB_INPUTS),
        ("`MAX_FLASH_SEGMENTS`", MAX_FLASH_SEGMENTS),
        ("`MAX_EXECUTION_UNITS`", MAX_EXECUTION_UNITS),
    ];
    let table = capacity_defaults(&readme());
    for (name, value) in code {
        let row = table
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("README.md's capacity table has no row {name}"));
        assert_eq!(row.1, value.to_string(), "README.md's default of {name}");
    }
}
