//! The parts of the TFLite schema (`tensorflow/compiler/mlir/lite/schema/schema.fbs`) this reader
//! decodes: vtable slots of the tables and the enums (the builtin options tables are in
//! `options`).
//!
//! A field's vtable slot is its position in the schema's table declaration (a union field takes
//! two slots: its `_type` tag, then its value). Defaults are the schema's.

use super::error::ModelError;
use super::flatbuffer::Table;

type Result<T> = core::result::Result<T, ModelError>;

/// Vtable slots (field order in `schema.fbs`).
pub(crate) mod slot {
    /// `table Model`.
    pub(crate) mod model {
        pub(crate) const VERSION: u16 = 0;
        pub(crate) const OPERATOR_CODES: u16 = 1;
        pub(crate) const SUBGRAPHS: u16 = 2;
        pub(crate) const DESCRIPTION: u16 = 3;
        pub(crate) const BUFFERS: u16 = 4;
    }
    /// `table OperatorCode`.
    pub(crate) mod opcode {
        pub(crate) const DEPRECATED_BUILTIN_CODE: u16 = 0;
        pub(crate) const CUSTOM_CODE: u16 = 1;
        pub(crate) const VERSION: u16 = 2;
        pub(crate) const BUILTIN_CODE: u16 = 3;
    }
    /// `table SubGraph`.
    pub(crate) mod subgraph {
        pub(crate) const TENSORS: u16 = 0;
        pub(crate) const INPUTS: u16 = 1;
        pub(crate) const OUTPUTS: u16 = 2;
        pub(crate) const OPERATORS: u16 = 3;
        pub(crate) const NAME: u16 = 4;
    }
    /// `table Tensor`.
    pub(crate) mod tensor {
        pub(crate) const SHAPE: u16 = 0;
        pub(crate) const TYPE: u16 = 1;
        pub(crate) const BUFFER: u16 = 2;
        pub(crate) const NAME: u16 = 3;
        pub(crate) const QUANTIZATION: u16 = 4;
        pub(crate) const IS_VARIABLE: u16 = 5;
        pub(crate) const SPARSITY: u16 = 6;
    }
    /// `table QuantizationParameters`.
    pub(crate) mod quant {
        pub(crate) const SCALE: u16 = 2;
        pub(crate) const ZERO_POINT: u16 = 3;
        pub(crate) const DETAILS_TYPE: u16 = 4;
        pub(crate) const QUANTIZED_DIMENSION: u16 = 6;
    }
    /// `table Operator`.
    pub(crate) mod operator {
        pub(crate) const OPCODE_INDEX: u16 = 0;
        pub(crate) const INPUTS: u16 = 1;
        pub(crate) const OUTPUTS: u16 = 2;
        pub(crate) const BUILTIN_OPTIONS_TYPE: u16 = 3;
        pub(crate) const BUILTIN_OPTIONS: u16 = 4;
        pub(crate) const CUSTOM_OPTIONS: u16 = 5;
    }
    /// `table Buffer`.
    pub(crate) mod buffer {
        pub(crate) const DATA: u16 = 0;
        pub(crate) const OFFSET: u16 = 1;
        pub(crate) const SIZE: u16 = 2;
    }
}

/// Element type of a tensor (`TensorType` in the schema).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[allow(missing_docs)] // the variants are the schema's names
pub enum DataType {
    Float32,
    Float16,
    Int32,
    UInt8,
    Int64,
    String,
    Bool,
    Int16,
    Complex64,
    Int8,
    Float64,
    Complex128,
    UInt64,
    Resource,
    Variant,
    UInt32,
    UInt16,
    Int4,
    BFloat16,
    Int2,
    UInt4,
    Float8E4M3Fn,
    Float8E5M2,
}

impl DataType {
    const ALL: [DataType; 23] = [
        Self::Float32,
        Self::Float16,
        Self::Int32,
        Self::UInt8,
        Self::Int64,
        Self::String,
        Self::Bool,
        Self::Int16,
        Self::Complex64,
        Self::Int8,
        Self::Float64,
        Self::Complex128,
        Self::UInt64,
        Self::Resource,
        Self::Variant,
        Self::UInt32,
        Self::UInt16,
        Self::Int4,
        Self::BFloat16,
        Self::Int2,
        Self::UInt4,
        Self::Float8E4M3Fn,
        Self::Float8E5M2,
    ];

    /// The type for a `TensorType` code, or `None` if the schema does not define it.
    pub fn from_code(code: i8) -> Option<Self> {
        usize::try_from(code)
            .ok()
            .and_then(|i| Self::ALL.get(i).copied())
    }

    /// The `TensorType` code.
    pub fn code(self) -> i8 {
        self as i8
    }

    /// Bits per element, or `None` for types without a fixed size (`String`, `Resource`,
    /// `Variant`).
    pub fn bits(self) -> Option<u32> {
        use DataType::*;
        Some(match self {
            Int2 => 2,
            Int4 | UInt4 => 4,
            UInt8 | Int8 | Bool | Float8E4M3Fn | Float8E5M2 => 8,
            Float16 | Int16 | UInt16 | BFloat16 => 16,
            Float32 | Int32 | UInt32 => 32,
            Int64 | UInt64 | Float64 | Complex64 => 64,
            Complex128 => 128,
            String | Resource | Variant => return None,
        })
    }

    /// NumPy's name for the type (`"int8"`, `"float32"`, ...), as TensorFlow's tools print it.
    pub fn name(self) -> &'static str {
        use DataType::*;
        match self {
            Float32 => "float32",
            Float16 => "float16",
            Int32 => "int32",
            UInt8 => "uint8",
            Int64 => "int64",
            String => "string",
            Bool => "bool",
            Int16 => "int16",
            Complex64 => "complex64",
            Int8 => "int8",
            Float64 => "float64",
            Complex128 => "complex128",
            UInt64 => "uint64",
            Resource => "resource",
            Variant => "variant",
            UInt32 => "uint32",
            UInt16 => "uint16",
            Int4 => "int4",
            BFloat16 => "bfloat16",
            Int2 => "int2",
            UInt4 => "uint4",
            Float8E4M3Fn => "float8_e4m3fn",
            Float8E5M2 => "float8_e5m2",
        }
    }
}

/// Reads a `TensorType` field.
pub(super) fn data_type(t: &Table<'_>, slot: u16, what: &'static str) -> Result<DataType> {
    let code: i8 = t.scalar(slot, what, 0)?;
    DataType::from_code(code).ok_or(ModelError::BadEnum {
        what,
        value: i32::from(code),
    })
}

/// Padding of a convolution or pooling window (`Padding` in the schema).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Padding {
    /// Pad so the output has `ceil(input / stride)` elements.
    Same,
    /// No padding.
    Valid,
}

/// Reads a `Padding` field.
pub(super) fn padding(t: &Table<'_>, slot: u16, what: &'static str) -> Result<Padding> {
    match t.scalar::<i8>(slot, what, 0)? {
        0 => Ok(Padding::Same),
        1 => Ok(Padding::Valid),
        v => Err(ModelError::BadEnum {
            what,
            value: i32::from(v),
        }),
    }
}

/// A fused activation (`ActivationFunctionType` in the schema).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Activation {
    /// None.
    None,
    /// `max(x, 0)`.
    Relu,
    /// `clamp(x, -1, 1)`.
    ReluN1To1,
    /// `clamp(x, 0, 6)`.
    Relu6,
    /// `tanh(x)`.
    Tanh,
    /// `sign(x)`.
    SignBit,
}

/// Reads an `ActivationFunctionType` field.
pub(super) fn activation(t: &Table<'_>, slot: u16, what: &'static str) -> Result<Activation> {
    Ok(match t.scalar::<i8>(slot, what, 0)? {
        0 => Activation::None,
        1 => Activation::Relu,
        2 => Activation::ReluN1To1,
        3 => Activation::Relu6,
        4 => Activation::Tanh,
        5 => Activation::SignBit,
        v => {
            return Err(ModelError::BadEnum {
                what,
                value: i32::from(v),
            })
        }
    })
}

/// Layout of a fully connected layer's weights (`FullyConnectedOptionsWeightsFormat`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum WeightsFormat {
    /// Row-major `[out, in]`.
    Default,
    /// The shuffled 4x16 int8 layout of TFLite's optimized kernels.
    Shuffled4x16Int8,
}
