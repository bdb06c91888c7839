//! Residency and pinned host buffers: transfers happen only when a job or a read needs the
//! bytes, never twice, and never through a staging copy for pinned tensors.

use npu_compute::channel::{ComputeChannel, RefCellChannel};
use npu_compute::client::ComputeClient;
use npu_compute::hal::Npu;
use npu_compute::memory::MemoryConfig;
use npu_compute::ops::{Op, ReluF32};
use npu_compute::server::{NpuServer, Residency, ServerStats};
use npu_compute::Error;
use npu_sim::{AlignedMemory, SimConfig, SimNpu};

type Server = NpuServer<SimNpu<'static>>;

fn memory<const N: usize>() -> &'static mut [u8] {
    Box::leak(Box::new(AlignedMemory::<N>::new())).as_mut_slice()
}

fn channel() -> RefCellChannel<Server> {
    let npu = SimNpu::new(memory::<65536>(), memory::<16384>(), SimConfig::default()).unwrap();
    RefCellChannel::new(NpuServer::new(npu, MemoryConfig::default()).unwrap())
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Counter differences: (uploads, downloads, device copies, staging copy bytes).
fn moved(before: ServerStats, after: ServerStats) -> (u32, u32, u32, u64) {
    (
        after.uploads - before.uploads,
        after.downloads - before.downloads,
        after.device_copies - before.device_copies,
        after.staging_copy_bytes - before.staging_copy_bytes,
    )
}

const RELU: Op = Op::ReluF32(ReluF32 { len: 4 });

#[test]
fn a_pinned_input_is_uploaded_once_and_only_when_a_job_needs_it() {
    let channel = channel();
    let client = ComputeClient::new(&channel);
    let reserved = client.memory_stats().unwrap().reserved;
    let x = client.pinned(16).unwrap();
    client
        .host_mut(&x, |b| {
            b.copy_from_slice(&f32_bytes(&[-1.0, 2.0, -3.0, 4.0]))
        })
        .unwrap();
    let start = client.stats().unwrap();
    assert_eq!(client.residency(&x).unwrap(), Residency::Host);
    assert_eq!(
        client.memory_stats().unwrap().reserved,
        reserved,
        "no device memory before a job uses it"
    );
    assert_eq!(moved(start, client.stats().unwrap()), (0, 0, 0, 0));

    let (y, z) = (client.empty(16).unwrap(), client.empty(16).unwrap());
    client.execute(RELU, &[&x], &y).unwrap();
    assert_eq!(client.residency(&x).unwrap(), Residency::Both);
    client.execute(RELU, &[&x], &z).unwrap();
    assert_eq!(
        moved(start, client.stats().unwrap()),
        (1, 0, 0, 0),
        "one upload, from the pinned block"
    );

    // A new host write makes the device copy stale: the next job uploads again.
    client
        .host_mut(&x, |b| {
            b.copy_from_slice(&f32_bytes(&[5.0, -6.0, 7.0, -8.0]))
        })
        .unwrap();
    assert_eq!(client.residency(&x).unwrap(), Residency::Host);
    client.execute(RELU, &[&x], &z).unwrap();
    assert_eq!(moved(start, client.stats().unwrap()), (2, 0, 0, 0));
    let mut out = [0.0f32; 4];
    client.read_f32(&y, &mut out).unwrap();
    assert_eq!(out, [0.0, 2.0, 0.0, 4.0]);
    client.read_f32(&z, &mut out).unwrap();
    assert_eq!(out, [5.0, 0.0, 7.0, 0.0]);
}

#[test]
fn a_pinned_output_stays_on_the_device_until_read_and_is_downloaded_once() {
    let channel = channel();
    let client = ComputeClient::new(&channel);
    let x = client.create(&f32_bytes(&[-1.0, 2.0, -3.0, 4.0])).unwrap();
    let y = client.pinned(16).unwrap();
    let start = client.stats().unwrap();
    client.execute(RELU, &[&x], &y).unwrap();
    assert_eq!(client.residency(&y).unwrap(), Residency::Device);
    assert_eq!(moved(start, client.stats().unwrap()), (0, 0, 0, 0));
    let want = f32_bytes(&[0.0, 2.0, 0.0, 4.0]);
    for _ in 0..3 {
        assert_eq!(client.host_ref(&y, |b| b.to_vec()).unwrap(), want);
    }
    let mut out = [0u8; 16];
    client.read(&y, &mut out).unwrap();
    assert_eq!(out.to_vec(), want);
    assert_eq!(
        moved(start, client.stats().unwrap()),
        (0, 1, 0, 0),
        "one download, into the pinned block"
    );
    assert_eq!(client.residency(&y).unwrap(), Residency::Both);
}

#[test]
fn try_host_ref_never_waits() {
    let channel = channel();
    let client = ComputeClient::new(&channel);
    let x = client.create(&f32_bytes(&[-1.0, 2.0, -3.0, 4.0])).unwrap();
    let y = client.pinned(16).unwrap();
    client.execute(RELU, &[&x], &y).unwrap();
    let waits = client.stats().unwrap().waits;
    let t0 = channel.with(|s| s.npu().now()).unwrap();
    assert_eq!(
        client.try_host_ref(&y, |b| b.to_vec()),
        Err(nb::Error::WouldBlock)
    );
    assert_eq!(client.stats().unwrap().waits, waits);
    assert_eq!(
        channel.with(|s| s.npu().now()).unwrap(),
        t0,
        "no virtual time passed"
    );
    let got = loop {
        match client.try_host_ref(&y, |b| b.to_vec()) {
            Ok(bytes) => break bytes,
            Err(nb::Error::WouldBlock) => channel.with(|s| s.npu_mut().wait_for_event()).unwrap(),
            Err(nb::Error::Other(e)) => panic!("{e}"),
        }
    };
    assert_eq!(got, f32_bytes(&[0.0, 2.0, 0.0, 4.0]));
    assert_eq!(client.stats().unwrap().downloads, 1);
}

#[test]
fn writing_a_pinned_block_waits_for_the_upload_still_reading_it() {
    let channel = channel();
    let client = ComputeClient::new(&channel);
    let x = client.pinned(16).unwrap();
    client
        .write(&x, &f32_bytes(&[1.0, -2.0, 3.0, -4.0]))
        .unwrap();
    let y = client.empty(16).unwrap();
    // The upload is queued, not done (no virtual time has passed); overwriting the block now
    // would change what it sends.
    client.execute(RELU, &[&x], &y).unwrap();
    client.write(&x, &f32_bytes(&[9.0; 4])).unwrap();
    let z = client.empty(16).unwrap();
    client.execute(RELU, &[&x], &z).unwrap();
    let mut out = [0.0f32; 4];
    client.read_f32(&y, &mut out).unwrap();
    assert_eq!(out, [1.0, 0.0, 3.0, 0.0]);
    client.read_f32(&z, &mut out).unwrap();
    assert_eq!(out, [9.0; 4]);
    assert_eq!(
        client.stats().unwrap().staging_copy_bytes,
        16 * 2,
        "only the two reads"
    );
}

#[test]
fn copies_go_device_to_device_or_straight_through_pinned_blocks() {
    let channel = channel();
    let client = ComputeClient::new(&channel);
    let bytes = f32_bytes(&[1.0, 2.0, 3.0, 4.0]);
    let a = client.create(&bytes).unwrap();
    let b = client.empty(16).unwrap();
    let start = client.stats().unwrap();
    client.copy(&a, &b).unwrap();
    assert_eq!(moved(start, client.stats().unwrap()), (0, 0, 1, 0));

    // Device to a pinned buffer without device memory: a download into its block.
    let p = client.pinned(16).unwrap();
    client.copy(&b, &p).unwrap();
    assert_eq!(client.residency(&p).unwrap(), Residency::Host);
    assert_eq!(moved(start, client.stats().unwrap()), (0, 1, 1, 0));
    // Pinned to pinned: the CPU copies, nothing moves on the bus.
    let q = client.pinned(16).unwrap();
    client.copy(&p, &q).unwrap();
    // Pinned to device: an upload straight from the block.
    let c = client.empty(16).unwrap();
    client.copy(&q, &c).unwrap();
    assert_eq!(moved(start, client.stats().unwrap()), (1, 1, 1, 0));
    let mut out = [0u8; 16];
    client.read(&c, &mut out).unwrap();
    assert_eq!(out.to_vec(), bytes);
    assert_eq!(client.host_ref(&q, |b| b.to_vec()).unwrap(), bytes);

    let small = client.empty(8).unwrap();
    assert!(matches!(
        client.copy(&a, &small),
        Err(Error::SizeMismatch {
            expected: 8,
            actual: 16
        })
    ));
}

#[test]
fn host_access_to_a_tensor_without_a_pinned_block_is_an_error() {
    let channel = channel();
    let client = ComputeClient::new(&channel);
    let a = client.empty(16).unwrap();
    assert_eq!(client.host_mut(&a, |_| ()), Err(Error::NotPinned));
    assert_eq!(client.host_ref(&a, |_| ()), Err(Error::NotPinned));
    assert_eq!(client.residency(&a).unwrap(), Residency::Device);
}

#[test]
fn pinned_blocks_are_returned_when_their_tensor_is_dropped() {
    let channel = channel();
    let client = ComputeClient::new(&channel);
    // Host memory is 16 KiB: 100 pinned buffers of 4 KiB fit only if each is given back.
    for k in 0..100u8 {
        let x = client.pinned(4096).unwrap();
        client.host_mut(&x, |b| b.fill(k)).unwrap();
        let y = client.empty(4096).unwrap();
        client.copy(&x, &y).unwrap();
        drop(x);
    }
    client.sync().unwrap();
    assert!(matches!(
        client.pinned(1 << 20),
        Err(Error::StagingExhausted { .. })
    ));
}

/// Constant data aligned as the simulator maps flash.
#[repr(align(16))]
struct Aligned([f32; 4]);
static CONSTANT: Aligned = Aligned([1.0, -2.0, 3.0, -4.0]);

#[test]
fn constants_are_read_only_wherever_their_bytes_live() {
    let channel = channel();
    let client = ComputeClient::new(&channel);
    let data: &'static [u8] = bytemuck::cast_slice(&CONSTANT.0);
    // Uploaded (no flash segment holds the data), computed at load time, and in flash.
    let uploaded = client.create_const(data).unwrap();
    let computed = client
        .create_const_with(16, |b| {
            b.copy_from_slice(data);
            Ok(())
        })
        .unwrap();
    let segment = client.map_flash(data).unwrap();
    let in_flash = client.create_const(data).unwrap();
    assert!(!client.is_in_flash(&uploaded).unwrap());
    assert!(client.is_in_flash(&in_flash).unwrap());
    let scratch = client.create(data).unwrap();
    for c in [&uploaded, &computed, &in_flash] {
        assert_eq!(
            client.execute(RELU, &[&scratch], c),
            Err(Error::ReadOnlyTensor)
        );
        assert_eq!(client.write(c, &[0; 16]), Err(Error::ReadOnlyTensor));
        assert_eq!(client.copy(&scratch, c), Err(Error::ReadOnlyTensor));
        assert!(matches!(client.place(c, 0, 4), Err(Error::ReadOnlyTensor)));
        // Read, they are what they were made with.
        let out = client.empty(16).unwrap();
        client.execute(RELU, &[c], &out).unwrap();
        let mut got = [0u8; 16];
        client.read(&out, &mut got).unwrap();
        assert_eq!(got.to_vec(), f32_bytes(&[1.0, 0.0, 3.0, 0.0]));
    }
    drop(in_flash);
    client.unmap_flash(segment).unwrap();
}

#[test]
fn the_server_reports_the_capacities_a_run_needed() {
    let channel = channel();
    let client = ComputeClient::new(&channel);
    let none = client.stats().unwrap();
    assert_eq!(
        (
            none.handles_peak,
            none.staging_blocks_peak,
            none.staging_bytes_peak,
            none.staging_largest_bytes
        ),
        (0, 0, 0, 0)
    );
    {
        // Three tensors at once, each created through its own staging block.
        let a = client.create(&[1; 40]).unwrap();
        let b = client.create(&[2; 40]).unwrap();
        let c = client.empty(16).unwrap();
        client.sync().unwrap();
        drop((a, b, c));
    }
    let one = client.empty(16).unwrap();
    let pinned = client.pinned(100).unwrap();
    let stats = client.stats().unwrap();
    assert_eq!(stats.handles_peak, 3, "two live now, three at the peak");
    // The two creates' blocks (48 bytes each at alignment 16) were pending together until
    // `sync`; the pinned block then took the freed space from offset 0 and reached byte 112.
    assert_eq!(stats.staging_blocks_peak, 2, "{stats:?}");
    assert_eq!(stats.staging_bytes_peak, 112, "{stats:?}");
    assert_eq!(
        stats.staging_largest_bytes, 112,
        "the pinned block, 100 bytes rounded up"
    );
    drop((one, pinned));
    // Peaks stay when tensors go.
    assert_eq!(client.stats().unwrap().handles_peak, 3);
}

#[test]
fn a_pinned_tensor_is_not_a_pool() {
    // Found by the client_api fuzz target: a tensor placed in a pinned tensor's device memory
    // was written, then a failed placement in the same pool uploaded the pool's host block
    // over it (its residency said Host), and the write was lost.
    let channel = channel();
    let client = ComputeClient::new(&channel);
    let pool = client.pinned(64).unwrap();
    client.host_mut(&pool, |b| b.fill(7)).unwrap();
    let before = client.stats().unwrap();
    assert_eq!(client.place(&pool, 0, 16).err(), Some(Error::PinnedPool));
    assert_eq!(client.place(&pool, 8, 16).err(), Some(Error::PinnedPool));
    // Refused before anything moved: no upload, no device memory, the host block newest.
    assert_eq!(moved(before, client.stats().unwrap()), (0, 0, 0, 0));
    assert_eq!(client.memory_stats().unwrap().in_use, 0);
    assert_eq!(client.residency(&pool).unwrap(), Residency::Host);
    assert_eq!(client.host_ref(&pool, |b| b.to_vec()).unwrap(), vec![7; 64]);
    assert_eq!(channel.with(|s| s.live_tensors()).unwrap(), 1);
}
