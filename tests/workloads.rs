//! The benchmark workloads: they compute real values deterministically, and the memory figures
//! they report relate the way the Burn-Compute study says they must.

use npu_compute::memory::{DeallocStrategy, MemoryConfig, SliceStrategy};
use npu_sim::workloads::{self, ConvNet, Workload};
use npu_sim::SimConfig;

fn config(dealloc: DeallocStrategy) -> MemoryConfig {
    MemoryConfig {
        slice: SliceStrategy::Ratio(0.8),
        dealloc,
    }
}

#[test]
fn conv_net_unfolds_with_same_padding_and_scores_deterministically() {
    let image = workloads::pseudo_random_i8(11, 32 * 32 * 3);
    let cols = workloads::im2col(&image, 32, 32, 3, 1);
    assert_eq!(cols.len(), 1024 * 27);
    // Padding SAME: the top-left output's first patch row starts with padding (zero point).
    assert!(cols[..9].iter().all(|&v| v == -5), "{:?}", &cols[..9]);
    // Centre of the patch of output (0, 0) is input pixel (0, 0).
    assert_eq!(&cols[12..15], &image[0..3]);

    let (mut device, mut host) = (
        workloads::aligned_memory(1 << 20),
        workloads::aligned_memory(256 << 10),
    );
    let channel = workloads::channel(
        &mut device,
        &mut host,
        SimConfig::default(),
        MemoryConfig::default(),
    )
    .unwrap();
    let client = npu_compute::client::ComputeClient::new(&channel);
    let net = ConvNet::new(&client).unwrap();
    let a = net.infer(&client, &image).unwrap();
    let b = net.infer(&client, &image).unwrap();
    assert_eq!(a, b, "same input, same scores");
    let c = net
        .infer(&client, &workloads::pseudo_random_i8(12, 32 * 32 * 3))
        .unwrap();
    assert_ne!(a, c, "different input, different scores");
    assert!(
        a.iter().any(|&v| v != 127 && v != -128),
        "scores are not all saturated: {a:?}"
    );
}

#[test]
fn reserved_bytes_bound_live_bytes_and_frequent_deallocation_reserves_less() {
    for workload in [Workload::ConvNet, Workload::Transformer] {
        let (never, cycles_a) =
            workloads::run(workload, config(DeallocStrategy::Never), 16).unwrap();
        let (every, _) = workloads::run(
            workload,
            config(DeallocStrategy::PeriodTick { period: 1 }),
            16,
        )
        .unwrap();
        let (again, cycles_b) =
            workloads::run(workload, config(DeallocStrategy::Never), 16).unwrap();
        assert_eq!(
            (never, cycles_a),
            (again, cycles_b),
            "{workload:?}: deterministic"
        );
        for s in [never, every] {
            assert!(s.reserved_peak >= s.in_use_peak, "{workload:?}: {s:?}");
            assert_eq!(
                s.in_use, never.in_use,
                "{workload:?}: only the weights remain live"
            );
        }
        assert_eq!(
            never.in_use_peak, every.in_use_peak,
            "{workload:?}: the trace does not depend on the strategy"
        );
        assert!(
            every.reserved_peak <= never.reserved_peak,
            "{workload:?}: {every:?} vs {never:?}"
        );
        assert_eq!(never.deallocations, 0);
        assert!(every.deallocations > 0);
    }
}
