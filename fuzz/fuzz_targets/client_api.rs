//! Fuzz target: random sequences of client calls on a small simulated NPU, with the server's
//! invariants checked after every call.
//!
//! The input bytes are read as a program: each step takes an opcode byte and a few argument
//! bytes (a read past the end gives zeros, so every input is a valid program). The steps are
//! the client's whole surface: `create`, `empty`, `write`, `execute` (elementwise, copy and
//! fully connected ops, with operands of right and wrong sizes, aliased, and released), `read`,
//! `try_read`, drop, clone, `place` into a pool, `pinned` tensors and their host blocks,
//! `copy`, job plans (built, run, dropped), `sync`, mapping and unmapping flash with constants
//! in it, moving the simulator's clock and its interrupt, and injected job faults.
//!
//! The machine is small (2 KiB arena, 768 bytes of staging memory, 8 handles, 16 chunks, 4
//! staging blocks, 8 jobs in flight), so every limit is hit often.
//!
//! After every step the target checks, through the server's public inspection
//! (`NpuServer::for_each_tensor`, `staging_use`, `memory_stats`):
//!
//! - the live tensors are exactly those the model holds, each with the references the model
//!   expects (handles held, tensors placed inside it, job plans using it);
//! - no two tensors with memory of their own overlap, every device range lies inside the
//!   arena, a placed tensor inside its pool, and host blocks (pinned, started reads) are
//!   disjoint and inside host memory;
//! - the memory manager's bytes in use are the sum of those tensors' sizes;
//! - after `sync`, no staging block waits for a transfer and the blocks allocated are the
//!   pinned tensors' and the started reads';
//! - a call either succeeds or returns an error (no panic); a call with a defect the model
//!   sees (wrong sizes, aliasing, a released handle, a read-only output) is refused with an
//!   error naming one of them;
//! - a read returns what the model expects: the bytes written, or a CPU reference of the op
//!   that produced them.
//!
//! Injected faults (a hardware fault on a job to come: DMA, bus, hang, overrun, spurious or
//! lost interrupt; or a job failing with a code) make jobs fail, and the server recover: from
//! the injection until a `sync` after a hardware fault was decided (to the end of the run for
//! a failure with a code, which the simulator does not report when it strikes), every tensor
//! a call changes is "suspect": its reads may fail (the fault, or `ContentsLost`), its bytes
//! are unknown, until it is rewritten with no fault pending. At the end everything is dropped
//! and the server must be empty: no tensor, no byte in use, no
//! staging block.

#![no_main]

use std::collections::HashMap;

use libfuzzer_sys::fuzz_target;
use npu_compute::channel::{ComputeChannel, RefCellChannel};
use npu_compute::client::{ComputeClient, JobPlan, Tensor};
use npu_compute::hal::{Region, Space};
use npu_compute::handle::HandleId;
use npu_compute::memory::{ChunkSliceMemory, MemoryConfig};
use npu_compute::ops::{AddF32, FullyConnectedF32, MulF32, NegF32, Op, ReluF32, Reshape};
use npu_compute::server::{ComputeServer, LiveTensor, NpuServer, WatchdogConfig};
use npu_compute::Error;
use npu_kernels::FcShape;
use npu_sim::{FaultKind, FaultPlan, FaultRule, SimConfig, SimNpu};

const DEVICE_BYTES: usize = 2048;
const HOST_BYTES: usize = 768;
const ALIGN: u32 = 16;
const HANDLES: usize = 8;

type Npu<'a> = SimNpu<'a, 8>;
type Server<'a> = NpuServer<Npu<'a>, ChunkSliceMemory<16>, HANDLES, 4>;
type Chan<'a> = RefCellChannel<Server<'a>, HANDLES>;
type T<'c, 'a> = Tensor<'c, Chan<'a>>;
type Plan<'c, 'a> = JobPlan<'c, Chan<'a>, 4, 8>;

/// Constant data standing in for a model in flash.
#[repr(C, align(16))]
struct Flash([u8; 256]);

static FLASH: Flash = Flash({
    let mut b = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        b[i] = (i as u8).wrapping_mul(37).wrapping_add(11);
        i += 1;
    }
    b
});

/// Whether to print each step (set `CLIENT_API_TRACE` to replay a crash with a trace).
fn tracing() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("CLIENT_API_TRACE").is_some())
}

macro_rules! trace {
    ($($arg:tt)*) => {
        if tracing() {
            eprintln!($($arg)*);
        }
    };
}

fuzz_target!(|data: &[u8]| {
    let mut device = vec![0u128; DEVICE_BYTES / 16];
    let mut host = vec![0u128; HOST_BYTES / 16];
    let npu: Npu = SimNpu::with_job_capacity(
        bytemuck::cast_slice_mut(&mut device),
        bytemuck::cast_slice_mut(&mut host),
        SimConfig::default(),
    )
    .expect("simulator");
    // The watchdog on, so that an injected hang ends as a fault rather than a wait for ever.
    let server: Server = NpuServer::new(npu, MemoryConfig::default())
        .expect("server")
        .with_watchdog(WatchdogConfig::ON);
    let channel: Chan = RefCellChannel::new(server);
    let mut f = Fuzz::new(&channel, data);
    while !f.input.is_empty() {
        f.step();
        f.check();
    }
    f.finish();
});

/// The input, read as a program.
struct Input<'d>(&'d [u8]);

impl Input<'_> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    /// An index below `n` (0 when `n` is 0).
    fn pick(&mut self, n: usize) -> usize {
        let b = usize::from(self.u8());
        if n == 0 {
            0
        } else {
            b % n
        }
    }
    /// A tensor size: mostly small multiples of 4, sometimes odd, empty or too big.
    fn size(&mut self) -> u32 {
        const SIZES: [u32; 16] = [
            4, 8, 16, 16, 32, 32, 64, 64, 128, 256, 12, 20, 0, 3, 1024, 4096,
        ];
        SIZES[self.pick(SIZES.len())]
    }
}

/// What the model knows of one live tensor.
#[derive(Clone, Debug)]
struct Info {
    bytes: u32,
    /// Its bytes, when the model knows them.
    contents: Option<Vec<u8>>,
    /// Changed while an injected fault could strike: its reads may fail.
    suspect: bool,
    /// The pool it is placed in.
    pool: Option<HandleId>,
    pinned: bool,
    constant: bool,
}

/// A job plan and what it was built with.
struct PlanModel<'c, 'a> {
    plan: Plan<'c, 'a>,
    ops: Vec<Op>,
    /// Each step's inputs and output.
    steps: Vec<(Vec<HandleId>, HandleId)>,
}

struct Fuzz<'c, 'a, 'd> {
    client: ComputeClient<'c, Chan<'a>>,
    channel: &'c Chan<'a>,
    input: Input<'d>,
    held: Vec<T<'c, 'a>>,
    info: HashMap<HandleId, Info>,
    /// Ids whose tensors are gone.
    dead: Vec<HandleId>,
    plans: Vec<PlanModel<'c, 'a>>,
    flash_segments: Vec<u8>,
    /// A fault was injected and has not been followed by a `sync` after it struck.
    fault_window: bool,
    /// The simulator's count of hardware faults decided when the last one was injected, while
    /// it may still strike: the window closes at a `sync` after the count passed it.
    hardware_pending: Option<u64>,
    /// A job failure (with a code) was injected: the simulator does not tell when it struck,
    /// so the window stays open to the end of the run.
    code_armed: bool,
    /// The last step was a `sync` that closed every transfer.
    synced: bool,
}

/// The class of an error, to compare with what the model expects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    BadOperands,
    Aliases,
    Stale,
    ReadOnly,
    Size,
    NotPinned,
}

fn class(e: &Error) -> Option<Class> {
    Some(match e {
        // Wrong sizes, a wrong count of inputs, sizes past u32: one class of defect.
        Error::BadOperands { .. } | Error::OperandCount { .. } | Error::OperandTooLarge { .. } => {
            Class::BadOperands
        }
        Error::OutputAliasesInput { .. } => Class::Aliases,
        Error::StaleHandle { .. } => Class::Stale,
        Error::ReadOnlyTensor => Class::ReadOnly,
        Error::SizeMismatch { .. } => Class::Size,
        Error::NotPinned => Class::NotPinned,
        _ => return None,
    })
}

/// Errors any call may meet on a small machine: a fixed resource is exhausted.
fn is_resource(e: &Error) -> bool {
    matches!(
        e,
        Error::OutOfMemory { .. } | Error::StagingExhausted { .. } | Error::CapacityExceeded { .. }
    )
}

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn bytes_of(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Whether two byte strings hold the same f32 values (NaN equals NaN, -0 equals +0) or, when
/// not a whole number of f32s, the same bytes.
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    if a.len() % 4 != 0 {
        return a == b;
    }
    f32s(a)
        .iter()
        .zip(f32s(b))
        .all(|(x, y)| x == &y || (x.is_nan() && y.is_nan()))
}

/// The CPU reference of `op` on `inputs`, or `None` where the model does not predict it
/// (values so large that the order of a sum matters, NaNs whose sign a kernel may choose).
fn reference(op: &Op, inputs: &[&[u8]]) -> Option<Vec<u8>> {
    let small = |b: &[u8]| f32s(b).iter().all(|x| x.abs() <= 1024.0);
    let finite = |b: &[u8]| f32s(b).iter().all(|x| x.is_finite());
    let v = |k: usize| f32s(inputs[k]);
    // TFLM's float ADD and MUL with no fused activation clamp to the finite range: an
    // infinity (an input's, or an overflow's) comes out as ±f32::MAX; a NaN stays one.
    let finite_range = |x: f32| x.clamp(f32::MIN, f32::MAX);
    Some(match op {
        Op::AddF32(_) => bytes_of(
            &v(0)
                .iter()
                .zip(v(1))
                .map(|(a, b)| finite_range(a + b))
                .collect::<Vec<_>>(),
        ),
        Op::MulF32(_) => bytes_of(
            &v(0)
                .iter()
                .zip(v(1))
                .map(|(a, b)| finite_range(a * b))
                .collect::<Vec<_>>(),
        ),
        Op::NegF32(_) => bytes_of(&v(0).iter().map(|a| -a).collect::<Vec<_>>()),
        Op::ReluF32(_) => {
            if !finite(inputs[0]) {
                return None;
            }
            bytes_of(&v(0).iter().map(|a| a.max(0.0)).collect::<Vec<_>>())
        }
        Op::Reshape(_) => inputs[0].to_vec(),
        Op::FullyConnectedF32(fc) => {
            if !small(inputs[0]) || !small(inputs[1]) {
                return None;
            }
            let s = fc.shape;
            let (x, w) = (v(0), v(1));
            let (b, i, o) = (
                s.batches as usize,
                s.in_features as usize,
                s.out_features as usize,
            );
            // The optional third input is the bias, added after the sum (as the kernel does).
            let bias = if inputs.len() > 2 {
                if !small(inputs[2]) {
                    return None;
                }
                v(2)
            } else {
                vec![0.0; o]
            };
            let mut out = vec![0.0f32; b * o];
            for r in 0..b {
                for c in 0..o {
                    let sum: f32 = (0..i).map(|k| x[r * i + k] * w[c * i + k]).sum();
                    out[r * o + c] = sum + bias[c];
                }
            }
            bytes_of(&out)
        }
        _ => return None,
    })
}

fn overlaps(a: Region, b: Region) -> bool {
    a.space == b.space
        && a.len > 0
        && b.len > 0
        && a.offset < b.offset + b.len
        && b.offset < a.offset + a.len
}

fn round(bytes: u32) -> u32 {
    bytes.max(1).div_ceil(ALIGN) * ALIGN
}

impl<'c, 'a, 'd> Fuzz<'c, 'a, 'd> {
    fn new(channel: &'c Chan<'a>, data: &'d [u8]) -> Self {
        Fuzz {
            client: ComputeClient::new(channel),
            channel,
            input: Input(data),
            held: Vec::new(),
            info: HashMap::new(),
            dead: Vec::new(),
            plans: Vec::new(),
            flash_segments: Vec::new(),
            fault_window: false,
            hardware_pending: None,
            code_armed: false,
            synced: false,
        }
    }

    fn server<R>(&self, f: impl FnOnce(&mut Server<'a>) -> R) -> R {
        self.channel.with(f).expect("channel free between steps")
    }

    /// Contents made from the input: small integers as f32 (exact under the ops' arithmetic)
    /// when a whole number of f32s, else raw bytes.
    fn contents(&mut self, bytes: u32) -> Vec<u8> {
        let seed = self.input.u8();
        let step = self.input.u8() | 1;
        if bytes % 4 == 0 {
            let v: Vec<f32> = (0..bytes / 4)
                .map(|k| f32::from((seed.wrapping_add(step.wrapping_mul(k as u8))) as i8))
                .collect();
            bytes_of(&v)
        } else {
            (0..bytes)
                .map(|k| seed ^ (k as u8).wrapping_mul(step))
                .collect()
        }
    }

    /// A new tensor's model, after a call that made it.
    fn adopt(&mut self, t: T<'c, 'a>, info: Info) {
        let id = t.id();
        assert!(
            !self.info.contains_key(&id),
            "a new tensor {id:?} has the id of a live one"
        );
        assert!(
            !self.dead.contains(&id),
            "a new tensor reuses a dead id {id:?}"
        );
        trace!("  new {id:?}: {info:?}");
        self.info.insert(id, info);
        self.held.push(t);
    }

    /// References the model expects on `id`.
    fn expected_refs(&self, id: HandleId) -> u32 {
        let handles = self.held.iter().filter(|t| t.id() == id).count();
        let children = self.info.values().filter(|i| i.pool == Some(id)).count();
        let plans = self
            .plans
            .iter()
            .filter(|p| p.plan.jobs().tensor_ids().any(|t| t == id))
            .count();
        (handles + children + plans) as u32
    }

    /// Forgets tensors nothing refers to any more (a pool goes with its last placed tensor).
    fn collect(&mut self) {
        loop {
            let gone: Vec<HandleId> = self
                .info
                .keys()
                .copied()
                .filter(|&id| self.expected_refs(id) == 0)
                .collect();
            if gone.is_empty() {
                return;
            }
            for id in gone {
                self.info.remove(&id);
                self.dead.push(id);
            }
        }
    }

    /// The live tensors, as the server reports them.
    fn live(&self) -> Vec<LiveTensor> {
        let mut v = Vec::new();
        self.server(|s| s.for_each_tensor(|t| v.push(t)))
            .expect("every live tensor's memory is live");
        v
    }

    /// `id` changed (a write, a job's output): its model becomes `contents`, and every other
    /// tensor over the same device bytes (a pool and the tensors placed in it) unknown. Jobs
    /// on two placements over the same bytes are ordered only at placement (see
    /// `MemoryManagement::place`), so a placement over another becomes unknown itself too.
    ///
    /// `done` says the call that changed it succeeded: its bytes are then known again (unless
    /// a fault may strike), where a failed call leaves a tensor whose bytes were lost lost.
    fn changed(&mut self, id: HandleId, contents: Option<Vec<u8>>, done: bool) {
        let live = self.live();
        let placed = |info: &HashMap<HandleId, Info>, id| {
            info.get(&id).is_some_and(|i: &Info| i.pool.is_some())
        };
        let mut unordered = false;
        if let Some(region) = live.iter().find(|t| t.id == id).and_then(|t| t.device) {
            for t in &live {
                if t.id != id && t.device.is_some_and(|r| overlaps(r, region)) {
                    unordered |= placed(&self.info, id) && placed(&self.info, t.id);
                    if let Some(i) = self.info.get_mut(&t.id) {
                        i.contents = None;
                        i.suspect |= self.fault_window;
                    }
                }
            }
        }
        let window = self.fault_window;
        trace!("  changed {id:?}: {contents:?} (fault window {window}, unordered {unordered})");
        if let Some(i) = self.info.get_mut(&id) {
            i.contents = if window || unordered { None } else { contents };
            // Rewritten with no fault pending, its bytes are known again.
            i.suspect = window || (i.suspect && !done);
        }
    }

    /// An id for an operand: mostly a held tensor's, sometimes a released one's.
    fn operand(&mut self, want: u32) -> Option<HandleId> {
        let how = self.input.u8();
        if how % 8 == 7 && !self.dead.is_empty() {
            let k = self.input.pick(self.dead.len());
            return Some(self.dead[k]);
        }
        if how % 8 < 5 {
            // A held tensor of the wanted size, if there is one.
            let fits: Vec<HandleId> = self
                .held
                .iter()
                .map(|t| t.id())
                .filter(|id| self.info[id].bytes == want)
                .collect();
            if !fits.is_empty() {
                let k = self.input.pick(fits.len());
                return Some(fits[k]);
            }
        }
        if self.held.is_empty() {
            return None;
        }
        let k = self.input.pick(self.held.len());
        Some(self.held[k].id())
    }

    /// An op whose output has `out` bytes (or, sometimes, a wrong or overflowing size).
    fn op(&mut self, out: u32) -> Op {
        let kind = self.input.u8();
        let skew = self.input.u8();
        let len = match skew % 16 {
            0 => u32::MAX,
            1 => out / 4 + 1,
            _ => out / 4,
        };
        match kind % 6 {
            0 => Op::AddF32(AddF32 { len }),
            1 => Op::MulF32(MulF32 { len }),
            2 => Op::ReluF32(ReluF32 { len }),
            3 => Op::NegF32(NegF32 { len }),
            4 => Op::Reshape(Reshape {
                len: if skew % 16 == 0 { u32::MAX } else { out },
            }),
            _ => Op::FullyConnectedF32(FullyConnectedF32 {
                shape: FcShape {
                    batches: 1 + u32::from(skew >> 6),
                    in_features: 1 + u32::from(kind >> 5),
                    out_features: len.max(1) / (1 + u32::from(skew >> 6)),
                },
            }),
        }
    }

    /// What the model sees wrong with `op` on `inputs` into `output`.
    fn defects(&self, op: &Op, inputs: &[HandleId], output: HandleId) -> Vec<Class> {
        let mut d = Vec::new();
        let Some(need) = op.operands() else {
            return vec![Class::BadOperands];
        };
        if !need.accepts(inputs.len()) {
            d.push(Class::BadOperands);
        }
        for (k, id) in inputs.iter().enumerate() {
            if *id == output {
                d.push(Class::Aliases);
            }
            match self.info.get(id) {
                None => d.push(Class::Stale),
                Some(i) if need.inputs.get(k) != Some(&i.bytes) => d.push(Class::BadOperands),
                _ => {}
            }
        }
        match self.info.get(&output) {
            None => d.push(Class::Stale),
            Some(i) => {
                if i.constant {
                    d.push(Class::ReadOnly);
                }
                if i.bytes != need.output {
                    d.push(Class::BadOperands);
                }
            }
        }
        d
    }

    /// Checks a call's outcome against the defects the model sees: refused with one of them,
    /// or, without any, accepted unless a resource ran out (or a fault struck).
    fn expect(&self, what: &str, r: &Result<(), Error>, defects: &[Class]) -> bool {
        match r {
            Ok(()) => {
                assert!(defects.is_empty(), "{what}: accepted despite {defects:?}");
                true
            }
            Err(e) => {
                if !defects.is_empty() {
                    assert!(
                        class(e).is_some_and(|c| defects.contains(&c))
                            || (matches!(e, Error::ContentsLost) && self.any_suspect()),
                        "{what}: refused with {e:?}, expected one of {defects:?}"
                    );
                } else {
                    assert!(
                        is_resource(e)
                            || self.fault_window
                            || matches!(e, Error::Hal(_))
                            || (matches!(e, Error::ContentsLost) && self.any_suspect()),
                        "{what}: unexpected {e:?}"
                    );
                }
                false
            }
        }
    }

    /// Whether some tensor's bytes may be lost to a fault (a job reading it may fail).
    fn any_suspect(&self) -> bool {
        self.info.values().any(|i| i.suspect)
    }

    fn held_index(&mut self) -> Option<usize> {
        if self.held.is_empty() {
            None
        } else {
            Some(self.input.pick(self.held.len()))
        }
    }

    fn step(&mut self) {
        let was_synced = std::mem::take(&mut self.synced);
        let opcode = self.input.u8();
        trace!("step {}", opcode % 24);
        match opcode % 24 {
            0 | 1 => {
                let bytes = self.input.size();
                let data = self.contents(bytes);
                match self.client.create(&data) {
                    Ok(t) => {
                        assert_eq!(t.bytes(), bytes);
                        let suspect = self.fault_window;
                        self.adopt(
                            t,
                            Info {
                                bytes,
                                contents: (!suspect).then_some(data),
                                suspect,
                                pool: None,
                                pinned: false,
                                constant: false,
                            },
                        );
                    }
                    Err(e) => assert!(is_resource(&e) || self.fault_window, "create: {e:?}"),
                }
            }
            2 => {
                let bytes = self.input.size();
                match self.client.empty(bytes) {
                    Ok(t) => self.adopt(
                        t,
                        Info {
                            bytes,
                            contents: None,
                            suspect: self.fault_window,
                            pool: None,
                            pinned: false,
                            constant: false,
                        },
                    ),
                    Err(e) => assert!(is_resource(&e) || self.fault_window, "empty: {e:?}"),
                }
            }
            3 | 4 => {
                // write, sometimes of the wrong size, sometimes to a released tensor
                let Some(k) = self.held_index() else { return };
                let id = self.held[k].id();
                let info = self.info[&id].clone();
                let wrong = self.input.u8() % 8 == 0;
                let stale = self.input.u8() % 16 == 0 && !self.dead.is_empty();
                let bytes = if wrong { info.bytes + 4 } else { info.bytes };
                let data = self.contents(bytes);
                if stale {
                    let d = self.dead[self.input.pick(self.dead.len())];
                    let r = self.server(|s| s.write(d, &data));
                    self.expect("write to a released tensor", &r, &[Class::Stale]);
                    return;
                }
                let r = self.client.write(&self.held[k], &data);
                trace!("  write {id:?} {data:?}: {r:?}");
                let mut defects = Vec::new();
                if wrong {
                    defects.push(Class::Size);
                }
                if info.constant {
                    defects.push(Class::ReadOnly);
                }
                if self.expect("write", &r, &defects) {
                    self.changed(id, Some(data), true);
                } else if r.is_err() && defects.is_empty() {
                    // A refused write may have started: the bytes are unknown.
                    self.changed(id, None, false);
                }
            }
            5..=8 => self.execute(),
            9 | 10 => {
                let Some(k) = self.held_index() else { return };
                let id = self.held[k].id();
                let info = self.info[&id].clone();
                let wrong = self.input.u8() % 8 == 0;
                let mut out = vec![0u8; (info.bytes + u32::from(wrong)) as usize];
                let r = if opcode % 24 == 9 {
                    self.client.read(&self.held[k], &mut out)
                } else {
                    match self.client.try_read(&self.held[k], &mut out) {
                        Ok(()) => Ok(()),
                        Err(nb::Error::WouldBlock) => {
                            assert!(!wrong, "try_read of the wrong size would block");
                            return;
                        }
                        Err(nb::Error::Other(e)) => Err(e),
                    }
                };
                trace!("  read {id:?}: {r:?} {out:?}");
                match r {
                    Ok(()) => {
                        assert!(!wrong, "read into a buffer of the wrong size");
                        if let (Some(c), false) = (&info.contents, info.suspect) {
                            assert!(
                                same(c, &out),
                                "read of {id:?} returned {out:?}, expected {c:?}"
                            );
                        }
                    }
                    Err(e) => {
                        if wrong {
                            assert_eq!(class(&e), Some(Class::Size), "wrong-size read: {e:?}");
                        } else {
                            assert!(
                                is_resource(&e) || info.suspect || self.fault_window,
                                "read of {id:?} ({info:?}) failed: {e:?}"
                            );
                        }
                    }
                }
            }
            11 | 12 => {
                // drop one handle
                let Some(k) = self.held_index() else { return };
                trace!("  drop {:?}", self.held[k].id());
                drop(self.held.swap_remove(k));
                self.collect();
            }
            13 => {
                let Some(k) = self.held_index() else { return };
                let t = self.held[k].clone();
                self.held.push(t);
            }
            14 => {
                // place a tensor in a pool
                let Some(k) = self.held_index() else { return };
                let pool = self.held[k].id();
                let offset = u32::from(self.input.u8() % 8) * 8;
                let bytes = self.input.size();
                let pool_info = self.info[&pool].clone();
                let r = self.client.place(&self.held[k], offset, bytes);
                trace!("  place {bytes} at {offset} in {pool:?}: {r:?}");
                match r {
                    Ok(t) => {
                        assert!(
                            offset % ALIGN == 0 && offset + round(bytes) <= round(pool_info.bytes),
                            "placed {bytes} at {offset} in a pool of {}",
                            pool_info.bytes
                        );
                        assert!(!pool_info.constant, "placed inside a constant");
                        assert!(!pool_info.pinned, "placed inside a pinned tensor");
                        self.adopt(
                            t,
                            Info {
                                bytes,
                                contents: None,
                                suspect: self.fault_window || pool_info.suspect,
                                pool: Some(pool),
                                pinned: false,
                                constant: false,
                            },
                        );
                    }
                    Err(e) if pool_info.pinned => {
                        assert_eq!(e, Error::PinnedPool, "place in a pinned tensor")
                    }
                    Err(e) => assert!(
                        matches!(e, Error::BadPlacement { .. } | Error::ReadOnlyTensor)
                            || is_resource(&e)
                            || self.fault_window,
                        "place: {e:?}"
                    ),
                }
            }
            15 => {
                let bytes = self.input.size();
                match self.client.pinned(bytes) {
                    Ok(t) => self.adopt(
                        t,
                        Info {
                            bytes,
                            contents: Some(vec![0; bytes as usize]),
                            suspect: false,
                            pool: None,
                            pinned: true,
                            constant: false,
                        },
                    ),
                    Err(e) => assert!(is_resource(&e) || self.fault_window, "pinned: {e:?}"),
                }
            }
            16 => {
                // write a pinned tensor's block in place (NotPinned for any other)
                let Some(k) = self.held_index() else { return };
                let id = self.held[k].id();
                let info = self.info[&id].clone();
                let data = self.contents(info.bytes);
                let r = self
                    .client
                    .host_mut(&self.held[k], |b| b.copy_from_slice(&data));
                trace!("  host_mut {id:?}: {r:?}");
                let defects = if info.pinned {
                    vec![]
                } else {
                    vec![Class::NotPinned]
                };
                if self.expect("host_mut", &r, &defects) {
                    self.changed(id, Some(data), true);
                }
            }
            17 => {
                // copy between two tensors
                let (Some(a), Some(b)) = (self.held_index(), self.held_index()) else {
                    return;
                };
                let (src, dst) = (self.held[a].id(), self.held[b].id());
                let (si, di) = (self.info[&src].clone(), self.info[&dst].clone());
                let r = self.client.copy(&self.held[a], &self.held[b]);
                trace!("  copy {src:?} -> {dst:?}: {r:?}");
                let mut defects = Vec::new();
                if si.bytes != di.bytes {
                    defects.push(Class::Size);
                }
                if di.constant {
                    defects.push(Class::ReadOnly);
                }
                if self.expect("copy", &r, &defects) && src != dst {
                    let shared = self.share_memory(src, dst);
                    let c = if shared || si.suspect {
                        None
                    } else {
                        si.contents
                    };
                    self.changed(dst, c, true);
                } else if r.is_err() && defects.is_empty() {
                    self.changed(dst, None, false);
                }
            }
            18 => self.plan_build(),
            19 => {
                let Some(p) = (!self.plans.is_empty()).then(|| self.input.pick(self.plans.len()))
                else {
                    return;
                };
                self.plan_run(p);
            }
            20 => {
                if !self.plans.is_empty() {
                    let p = self.input.pick(self.plans.len());
                    drop(self.plans.swap_remove(p));
                    self.collect();
                }
            }
            21 => {
                let mut r = self.client.sync();
                // A sync that met a hardware fault reports it, after recovering: the next one
                // finds nothing in flight.
                if let Err(Error::Fault { recovered, .. }) = r {
                    assert!(self.fault_window, "a fault without injection: {r:?}");
                    assert!(recovered, "the simulator resets: {r:?}");
                    r = self.client.sync();
                }
                trace!("  sync: {r:?}");
                assert!(r.is_ok(), "sync: {r:?}");
                let decided = self.server(|s| s.npu().stats().faults_injected.total());
                if self.hardware_pending.is_some_and(|n| decided > n) {
                    self.hardware_pending = None;
                }
                self.fault_window = self.code_armed || self.hardware_pending.is_some();
                self.synced = true;
            }
            22 => self.flash(),
            _ => {
                // the clock, the interrupt, and faults
                match self.input.u8() % 8 {
                    0..=3 => {
                        let cycles = u64::from(self.input.u8()) * 16;
                        self.server(|s| {
                            s.npu_mut().advance(cycles);
                            s.on_interrupt();
                        });
                    }
                    4..=6 => {
                        let code = 0x100 + u32::from(self.input.u8());
                        let how = self.input.u8();
                        let job = u64::from(self.input.u8() % 4);
                        let kind = match how % 8 {
                            0 => Some(FaultKind::Dma),
                            1 => Some(FaultKind::Bus),
                            2 => Some(FaultKind::Hang),
                            3 => Some(FaultKind::Overrun {
                                times: 3,
                                plus: 100,
                            }),
                            4 => Some(FaultKind::SpuriousIrq),
                            5 => Some(FaultKind::LostIrq),
                            _ => None,
                        };
                        let (failed, in_flight) = self.server(|s| {
                            let npu = s.npu_mut();
                            match kind {
                                // The next compute job to retire fails with a code.
                                None => npu.fail_next_compute_job(code),
                                // A hardware fault on the job-th job submitted from now on.
                                Some(kind) => {
                                    let mut plan = FaultPlan::default();
                                    let rule = FaultRule::at_job(kind, job).at_most(1);
                                    plan.push(rule).expect("one rule fits");
                                    npu.set_faults(plan);
                                }
                            }
                            (
                                s.npu().stats().faults_injected.total(),
                                s.npu().in_flight(),
                            )
                        });
                        trace!("  inject {kind:?} at job {job} (code {code})");
                        match kind {
                            None => self.code_armed = true,
                            Some(_) => self.hardware_pending = Some(failed),
                        }
                        self.fault_window = true;
                        // The fault strikes the next compute job to retire, which may be one
                        // in flight already: whatever it writes, and whatever depends on it.
                        if in_flight > 0 {
                            for i in self.info.values_mut() {
                                i.suspect = true;
                            }
                        }
                        trace!("  fault injected");
                    }
                    _ => {
                        // every tensor is read back in turn
                        for k in 0..self.held.len() {
                            let id = self.held[k].id();
                            let info = self.info[&id].clone();
                            let mut out = vec![0u8; info.bytes as usize];
                            let r = self.client.read(&self.held[k], &mut out);
                            trace!("  read {id:?}: {r:?} {out:?}");
                            match r {
                                Ok(()) => {
                                    if let (Some(c), false) = (&info.contents, info.suspect) {
                                        assert!(same(c, &out), "read of {id:?}: {out:?} != {c:?}");
                                    }
                                }
                                Err(e) => assert!(
                                    is_resource(&e) || info.suspect || self.fault_window,
                                    "read of {id:?} failed: {e:?}"
                                ),
                            }
                        }
                    }
                }
            }
        }
        let _ = was_synced;
    }

    /// Whether two tensors' device bytes overlap.
    fn share_memory(&self, a: HandleId, b: HandleId) -> bool {
        let live = self.live();
        let region = |id| live.iter().find(|t| t.id == id).and_then(|t| t.device);
        matches!((region(a), region(b)), (Some(x), Some(y)) if overlaps(x, y))
    }

    fn execute(&mut self) {
        let Some(k) = self.held_index() else { return };
        let output = self.held[k].id();
        let out_bytes = self.info[&output].bytes;
        let op = self.op(out_bytes);
        let need = op.operands();
        let n_inputs = match &need {
            Some(n) => {
                let extra = self.input.u8() % 16 == 0;
                n.inputs.len() + usize::from(extra)
            }
            None => 1,
        };
        let mut inputs = Vec::new();
        for j in 0..n_inputs {
            let want = need
                .as_ref()
                .and_then(|n| n.inputs.get(j).copied())
                .unwrap_or(0);
            let alias = self.input.u8() % 16 == 0;
            let id = if alias {
                Some(output)
            } else {
                self.operand(want)
            };
            match id {
                Some(id) => inputs.push(id),
                None => return,
            }
        }
        let defects = self.defects(&op, &inputs, output);
        let uses_dead = inputs.iter().any(|id| !self.info.contains_key(id));
        let r = if uses_dead {
            self.server(|s| s.execute(&op, &inputs, output))
        } else {
            let ts: Vec<&T<'c, 'a>> = inputs
                .iter()
                .map(|id| self.held.iter().find(|t| t.id() == *id).expect("held"))
                .collect();
            self.client.execute(&op, &ts, &self.held[k])
        };
        trace!("  execute {op:?} {inputs:?} -> {output:?}: {r:?} (defects {defects:?})");
        if self.expect("execute", &r, &defects) {
            let c = self.predict(&op, &inputs, output);
            self.changed(output, c, true);
        } else if r.is_err() && defects.is_empty() {
            self.changed(output, None, false);
        }
    }

    /// The output the model predicts for `op` on `inputs` into `output`.
    fn predict(&self, op: &Op, inputs: &[HandleId], output: HandleId) -> Option<Vec<u8>> {
        let mut ins = Vec::new();
        for id in inputs {
            let i = self.info.get(id)?;
            if i.suspect || self.share_memory(*id, output) {
                return None;
            }
            ins.push(i.contents.as_deref()?);
        }
        reference(op, &ins)
    }

    fn plan_build(&mut self) {
        let mut plan: Plan<'c, 'a> = self.client.job_plan();
        let mut ops = Vec::new();
        let mut steps = Vec::new();
        let n = 1 + self.input.u8() % 4;
        for _ in 0..n {
            let Some(k) = self.held_index() else { break };
            let output = self.held[k].id();
            let op = self.op(self.info[&output].bytes);
            let Some(need) = op.operands() else { continue };
            let mut inputs = Vec::new();
            for &want in need.inputs.iter() {
                let Some(id) = self.operand(want) else { return };
                inputs.push(id);
            }
            if inputs.iter().any(|id| !self.info.contains_key(id)) {
                continue;
            }
            let defects = self.defects(&op, &inputs, output);
            let ts: Vec<&T<'c, 'a>> = inputs
                .iter()
                .map(|id| self.held.iter().find(|t| t.id() == *id).expect("held"))
                .collect();
            let r = plan.push(&op, &ts, &self.held[k]);
            trace!("  plan push {op:?} {inputs:?} -> {output:?}: {r:?}");
            let pinned = inputs
                .iter()
                .chain([&output])
                .any(|id| self.info[id].pinned);
            match r {
                Ok(()) => {
                    assert!(defects.is_empty(), "plan step accepted despite {defects:?}");
                    ops.push(op);
                    steps.push((inputs, output));
                }
                Err(Error::JobPlan(_)) if pinned || defects.is_empty() => {}
                Err(e) => {
                    if defects.is_empty() {
                        assert!(
                            is_resource(&e)
                                || self.fault_window
                                || (matches!(e, Error::ContentsLost) && self.any_suspect()),
                            "plan step: {e:?}"
                        );
                    } else {
                        assert!(
                            class(&e).is_some_and(|c| defects.contains(&c))
                                || (matches!(e, Error::ContentsLost) && self.any_suspect()),
                            "plan step refused with {e:?}, expected one of {defects:?}"
                        );
                    }
                }
            }
        }
        self.plans.push(PlanModel { plan, ops, steps });
    }

    fn plan_run(&mut self, p: usize) {
        let wrong = self.input.u8() % 8 == 0;
        let plan = &mut self.plans[p];
        let mut ops: Vec<&Op> = plan.ops.iter().collect();
        if wrong {
            ops.pop();
        }
        let r = plan.plan.run(&ops);
        trace!("  run plan {p} {:?}: {r:?}", plan.steps);
        let steps = plan.steps.clone();
        let plan_ops = plan.ops.clone();
        match r {
            Ok(()) => {
                assert!(!wrong || plan_ops.is_empty(), "a run with too few ops");
                for (op, (inputs, output)) in plan_ops.iter().zip(steps) {
                    let c = self.predict(op, &inputs, output);
                    self.changed(output, c, true);
                }
            }
            Err(e) => {
                if wrong {
                    assert!(
                        matches!(e, Error::JobPlan(_)),
                        "run with too few ops: {e:?}"
                    );
                } else {
                    assert!(
                        is_resource(&e)
                            || self.fault_window
                            || matches!(e, Error::Hal(_))
                            || (matches!(e, Error::ContentsLost) && self.any_suspect()),
                        "plan run: {e:?}"
                    );
                    for (_, output) in steps {
                        self.changed(output, None, false);
                    }
                }
            }
        }
    }

    fn flash(&mut self) {
        match self.input.u8() % 4 {
            0 => match self.client.map_flash(&FLASH.0) {
                Ok(seg) => self.flash_segments.push(seg),
                Err(e) => assert!(matches!(e, Error::Hal(_)), "map_flash: {e:?}"),
            },
            1 if !self.flash_segments.is_empty() => {
                let k = self.input.pick(self.flash_segments.len());
                let seg = self.flash_segments[k];
                let in_use = self
                    .live()
                    .iter()
                    .any(|t| t.device.is_some_and(|r| r.space == Space::Flash(seg)));
                match self.client.unmap_flash(seg) {
                    Ok(()) => {
                        assert!(!in_use, "unmapped a segment tensors use");
                        self.flash_segments.swap_remove(k);
                    }
                    Err(e) => assert!(
                        (matches!(e, Error::FlashInUse { .. }) && in_use)
                            || (self.fault_window && matches!(e, Error::Fault { .. })),
                        "unmap_flash: {e:?}"
                    ),
                }
            }
            _ => {
                let start = usize::from(self.input.u8()) & !3;
                let len = usize::from(self.input.u8() % 64) * 4;
                let end = (start + len).min(FLASH.0.len());
                let data: &'static [u8] = &FLASH.0[start..end];
                match self.client.create_const(data) {
                    Ok(t) => {
                        let suspect = self.fault_window;
                        self.adopt(
                            t,
                            Info {
                                bytes: data.len() as u32,
                                contents: (!suspect).then(|| data.to_vec()),
                                suspect,
                                pool: None,
                                pinned: false,
                                constant: true,
                            },
                        )
                    }
                    Err(e) => assert!(is_resource(&e) || self.fault_window, "create_const: {e:?}"),
                }
            }
        }
    }

    /// The invariants, after every step.
    fn check(&self) {
        let live = self.live();
        let (stats, in_table, staging) =
            self.server(|s| (s.memory_stats(), s.live_tensors(), s.staging_use()));
        assert_eq!(in_table, live.len());
        // The live tensors are the model's, with the references it expects.
        assert_eq!(
            live.len(),
            self.info.len(),
            "server has {:?}, model {:?}",
            live.iter().map(|t| t.id).collect::<Vec<_>>(),
            self.info.keys().collect::<Vec<_>>()
        );
        for t in &live {
            let i = self
                .info
                .get(&t.id)
                .unwrap_or_else(|| panic!("unknown live tensor {t:?}"));
            assert_eq!(t.bytes, i.bytes, "size of {:?}", t.id);
            assert_eq!(t.refs, self.expected_refs(t.id), "references of {t:?}");
            assert_eq!(t.pool, i.pool, "pool of {:?}", t.id);
            assert_eq!(t.constant, i.constant, "constness of {:?}", t.id);
            assert_eq!(t.host.is_some(), i.pinned, "pinned block of {:?}", t.id);
            if let Some(r) = t.device {
                if r.space == Space::Device {
                    assert!(
                        r.offset + r.len <= DEVICE_BYTES as u32,
                        "{t:?} leaves the arena"
                    );
                    assert_eq!(r.len, t.bytes, "{t:?} bound to a range of another size");
                }
            }
            for r in [t.host, t.download].into_iter().flatten() {
                assert!(
                    r.offset + r.len <= HOST_BYTES as u32,
                    "{t:?} leaves host memory"
                );
            }
        }
        // No two reservations overlap; a placed tensor lies in its pool.
        let reserved: Vec<(&LiveTensor, Region)> = live
            .iter()
            .filter(|t| t.reserved)
            .filter_map(|t| Some((t, t.device?)))
            .collect();
        for (k, (a, ra)) in reserved.iter().enumerate() {
            for (b, rb) in &reserved[k + 1..] {
                assert!(!overlaps(*ra, *rb), "{a:?} overlaps {b:?}");
            }
        }
        for t in live.iter().filter(|t| t.pool.is_some()) {
            let pool = live
                .iter()
                .find(|p| Some(p.id) == t.pool)
                .unwrap_or_else(|| panic!("the pool of {t:?} is gone"));
            let (Some(r), Some(p)) = (t.device, pool.device) else {
                panic!("placed {t:?} or its pool {pool:?} without device memory");
            };
            assert!(
                r.offset >= p.offset && r.offset + round(r.len) <= p.offset + round(p.len),
                "{t:?} leaves its pool {pool:?}"
            );
        }
        let host: Vec<Region> = live
            .iter()
            .flat_map(|t| [t.host, t.download])
            .flatten()
            .collect();
        for (k, a) in host.iter().enumerate() {
            for b in &host[k + 1..] {
                assert!(!overlaps(*a, *b), "host blocks {a:?} and {b:?} overlap");
            }
        }
        // The bytes in use are the reservations'.
        let sum: u32 = live.iter().filter(|t| t.reserved).map(|t| t.bytes).sum();
        assert_eq!(
            stats.in_use, sum,
            "bytes in use: {stats:?}, tensors {live:?}"
        );
        assert!(stats.reserved <= DEVICE_BYTES as u32, "{stats:?}");
        // Staging: at least the pinned and started reads' blocks; after a sync, exactly them.
        let owned = host.len() as u32;
        assert!(
            staging.blocks >= owned,
            "{staging:?} < {owned} owned blocks"
        );
        if self.synced {
            assert_eq!(staging.pending, 0, "after sync: {staging:?}");
            assert_eq!(staging.blocks, owned, "after sync: {staging:?}, {live:?}");
        }
    }

    /// Drops everything: the server must be empty.
    fn finish(mut self) {
        self.plans.clear();
        self.held.clear();
        self.collect();
        assert!(self.info.is_empty());
        let mut r = self.client.sync();
        if let Err(Error::Fault { .. }) = r {
            r = self.client.sync();
        }
        assert!(r.is_ok(), "sync: {r:?}");
        self.synced = true;
        self.check();
        let (stats, staging, live) =
            self.server(|s| (s.memory_stats(), s.staging_use(), s.live_tensors()));
        assert_eq!(live, 0, "tensors left");
        assert_eq!(stats.in_use, 0, "bytes left in use: {stats:?}");
        assert_eq!(staging.blocks, 0, "staging blocks left: {staging:?}");
        for seg in self.flash_segments.clone() {
            assert_eq!(self.client.unmap_flash(seg), Ok(()));
        }
    }
}
