//! Tensors: shape, element type, quantization and constant data, decoded from the file and
//! checked against each other.

use super::flatbuffer::{Table, Tables, Vector};
use super::schema::slot;
use super::{DataType, ModelError, Result, Shared, MAX_RANK};

/// A tensor's shape: up to [`MAX_RANK`] non-negative dimensions whose product (and byte size)
/// fits a `u32`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Shape {
    dims: [u32; MAX_RANK],
    rank: u8,
    elements: u32,
}

impl Shape {
    /// The dimensions, outermost first (NHWC for images).
    pub fn dims(&self) -> &[u32] {
        &self.dims[..usize::from(self.rank)]
    }

    /// Number of dimensions (0 for a scalar).
    pub fn rank(&self) -> usize {
        usize::from(self.rank)
    }

    /// Number of elements (the product of the dimensions; 1 for a scalar).
    pub fn num_elements(&self) -> u32 {
        self.elements
    }

    /// Dimension `axis`, if `axis < rank()`.
    pub fn dim(&self, axis: usize) -> Option<u32> {
        self.dims().get(axis).copied()
    }
}

/// A tensor's affine quantization: `real = scale[c] * (q - zero_point[c])`, with one `(scale,
/// zero_point)` pair per tensor, or one per channel along
/// [`quantized_dimension`](Quantization::quantized_dimension). Zero-copy: the values are decoded
/// from the file when asked for.
#[derive(Clone, Copy, Debug)]
pub struct Quantization<'a> {
    scale: Vector<'a, f32>,
    zero_point: Vector<'a, i64>,
    axis: Option<u8>,
}

impl<'a> Quantization<'a> {
    /// Number of `(scale, zero_point)` pairs: 1 per tensor, or the quantized dimension's size.
    pub fn len(&self) -> usize {
        self.scale.len() as usize
    }

    /// Always false: a tensor with no quantization pairs has no [`Quantization`].
    pub fn is_empty(&self) -> bool {
        self.scale.len() == 0
    }

    /// The axis the pairs run along, for per-channel quantization: the file's
    /// `quantized_dimension` when it names a dimension with one pair per index. `None` for
    /// per-tensor quantization, and for several pairs whose declared dimension is out of range
    /// or of another size: TFLM ignores the field (its kernels know their axis), and so do
    /// the lowerings, which check the count of pairs against the axis they use.
    pub fn quantized_dimension(&self) -> Option<usize> {
        self.axis.map(usize::from)
    }

    /// Whether there is more than one pair (one per channel along some axis).
    pub fn is_per_channel(&self) -> bool {
        self.len() > 1
    }

    /// Scale `i`.
    pub fn scale(&self, i: usize) -> Option<f32> {
        self.scale.get(u32::try_from(i).ok()?)
    }

    /// Zero point `i`.
    pub fn zero_point(&self, i: usize) -> Option<i64> {
        self.zero_point.get(u32::try_from(i).ok()?)
    }

    /// All scales.
    pub fn scales(&self) -> impl Iterator<Item = f32> + 'a {
        self.scale.iter()
    }

    /// All zero points.
    pub fn zero_points(&self) -> impl Iterator<Item = i64> + 'a {
        self.zero_point.iter()
    }

    /// Decodes tensor `tensor`'s `QuantizationParameters` (its shape `shape`); `None` when it
    /// holds no pairs.
    fn decode(t: Table<'a>, shape: &Shape, tensor: u16) -> Result<Option<Self>> {
        let details: u8 = t.scalar(
            slot::quant::DETAILS_TYPE,
            "QuantizationParameters.details_type",
            0,
        )?;
        match details {
            0 => {}
            1..=3 => {
                return Err(ModelError::Unsupported {
                    what: "QuantizationParameters.details",
                })
            }
            v => {
                return Err(ModelError::BadEnum {
                    what: "QuantizationParameters.details_type",
                    value: i32::from(v),
                })
            }
        }
        let scale = t.vector_or_empty::<f32>(slot::quant::SCALE, "QuantizationParameters.scale")?;
        let zero_point =
            t.vector_or_empty::<i64>(slot::quant::ZERO_POINT, "QuantizationParameters.zero_point")?;
        let (n, m) = (scale.len(), zero_point.len());
        let bad = |reason| ModelError::BadQuantization {
            tensor: u32::from(tensor),
            scales: n,
            zero_points: m,
            reason,
        };
        if n == 0 && m == 0 {
            return Ok(None);
        }
        if n != m {
            return Err(bad("scale and zero_point differ in length"));
        }
        // TFLM ignores `quantized_dimension` (each kernel knows the axis its per-channel
        // parameters run along: 0 for a convolution's filter, 3 for a depthwise one's), and
        // models in the field carry wrong ones (TFLM's own person-detection example gives its
        // 1-D biases dimension 3). So a wrong one is no error: it is recorded as no axis.
        let axis = if n > 1 {
            let qd: i32 = t.scalar(
                slot::quant::QUANTIZED_DIMENSION,
                "QuantizationParameters.quantized_dimension",
                0,
            )?;
            usize::try_from(qd)
                .ok()
                .filter(|&a| shape.dim(a) == Some(n))
                // qd < rank <= MAX_RANK.
                .map(|a| a as u8)
        } else {
            None
        };
        Ok(Some(Self {
            scale,
            zero_point,
            axis,
        }))
    }
}

/// A tensor's description, decoded from the file (zero-copy: `name` and `data` borrow it).
#[derive(Clone, Copy, Debug)]
pub struct TensorInfo<'a> {
    /// Index in the subgraph.
    pub index: u16,
    /// `Tensor.name` (empty if absent).
    pub name: &'a str,
    /// Element type.
    pub dtype: DataType,
    /// Shape.
    pub shape: Shape,
    /// Bytes the tensor occupies (sub-byte types packed, rounded up), or `None` for types
    /// without a fixed size (`String`, `Resource`, `Variant`).
    pub byte_size: Option<u32>,
    /// Index of its buffer in the model.
    pub buffer: u32,
    /// The constant data (`None` for activations and empty buffers). Exactly `byte_size` bytes
    /// (for 4- and 2-bit types, either packed or one element per byte). Not necessarily
    /// aligned: read multi-byte elements with `from_le_bytes`.
    pub data: Option<&'a [u8]>,
    /// Quantization parameters, if the tensor is quantized.
    pub quantization: Option<Quantization<'a>>,
    /// Whether the tensor is a variable (state kept across invocations).
    pub is_variable: bool,
}

impl<'a> TensorInfo<'a> {
    /// Whether the tensor has constant data.
    pub fn is_constant(&self) -> bool {
        self.data.is_some()
    }

    /// Decodes tensor `index`, checking its shape, type, buffer and quantization against one
    /// another.
    pub(super) fn decode(shared: &Shared<'a>, tensors: Tables<'a>, index: u16) -> Result<Self> {
        let t = tensors.get(u32::from(index))?;
        let item = u32::from(index);
        let dims = t.vector_or_empty::<i32>(slot::tensor::SHAPE, "Tensor.shape")?;
        if dims.len() > MAX_RANK as u32 {
            return Err(ModelError::CapacityExceeded {
                what: "Tensor.shape",
                capacity: "MAX_RANK",
                limit: MAX_RANK as u16,
                actual: dims.len(),
            });
        }
        let mut shape = Shape {
            dims: [0; MAX_RANK],
            rank: dims.len() as u8,
            elements: 1,
        };
        let too_large = ModelError::TensorTooLarge { tensor: item };
        for (axis, d) in dims.iter().enumerate() {
            let d = u32::try_from(d).map_err(|_| ModelError::BadDimension {
                tensor: item,
                axis: axis as u32,
                value: d,
            })?;
            shape.dims[axis] = d;
            shape.elements = shape.elements.checked_mul(d).ok_or(too_large)?;
        }
        let code: i8 = t.scalar(slot::tensor::TYPE, "Tensor.type", 0)?;
        let dtype = DataType::from_code(code).ok_or(ModelError::BadEnum {
            what: "Tensor.type",
            value: i32::from(code),
        })?;
        let byte_size = match dtype.bits() {
            Some(bits) => {
                let bits = u64::from(shape.elements) * u64::from(bits);
                Some(u32::try_from(bits.div_ceil(8)).map_err(|_| too_large)?)
            }
            None => None,
        };
        if t.table(slot::tensor::SPARSITY, "SparsityParameters")?
            .is_some()
        {
            return Err(ModelError::Unsupported {
                what: "Tensor.sparsity",
            });
        }
        let buffer: u32 = t.scalar(slot::tensor::BUFFER, "Tensor.buffer", 0)?;
        let data = if buffer == 0 && shared.buffers.len() == 0 {
            None
        } else if buffer >= shared.buffers.len() {
            return Err(ModelError::BadIndex {
                what: "Tensor.buffer",
                item,
                index: ModelError::index(buffer),
                len: shared.buffers.len(),
            });
        } else {
            shared.buffer(buffer)?
        };
        if let (Some(d), Some(size)) = (data, byte_size) {
            let actual = u32::try_from(d.len()).unwrap_or(u32::MAX);
            let unpacked = dtype.bits().is_some_and(|b| b < 8) && actual == shape.elements;
            if actual != size && !unpacked {
                return Err(ModelError::BufferSizeMismatch {
                    tensor: item,
                    expected: size,
                    actual,
                });
            }
        }
        let quantization = match t.table(slot::tensor::QUANTIZATION, "QuantizationParameters")? {
            Some(q) => Quantization::decode(q, &shape, index)?,
            None => None,
        };
        Ok(Self {
            index,
            name: t.string(slot::tensor::NAME, "Tensor.name")?.unwrap_or(""),
            dtype,
            shape,
            byte_size,
            buffer,
            data,
            quantization,
            is_variable: t.boolean(slot::tensor::IS_VARIABLE, "Tensor.is_variable", false)?,
        })
    }
}
