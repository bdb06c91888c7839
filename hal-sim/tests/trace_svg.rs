//! `npu-sim trace --svg` seen as a person sees it: the chart of a real model opened in a real
//! headless browser (Chromium), which must render it (a screenshot that is not blank, with
//! the job bars' colours in it) and lay out every lane's label (each label's rendered box,
//! measured in the page by `getBBox()`, has a width).
//!
//! Chromium is required, not optional: without it the test fails and says how to install it
//! (`.ci/run`'s install step does, with `apt-get install chromium`).
//!
//! And what the chart is drawn from: the runner's trace of an invoke on two units.
#![cfg(feature = "std")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How long one browser run may take before the test fails.
const BROWSER_TIMEOUT: Duration = Duration::from_secs(120);

fn npu_sim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_npu-sim"))
        .args(args)
        .output()
        .unwrap()
}

/// A scratch directory of this test's own (tests run in parallel).
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("npu-sim-trace-svg-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes the chart of the repository's keyword-spotting model into `dir`.
fn chart(dir: &Path) -> (PathBuf, String) {
    let model =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/models/kws_dscnn/model.tflite");
    let svg = dir.join("kws.svg");
    let o = npu_sim(&[
        "trace",
        model.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&svg).unwrap();
    (svg, text)
}

/// The Chromium binary, or a failure that says how to install it.
fn chromium() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in ["chromium", "chromium-browser"] {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    panic!(
        "Chromium is not installed, and this test needs a real browser: run .ci/run's install \
         step (it runs `apt-get install -y chromium`), or install Debian's `chromium` package"
    );
}

/// Runs headless Chromium with `args` (its own profile in `dir`), failing on a non-zero
/// status or after [`BROWSER_TIMEOUT`]; returns its stdout.
fn browser(dir: &Path, args: &[String]) -> String {
    let profile = dir.join("profile");
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            &format!("--user-data-dir={}", profile.display()),
        ])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("Chromium starts");
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if start.elapsed() > BROWSER_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("Chromium did not finish within {BROWSER_TIMEOUT:?}: {args:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "Chromium failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The value of attribute `name` in the first element of `svg` that has it.
fn attribute<'a>(svg: &'a str, name: &str) -> &'a str {
    let key = format!(" {name}=\"");
    let from = svg.find(&key).expect("the attribute") + key.len();
    svg[from..].split('"').next().unwrap()
}

/// The `data-lane` of every lane label, top to bottom.
fn lane_labels(svg: &str) -> Vec<String> {
    svg.lines()
        .filter(|l| l.contains(r#"class="lane-label""#))
        .map(|l| attribute(l, "data-lane").to_string())
        .collect()
}

/// `hsl(h,s%,l%)` as 8-bit RGB.
fn hsl_to_rgb(h: f64, s: f64, l: f64) -> [u8; 3] {
    let c = (1.0 - (2.0 * l - 1.0).abs()) * s;
    let x = c * (1.0 - ((h / 60.0) % 2.0 - 1.0).abs());
    let m = l - c / 2.0;
    let (r, g, b) = match (h / 60.0) as u32 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    [r, g, b].map(|v| ((v + m) * 255.0).round() as u8)
}

/// The colours of the job bars at least 4 units wide in `svg` (narrower ones blend with the
/// background when rasterised), as RGB.
fn bar_colours(svg: &str) -> Vec<[u8; 3]> {
    let mut colours: Vec<[u8; 3]> = svg
        .lines()
        .filter(|l| l.starts_with(r#"<rect class="job""#))
        .filter(|l| attribute(l, "width").parse::<f64>().unwrap() >= 4.0)
        .filter_map(|l| {
            let hsl = attribute(l, "fill")
                .strip_prefix("hsl(")?
                .strip_suffix(')')?;
            let parts: Vec<f64> = hsl
                .split(',')
                .map(|p| p.trim_end_matches('%').parse().unwrap())
                .collect();
            Some(hsl_to_rgb(parts[0], parts[1] / 100.0, parts[2] / 100.0))
        })
        .collect();
    colours.sort_unstable();
    colours.dedup();
    colours
}

#[test]
fn the_chart_renders_in_a_browser() {
    let dir = scratch("screenshot");
    let (svg_path, svg) = chart(&dir);
    let (width, height) = (attribute(&svg, "width"), attribute(&svg, "height"));
    let shot = dir.join("shot.png");
    browser(
        &dir,
        &[
            format!("--screenshot={}", shot.display()),
            format!("--window-size={width},{height}"),
            format!("file://{}", svg_path.display()),
        ],
    );

    let decoder = png::Decoder::new(std::fs::File::open(&shot).expect("a screenshot"));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("a PNG frame");
    let channels = info.color_type.samples();
    assert!(channels >= 3, "{:?}", info.color_type);
    let pixels: Vec<[u8; 3]> = buf[..info.buffer_size()]
        .chunks_exact(channels)
        .map(|p| [p[0], p[1], p[2]])
        .collect();
    assert_eq!(
        pixels.len(),
        (info.width * info.height) as usize,
        "{}x{}",
        info.width,
        info.height
    );
    let non_white = pixels.iter().filter(|p| **p != [255, 255, 255]).count();
    let mut distinct = pixels.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert!(
        non_white * 10 > pixels.len(),
        "{non_white} of {} pixels are not white: the chart did not render",
        pixels.len()
    );
    assert!(
        distinct.len() >= 32,
        "{} distinct colours: the chart did not render",
        distinct.len()
    );
    // Every family's bar colour is on screen (within rounding).
    let colours = bar_colours(&svg);
    assert!(colours.len() >= 3, "{colours:?}");
    for colour in colours {
        let near = |p: &&[u8; 3]| (0..3).all(|i| p[i].abs_diff(colour[i]) <= 3);
        let count = pixels.iter().filter(near).count();
        assert!(count >= 20, "bar colour {colour:?} on {count} pixels only");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn every_lane_label_is_laid_out() {
    let dir = scratch("labels");
    let (_, svg) = chart(&dir);
    let labels = lane_labels(&svg);
    for lane in ["unit 0 (u55-128)", "DMA", "CPU"] {
        assert!(
            labels.iter().any(|l| l == lane),
            "{lane} missing: {labels:?}"
        );
    }
    // The page measures each label's rendered box and writes the widths into the DOM, which
    // --dump-dom prints once the page has loaded (and the script has run).
    let page = dir.join("page.html");
    std::fs::write(
        &page,
        format!(
            r#"<!DOCTYPE html>
<html><body>
{svg}
<pre id="widths"></pre>
<script>
const rows = [];
for (const label of document.querySelectorAll("text.lane-label")) {{
  const box = label.getBBox();
  rows.push(label.getAttribute("data-lane") + "=" + box.width.toFixed(1) + "x" + box.height.toFixed(1));
}}
document.getElementById("widths").textContent = "[" + rows.join(";") + "]";
</script>
</body></html>
"#
        ),
    )
    .unwrap();
    let dom = browser(
        &dir,
        &[
            "--dump-dom".to_string(),
            format!("file://{}", page.display()),
        ],
    );
    let measured = dom
        .split(r#"<pre id="widths">["#)
        .nth(1)
        .and_then(|rest| rest.split("]</pre>").next())
        .unwrap_or_else(|| panic!("the page's script wrote no widths: {dom}"));
    let sizes: Vec<(String, f64, f64)> = measured
        .split(';')
        .map(|row| {
            let (lane, size) = row.rsplit_once('=').unwrap();
            let (w, h) = size.split_once('x').unwrap();
            (lane.to_string(), w.parse().unwrap(), h.parse().unwrap())
        })
        .collect();
    assert_eq!(
        sizes.iter().map(|(l, ..)| l.clone()).collect::<Vec<_>>(),
        labels
    );
    for (lane, width, height) in &sizes {
        assert!(
            *width > 10.0 && *height > 5.0,
            "{lane}'s label renders {width}x{height}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_runner_traces_a_whole_invoke_on_every_unit() {
    use npu_compute::graph::Optimise;
    use npu_sim::gantt::{figures, Chart};
    use npu_sim::runner::{self, RunOptions};
    use npu_sim::{Lane, SimConfig, TraceKind};

    let model = std::fs::read(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/models/kws_dscnn/model.tflite"),
    )
    .unwrap();
    let model = runner::leak_aligned(&model);
    let config = SimConfig {
        execution_units: 2,
        ..SimConfig::default()
    };
    let (arena, host) = runner::planned_memory(model, config, Optimise::Cycles).unwrap();
    let inputs: Vec<Vec<u8>> = runner::input_sizes(model)
        .unwrap()
        .into_iter()
        .map(|n| vec![0; n as usize])
        .collect();
    let inputs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
    let opts = RunOptions {
        arena_bytes: arena,
        host_bytes: host,
        config,
        ..RunOptions::default()
    };
    let run = runner::trace(model, &inputs, &opts).unwrap();
    assert!(run.planned);
    assert_eq!(run.units.len(), 2);
    // An invoke: the input's upload first, the output's download last.
    let mut jobs = run.jobs.clone();
    jobs.sort_by_key(|(e, _)| e.fence);
    assert!(matches!(
        jobs.first().unwrap().0.kind,
        TraceKind::Transfer { .. }
    ));
    assert!(matches!(
        jobs.last().unwrap().0.kind,
        TraceKind::Transfer { .. }
    ));
    assert!(run
        .jobs
        .iter()
        .all(|(e, r)| e.failure.is_none() && r.write.is_some()));
    let chart = Chart {
        title: "kws",
        jobs: &run.jobs,
        units: &run.units,
        arena_bytes: arena as u64,
    };
    let f = figures(&chart);
    let busy = |lane| f.busy.iter().find(|(l, _)| *l == lane).unwrap().1;
    assert!(
        busy(Lane::Unit(0)) > 0 && busy(Lane::Unit(1)) > 0,
        "{:?}",
        f.busy
    );
    assert!(busy(Lane::Dma) > 0);
    assert_eq!(busy(Lane::Cpu), 0);
    // What is live at once fits the planned arena (the margin excluded), and is not nothing.
    let planned = runner::plan(model, config, Optimise::Cycles)
        .unwrap()
        .arena_bytes();
    assert!(f.occupancy.peak_bytes > 0);
    assert!(
        f.occupancy.peak_bytes <= u64::from(planned),
        "peak {} B over the planned {planned} B",
        f.occupancy.peak_bytes
    );
}
