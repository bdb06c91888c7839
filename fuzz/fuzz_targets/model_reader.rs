//! Fuzz target: `Model::parse` on arbitrary bytes, then every accessor.
//!
//! Must never panic. After a successful parse, no accessor may fail (that is the reader's
//! contract), so an accessor error is reported as a crash too.

#![no_main]

use libfuzzer_sys::fuzz_target;
use npu_compute::model::{BuiltinOptions, Model, ModelError};

fn walk(m: &Model<'_>) -> Result<u64, ModelError> {
    let mut sum = u64::from(m.version());
    sum = sum.wrapping_add(m.description().map_or(0, |d| d.len() as u64));
    for i in 0..m.opcode_count() {
        let c = m.opcode(i)?;
        sum = sum.wrapping_add(c.builtin.code() as u64 + c.builtin.name().len() as u64);
        sum = sum.wrapping_add(c.custom_code.map_or(0, |s| s.len() as u64));
    }
    for i in 0..m.buffer_count() {
        sum = sum.wrapping_add(
            m.buffer(i)?
                .map_or(0, |d| d.iter().map(|&b| u64::from(b)).sum()),
        );
    }
    for s in 0..m.subgraph_count() {
        let g = m.subgraph_at(s)?;
        sum = sum.wrapping_add(g.name().map_or(0, |n| n.len() as u64));
        for t in g.tensors() {
            let t = t?;
            sum = sum.wrapping_add(t.name.len() as u64 + u64::from(t.shape.num_elements()));
            for &d in t.shape.dims() {
                sum = sum.wrapping_add(u64::from(d));
            }
            sum = sum.wrapping_add(u64::from(t.byte_size.unwrap_or(0)));
            sum =
                sum.wrapping_add(t.dtype.bits().unwrap_or(0) as u64 + t.dtype.name().len() as u64);
            if let (Some(d), Some(size)) = (t.data, t.byte_size) {
                assert!(
                    d.len() as u64 == u64::from(size)
                        || d.len() as u64 == u64::from(t.shape.num_elements())
                );
            }
            if let Some(q) = t.quantization {
                for i in 0..q.len() {
                    sum = sum.wrapping_add(u64::from(q.scale(i).expect("scale").to_bits()));
                    sum = sum.wrapping_add(q.zero_point(i).expect("zero point") as u64);
                }
                assert!(q.scale(q.len()).is_none());
                sum = sum.wrapping_add(q.scales().map(|s| u64::from(s.to_bits())).sum::<u64>());
                sum =
                    sum.wrapping_add(q.zero_points().map(|z| z as u64).fold(0, u64::wrapping_add));
                if let Some(axis) = q.quantized_dimension() {
                    assert_eq!(t.shape.dim(axis), Some(q.len() as u32));
                }
            }
        }
        for op in g.operators() {
            let op = op?;
            sum = sum.wrapping_add(op.builtin.code() as u64 + u64::from(op.opcode_index));
            for &i in op.inputs.iter().chain(op.outputs.iter()).flatten() {
                sum = sum.wrapping_add(u64::from(g.tensor(i)?.index));
            }
            let options = op.options.clone().or_default_for(op.builtin);
            sum = sum.wrapping_add(match &options {
                BuiltinOptions::Reshape(r) => r.new_shape.as_ref().map_or(0, |s| s.len() as u64),
                BuiltinOptions::Conv2d(c) => c.stride_w as u64,
                BuiltinOptions::Other { options_type } => u64::from(*options_type),
                _ => 1,
            });
            sum = sum.wrapping_add(op.custom_options.map_or(0, |c| c.len() as u64));
        }
        for i in g.inputs().chain(g.outputs()) {
            sum = sum.wrapping_add(u64::from(g.tensor(i)?.index));
        }
        assert_eq!(g.inputs().count(), g.inputs().len());
        assert_eq!(g.outputs().count(), g.outputs().len());
    }
    Ok(sum)
}

fuzz_target!(|data: &[u8]| {
    if let Ok(model) = Model::parse(data) {
        match walk(&model) {
            Ok(sum) => {
                core::hint::black_box(sum);
            }
            Err(e) => panic!("accessor failed after a successful parse: {e:?}"),
        }
    }
});
