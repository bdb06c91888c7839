//! The tensor access list of a measured invoke (`npu_sim::access_list`), on the repository's
//! models: every activation written by exactly one operator before it is read, reads that are
//! the operators' inputs, ordered timestamps, a memory peak within the arena plan's figures,
//! CPU-fallback operators covered, and typed errors for a trace that is not the graph's.

use npu_compute::model::Model;
use npu_compute::ops::{DType, OpKind, OpSet};
use npu_sim::access_list::{self, AccessError, AccessKind, AccessList, Measurement, Via};
use npu_sim::runner::{self, leak_aligned};
use npu_sim::{SimConfig, ETHOS_U55_OPS};
use std::collections::BTreeSet;
use std::path::PathBuf;

const MODELS: [&str; 4] = ["convnet", "kws_dscnn", "inception", "tiny_transformer"];

fn model(name: &str) -> &'static [u8] {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/models")
        .join(name)
        .join("model.tflite");
    leak_aligned(&std::fs::read(&path).unwrap())
}

/// Measures `name` on `config` (zero inputs: the schedule does not depend on the data).
fn measure(name: &str, config: SimConfig) -> (&'static [u8], Measurement) {
    let bytes = model(name);
    let inputs: Vec<Vec<u8>> = runner::input_sizes(bytes)
        .unwrap()
        .into_iter()
        .map(|n| vec![0; n as usize])
        .collect();
    let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
    let m = access_list::measure_unconstrained(bytes, &refs, config)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    (bytes, m)
}

fn two_units() -> SimConfig {
    SimConfig::default()
        .with_units(&npu_sim::parse_units("u55-128,u55-256").unwrap())
        .unwrap()
}

/// Every invariant the list promises, for any model and configuration.
/// `pipelined`: bands on several units may read rows of a tensor before all are written.
fn check(name: &str, bytes: &'static [u8], m: &Measurement, pipelined: bool) {
    let (list, facts) = (&m.list, &m.facts);
    let sub = Model::parse(bytes).unwrap().subgraph();
    assert_eq!(list.tensors.len(), facts.activations.len(), "{name}");
    assert!(list.start < list.end, "{name}: an empty window");
    for t in &list.tensors {
        let what = format!("{name}: tensor {}", t.tensor);
        assert!(
            sub.tensor(t.tensor).unwrap().data.is_none() || t.variable,
            "{what}: a constant"
        );
        // Timestamps: each access within the window, in time order.
        for a in &t.accesses {
            assert!(
                list.start <= a.start && a.start <= a.end && a.end <= list.end,
                "{what}: {a:?}"
            );
        }
        assert!(
            t.accesses
                .windows(2)
                .all(|w| (w[0].start, w[0].end) <= (w[1].start, w[1].end)),
            "{what}: accesses out of order"
        );
        assert_eq!(t.gaps().len(), t.accesses.len().saturating_sub(1), "{what}");
        // Written by exactly one operator (none for a model input, which its upload writes),
        // before any read.
        let writers: Vec<_> = t
            .accesses
            .iter()
            .filter(|a| a.kind == AccessKind::Write && a.op.is_some())
            .collect();
        if t.input {
            assert!(
                writers.is_empty() && t.producer.is_none(),
                "{what}: an input written"
            );
            assert!(
                t.accesses
                    .iter()
                    .any(|a| a.kind == AccessKind::Write && a.via == Via::Transfer),
                "{what}: an input never uploaded"
            );
        } else {
            assert_eq!(writers.len(), 1, "{what}: writers {writers:?}");
            assert_eq!(
                writers[0].op, t.producer,
                "{what}: the writer is not the producer"
            );
        }
        assert_eq!(
            t.accesses.first().map(|a| a.kind),
            Some(AccessKind::Write),
            "{what}"
        );
        let written = t.first_write_end().unwrap();
        let ready = if pipelined {
            t.accesses[0].start
        } else {
            written
        };
        assert!(
            t.accesses
                .iter()
                .filter(|a| a.kind == AccessKind::Read)
                .all(|a| a.start >= ready),
            "{what}: read before its write"
        );
        if t.output {
            assert!(
                t.accesses
                    .iter()
                    .any(|a| a.op.is_none() && a.kind == AccessKind::Read),
                "{what}: an output never downloaded"
            );
        }
        let (s, e) = t.live().unwrap();
        assert!(s <= written && t.last_read_end().unwrap() <= e, "{what}");
    }
    // Reads are the operators' inputs: each step reads exactly its activation operands, each
    // an input of its operator in the model.
    let activation: BTreeSet<u16> = list.tensors.iter().map(|t| t.tensor).collect();
    for (s, step) in facts.steps.iter().enumerate() {
        let want: BTreeSet<u16> = step
            .operands
            .iter()
            .flatten()
            .copied()
            .filter(|t| activation.contains(t))
            .collect();
        let got: BTreeSet<u16> = list
            .tensors
            .iter()
            .filter(|t| {
                t.accesses
                    .iter()
                    .any(|a| a.op == Some(s as u16) && a.kind == AccessKind::Read)
            })
            .map(|t| t.tensor)
            .collect();
        assert_eq!(got, want, "{name}: step {s}'s reads");
        let info = sub.operator(u32::from(facts.model_ops[s])).unwrap();
        for t in &got {
            assert!(
                info.inputs.contains(&Some(*t)),
                "{name}: step {s} reads {t}, no input"
            );
        }
        assert!(
            info.outputs.contains(&Some(step.output)),
            "{name}: step {s}'s output"
        );
        let run = list.operators[s];
        assert_eq!(
            run.jobs > 0,
            step.runs || facts.tasks.contains(&(s as u16)),
            "{name}: {s}"
        );
    }
    // The memory curve: within the pool, its peak the most bytes live at once.
    assert!(
        list.peak_bytes <= u64::from(list.arena.activation_bytes),
        "{name}"
    );
    assert_eq!(
        list.curve.iter().map(|p| p.bytes).max(),
        Some(list.peak_bytes),
        "{name}"
    );
    assert_eq!(
        list.curve.last().map(|p| p.bytes),
        Some(0),
        "{name}: bytes left live"
    );
    let at_peak: u64 = list
        .tensors
        .iter()
        .filter(|t| list.live_at_peak.contains(&t.tensor))
        .map(|t| u64::from(t.len))
        .sum();
    assert!(
        at_peak >= list.peak_bytes,
        "{name}: the tensors live at the peak cover it"
    );
    assert_eq!(
        list.other_transfers, 0,
        "{name}: transfers no tensor accounts for"
    );
}

#[test]
fn every_model_on_one_unit_peaks_at_the_whole_tensor_lower_bound() {
    for name in MODELS {
        let (bytes, m) = measure(name, SimConfig::default());
        check(name, bytes, &m, false);
        let list = &m.list;
        assert!(
            list.planned,
            "{name}: the steady invoke replays the job plan"
        );
        assert!(list.operators.iter().all(|o| o.via != Via::Cpu), "{name}");
        // On one unit the tensors live at any cycle are among those the plan counts live at
        // one step; on these models no alias lies at the peak, so the bound is met.
        assert_eq!(
            list.peak_bytes,
            u64::from(list.arena.lower_bound_bytes),
            "{name}"
        );
        let json: serde_json::Value = serde_json::from_str(&list.to_json()).unwrap();
        assert_eq!(json["peak_bytes"], list.peak_bytes);
        assert_eq!(
            json["tensors"].as_array().unwrap().len(),
            list.tensors.len()
        );
        let first = &json["tensors"][0];
        for field in [
            "tensor", "bytes", "offset", "len", "producer", "accesses", "gaps", "live",
        ] {
            assert!(first.get(field).is_some(), "{name}: {field}");
        }
        let access = &first["accesses"][0];
        for field in ["op", "kind", "start", "end", "via"] {
            assert!(access.get(field).is_some(), "{name}: {field}");
        }
    }
}

#[test]
fn bands_on_two_units_are_one_operator_each() {
    for name in MODELS {
        let (bytes, m) = measure(name, two_units());
        check(name, bytes, &m, true);
        // Every job of the trace is some operator's: the jobs the operators ran plus the
        // invoke's transfers are the trace.
        let jobs: usize = m.list.operators.iter().map(|o| usize::from(o.jobs)).sum();
        let transfers = m
            .trace
            .jobs
            .iter()
            .filter(|(e, _)| matches!(e.kind, npu_sim::TraceKind::Transfer { .. }))
            .count();
        assert_eq!(jobs + transfers, m.trace.jobs.len(), "{name}");
    }
}

#[test]
fn cpu_fallback_operators_are_listed_with_their_transfers() {
    let config = SimConfig {
        ops: ETHOS_U55_OPS
            .without(OpKind::DepthwiseConv2d, DType::I8)
            .without(OpKind::Softmax, DType::I8),
        ..SimConfig::default()
    };
    let (bytes, m) = measure("kws_dscnn", config);
    check("kws_dscnn on the CPU", bytes, &m, false);
    let cpu: Vec<_> = m
        .list
        .operators
        .iter()
        .filter(|o| o.via == Via::Cpu)
        .collect();
    assert_eq!(cpu.len(), 5, "4 depthwise convolutions and the softmax");
    assert!(cpu.iter().all(|o| o.jobs == 1 && o.start < o.end));
    // The CPU's span covers its entry and the transfers around it.
    let entries: Vec<_> = m
        .trace
        .jobs
        .iter()
        .filter(|(e, _)| matches!(e.kind, npu_sim::TraceKind::Cpu { .. }))
        .collect();
    assert_eq!(entries.len(), 5);
    for (o, (e, _)) in cpu.iter().zip(&entries) {
        assert!(o.start < e.start && e.end < o.end, "{o:?} around {e:?}");
    }
    // Every operator on the CPU, on two units as well.
    for (config, pipelined) in [(SimConfig::default(), false), (two_units(), true)] {
        let config = SimConfig {
            ops: OpSet::EMPTY,
            ..config
        };
        for name in MODELS {
            let (bytes, m) = measure(name, config);
            check(name, bytes, &m, pipelined);
            assert!(m.list.operators.iter().all(|o| o.via != Via::Npu), "{name}");
        }
    }
}

#[test]
fn the_same_run_gives_the_same_list() {
    let (_, a) = measure("inception", SimConfig::default());
    let (_, b) = measure("inception", SimConfig::default());
    assert_eq!(a.list, b.list);
}

#[test]
fn a_trace_that_is_not_the_graphs_is_refused_with_a_reason() {
    let (_, kws) = measure("kws_dscnn", SimConfig::default());
    let (_, convnet) = measure("convnet", SimConfig::default());
    // Another model's trace.
    let foreign = AccessList::build(&kws.facts, &convnet.trace.jobs, true);
    assert!(
        matches!(
            foreign,
            Err(AccessError::Unmatched { .. } | AccessError::Missing { .. })
        ),
        "{foreign:?}"
    );
    // A trace missing its last jobs.
    let jobs = &kws.trace.jobs;
    let cut = AccessList::build(&kws.facts, &jobs[..jobs.len() / 2], true);
    let Err(error) = cut else {
        panic!("a truncated trace was listed");
    };
    assert!(matches!(error, AccessError::Missing { .. }), "{error:?}");
    assert!(error.to_string().contains("incomplete"), "{error}");
    // A failed job.
    let mut failed = jobs.clone();
    failed[3].0.failure = Some(7);
    assert!(matches!(
        AccessList::build(&kws.facts, &failed, true),
        Err(AccessError::Failed { code: 7, .. })
    ));
    // Tiled chains are not whole tensors.
    let mut tiled = kws.facts.clone();
    tiled.arena.tiled_chains = 2;
    assert!(matches!(
        AccessList::build(&tiled, jobs, true),
        Err(AccessError::Tiled { chains: 2 })
    ));
    // An empty trace of a graph with steps.
    assert!(AccessList::build(&kws.facts, &[], true).is_err());
}

/// The swap candidates at the peak: live, and no access using them then. A chain of single
/// operators peaks inside one operator, its input and output both in use (kws_dscnn,
/// convnet); a branchy model holds branch outputs waiting for their concatenation
/// (inception).
#[test]
fn idle_tensors_at_the_peak_are_those_no_access_uses_then() {
    for name in MODELS {
        let (_, m) = measure(name, SimConfig::default());
        let list = &m.list;
        let idle = list.idle_at_peak();
        let at = list.peak_cycle;
        for t in list
            .tensors
            .iter()
            .filter(|t| list.live_at_peak.contains(&t.tensor))
        {
            let used = t.accesses.iter().any(|a| a.start <= at && at < a.end);
            assert_eq!(
                idle.contains(&t.tensor),
                !used,
                "{name}: tensor {}",
                t.tensor
            );
        }
        assert!(idle.iter().all(|t| list.live_at_peak.contains(t)), "{name}");
        let bytes: u64 = list
            .tensors
            .iter()
            .filter(|t| idle.contains(&t.tensor))
            .map(|t| u64::from(t.len))
            .sum();
        assert_eq!(list.idle_at_peak_bytes(), bytes, "{name}");
        assert!(
            bytes < list.peak_bytes,
            "{name}: something is in use at the peak"
        );
        let json: serde_json::Value = serde_json::from_str(&list.to_json()).unwrap();
        assert_eq!(json["idle_at_peak_bytes"], bytes, "{name}");
        match name {
            "kws_dscnn" | "convnet" => assert!(idle.is_empty(), "{name}: {idle:?}"),
            "inception" => assert!(!idle.is_empty(), "{name}"),
            _ => {}
        }
    }
}
