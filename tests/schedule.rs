//! Static schedules of whole models (see `npu_compute::graph`'s schedule): every model of the
//! repository on one, two and mixed execution units, in each scheduling mode, gives TFLM's
//! bytes job by job and from its job plan; a schedule exported from one graph is followed by
//! another of the same model and units and refused by anything else; placements name units the
//! NPU has.

use npu_compute::channel::ComputeChannel;
use npu_compute::client::ComputeClient;
use npu_compute::graph::{
    Graph, GraphError, GraphTableError, Optimise, PrepareOptions, Scheduling,
};
use npu_compute::hal::{HalError, Npu};
use npu_compute::ops::{AddF32, Op};
use npu_compute::server::Placement;
use npu_compute::Error;
use npu_sim::{parse_units, runner, SimConfig};

const DEVICE: usize = 1 << 20;
const HOST: usize = 256 * 1024;
const MODELS: &[&str] = &["kws_dscnn", "convnet", "inception", "tiny_transformer"];

fn read(model: &str, file: &str) -> Vec<u8> {
    let path = format!(
        "{}/examples/models/{model}/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn config(units: &str) -> SimConfig {
    SimConfig::default()
        .with_units(&parse_units(units).unwrap())
        .unwrap()
}

/// The NPU cycles of each of three invokes (the first job by job, the others planned), after
/// checking every output against TFLM's; and the graph's schedule report.
fn run(
    model: &str,
    units: &str,
    options: PrepareOptions,
) -> (Vec<u64>, npu_compute::graph::ScheduleReport, Vec<u8>) {
    let bytes = runner::leak_aligned(&read(model, "model.tflite"));
    let input = read(model, "input_0.bin");
    let expected = read(model, "expected_tflm_0.bin");
    let mut device = vec![0u128; DEVICE / 16];
    let mut host = vec![0u128; HOST / 16];
    let channel = runner::channel(&mut device, &mut host, config(units)).unwrap();
    let client = ComputeClient::new(&channel);
    let mut graph: runner::SimGraph = Graph::prepare_with(client, bytes, options)
        .unwrap_or_else(|e| panic!("{model} on {units}: prepare: {e}"));
    client.sync().unwrap();
    let mut cycles = Vec::new();
    for invoke in 0..3 {
        let mut out = vec![0xa5; expected.len()];
        let before = channel.with(|s| s.npu().now()).unwrap();
        graph
            .invoke(&[&input], &mut [&mut out])
            .unwrap_or_else(|e| panic!("{model} on {units}: invoke {invoke}: {e}"));
        let after = channel.with(|s| s.npu().now()).unwrap();
        assert_eq!(
            out, expected,
            "{model} on {units} ({options:?}), invoke {invoke}"
        );
        cycles.push(after - before);
    }
    assert!(
        graph.job_plan().is_some(),
        "{model} on {units}: later invokes replay a job plan"
    );
    let mut table = vec![0; 64 * 1024];
    let n = graph.export_schedule(&mut table).unwrap_or(0);
    table.truncate(n);
    // Too small a buffer is refused whole, saying how much the table takes.
    if n > 0 {
        let refused = graph.export_schedule(&mut vec![0; n - 1]);
        assert!(
            matches!(
                refused,
                Err(GraphError::ScheduleTable(GraphTableError::BufferTooSmall { needed, len }))
                    if needed == n && len == n - 1
            ),
            "{refused:?}"
        );
    }
    (cycles, graph.schedule(), table)
}

fn options(scheduling: Scheduling) -> PrepareOptions {
    PrepareOptions {
        optimise: Optimise::Cycles,
        scheduling,
        ..PrepareOptions::default()
    }
}

#[test]
fn every_model_gives_tflms_bytes_in_every_mode_on_every_units() {
    for model in MODELS {
        for units in ["u55-128", "u55-128,u55-128", "u55-256,u55-128"] {
            for scheduling in [Scheduling::Static, Scheduling::Dynamic, Scheduling::OpByOp] {
                let (cycles, report, _) = run(model, units, options(scheduling));
                assert_eq!(report.planned, scheduling != Scheduling::Dynamic);
                if report.planned {
                    assert!(
                        report.predicted_cycles >= report.lower_bound.max(),
                        "{model} {units}: {report:?}"
                    );
                    assert!(report.tasks > 0);
                }
                // A planned invoke runs the same jobs as the per-job one.
                assert_eq!(cycles[1], cycles[2], "{model} {units} {scheduling:?}");
            }
        }
    }
}

#[test]
fn two_units_split_operators_and_run_faster_than_one() {
    let (one, report_one, _) = run("kws_dscnn", "u55-128", options(Scheduling::Static));
    let (two, report_two, _) = run("kws_dscnn", "u55-128,u55-128", options(Scheduling::Static));
    // One unit: the model's own order on it, nothing split.
    assert_eq!(report_one.split_operators, 0);
    assert_eq!(report_one.tasks, 12);
    assert!(report_two.split_operators > 0, "{report_two:?}");
    assert!(report_two.tasks > report_one.tasks);
    assert!(
        two[1] * 10 < one[1] * 9,
        "two units {} against one {}",
        two[1],
        one[1]
    );
}

#[test]
fn an_exported_schedule_is_followed_by_the_same_model_and_units_only() {
    let (cycles, report, table) = run("kws_dscnn", "u55-128,u55-128", options(Scheduling::Static));
    assert!(!table.is_empty());
    let table: &'static [u8] = Vec::leak(table);
    let imported = PrepareOptions {
        schedule_table: Some(table),
        ..options(Scheduling::Static)
    };
    let (again, followed, exported) = run("kws_dscnn", "u55-128,u55-128", imported);
    assert_eq!(again, cycles, "the same jobs on the same units");
    assert_eq!(followed.tasks, report.tasks);
    assert_eq!(followed.split_operators, report.split_operators);
    assert_eq!(exported, table, "exporting a followed table gives it back");

    // Other units, another model, damaged bytes: refused with a reason, nothing followed.
    let prepare = |model: &str, units: &str, table: &'static [u8]| {
        let bytes = runner::leak_aligned(&read(model, "model.tflite"));
        let mut device = vec![0u128; DEVICE / 16];
        let mut host = vec![0u128; HOST / 16];
        let channel = runner::channel(&mut device, &mut host, config(units)).unwrap();
        let client = ComputeClient::new(&channel);
        let options = PrepareOptions {
            schedule_table: Some(table),
            ..options(Scheduling::Static)
        };
        Graph::<_, 64, 128>::prepare_with(client, bytes, options).err()
    };
    for (model, units) in [
        ("kws_dscnn", "u55-256,u55-128"),
        ("convnet", "u55-128,u55-128"),
    ] {
        let e = prepare(model, units, table).expect("refused");
        assert!(
            matches!(
                e,
                GraphError::ScheduleTable(GraphTableError::OtherModel { .. })
            ),
            "{e:?}"
        );
        assert!(e.to_string().contains("npu-sim plan MODEL --schedule FILE"));
    }
    for at in [0, 5, 9, 17, 25, table.len() - 1] {
        let mut damaged = table.to_vec();
        damaged[at] ^= 0x40;
        let e = prepare("kws_dscnn", "u55-128,u55-128", Vec::leak(damaged)).expect("refused");
        assert!(
            matches!(e, GraphError::ScheduleTable(_)),
            "byte {at}: {e:?}"
        );
    }
    for len in [0, 10, 30, table.len() - 1] {
        let e = prepare("kws_dscnn", "u55-128,u55-128", &table[..len]).expect("refused");
        assert!(
            matches!(e, GraphError::ScheduleTable(_)),
            "{len} bytes: {e:?}"
        );
    }
}

#[test]
fn placements_name_units_the_npu_has() {
    let mut device = vec![0u128; DEVICE / 16];
    let mut host = vec![0u128; HOST / 16];
    let channel = runner::channel(&mut device, &mut host, config("u55-128,u55-256")).unwrap();
    let client = ComputeClient::new(&channel);
    let x = client.create_f32(&[1.0, 2.0]).unwrap();
    let y = client.empty(8).unwrap();
    let add = Op::AddF32(AddF32 { len: 2 });
    for placement in [
        Placement::Auto,
        Placement::Unit(0),
        Placement::Unit(1),
        Placement::Cpu,
    ] {
        client.execute_on(placement, &add, &[&x, &x], &y).unwrap();
        let mut out = [0f32; 2];
        client.read_f32(&y, &mut out).unwrap();
        assert_eq!(out, [2.0, 4.0], "{placement:?}");
    }
    assert!(matches!(
        client.execute_on(Placement::Unit(2), &add, &[&x, &x], &y),
        Err(Error::Hal(HalError::NoSuchUnit { unit: 2, units: 2 }))
    ));
    // Estimates: the faster unit is predicted faster; the CPU has its own figure.
    let on = |p| client.estimate(p, &add, &[&x, &x], &y).unwrap().unwrap();
    assert!(on(Placement::Unit(1)).cycles <= on(Placement::Unit(0)).cycles);
    assert!(on(Placement::Cpu).cycles > 0);
    assert_eq!(client.execution_unit(1).unwrap().name, "u55-256");
    assert_eq!(client.execution_unit(1).unwrap().macs_per_cycle, 256);
}

/// The firmware's `kws_schedule.bin` is a table this build follows: made again with `npu-sim
/// plan ../models/kws_dscnn/model.tflite --schedule kws_schedule.bin` (from
/// `examples/firmware`) whenever the table's layout, the model or the simulator's units change.
#[test]
fn the_firmware_schedule_table_is_current() {
    let table = std::fs::read(format!(
        "{}/examples/firmware/kws_schedule.bin",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let options = PrepareOptions {
        schedule_table: Some(Vec::leak(table)),
        ..options(Scheduling::Static)
    };
    let (_, report, _) = run("kws_dscnn", "u55-128", options);
    assert!(report.planned);
    assert_eq!(report.tasks, 12);
}
