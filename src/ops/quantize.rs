//! QUANTIZE and DEQUANTIZE: int8 to int8 with another scale (requantization), f32 to int8, and
//! int8 to f32, TFLM's rounding; and the same with int16 (TensorFlow Lite's 16x8 models): int16
//! to int16 and to int8, int8 to int16, f32 to int16, int16 to f32. Operands `[input]`; an op's
//! dtype is its input's.
//!
//! Where they run: Vela places QUANTIZE on an Ethos-U55 for int8 and int16 (its generic
//! constraints only), so every QUANTIZE form is on the simulated NPU with the int8 ones (f32 to
//! int16 shares f32 to int8's family and dtype, which the simulator has run since before the
//! list was followed). Vela has no DEQUANTIZE: int16 to f32 runs on the CPU.
//!
//! TFLM's integer QUANTIZE forms with int32 on one side (int8 or int16 to int32, int32 to int8
//! or int16) are their own family, [`OpKind::QuantizeInt32`](super::OpKind::QuantizeInt32),
//! on the CPU: Vela takes int32 tensors only for ADD, ARG_MAX, MUL, SHAPE, SUB and TRANSPOSE.

use npu_kernels::int8::{self as ki, IntType, Quant, RequantizeParams};
use npu_kernels::packed::{WordReader, Words};
use npu_kernels::KernelError;

use super::interp::{i8s, input, view, view_mut};
use super::lower::{self, compute, operands, quant, quant_of, unsupported, LowerCtx};
use super::{rows_of, CpuKernel, Layer, LayerKind, OpError, Operands, Operator};
use crate::model::DataType;

/// int8 to int8 QUANTIZE (requantization) on `len` elements.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RequantizeI8 {
    /// Elements.
    pub len: u32,
    /// Rescaling parameters.
    pub params: RequantizeParams,
}

/// f32 to int8 QUANTIZE on `len` elements (operand `[input]` is f32).
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct QuantizeF32 {
    /// Elements.
    pub len: u32,
    /// The output's quantization.
    pub quant: Quant,
}

/// int8 to f32 DEQUANTIZE on `len` elements (the output is f32).
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DequantizeI8 {
    /// Elements.
    pub len: u32,
    /// The input's quantization.
    pub quant: Quant,
}

/// f32 to int16 QUANTIZE on `len` elements (operand `[input]` is f32).
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct QuantizeF32ToI16 {
    /// Elements.
    pub len: u32,
    /// The output's quantization.
    pub quant: Quant,
}

/// int16 to f32 DEQUANTIZE on `len` elements (the output is f32).
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DequantizeI16 {
    /// Elements.
    pub len: u32,
    /// The input's quantization.
    pub quant: Quant,
}

/// Declares an integer QUANTIZE between two integer types: its description and `impl
/// Operator`, priced as the CPU kernel class `$cpu` (measured on the firmware: 29 per element
/// into int16 or int32 or from int16 into int16, `Requantize16`; 43 into int8 or from int32,
/// `Requantize`), and with `npu` a pass of the cycle model (those the Ethos-U55 runs; the
/// int32 ones run on the CPU: no layer).
macro_rules! requantize {
    ($(#[$doc:meta])* $name:ident, $in:ty => $out:ty, $kernel:ident, $cpu:ident, npu: $npu:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq)]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        pub struct $name {
            /// Elements.
            pub len: u32,
            /// Rescaling parameters.
            pub params: RequantizeParams,
        }

        impl Operator for $name {
            fn pack(&self, w: &mut Words<'_>) -> bool {
                w.put(self.len);
                self.params.pack(w);
                true
            }
            fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
                Ok(Self {
                    len: r.take()?,
                    params: RequantizeParams::unpack(r, int_type::<$in>(), int_type::<$out>())?,
                })
            }
            fn operands(&self) -> Option<Operands> {
                conversion(
                    self.len,
                    core::mem::size_of::<$in>() as u32,
                    core::mem::size_of::<$out>() as u32,
                )
            }
            fn macs(&self) -> u64 {
                u64::from(self.len)
            }
            fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
                let x = view::<$in>(input(inputs, 0), 0)?;
                Ok(ki::$kernel(&self.params, x, view_mut(output)?)?)
            }
            fn cpu_kernel(&self) -> CpuKernel {
                CpuKernel::$cpu
            }
            fn layer(&self) -> Option<Layer> {
                $npu.then(|| layer(self.len))
            }
            fn output_elements(&self) -> Option<u64> {
                Some(u64::from(self.len))
            }
        }
    };
}

requantize!(
    /// int16 to int16 QUANTIZE (requantization) on `len` elements.
    RequantizeI16, i16 => i16, requantize_i16, Requantize16, npu: true
);
requantize!(
    /// int16 to int8 QUANTIZE on `len` elements.
    RequantizeI16ToI8, i16 => i8, requantize_i16_to_i8, Requantize, npu: true
);
requantize!(
    /// int8 to int16 QUANTIZE on `len` elements.
    RequantizeI8ToI16, i8 => i16, requantize_i8_to_i16, Requantize16, npu: true
);

requantize!(
    /// int8 to int32 QUANTIZE on `len` elements.
    RequantizeI8ToI32, i8 => i32, requantize_i8_to_i32, Requantize16, npu: false
);
requantize!(
    /// int16 to int32 QUANTIZE on `len` elements.
    RequantizeI16ToI32, i16 => i32, requantize_i16_to_i32, Requantize16, npu: false
);
requantize!(
    /// int32 to int8 QUANTIZE on `len` elements.
    RequantizeI32ToI8, i32 => i8, requantize_i32_to_i8, Requantize, npu: false
);
requantize!(
    /// int32 to int16 QUANTIZE on `len` elements.
    RequantizeI32ToI16, i32 => i16, requantize_i32_to_i16, Requantize, npu: false
);

/// The integer type of `T` (i8, i16 or i32), by its size.
fn int_type<T>() -> IntType {
    match core::mem::size_of::<T>() {
        1 => IntType::I8,
        2 => IntType::I16,
        _ => IntType::I32,
    }
}

/// Operands of a conversion of `len` elements from `in_size`-byte to `out_size`-byte ones.
fn conversion(len: u32, in_size: u32, out_size: u32) -> Option<Operands> {
    Operands::new(&[len.checked_mul(in_size)?], 0, len.checked_mul(out_size)?)
}

/// The cycle model's view: one pass through the output stage.
fn layer(len: u32) -> Layer {
    let rows = rows_of(len, 1);
    Layer::new(LayerKind::Quantize, rows, rows)
}

impl Operator for RequantizeI8 {
    fn pack(&self, w: &mut Words<'_>) -> bool {
        w.put(self.len);
        self.params.pack(w);
        true
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        Ok(Self {
            len: r.take()?,
            params: RequantizeParams::unpack(r, IntType::I8, IntType::I8)?,
        })
    }
    fn operands(&self) -> Option<Operands> {
        Operands::new(&[self.len], 0, self.len)
    }
    fn macs(&self) -> u64 {
        u64::from(self.len)
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        Ok(ki::requantize(
            &self.params,
            i8s(inputs, 0)?,
            view_mut(output)?,
        )?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::Requantize
    }
    fn layer(&self) -> Option<Layer> {
        Some(layer(self.len))
    }
}

impl Operator for QuantizeF32 {
    fn pack(&self, w: &mut Words<'_>) -> bool {
        w.put(self.len);
        self.quant.pack(w);
        true
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        Ok(Self {
            len: r.take()?,
            quant: Quant::unpack(r, IntType::I8)?,
        })
    }
    fn operands(&self) -> Option<Operands> {
        Operands::new(&[self.len.checked_mul(4)?], 0, self.len)
    }
    fn macs(&self) -> u64 {
        u64::from(self.len)
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        let x = view(input(inputs, 0), 0)?;
        Ok(ki::quantize_f32(self.quant, x, view_mut(output)?)?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::Quantize
    }
    fn layer(&self) -> Option<Layer> {
        Some(layer(self.len))
    }
    fn output_elements(&self) -> Option<u64> {
        Some(u64::from(self.len))
    }
}

impl Operator for DequantizeI8 {
    fn pack(&self, w: &mut Words<'_>) -> bool {
        w.put(self.len);
        self.quant.pack(w);
        true
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        Ok(Self {
            len: r.take()?,
            quant: Quant::unpack(r, IntType::I8)?,
        })
    }
    fn operands(&self) -> Option<Operands> {
        Operands::new(&[self.len], 0, self.len.checked_mul(4)?)
    }
    fn macs(&self) -> u64 {
        u64::from(self.len)
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        Ok(ki::dequantize(
            self.quant,
            i8s(inputs, 0)?,
            view_mut(output)?,
        )?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::Dequantize
    }
    fn output_elements(&self) -> Option<u64> {
        Some(u64::from(self.len))
    }
}

impl Operator for QuantizeF32ToI16 {
    fn pack(&self, w: &mut Words<'_>) -> bool {
        w.put(self.len);
        self.quant.pack(w);
        true
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        Ok(Self {
            len: r.take()?,
            quant: Quant::unpack(r, IntType::I16)?,
        })
    }
    fn operands(&self) -> Option<Operands> {
        conversion(self.len, 4, 2)
    }
    fn macs(&self) -> u64 {
        u64::from(self.len)
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        let x = view(input(inputs, 0), 0)?;
        Ok(ki::quantize_f32_to_i16(self.quant, x, view_mut(output)?)?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::Quantize
    }
    fn layer(&self) -> Option<Layer> {
        Some(layer(self.len))
    }
    fn output_elements(&self) -> Option<u64> {
        Some(u64::from(self.len))
    }
}

impl Operator for DequantizeI16 {
    fn pack(&self, w: &mut Words<'_>) -> bool {
        w.put(self.len);
        self.quant.pack(w);
        true
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        Ok(Self {
            len: r.take()?,
            quant: Quant::unpack(r, IntType::I16)?,
        })
    }
    fn operands(&self) -> Option<Operands> {
        conversion(self.len, 2, 4)
    }
    fn macs(&self) -> u64 {
        u64::from(self.len)
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        let x = view(input(inputs, 0), 0)?;
        Ok(ki::dequantize_i16(self.quant, x, view_mut(output)?)?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::Dequantize
    }
    fn output_elements(&self) -> Option<u64> {
        Some(u64::from(self.len))
    }
}

/// QUANTIZE: from f32, or from int8, int16 or int32 with another scale, to int8 or int16; and
/// from int8 or int16 to int32.
pub(super) fn lower(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, lower::LowerError> {
    let (x, y) = (ctx.input(0)?, ctx.output()?);
    let len = x.shape.num_elements();
    lower::check_elements(&y, len as usize)?;
    let list = operands(&[lower::Operand::Tensor(x.index)]);
    let (i8t, i16t, i32t) = (IntType::I8, IntType::I16, IntType::I32);
    let rescale = |xt, yt| {
        RequantizeParams::with_ranges(quant_of(&x, x.dtype)?, xt, quant_of(&y, y.dtype)?, yt)
            .map_err(lower::LowerError::from)
    };
    match (x.dtype, y.dtype) {
        (DataType::Float32, DataType::Int8) => Ok(compute(
            QuantizeF32 {
                len,
                quant: quant(&y)?,
            },
            list,
        )),
        (DataType::Int8, DataType::Int8) => Ok(compute(
            RequantizeI8 {
                len,
                params: RequantizeParams::new(quant(&x)?, quant(&y)?)?,
            },
            list,
        )),
        (DataType::Float32, DataType::Int16) => Ok(compute(
            QuantizeF32ToI16 {
                len,
                quant: quant_of(&y, DataType::Int16)?,
            },
            list,
        )),
        (DataType::Int16, DataType::Int16) => Ok(compute(
            RequantizeI16 {
                len,
                params: rescale(i16t, i16t)?,
            },
            list,
        )),
        (DataType::Int16, DataType::Int8) => Ok(compute(
            RequantizeI16ToI8 {
                len,
                params: rescale(i16t, i8t)?,
            },
            list,
        )),
        (DataType::Int8, DataType::Int16) => Ok(compute(
            RequantizeI8ToI16 {
                len,
                params: rescale(i8t, i16t)?,
            },
            list,
        )),
        (DataType::Int8, DataType::Int32) => Ok(compute(
            RequantizeI8ToI32 {
                len,
                params: rescale(i8t, i32t)?,
            },
            list,
        )),
        (DataType::Int16, DataType::Int32) => Ok(compute(
            RequantizeI16ToI32 {
                len,
                params: rescale(i16t, i32t)?,
            },
            list,
        )),
        (DataType::Int32, DataType::Int8) => Ok(compute(
            RequantizeI32ToI8 {
                len,
                params: rescale(i32t, i8t)?,
            },
            list,
        )),
        (DataType::Int32, DataType::Int16) => Ok(compute(
            RequantizeI32ToI16 {
                len,
                params: rescale(i32t, i16t)?,
            },
            list,
        )),
        (DataType::Int8 | DataType::Int16, _) => Err(unsupported(
            "QUANTIZE output type other than int8, int16 or int32",
        )),
        (DataType::Float32 | DataType::Int32, _) => {
            Err(unsupported("QUANTIZE output type other than int8 or int16"))
        }
        _ => Err(unsupported(
            "QUANTIZE input type other than float32, int8, int16 or int32",
        )),
    }
}

/// DEQUANTIZE: int8 or int16 to f32.
pub(super) fn lower_dequantize(
    ctx: &LowerCtx<'_, '_>,
) -> Result<lower::Lowered, lower::LowerError> {
    let (x, y) = (ctx.input(0)?, ctx.output()?);
    if y.dtype != DataType::Float32 {
        return Err(unsupported("DEQUANTIZE output type other than float32"));
    }
    let len = x.shape.num_elements();
    lower::check_elements(&y, len as usize)?;
    let list = operands(&[lower::Operand::Tensor(x.index)]);
    if x.dtype == DataType::Int16 {
        let quant = quant_of(&x, DataType::Int16)?;
        return Ok(compute(DequantizeI16 { len, quant }, list));
    }
    Ok(compute(
        DequantizeI8 {
            len,
            quant: quant(&x)?,
        },
        list,
    ))
}
