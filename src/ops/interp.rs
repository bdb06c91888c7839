//! The operator interpreter's plumbing over byte buffers: typed views of raw operand bytes,
//! in-place execution through a stack copy, and splitting one memory into an output and its
//! inputs. The CPU fallback and the simulator both compute through it, so both compute with
//! the same arithmetic.
//!
//! Buffers are raw bytes as they lie in memory (little-endian f32 / i32, int8). Viewing them as
//! typed slices needs their natural alignment; HALs guarantee it by aligning every region.

use super::{Op, OpError, MAX_INPUTS};

/// Input `operand`'s bytes as elements of `T`.
pub(super) fn view<T: bytemuck::AnyBitPattern>(
    bytes: &[u8],
    operand: usize,
) -> Result<&[T], OpError> {
    bytemuck::try_cast_slice(bytes).map_err(|_| OpError::Misaligned {
        operand: operand as u8,
    })
}

/// The output's bytes as elements of `T`.
pub(super) fn view_mut<T: bytemuck::AnyBitPattern + bytemuck::NoUninit>(
    bytes: &mut [u8],
) -> Result<&mut [T], OpError> {
    bytemuck::try_cast_slice_mut(bytes).map_err(|_| OpError::Misaligned {
        operand: MAX_INPUTS as u8,
    })
}

/// Input `i` of `inputs` (empty when absent: the kernel then refuses its length).
pub(super) fn input<'a>(inputs: &[&'a [u8]], i: usize) -> &'a [u8] {
    inputs.get(i).copied().unwrap_or(&[])
}

/// Input `i` as int8.
pub(super) fn i8s<'a>(inputs: &[&'a [u8]], i: usize) -> Result<&'a [i8], OpError> {
    view(input(inputs, i), i)
}

/// The optional int32 bias at input `i`.
pub(super) fn bias<'a>(inputs: &[&'a [u8]], i: usize) -> Result<Option<&'a [i32]>, OpError> {
    inputs.get(i).map(|b| view::<i32>(b, i)).transpose()
}

/// Input `i` as int16.
pub(super) fn i16s<'a>(inputs: &[&'a [u8]], i: usize) -> Result<&'a [i16], OpError> {
    view(input(inputs, i), i)
}

/// The optional bias at input `i` of a 16x8 operator, of the accumulator type `A` (int32 or
/// int64), read at any alignment (a `.tflite` file aligns int64 biases to 4 bytes only).
pub(super) fn bias_of<'a, A: npu_kernels::int16::Accumulator>(
    inputs: &[&'a [u8]],
    i: usize,
) -> Option<npu_kernels::int16::Bias<'a, A>> {
    inputs
        .get(i)
        .map(|b| npu_kernels::int16::Bias::from_le_bytes(b))
}

/// Elements computed per pass by [`run_in_place`]: the size of its stack copy.
const IN_PLACE_CHUNK: usize = 64;

/// See [`Op::run_in_place`].
pub(super) fn run_in_place(
    op: &Op,
    inputs: &[Option<&[u8]>],
    inout: &mut [u8],
) -> Result<(), OpError> {
    if !op.runs_in_place() {
        return Err(OpError::NotInPlace);
    }
    let mut copy = [0u8; IN_PLACE_CHUNK];
    let mut start = 0;
    while start < inout.len() {
        let end = (start + IN_PLACE_CHUNK).min(inout.len());
        let n = end - start;
        copy[..n].copy_from_slice(&inout[start..end]);
        let chunk_op = op.prefix(n as u32).ok_or(OpError::NotInPlace)?;
        let mut views: heapless::Vec<&[u8], MAX_INPUTS> = heapless::Vec::new();
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
        chunk_op.run(&views, &mut inout[start..end])?;
        start = end;
    }
    Ok(())
}

/// The alignment an operand's bytes need for every typed view the kernels take of them (`i32`
/// biases and multipliers, `f32`, `i16`): a buffer starting on it can be viewed as any.
pub const VIEW_ALIGNMENT: usize = 4;

/// Where one input of an op computed over a memory ([`run_over`]) lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputBytes<'a> {
    /// `(offset, len)` in the memory.
    At(usize, usize),
    /// Bytes outside it, read only (a model's constants in flash).
    Outside(&'a [u8]),
}

/// Computes `op` over one memory: its output at `output` (`(offset, len)`), its inputs where
/// `inputs` says. A stateful op's [state operands](Op::state_inputs) (its first inputs,
/// which must lie in the memory) are updated where they lie. An input whose range is exactly
/// the output's, for an op that [runs in place](Op::runs_in_place), is read from the output
/// ([`Op::run_in_place`]). `None` when a range is out of bounds or overlaps what it must not
/// (see [`split_operands`], [`split_writable`]); else the op's result.
///
/// The CPU fallback computes through it over host staging or device memory, and the
/// simulator over device memory, so that all of them compute the same way.
pub fn run_over(
    op: &Op,
    memory: &mut [u8],
    output: (usize, usize),
    inputs: &[InputBytes<'_>],
) -> Option<Result<(), OpError>> {
    let state = usize::from(op.state_inputs()).min(inputs.len());
    let in_place = |i: &InputBytes<'_>| {
        op.runs_in_place() && state == 0 && output.1 > 0 && *i == InputBytes::At(output.0, output.1)
    };
    let mut writable: heapless::Vec<(usize, usize), MAX_INPUTS> = heapless::Vec::new();
    writable.push(output).ok()?;
    for i in &inputs[..state] {
        let InputBytes::At(start, len) = *i else {
            return None;
        };
        writable.push((start, len)).ok()?;
    }
    let mut ranges: heapless::Vec<(usize, usize), MAX_INPUTS> = heapless::Vec::new();
    for i in &inputs[state..] {
        if let (InputBytes::At(start, len), false) = (*i, in_place(i)) {
            ranges.push((start, len)).ok()?;
        }
    }
    let (mut mutable, views) = split_writable(memory, &writable, &ranges)?;
    let mut views = views.into_iter();
    // Every input in operand order: `None` for one read from the output.
    let mut ins: heapless::Vec<Option<&[u8]>, MAX_INPUTS> = heapless::Vec::new();
    for i in &inputs[state..] {
        let view = match *i {
            _ if in_place(i) => None,
            InputBytes::At(..) => Some(views.next()?),
            InputBytes::Outside(bytes) => Some(bytes),
        };
        ins.push(view).ok()?;
    }
    let (out, state) = mutable.split_first_mut()?;
    if ins.iter().any(Option::is_none) {
        return Some(op.run_in_place(&ins, out));
    }
    let ins: heapless::Vec<&[u8], MAX_INPUTS> = ins.into_iter().flatten().collect();
    Some(if state.is_empty() {
        op.run(&ins, out)
    } else {
        op.run_stateful(state, &ins, out)
    })
}

/// Splits one memory into a mutable output range and shared input ranges, which must not
/// overlap the output (inputs may overlap each other). Ranges are `(offset, len)`. `None` if a
/// range is out of bounds or overlaps the output.
pub fn split_operands<'m>(
    memory: &'m mut [u8],
    output: (usize, usize),
    inputs: &[(usize, usize)],
) -> Option<(&'m mut [u8], heapless::Vec<&'m [u8], MAX_INPUTS>)> {
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

/// The mutable and the shared slices [`split_writable`] cuts.
pub type Split<'m> = (
    heapless::Vec<&'m mut [u8], MAX_INPUTS>,
    heapless::Vec<&'m [u8], MAX_INPUTS>,
);

/// Splits one memory into mutable ranges (an output and a stateful op's state operands,
/// which must not overlap each other) and shared input ranges (which must not overlap any
/// mutable one; they may overlap each other). Ranges are `(offset, len)`; the mutable slices
/// come back in the order of `writable`. `None` if a range is out of bounds or overlaps what
/// it must not.
pub fn split_writable<'m>(
    memory: &'m mut [u8],
    writable: &[(usize, usize)],
    inputs: &[(usize, usize)],
) -> Option<Split<'m>> {
    // The writable ranges by start, each checked to end before the next begins.
    // (Kept sorted as they are added, here and for `cut` below: a few ranges, and a general
    // sort would put a quicksort in a firmware's flash.)
    let mut order: heapless::Vec<usize, MAX_INPUTS> = heapless::Vec::new();
    for (k, &(start, _)) in writable.iter().enumerate() {
        let at = order.partition_point(|&o| writable[o].0 <= start);
        order.insert(at, k).ok()?;
    }
    // Memory cut at each writable range: the shared gaps between, with their offsets.
    let mut gaps: heapless::Vec<(usize, &'m [u8]), { MAX_INPUTS + 1 }> = heapless::Vec::new();
    let mut cut: heapless::Vec<(usize, &'m mut [u8]), MAX_INPUTS> = heapless::Vec::new();
    let mut rest = memory;
    let mut at = 0;
    for &k in &order {
        let (start, len) = writable[k];
        let skip = start.checked_sub(at)?;
        if skip.checked_add(len)? > rest.len() {
            return None;
        }
        let (gap, tail) = rest.split_at_mut(skip);
        let (range, tail) = tail.split_at_mut(len);
        gaps.push((at, gap)).ok()?;
        // In the order asked for.
        cut.insert(cut.partition_point(|&(o, _)| o < k), (k, range))
            .ok()?;
        rest = tail;
        at = start + len;
    }
    gaps.push((at, rest)).ok()?;
    let mut views = heapless::Vec::new();
    for &(start, len) in inputs {
        start.checked_add(len)?;
        let within = gaps.iter().find_map(|&(g, bytes)| {
            let from = start.checked_sub(g)?;
            bytes.get(from..from + len)
        });
        let view = match within {
            Some(view) => view,
            // An empty input inside a writable range: empty, but at the memory's start, so
            // that it is as aligned as the memory (a kernel that views it as `f32` or `i32`
            // checks its alignment; `&[]` would sit at address 1).
            None if len == 0 => gaps.first().map(|&(_, bytes)| &bytes[..0])?,
            None => return None,
        };
        views.push(view).ok()?;
    }
    Some((cut.into_iter().map(|(_, r)| r).collect(), views))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{AddF32, AddI8, ReluF32};

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

    /// An operator of no elements over empty operands runs, wherever they lie: an empty input
    /// is viewed inside the memory (as aligned as it), not at `&[]`'s address 1, which an
    /// `f32` kernel's alignment check refused (a 0-element ReLU failed its job).
    #[test]
    fn empty_operands_run_aligned() {
        #[repr(align(4))]
        struct Memory([u8; 64]);
        let mut m = Memory([0; 64]);
        let relu = Op::ReluF32(ReluF32 { len: 0 });
        for (input, output) in [(16, 32), (32, 32), (40, 8)] {
            let ran = run_over(&relu, &mut m.0, (output, 0), &[InputBytes::At(input, 0)]);
            assert_eq!(ran, Some(Ok(())), "input at {input}, output at {output}");
        }
        let (_, ins) = split_writable(&mut m.0, &[(0, 8)], &[(4, 0), (16, 0)]).unwrap();
        assert!(ins.iter().all(|v| (v.as_ptr() as usize).is_multiple_of(4)));
    }

    #[test]
    fn split_writable_rejects_overlap() {
        let mut m = [0u8; 64];
        {
            let (mut outs, ins) =
                split_writable(&mut m, &[(32, 8), (0, 8)], &[(8, 8), (48, 16)]).unwrap();
            assert_eq!((outs[0].len(), outs[1].len(), ins.len()), (8, 8, 2));
            outs[1][0] = 7;
        }
        assert_eq!(m[0], 7);
        // Writable ranges overlapping each other, an input overlapping one, out of bounds.
        assert!(split_writable(&mut m, &[(0, 8), (4, 8)], &[]).is_none());
        assert!(split_writable(&mut m, &[(0, 8)], &[(4, 8)]).is_none());
        assert!(split_writable(&mut m, &[(60, 8)], &[]).is_none());
        assert!(split_writable(&mut m, &[(0, 8)], &[(60, 8)]).is_none());
        // Empty inputs anywhere; inputs may overlap each other.
        let ins =
            split_writable(&mut m, &[(0, 8)], &[(4, 0), (8, 8), (12, 8)]).map(|(_, i)| i.len());
        assert_eq!(ins, Some(3));
    }

    #[test]
    fn in_place_equals_separate_buffers() {
        use npu_kernels::int8::{Activation, AddParams, Quant};
        let q = |scale, zero_point| Quant { scale, zero_point };
        let params = AddParams::new(q(0.05, -3), q(0.07, 5), q(0.1, 2), Activation::None).unwrap();
        let op = Op::from(AddI8 { len: 150, params });
        let a: [u8; 150] = core::array::from_fn(|i| (i * 7) as u8);
        let b: [u8; 150] = core::array::from_fn(|i| (i * 13 + 1) as u8);
        let mut separate = [0u8; 150];
        op.run(&[&a, &b], &mut separate).unwrap();
        let mut inout = a;
        op.run_in_place(&[None, Some(&b)], &mut inout).unwrap();
        assert_eq!(inout, separate);
        // Both inputs the output (x + x).
        let mut twice = [0u8; 150];
        op.run(&[&a, &a], &mut twice).unwrap();
        let mut inout = a;
        op.run_in_place(&[None, None], &mut inout).unwrap();
        assert_eq!(inout, twice);
        let relu = Op::from(ReluF32 { len: 4 });
        assert_eq!(
            relu.run_in_place(&[None], &mut [0; 16]),
            Err(OpError::NotInPlace)
        );
    }

    #[test]
    fn input_count_is_checked() {
        let mut out = [0u8; 4];
        assert_eq!(
            Op::from(AddF32 { len: 1 }).run(&[&[0; 4]], &mut out),
            Err(OpError::InputCount { given: 1 })
        );
    }
}
