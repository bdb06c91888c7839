//! Slices (int8, int16): SLICE, STRIDED_SLICE, and each output of SPLIT, SPLIT_V and UNPACK,
//! all one strided copy ([`npu_kernels::movement::slice`]). Operands `[input]`; the begin,
//! end, size, stride and axis tensors are constants read here, at prepare, and never reach the
//! device.
//!
//! An operator with several outputs (SPLIT, SPLIT_V, UNPACK) is lowered once per output, each
//! time into the slice that output is: output `j` of a SPLIT into `n` along axis `a` is the
//! slice starting at `j · d / n` of `d / n` elements along `a`.
//!
//! Where they run: Vela places SLICE, SPLIT, SPLIT_V, UNPACK and STRIDED_SLICE on an Ethos-U55
//! (int8 and int16), STRIDED_SLICE only with every stride 1, no ellipsis, no offset and not
//! both new-axis and shrink masks. So a slice that satisfies those is a [`SliceI8`] /
//! [`SliceI16`] (the `Slice` family, on the NPU), and a STRIDED_SLICE that does not is a
//! [`StridedSliceI8`] / [`StridedSliceI16`] (the `StridedSlice` family, on the CPU), the same
//! kernel. Vela's rank limit (4) is not followed: TFLM's SLICE takes rank 5, and so does the
//! simulated NPU.

use core::mem::size_of;

use npu_kernels::movement::{self as mv, SliceParams};

use super::interp::{input, view, view_mut};
use super::lower::{self, compute, operands, unsupported, LowerCtx, LowerError};
use super::{bytes, padded, CpuKernel, Layer, LayerKind, OpError, Operands, Operator};
use crate::model::{BuiltinOptions, DataType, TensorInfo};

/// Highest rank TFLM's SLICE (and its 5-D STRIDED_SLICE kernel) takes.
const MAX_RANK: usize = 5;

/// Declares a slice description for one element type.
macro_rules! slice_op {
    ($($(#[$doc:meta])* $name:ident: $t:ty;)*) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq)]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        pub struct $name {
            /// Input shape, start, counts and strides.
            pub params: SliceParams,
        }

        impl Operator for $name {
            packed_fields!(params);
            fn operands(&self) -> Option<Operands> {
                let size = size_of::<$t>();
                let input = bytes(self.params.input_elements().checked_mul(size)?)?;
                Operands::new(&[input], 0, bytes(self.params.output_elements().checked_mul(size)?)?)
            }
            /// The bytes it copies: what its loops' cost follows (elements for int8).
            fn macs(&self) -> u64 {
                (self.params.output_elements() * size_of::<$t>()) as u64
            }
            fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
                Ok(mv::slice(
                    &self.params,
                    view::<$t>(input(inputs, 0), 0)?,
                    view_mut::<$t>(output)?,
                )?)
            }
            fn cpu_kernel(&self) -> CpuKernel {
                copy_kernel(self.params.walk())
            }
            fn taps(&self) -> u64 {
                self.params.walk().rows() as u64
            }
            fn layer(&self) -> Option<Layer> {
                let out = padded(self.params.output_shape().as_slice());
                Some(Layer::new(LayerKind::Transpose, out, out))
            }
        }
    )*};
}

slice_op! {
    /// int8 slice the NPU runs: SLICE, SPLIT, SPLIT_V, UNPACK, STRIDED_SLICE of unit strides.
    SliceI8: i8;
    /// int16 slice the NPU runs (see [`SliceI8`]).
    SliceI16: i16;
    /// int8 STRIDED_SLICE of other strides (negative ones too), on the CPU.
    StridedSliceI8: i8;
    /// int16 STRIDED_SLICE of other strides, on the CPU.
    StridedSliceI16: i16;
}

/// The CPU class of a strided copy: whole rows when its innermost axis is contiguous on both
/// sides (long or short, two loops of different costs), element by element otherwise.
pub(super) fn copy_kernel(walk: &mv::Walk) -> CpuKernel {
    match (walk.unit_rows(), walk.short_rows()) {
        (true, false) => CpuKernel::CopyRows,
        (true, true) => CpuKernel::CopyShortRows,
        (false, _) => CpuKernel::CopyElements,
    }
}

/// The element type of a data-movement operator: its input's and output's, int8 or int16.
pub(super) fn element_type(x: &TensorInfo<'_>, y: &TensorInfo<'_>) -> Result<DataType, LowerError> {
    if x.dtype != y.dtype {
        return Err(unsupported("output type other than the input's"));
    }
    match x.dtype {
        DataType::Int8 | DataType::Int16 => Ok(x.dtype),
        _ => Err(unsupported("tensor type other than int8 and int16")),
    }
}

/// Reads a small constant int32 or int64 tensor (begins, sizes, paddings) into `out`; returns
/// the count. int64 values must fit an `i32` (TFLM narrows them to `int`).
pub(super) fn const_ints(t: &TensorInfo<'_>, out: &mut [i32]) -> Result<usize, LowerError> {
    let data = t.data.ok_or(unsupported("non-constant parameter tensor"))?;
    let width = match t.dtype {
        DataType::Int32 => 4,
        DataType::Int64 => 8,
        _ => {
            return Err(unsupported(
                "parameter tensor type other than int32 and int64",
            ))
        }
    };
    let n = data.len() / width;
    if n > out.len() || n != t.shape.num_elements() as usize {
        return Err(unsupported("parameter tensor of that length"));
    }
    for (o, c) in out.iter_mut().zip(data.chunks_exact(width)) {
        *o = if width == 4 {
            i32::from_le_bytes([c[0], c[1], c[2], c[3]])
        } else {
            let v = i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
            i32::try_from(v).map_err(|_| unsupported("parameter beyond int32"))?
        };
    }
    Ok(n)
}

/// A constant int32 axis (a one-element tensor) in `0..rank`, negative counted from the end.
fn const_axis(t: &TensorInfo<'_>, rank: usize) -> Result<usize, LowerError> {
    if t.dtype != DataType::Int32 {
        return Err(unsupported("axis tensor type other than int32"));
    }
    let mut axis = [0i32; 1];
    if const_ints(t, &mut axis)? != 1 {
        return Err(unsupported("axis tensor of other than one element"));
    }
    axis_in(axis[0], rank)
}

/// `axis` in `0..rank`, negative counted from the end.
pub(super) fn axis_in(axis: i32, rank: usize) -> Result<usize, LowerError> {
    let a = if axis < 0 {
        i64::from(axis) + rank as i64
    } else {
        i64::from(axis)
    };
    usize::try_from(a)
        .ok()
        .filter(|&a| a < rank)
        .ok_or(unsupported("axis out of range"))
}

/// The op for a slice of `x` into `y`: on the NPU's family when `npu`.
fn slice_op(
    x: &TensorInfo<'_>,
    y: &TensorInfo<'_>,
    (begin, counts, strides): (&[u32], &[u32], &[i32]),
    npu: bool,
) -> Result<lower::Lowered, LowerError> {
    let params = SliceParams::new(x.shape.dims(), begin, counts, strides)?;
    lower::check_elements(y, params.output_elements())?;
    let list = operands(&[lower::Operand::Tensor(x.index)]);
    Ok(match (element_type(x, y)?, npu) {
        (DataType::Int8, true) => compute(SliceI8 { params }, list),
        (DataType::Int8, false) => compute(StridedSliceI8 { params }, list),
        (_, true) => compute(SliceI16 { params }, list),
        (_, false) => compute(StridedSliceI16 { params }, list),
    })
}

/// The input of a slicing operator: rank 1 to 5.
fn sliced(t: TensorInfo<'_>) -> Result<TensorInfo<'_>, LowerError> {
    if (1..=MAX_RANK).contains(&t.shape.rank()) {
        Ok(t)
    } else {
        Err(unsupported("rank outside 1 to 5"))
    }
}

/// The whole of `dims` as counts from 0.
fn whole(dims: &[u32]) -> ([u32; MAX_RANK], [u32; MAX_RANK]) {
    let mut counts = [0u32; MAX_RANK];
    counts[..dims.len()].copy_from_slice(dims);
    ([0; MAX_RANK], counts)
}

/// SLICE (int8, int16): constant begin and size (int32 or int64), a size of −1 meaning to the
/// end. Begins and sizes reaching outside the input, which TFLM does not check, are refused.
pub(super) fn lower_slice(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, LowerError> {
    let (x, y) = (sliced(ctx.input(0)?)?, ctx.output()?);
    let rank = x.shape.rank();
    let (mut begin, mut size) = ([0i32; MAX_RANK], [0i32; MAX_RANK]);
    if const_ints(&ctx.input(1)?, &mut begin)? != rank
        || const_ints(&ctx.input(2)?, &mut size)? != rank
    {
        return Err(unsupported(
            "SLICE begin or size of other than one entry per axis",
        ));
    }
    let (mut b, mut counts) = ([0u32; MAX_RANK], [0u32; MAX_RANK]);
    for k in 0..rank {
        let dim = x.shape.dims()[k];
        b[k] = u32::try_from(begin[k])
            .ok()
            .filter(|&b| b <= dim)
            .ok_or(unsupported("SLICE begin outside the input"))?;
        counts[k] = match size[k] {
            -1 => dim - b[k],
            s => u32::try_from(s)
                .ok()
                .filter(|&s| s <= dim - b[k])
                .ok_or(unsupported("SLICE size outside the input"))?,
        };
    }
    if y.shape.dims() != &counts[..rank] {
        return Err(unsupported("SLICE output shape other than its sizes"));
    }
    slice_op(
        &x,
        &y,
        (&b[..rank], &counts[..rank], &[1; MAX_RANK][..rank]),
        true,
    )
}

/// STRIDED_SLICE (int8, int16): constant int32 begin, end and strides, one entry per axis;
/// begin, end and shrink-axis masks, negative indices and strides, resolved as TFLM's 5-D
/// kernel does (`strided_slice_logic.h`: `StridedSliceStartForAxis`, `StridedSliceEndForAxis`).
/// TFLM ignores the ellipsis and new-axis masks and the offset attribute (its parameters
/// zero them), and so does this, its output-shape check refusing what they would change.
/// A shrunk axis must index an element forwards: TFLM leaves its output unwritten otherwise.
pub(super) fn lower_strided_slice(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, LowerError> {
    let BuiltinOptions::StridedSlice(o) = ctx.options().clone().or_default_for(ctx.builtin())
    else {
        return Err(unsupported("STRIDED_SLICE options"));
    };
    if ctx.input_count() != 4 {
        return Err(unsupported("STRIDED_SLICE of other than 4 inputs"));
    }
    let (x, y) = (sliced(ctx.input(0)?)?, ctx.output()?);
    let rank = x.shape.rank();
    let mut v = [[0i32; MAX_RANK]; 3];
    for (i, values) in v.iter_mut().enumerate() {
        let t = ctx.input(i + 1)?;
        if t.dtype != DataType::Int32 || const_ints(&t, values)? != rank {
            return Err(unsupported(
                "STRIDED_SLICE begin, end or strides not int32 with one entry per axis",
            ));
        }
    }
    let [begin, end, strides] = v;
    let (mut starts, mut counts, mut shape) =
        ([0u32; MAX_RANK], [0u32; MAX_RANK], [0u32; MAX_RANK]);
    let mut kept = 0;
    for k in 0..rank {
        let size = i64::from(x.shape.dims()[k]);
        let stride = i64::from(strides[k]);
        if stride == 0 {
            return Err(unsupported("STRIDED_SLICE stride 0"));
        }
        let bit = |mask: i32| mask & (1 << k) != 0;
        let clamp = |v: i64| {
            if stride > 0 {
                v.clamp(0, size)
            } else {
                v.clamp(-1, size - 1)
            }
        };
        let mut start = i64::from(begin[k]);
        if start < 0 {
            start += size;
        }
        start = clamp(start);
        if bit(o.begin_mask) {
            start = if stride > 0 { 0 } else { size - 1 };
        }
        let shrink = bit(o.shrink_axis_mask);
        let stop = if shrink {
            if stride < 0 || !(0..size).contains(&start) {
                return Err(unsupported(
                    "STRIDED_SLICE shrinking an axis to no element or backwards",
                ));
            }
            start + 1
        } else {
            let mut stop = i64::from(end[k]);
            if stop < 0 {
                stop += size;
            }
            stop = clamp(stop);
            if bit(o.end_mask) {
                stop = if stride > 0 { size } else { -1 };
            }
            stop
        };
        let n = if stride > 0 && stop > start {
            (stop - start + stride - 1) / stride
        } else if stride < 0 && start > stop {
            (start - stop - stride - 1) / -stride
        } else {
            0
        };
        // At most the axis' size.
        counts[k] = n as u32;
        starts[k] = if n > 0 { start as u32 } else { 0 };
        if !shrink {
            shape[kept] = n as u32;
            kept += 1;
        }
    }
    if y.shape.dims() != &shape[..kept] {
        return Err(unsupported("STRIDED_SLICE output shape"));
    }
    let npu = strides[..rank].iter().all(|&s| s == 1)
        && o.ellipsis_mask == 0
        && !o.offset
        && !(o.new_axis_mask != 0 && o.shrink_axis_mask != 0);
    slice_op(
        &x,
        &y,
        (&starts[..rank], &counts[..rank], &strides[..rank]),
        npu,
    )
}

/// One output of SPLIT (int8, int16): input 0 the constant int32 axis, input 1 the tensor,
/// split into as many equal parts as the operator has outputs (as TFLM, which reads the count
/// from the outputs, not the options).
pub(super) fn lower_split(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, LowerError> {
    let (x, y) = (sliced(ctx.input(1)?)?, ctx.nth_output()?);
    let rank = x.shape.rank();
    let axis = const_axis(&ctx.input(0)?, rank)?;
    let n = u32::try_from(ctx.output_count()).map_err(|_| unsupported("SPLIT outputs"))?;
    let dim = x.shape.dims()[axis];
    if n == 0 || !dim.is_multiple_of(n) {
        return Err(unsupported(
            "SPLIT of an axis its output count does not divide",
        ));
    }
    let part = dim / n;
    let (mut begin, mut counts) = whole(x.shape.dims());
    begin[axis] = part * ctx.output_index() as u32;
    counts[axis] = part;
    if y.shape.dims() != &counts[..rank] {
        return Err(unsupported("SPLIT output shape"));
    }
    slice_op(
        &x,
        &y,
        (&begin[..rank], &counts[..rank], &[1; MAX_RANK][..rank]),
        true,
    )
}

/// One output of SPLIT_V (int8, int16): input 0 the tensor, input 1 the constant sizes (int32
/// or int64, at most one −1 for the rest), input 2 the constant int32 axis. TFLM takes each
/// output's part from its shape; the sizes must agree with those shapes, so both read the
/// same.
pub(super) fn lower_split_v(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, LowerError> {
    let (x, y) = (sliced(ctx.input(0)?)?, ctx.nth_output()?);
    let rank = x.shape.rank();
    let axis = const_axis(&ctx.input(2)?, rank)?;
    let mut sizes = [0i32; super::MAX_INPUTS * 2];
    let n = const_ints(&ctx.input(1)?, &mut sizes)?;
    let j = ctx.output_index();
    if n != ctx.output_count() || j >= n {
        return Err(unsupported(
            "SPLIT_V sizes of other than one entry per output",
        ));
    }
    let dim = i64::from(x.shape.dims()[axis]);
    let sizes = &mut sizes[..n];
    let inferred = sizes.iter().filter(|&&s| s == -1).count();
    let known: i64 = sizes
        .iter()
        .filter(|&&s| s != -1)
        .map(|&s| i64::from(s))
        .sum();
    if inferred > 1 || sizes.iter().any(|&s| s < -1) {
        return Err(unsupported("SPLIT_V sizes"));
    }
    for s in sizes.iter_mut() {
        if *s == -1 {
            *s = i32::try_from(dim - known).map_err(|_| unsupported("SPLIT_V sizes"))?;
        }
    }
    if sizes.iter().map(|&s| i64::from(s)).sum::<i64>() != dim || sizes.iter().any(|&s| s < 0) {
        return Err(unsupported("SPLIT_V sizes not adding up to the axis"));
    }
    let (mut begin, mut counts) = whole(x.shape.dims());
    // Each at least 0 and their sum the axis' size, checked above.
    begin[axis] = sizes[..j].iter().map(|&s| s as u32).sum();
    counts[axis] = sizes[j] as u32;
    if y.shape.dims() != &counts[..rank] {
        return Err(unsupported("SPLIT_V output shape"));
    }
    slice_op(
        &x,
        &y,
        (&begin[..rank], &counts[..rank], &[1; MAX_RANK][..rank]),
        true,
    )
}

/// One output of UNPACK (int8, int16): output `j` is element `j` along the axis, the axis
/// removed. The options' count must be the axis' size and the output count (TFLM indexes by
/// the count).
pub(super) fn lower_unpack(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, LowerError> {
    let BuiltinOptions::Unpack(o) = ctx.options().clone().or_default_for(ctx.builtin()) else {
        return Err(unsupported("UNPACK options"));
    };
    let (x, y) = (sliced(ctx.input(0)?)?, ctx.nth_output()?);
    let rank = x.shape.rank();
    let axis = axis_in(o.axis, rank)?;
    let dim = x.shape.dims()[axis] as usize;
    if usize::try_from(o.count).ok() != Some(dim) || ctx.output_count() != dim {
        return Err(unsupported("UNPACK count other than the axis' size"));
    }
    let (mut begin, mut counts) = whole(x.shape.dims());
    begin[axis] = ctx.output_index() as u32;
    counts[axis] = 1;
    let mut shape = [0u32; MAX_RANK];
    let kept = x
        .shape
        .dims()
        .iter()
        .enumerate()
        .filter(|&(k, _)| k != axis);
    for (s, (_, &d)) in shape.iter_mut().zip(kept) {
        *s = d;
    }
    if y.shape.dims() != &shape[..rank - 1] {
        return Err(unsupported("UNPACK output shape"));
    }
    slice_op(
        &x,
        &y,
        (&begin[..rank], &counts[..rank], &[1; MAX_RANK][..rank]),
        true,
    )
}
