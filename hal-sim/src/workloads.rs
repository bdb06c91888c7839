//! Workloads driven through the compute client, for the demo and the benchmarks (`std` only).
//!
//! Two int8 networks built from the operators the stack has today, computing real values:
//!
//! - [`ConvNet`]: a static conv net, every inference the same shapes. Three 3×3 convolutions
//!   (16, 32, 64 channels; the last two with stride 2) with fused ReLU on a 32×32×3 input, then a
//!   dense layer to 10 classes. Each convolution runs as im2col on the CPU (the activation is
//!   read back, unfolded, and uploaded as a scratch tensor) and a fully-connected job on the NPU.
//! - [`Transformer`]: one encoder layer (model width 32, two heads of 16, feed-forward 64)
//!   whose sequence length changes every inference. Per head: Q, K and Vᵀ projections, scores =
//!   Q·Kᵀ, a ReLU in place of softmax (not an operator yet), attention = scores·V, an output
//!   projection; then the residual adds and the feed-forward block.
//!
//! Weights are created once and stay resident; activations are reserved and released as a
//! runtime would, so the memory manager sees the allocation trace of a real inference loop.
//! Each transformer inference is one pass ([`ComputeClient::pass`]) keyed by its sequence
//! length: a no-op for the chunk/slice manager, measured then guided for [`GuidedMemory`]
//! ([`run_guided`]).

use npu_compute::channel::{ComputeChannel, RefCellChannel};
use npu_compute::client::{ComputeClient, Tensor};
use npu_compute::hal::Npu;
use npu_compute::memory::{ChunkSliceMemory, GuidedMemory, MemoryConfig, MemoryStats, PassStats};
use npu_compute::ops::{AddI8, FullyConnectedI8, Op, OpKind, ReluI8};
use npu_compute::server::NpuServer;
use npu_compute::Error;
use npu_kernels::int8::{
    Activation, AddParams, ChannelMultiplier, FcParams, MulParams, Quant, ReluParams,
};
use npu_kernels::FcShape;
use std::vec;
use std::vec::Vec;

use crate::{SimConfig, SimError, SimNpu};

/// Device arena of the benchmark and demo setups, in bytes.
pub const DEVICE_BYTES: usize = 1 << 20;
/// Host staging memory of the benchmark and demo setups, in bytes.
pub const HOST_BYTES: usize = 256 << 10;

/// 16-byte aligned zeroed memory on the heap (the simulator needs aligned bases).
pub fn aligned_memory(bytes: usize) -> Vec<u128> {
    vec![0u128; bytes.div_ceil(16)]
}

/// The server type of these workloads.
pub type SimServer<'a> = NpuServer<SimNpu<'a>>;
/// The channel type of these workloads.
pub type SimChannel<'a> = RefCellChannel<SimServer<'a>>;
/// The client type of these workloads.
pub type SimClient<'c, 'a> = ComputeClient<'c, SimChannel<'a>>;

/// Why a workload could not be set up or run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum WorkloadError {
    /// The simulator refused its configuration or memories.
    Sim(SimError),
    /// The compute stack failed.
    Stack(Error),
}

impl From<Error> for WorkloadError {
    fn from(e: Error) -> Self {
        WorkloadError::Stack(e)
    }
}

impl From<SimError> for WorkloadError {
    fn from(e: SimError) -> Self {
        WorkloadError::Sim(e)
    }
}

impl core::fmt::Display for WorkloadError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            WorkloadError::Sim(e) => write!(f, "simulator: {e}"),
            WorkloadError::Stack(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for WorkloadError {}

/// A channel over a fresh simulator using the given memories.
pub fn channel<'a>(
    device: &'a mut [u128],
    host: &'a mut [u128],
    sim: SimConfig,
    memory: MemoryConfig,
) -> Result<SimChannel<'a>, WorkloadError> {
    sim_channel(device, host, sim, memory)
}

/// A channel over a fresh simulator using the given memories, with any capacities (memory
/// chunks, handles, channel slots): [`channel`] and the model runner's stack both use it.
pub fn sim_channel<'a, const CHUNKS: usize, const HANDLES: usize, const SLOTS: usize>(
    device: &'a mut [u128],
    host: &'a mut [u128],
    sim: SimConfig,
    memory: MemoryConfig,
) -> Result<
    RefCellChannel<NpuServer<SimNpu<'a>, ChunkSliceMemory<CHUNKS>, HANDLES>, SLOTS>,
    WorkloadError,
> {
    let npu = SimNpu::new(
        bytemuck::cast_slice_mut(device),
        bytemuck::cast_slice_mut(host),
        sim,
    )?;
    Ok(RefCellChannel::new(NpuServer::new(npu, memory)?))
}

/// The step of the dependent-job chain (`npu-sim bench chain`, the engine tests): an int8
/// MUL of `x` by itself computing `x ← x² − 1.904` on the grid `x = q / 65.1` (the output
/// zero point folds in the constant). On `[−1.95, 1.95]` this quadratic map is chaotic and
/// never clamps, so every step changes the values and a lost, repeated or reordered step
/// shows in the result.
pub fn chain_params() -> Result<MulParams, npu_kernels::KernelError> {
    let scale = 1.95 / 127.0;
    let x = Quant {
        scale,
        zero_point: 0,
    };
    let out = Quant {
        scale,
        zero_point: -124,
    };
    MulParams::new(x, x, out, Activation::None)
}

/// `steps` steps of the chain from `x0`, on the CPU kernels: what the NPU must end with.
pub fn chain_reference(x0: &[i8], steps: usize) -> Result<Vec<i8>, npu_kernels::KernelError> {
    let params = chain_params()?;
    let mut x = x0.to_vec();
    let mut y = vec![0i8; x.len()];
    for _ in 0..steps {
        npu_kernels::int8::mul(&params, &x, &x, &mut y)?;
        core::mem::swap(&mut x, &mut y);
    }
    Ok(x)
}

/// A deterministic pseudo-random int8 sequence (xorshift), so every run computes the same.
pub fn pseudo_random_i8(seed: u32, len: usize) -> Vec<i8> {
    let mut s = seed.wrapping_mul(2_654_435_761).max(1);
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s >> 24) as i8
        })
        .collect()
}

/// Operand bytes for `op`, in operand order, any layer: data and weights pseudo-random
/// (seeded by `seed` and the operand's index), per-channel multipliers valid and varied,
/// biases small; `None` for an op whose sizes overflow. What tests of kernel variants and of
/// tuning run a single layer on.
pub fn operand_bytes(op: &Op, seed: u32) -> Option<Vec<Vec<u8>>> {
    let per_channel = matches!(
        op,
        Op::Conv2dI8(_) | Op::DepthwiseConv2dI8(_) | Op::FullyConnectedPerChannelI8(_)
    );
    let mut operands = Vec::new();
    for (i, &len) in op.operands()?.inputs.iter().enumerate() {
        let len = len as usize;
        operands.push(match (per_channel, i) {
            (true, 2) => {
                let channels = len / core::mem::size_of::<ChannelMultiplier>();
                let m: Vec<ChannelMultiplier> = (0..channels)
                    .map(|c| ChannelMultiplier::new(0.05, 0.01 + c as f32 * 0.003, 0.1))
                    .collect::<Result<_, _>>()
                    .ok()?;
                bytemuck::cast_slice(&m).to_vec()
            }
            (true, 3) => (0..len / 4)
                .flat_map(|c| ((c as i32 * 37) % 601 - 300).to_le_bytes())
                .collect(),
            _ => as_bytes(&pseudo_random_i8(seed.wrapping_add(i as u32), len)).to_vec(),
        });
    }
    Some(operands)
}

fn as_bytes(v: &[i8]) -> &[u8] {
    bytemuck::cast_slice(v)
}

const ACT: Quant = Quant {
    scale: 0.05,
    zero_point: -5,
};

/// FC parameters for `in_features` inputs: the weight scale shrinks with the fan-in so that
/// activations keep their spread from layer to layer instead of saturating.
fn fc_params(act: Activation, in_features: u32) -> Result<FcParams, Error> {
    let w_scale = 3.0 / (128.0 * (in_features.max(1) as f32).sqrt());
    FcParams::new(ACT, w_scale, ACT, act).map_err(|error| Error::Kernel {
        op: OpKind::FullyConnected,
        error,
    })
}

/// A 3×3 convolution's im2col on the CPU: `[h_out * w_out, 9 * c]` patches of an NHWC image,
/// padding SAME (padded positions take the input zero point, which the int8 FC subtracts).
pub fn im2col(image: &[i8], h: usize, w: usize, c: usize, stride: usize) -> Vec<i8> {
    let (ho, wo) = (h.div_ceil(stride), w.div_ceil(stride));
    let mut out = Vec::with_capacity(ho * wo * 9 * c);
    for oy in 0..ho {
        for ox in 0..wo {
            for ky in 0..3 {
                for kx in 0..3 {
                    let (y, x) = (
                        (oy * stride + ky) as isize - 1,
                        (ox * stride + kx) as isize - 1,
                    );
                    if y < 0 || x < 0 || y >= h as isize || x >= w as isize {
                        out.extend(core::iter::repeat_n(ACT.zero_point as i8, c));
                    } else {
                        let at = (y as usize * w + x as usize) * c;
                        out.extend_from_slice(&image[at..at + c]);
                    }
                }
            }
        }
    }
    out
}

/// The static conv net's resident weights.
pub struct ConvNet<'c, C: ComputeChannel> {
    layers: [(Tensor<'c, C>, Tensor<'c, C>); 3],
    dense: (Tensor<'c, C>, Tensor<'c, C>),
}

/// (input height = width, input channels, output channels, stride) of the three convolutions.
const CONV_LAYERS: [(usize, usize, usize, usize); 3] =
    [(32, 3, 16, 1), (32, 16, 32, 2), (16, 32, 64, 2)];

impl<'c, C: ComputeChannel> ConvNet<'c, C> {
    /// Upload the weights.
    pub fn new(client: &ComputeClient<'c, C>) -> Result<Self, Error> {
        let make = |seed: u32, out: usize, inp: usize| -> Result<_, Error> {
            let w = client.create(as_bytes(&pseudo_random_i8(seed, out * inp)))?;
            let bias: Vec<i32> = (0..out as i32).map(|i| i * 37 - 300).collect();
            Ok((w, client.create(bytemuck::cast_slice(&bias))?))
        };
        let l0 = make(1, 16, 27)?;
        let l1 = make(2, 32, 144)?;
        let l2 = make(3, 64, 288)?;
        let dense = make(4, 10, 8 * 8 * 64)?;
        Ok(ConvNet {
            layers: [l0, l1, l2],
            dense,
        })
    }

    /// One inference on a 32×32×3 image; returns the 10 class scores.
    pub fn infer(&self, client: &ComputeClient<'c, C>, image: &[i8]) -> Result<[i8; 10], Error> {
        let mut act: Vec<i8> = image.to_vec();
        let mut last = None;
        for (&(hw, cin, cout, stride), (w, b)) in CONV_LAYERS.iter().zip(&self.layers) {
            if let Some(t) = last.take() {
                let t: Tensor<'c, C> = t;
                act = vec![0i8; t.bytes() as usize];
                client.read(&t, bytemuck::cast_slice_mut(&mut act))?;
            }
            let cols = im2col(&act, hw, hw, cin, stride);
            let scratch = client.create(as_bytes(&cols))?;
            let positions = (hw / stride) * (hw / stride);
            let out = client.empty((positions * cout) as u32)?;
            let shape = FcShape {
                batches: positions as u32,
                in_features: (9 * cin) as u32,
                out_features: cout as u32,
            };
            client.execute(
                Op::FullyConnectedI8(FullyConnectedI8 {
                    shape,
                    params: fc_params(Activation::Relu, shape.in_features)?,
                }),
                &[&scratch, w, b],
                &out,
            )?;
            last = Some(out);
        }
        let features = last.ok_or(Error::ChannelBusy)?;
        let logits = client.empty(10)?;
        let shape = FcShape {
            batches: 1,
            in_features: 8 * 8 * 64,
            out_features: 10,
        };
        let (w, b) = &self.dense;
        client.execute(
            Op::FullyConnectedI8(FullyConnectedI8 {
                shape,
                params: fc_params(Activation::None, shape.in_features)?,
            }),
            &[&features, w, b],
            &logits,
        )?;
        drop(features);
        let mut out = [0i8; 10];
        client.read(&logits, bytemuck::cast_slice_mut(&mut out))?;
        Ok(out)
    }
}

/// Model width of the transformer.
pub const D_MODEL: usize = 32;
/// Width of one attention head.
pub const D_HEAD: usize = 16;
/// Feed-forward width.
pub const D_FF: usize = 64;
/// Sequence lengths of successive inferences (the pattern repeats).
pub const SEQ_LENGTHS: [usize; 8] = [16, 9, 24, 12, 31, 16, 20, 7];

/// The transformer encoder layer's resident weights.
pub struct Transformer<'c, C: ComputeChannel> {
    /// Per head: Wq, Wk ([D_HEAD, D_MODEL]), Wv ([D_HEAD, D_MODEL], used as the FC input so the
    /// job yields Vᵀ), Wo ([D_MODEL, D_HEAD]).
    heads: [[Tensor<'c, C>; 4]; 2],
    ff1: Tensor<'c, C>,
    ff2: Tensor<'c, C>,
}

impl<'c, C: ComputeChannel> Transformer<'c, C> {
    /// Upload the weights.
    pub fn new(client: &ComputeClient<'c, C>) -> Result<Self, Error> {
        let w = |seed: u32, len: usize| client.create(as_bytes(&pseudo_random_i8(seed, len)));
        let head = |s: u32| -> Result<[Tensor<'c, C>; 4], Error> {
            Ok([
                w(s, D_HEAD * D_MODEL)?,
                w(s + 1, D_HEAD * D_MODEL)?,
                w(s + 2, D_HEAD * D_MODEL)?,
                w(s + 3, D_MODEL * D_HEAD)?,
            ])
        };
        Ok(Transformer {
            heads: [head(10)?, head(20)?],
            ff1: w(30, D_FF * D_MODEL)?,
            ff2: w(31, D_MODEL * D_FF)?,
        })
    }

    fn fc(
        client: &ComputeClient<'c, C>,
        input: &Tensor<'c, C>,
        weights: &Tensor<'c, C>,
        shape: FcShape,
        act: Activation,
    ) -> Result<Tensor<'c, C>, Error> {
        let out = client.empty(shape.batches * shape.out_features)?;
        client.execute(
            Op::FullyConnectedI8(FullyConnectedI8 {
                shape,
                params: fc_params(act, shape.in_features)?,
            }),
            &[input, weights],
            &out,
        )?;
        Ok(out)
    }

    fn add(
        client: &ComputeClient<'c, C>,
        a: &Tensor<'c, C>,
        b: &Tensor<'c, C>,
    ) -> Result<Tensor<'c, C>, Error> {
        let params = AddParams::new(ACT, ACT, ACT, Activation::None)
            .unwrap_or_else(|_| unreachable!("valid scales"));
        let out = client.empty(a.bytes())?;
        client.execute(
            Op::AddI8(AddI8 {
                len: a.bytes(),
                params,
            }),
            &[a, b],
            &out,
        )?;
        Ok(out)
    }

    /// One inference on a `[len, D_MODEL]` sequence; returns the `[len, D_MODEL]` output.
    /// Over a [`GuidedMemory`] server, run it as one pass keyed by `len`
    /// ([`ComputeClient::pass`]).
    pub fn infer(&self, client: &ComputeClient<'c, C>, x: &[i8]) -> Result<Vec<i8>, Error> {
        let len = (x.len() / D_MODEL) as u32;
        let (d, dh, ff) = (D_MODEL as u32, D_HEAD as u32, D_FF as u32);
        let x = client.create(as_bytes(x))?;
        let relu = ReluParams::new(ACT, ACT).map_err(|error| Error::Kernel {
            op: OpKind::Relu,
            error,
        })?;
        let mut heads: Vec<Tensor<'c, C>> = Vec::new();
        for [wq, wk, wv, wo] in &self.heads {
            let proj = FcShape {
                batches: len,
                in_features: d,
                out_features: dh,
            };
            let q = Self::fc(client, &x, wq, proj, Activation::None)?;
            let k = Self::fc(client, &x, wk, proj, Activation::None)?;
            let vt = Self::fc(
                client,
                wv,
                &x,
                FcShape {
                    batches: dh,
                    in_features: d,
                    out_features: len,
                },
                Activation::None,
            )?;
            let scores = Self::fc(
                client,
                &q,
                &k,
                FcShape {
                    batches: len,
                    in_features: dh,
                    out_features: len,
                },
                Activation::None,
            )?;
            drop((q, k));
            let probs = client.empty(len * len)?;
            client.execute(
                Op::ReluI8(ReluI8 {
                    len: len * len,
                    params: relu,
                }),
                &[&scores],
                &probs,
            )?;
            drop(scores);
            let attn = Self::fc(
                client,
                &probs,
                &vt,
                FcShape {
                    batches: len,
                    in_features: len,
                    out_features: dh,
                },
                Activation::None,
            )?;
            drop((probs, vt));
            heads.push(Self::fc(
                client,
                &attn,
                wo,
                FcShape {
                    batches: len,
                    in_features: dh,
                    out_features: d,
                },
                Activation::None,
            )?);
        }
        let attention = Self::add(client, &heads[0], &heads[1])?;
        drop(heads);
        let r1 = Self::add(client, &x, &attention)?;
        drop((x, attention));
        let h = Self::fc(
            client,
            &r1,
            &self.ff1,
            FcShape {
                batches: len,
                in_features: d,
                out_features: ff,
            },
            Activation::Relu,
        )?;
        let f = Self::fc(
            client,
            &h,
            &self.ff2,
            FcShape {
                batches: len,
                in_features: ff,
                out_features: d,
            },
            Activation::None,
        )?;
        drop(h);
        let out = Self::add(client, &r1, &f)?;
        drop((r1, f));
        let mut bytes = vec![0i8; out.bytes() as usize];
        client.read(&out, bytemuck::cast_slice_mut(&mut bytes))?;
        Ok(bytes)
    }
}

/// Which workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// The static conv net.
    ConvNet,
    /// The transformer with changing sequence lengths.
    Transformer,
}

/// Run `inferences` inferences of a workload over a fresh simulator with memory configuration
/// `memory`; returns the memory figures at the end and the virtual cycles.
pub fn run(
    workload: Workload,
    memory: MemoryConfig,
    inferences: usize,
) -> Result<(MemoryStats, u64), WorkloadError> {
    let (mut device, mut host) = (aligned_memory(DEVICE_BYTES), aligned_memory(HOST_BYTES));
    let channel = channel(&mut device, &mut host, SimConfig::default(), memory)?;
    let client = ComputeClient::new(&channel);
    match workload {
        Workload::ConvNet => {
            let net = ConvNet::new(&client)?;
            for i in 0..inferences {
                net.infer(&client, &pseudo_random_i8(100 + i as u32, 32 * 32 * 3))?;
            }
        }
        Workload::Transformer => {
            let net = Transformer::new(&client)?;
            for i in 0..inferences {
                let len = SEQ_LENGTHS[i % SEQ_LENGTHS.len()];
                net.infer(&client, &pseudo_random_i8(200 + i as u32, len * D_MODEL))?;
            }
        }
    }
    client.sync()?;
    let stats = client.memory_stats()?;
    let cycles = channel.with(|s| s.npu().now())?;
    Ok((stats, cycles))
}

/// Shapes whose plans the guided memory of [`run_guided`] keeps: one per distinct sequence
/// length of [`SEQ_LENGTHS`] (seven), and one to spare.
pub const GUIDED_PLANS: usize = 8;

/// The memory manager of [`run_guided`]: measured then guided, over the chunk/slice manager.
pub type GuidedSimMemory = GuidedMemory<ChunkSliceMemory<64>, GUIDED_PLANS, 64>;
/// The server type of [`run_guided`].
pub type GuidedSimServer<'a> = NpuServer<SimNpu<'a>, GuidedSimMemory>;
/// The channel type of [`run_guided`].
pub type GuidedSimChannel<'a> = RefCellChannel<GuidedSimServer<'a>>;

/// A channel over a fresh simulator whose memory is a [`GuidedSimMemory`] over a chunk/slice
/// manager configured by `memory`.
pub fn guided_channel<'a>(
    device: &'a mut [u128],
    host: &'a mut [u128],
    sim: SimConfig,
    memory: MemoryConfig,
) -> Result<GuidedSimChannel<'a>, WorkloadError> {
    let npu = SimNpu::new(
        bytemuck::cast_slice_mut(device),
        bytemuck::cast_slice_mut(host),
        sim,
    )?;
    let caps = npu.capabilities();
    let inner = ChunkSliceMemory::new(caps.device_memory_bytes, caps.alignment, memory)?;
    Ok(RefCellChannel::new(NpuServer::with_memory(
        npu,
        GuidedMemory::new(inner),
    )?))
}

/// Figures of [`run_guided`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GuidedFigures {
    /// Memory figures at the end of the first cycle (every shape measured once).
    pub first_cycle: MemoryStats,
    /// Memory figures at the end, peaks counted from the end of the first cycle.
    pub guided: MemoryStats,
    /// Pass counters at the end.
    pub passes: PassStats,
    /// Virtual cycles at the end.
    pub cycles: u64,
}

/// The transformer with changing sequence lengths over [`GuidedSimMemory`]: one cycle of
/// [`SEQ_LENGTHS`] (every shape's first run, measured), the peaks reset, then `cycles` more
/// cycles. Inputs are those of [`run`], so the outputs are the same.
pub fn run_guided(memory: MemoryConfig, cycles: usize) -> Result<GuidedFigures, WorkloadError> {
    let (mut device, mut host) = (aligned_memory(DEVICE_BYTES), aligned_memory(HOST_BYTES));
    let channel = guided_channel(&mut device, &mut host, SimConfig::default(), memory)?;
    let client = ComputeClient::new(&channel);
    let net = Transformer::new(&client)?;
    let mut first_cycle = None;
    for i in 0..SEQ_LENGTHS.len() * (cycles + 1) {
        if i == SEQ_LENGTHS.len() {
            client.sync()?;
            first_cycle = Some(client.memory_stats()?);
            client.reset_memory_peak()?;
        }
        let len = SEQ_LENGTHS[i % SEQ_LENGTHS.len()];
        let x = pseudo_random_i8(200 + i as u32, len * D_MODEL);
        client.pass(len as u32, || net.infer(&client, &x))?;
    }
    client.sync()?;
    let guided = client.memory_stats()?;
    Ok(GuidedFigures {
        first_cycle: first_cycle.unwrap_or(guided),
        guided,
        passes: client.pass_stats()?,
        cycles: channel.with(|s| s.npu().now())?,
    })
}
