//! Running an [`Op`] over byte buffers with the npu-kernels reference kernels.
//!
//! The server uses this as the CPU fallback for operators the HAL declares unsupported, and a
//! software NPU can use it to execute jobs, so both compute with the same arithmetic.
//!
//! Buffers are raw bytes as they lie in memory (little-endian f32 / i32, int8). Viewing them as
//! typed slices needs their natural alignment; HALs guarantee it by aligning every region (see
//! [`Capabilities::alignment`](crate::hal::Capabilities::alignment)).

use crate::hal::{Op, MAX_JOB_INPUTS};
use npu_kernels::{f32 as kf, int8 as ki, KernelError};

/// Why an op could not run over the given buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum OpError {
    /// The kernel refused the operands.
    Kernel(KernelError),
    /// A buffer is not aligned for its element type, or its length is not a whole number of
    /// elements.
    Misaligned {
        /// Operand index (inputs first, then the output as [`MAX_JOB_INPUTS`]).
        operand: u8,
    },
    /// The op needs a different number of inputs.
    InputCount {
        /// Inputs given.
        given: u8,
    },
    /// The op cannot write over its input ([`Op::runs_in_place`] is false).
    NotInPlace,
}

impl core::fmt::Display for OpError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            OpError::Kernel(e) => e.fmt(f),
            OpError::Misaligned { operand } if usize::from(operand) == MAX_JOB_INPUTS => f
                .write_str(
                    "the output buffer is not aligned for its element type, or not a whole \
                     number of elements",
                ),
            OpError::Misaligned { operand } => write!(
                f,
                "input buffer {operand} is not aligned for its element type, or not a whole \
                 number of elements"
            ),
            OpError::InputCount { given } => {
                write!(f, "{given} inputs given, not a number the op takes")
            }
            OpError::NotInPlace => f.write_str("the op cannot write over its input"),
        }
    }
}

impl core::error::Error for OpError {}

impl From<KernelError> for OpError {
    fn from(e: KernelError) -> Self {
        OpError::Kernel(e)
    }
}

fn view<T: bytemuck::AnyBitPattern>(bytes: &[u8], operand: usize) -> Result<&[T], OpError> {
    bytemuck::try_cast_slice(bytes).map_err(|_| OpError::Misaligned {
        operand: operand as u8,
    })
}

fn view_mut<T: bytemuck::AnyBitPattern + bytemuck::NoUninit>(
    bytes: &mut [u8],
) -> Result<&mut [T], OpError> {
    bytemuck::try_cast_slice_mut(bytes).map_err(|_| OpError::Misaligned {
        operand: MAX_JOB_INPUTS as u8,
    })
}

/// Compute `op` from `inputs` (operand order as documented on [`Op`]) into `output`.
pub fn run_op(op: &Op, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
    let accepted = op
        .operands()
        .is_some_and(|operands| operands.accepts(inputs.len()));
    if !accepted {
        return Err(OpError::InputCount {
            given: inputs.len() as u8,
        });
    }
    let input = |i: usize| inputs.get(i).copied().unwrap_or(&[]);
    let i8s = |i: usize| view::<i8>(input(i), i);
    let bias = |i: usize| inputs.get(i).map(|b| view::<i32>(b, i)).transpose();
    match op {
        Op::AddF32 { .. } => kf::add(view(input(0), 0)?, view(input(1), 1)?, view_mut(output)?)?,
        Op::MulF32 { .. } => kf::mul(view(input(0), 0)?, view(input(1), 1)?, view_mut(output)?)?,
        Op::ReluF32 { .. } => kf::relu(view(input(0), 0)?, view_mut(output)?)?,
        Op::FullyConnectedF32 { shape } => {
            let bias = inputs.get(2).map(|b| view::<f32>(b, 2)).transpose()?;
            kf::fully_connected(
                *shape,
                view(input(0), 0)?,
                view(input(1), 1)?,
                bias,
                view_mut(output)?,
            )?
        }
        Op::AddI8 { params, .. } => ki::add(params, i8s(0)?, i8s(1)?, view_mut(output)?)?,
        Op::MulI8 { params, .. } => ki::mul(params, i8s(0)?, i8s(1)?, view_mut(output)?)?,
        Op::ReluI8 { params, .. } => ki::relu(params, i8s(0)?, view_mut(output)?)?,
        Op::FullyConnectedI8 { shape, params } => ki::fully_connected(
            params,
            *shape,
            i8s(0)?,
            i8s(1)?,
            bias(2)?,
            view_mut(output)?,
        )?,
        Op::FullyConnectedPerChannelI8 { shape, params } => ki::fully_connected_per_channel(
            params,
            *shape,
            view(input(2), 2)?,
            i8s(0)?,
            i8s(1)?,
            bias(3)?,
            view_mut(output)?,
        )?,
        Op::Conv2dI8 { params, .. } => ki::conv2d(
            params,
            view(input(2), 2)?,
            i8s(0)?,
            i8s(1)?,
            bias(3)?,
            view_mut(output)?,
        )?,
        Op::DepthwiseConv2dI8 { params, .. } => ki::depthwise_conv2d(
            params,
            view(input(2), 2)?,
            i8s(0)?,
            i8s(1)?,
            bias(3)?,
            view_mut(output)?,
        )?,
        Op::AveragePool2dI8 { params, .. } => {
            ki::average_pool2d(params, i8s(0)?, view_mut(output)?)?
        }
        Op::MaxPool2dI8 { params, .. } => ki::max_pool2d(params, i8s(0)?, view_mut(output)?)?,
        Op::SoftmaxI8 { depth, params, .. } => {
            ki::softmax(params, *depth as usize, i8s(0)?, view_mut(output)?)?
        }
        Op::MeanI8 { params } => ki::mean(params, i8s(0)?, view_mut(output)?)?,
        Op::AddBroadcastI8 { shape, params } => {
            ki::add_broadcast(params, shape, i8s(0)?, i8s(1)?, view_mut(output)?)?
        }
        Op::SubI8 { shape, params } => {
            ki::sub_broadcast(params, shape, i8s(0)?, i8s(1)?, view_mut(output)?)?
        }
        Op::MulBroadcastI8 { shape, params } => {
            ki::mul_broadcast(params, shape, i8s(0)?, i8s(1)?, view_mut(output)?)?
        }
        Op::RsqrtI8 { params, .. } => ki::rsqrt(params, i8s(0)?, view_mut(output)?)?,
        Op::RequantizeI8 { params, .. } => ki::requantize(params, i8s(0)?, view_mut(output)?)?,
        Op::QuantizeF32 { quant, .. } => {
            ki::quantize_f32(*quant, view(input(0), 0)?, view_mut(output)?)?
        }
        Op::DequantizeI8 { quant, .. } => ki::dequantize(*quant, i8s(0)?, view_mut(output)?)?,
        Op::BatchMatmulI8 { params } => {
            ki::batch_matmul(params, i8s(0)?, i8s(1)?, view_mut(output)?)?
        }
        Op::TransposeI8 { params } => ki::transpose(params, i8s(0)?, view_mut(output)?)?,
        Op::ConcatenationI8 { params } => {
            let mut views: heapless::Vec<&[i8], MAX_JOB_INPUTS> = heapless::Vec::new();
            for i in 0..inputs.len() {
                let _ = views.push(i8s(i)?);
            }
            ki::concatenation(params, &views, view_mut(output)?)?
        }
        Op::Reshape { .. } => ki::reshape(i8s(0)?, view_mut(output)?)?,
    }
    Ok(())
}

/// Elements computed per pass by [`run_op_in_place`]: the size of its stack copy.
const IN_PLACE_CHUNK: usize = 64;

/// Computes `op` into `inout`, which also holds the inputs given as `None` in `inputs` (the
/// others are separate buffers), for an op that [runs in place](Op::runs_in_place). It works
/// in chunks: each chunk of `inout` is copied to the stack first, so the kernels see disjoint
/// input and output slices and the result is the one `run_op` gives on separate buffers.
pub fn run_op_in_place(op: &Op, inputs: &[Option<&[u8]>], inout: &mut [u8]) -> Result<(), OpError> {
    if !op.runs_in_place() {
        return Err(OpError::NotInPlace);
    }
    let mut copy = [0u8; IN_PLACE_CHUNK];
    let mut start = 0;
    while start < inout.len() {
        let end = (start + IN_PLACE_CHUNK).min(inout.len());
        let n = end - start;
        copy[..n].copy_from_slice(&inout[start..end]);
        let mut chunk_op = *op;
        if let Op::AddI8 { len, .. } | Op::MulI8 { len, .. } | Op::ReluI8 { len, .. } =
            &mut chunk_op
        {
            *len = n as u32;
        }
        let mut views: heapless::Vec<&[u8], MAX_JOB_INPUTS> = heapless::Vec::new();
        for (i, input) in inputs.iter().enumerate() {
            let view = match input {
                Some(bytes) => bytes
                    .get(start..end)
                    .ok_or(OpError::Misaligned { operand: i as u8 })?,
                None => &copy[..n],
            };
            views
                .push(view)
                .map_err(|_| OpError::InputCount { given: i as u8 })?;
        }
        run_op(&chunk_op, &views, &mut inout[start..end])?;
        start = end;
    }
    Ok(())
}

/// Split one memory into a mutable output range and shared input ranges, which must not overlap
/// the output (inputs may overlap each other). Ranges are `(offset, len)`. `None` if a range is
/// out of bounds or overlaps the output.
pub fn split_operands<'m>(
    memory: &'m mut [u8],
    output: (usize, usize),
    inputs: &[(usize, usize)],
) -> Option<(&'m mut [u8], heapless::Vec<&'m [u8], MAX_JOB_INPUTS>)> {
    let (out_start, out_len) = output;
    let out_end = out_start.checked_add(out_len)?;
    if out_end > memory.len() {
        return None;
    }
    let (before, rest) = memory.split_at_mut(out_start);
    let (out, after) = rest.split_at_mut(out_len);
    let (before, after): (&'m [u8], &'m [u8]) = (before, after);
    let mut views = heapless::Vec::new();
    for &(start, len) in inputs {
        let end = start.checked_add(len)?;
        let view = if end <= out_start {
            before.get(start..end)?
        } else if start >= out_end {
            after.get(start - out_end..end - out_end)?
        } else if len == 0 {
            &[][..]
        } else {
            return None;
        };
        views.push(view).ok()?;
    }
    Some((out, views))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_rejects_overlap_and_out_of_bounds() {
        let mut m = [0u8; 64];
        assert!(split_operands(&mut m, (16, 16), &[(0, 16), (32, 16)]).is_some());
        assert!(split_operands(&mut m, (16, 16), &[(8, 16)]).is_none());
        assert!(split_operands(&mut m, (16, 16), &[(48, 32)]).is_none());
        assert!(split_operands(&mut m, (60, 16), &[]).is_none());
        // Empty inputs are fine anywhere, even inside the output's range.
        let empty = split_operands(&mut m, (16, 16), &[(20, 0), (0, 0)]).map(|(_, ins)| ins.len());
        assert_eq!(empty, Some(2));
        let (out, ins) = split_operands(&mut m, (32, 4), &[(0, 4), (0, 4), (40, 4)]).unwrap();
        out[0] = 1;
        assert_eq!(ins.len(), 3);
    }

    #[test]
    fn in_place_equals_separate_buffers() {
        use npu_kernels::int8::{Activation, AddParams, Quant};
        let q = |scale, zero_point| Quant { scale, zero_point };
        let params = AddParams::new(q(0.05, -3), q(0.07, 5), q(0.1, 2), Activation::None).unwrap();
        let op = Op::AddI8 { len: 150, params };
        let a: [u8; 150] = core::array::from_fn(|i| (i * 7) as u8);
        let b: [u8; 150] = core::array::from_fn(|i| (i * 13 + 1) as u8);
        let mut separate = [0u8; 150];
        run_op(&op, &[&a, &b], &mut separate).unwrap();
        let mut inout = a;
        run_op_in_place(&op, &[None, Some(&b)], &mut inout).unwrap();
        assert_eq!(inout, separate);
        // Both inputs the output (x + x).
        let mut twice = [0u8; 150];
        run_op(&op, &[&a, &a], &mut twice).unwrap();
        let mut inout = a;
        run_op_in_place(&op, &[None, None], &mut inout).unwrap();
        assert_eq!(inout, twice);
        let relu = Op::ReluF32 { len: 4 };
        assert_eq!(
            run_op_in_place(&relu, &[None], &mut [0; 16]),
            Err(OpError::NotInPlace)
        );
    }

    #[test]
    fn input_count_is_checked() {
        let mut out = [0u8; 4];
        assert_eq!(
            run_op(&Op::AddF32 { len: 1 }, &[&[0; 4]], &mut out),
            Err(OpError::InputCount { given: 1 })
        );
    }
}
