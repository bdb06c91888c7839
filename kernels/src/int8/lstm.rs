//! UNIDIRECTIONAL_SEQUENCE_LSTM with int8 weights and an int16 cell state, over int8
//! activations (int32 biases) or int16 ones (the 16x8 scheme, int64 biases), bit-exact with
//! TFLM's reference kernel.
//!
//! TFLM (`micro/kernels/unidirectional_sequence_lstm.cc`, `lstm_eval.h`, `lstm_eval.cc`,
//! `lstm_eval_common.cc`; `EvalLstm<int8_t, int8_t, int16_t, int32_t>` and
//! `EvalLstm<int16_t, int8_t, int16_t, int64_t>`). For every batch row and time step, with
//! `h` the hidden state (the activation type, the op's output) and `c` the cell state
//! (int16, scale `2^p` with `p = round(log2(cell_scale))`):
//!
//! ```text
//! gate G in (input, forget, cell, output):
//!   a = FC(x_t, W_G, bias_G)  → int16 at scale 2^-12 (input zero point folded in)
//!   r = FC(h,   R_G)          → int16 at scale 2^-12 (hidden zero point folded in)
//!   G = σ(sat16(a + r))       (the cell gate: tanh, or σ, as the options say)
//!                             σ and tanh: TFLM's int16 LUT kernels, output scale 2^-15
//! c = sat16(Mul(f, c) + Mul(i, g))       each Mul a requantizing int16 product
//! c = clamp(c, −clip, clip)              when the options' cell clip is above 0
//! h = Mul(tanh_p(c), o) + h_zp           int8, saturated
//! out_t = h
//! ```
//!
//! where `FC` is TFLM's integer fully connected with an int16 output: `acc = Σ w·(x − zp) (+
//! bias)`, `MultiplyByQuantizedMultiplier(acc, m, s)`, clamped to int16 (for int16
//! activations the accumulator is an int64 and the multiply TFLM's int64 one, which rounds
//! once with a 16-bit multiplier), the multiplier
//! `double(float(x_scale · w_scale)) / 2^-12`. The gates' multipliers are TFLM's fixed
//! `2^-12` (gate input) and `2^-15` (gate output) scales: the model's intermediate tensors are
//! not read (TFLM ignores them too).
//!
//! TFLM computes each gate for a whole row into scratch buffers; every step of it is
//! elementwise per unit once the two matrix products are done, so this kernel computes each
//! unit's four gates, cell and hidden value in turn, needing no scratch: the new hidden row
//! goes to the output first (TFLM copies it there), and back into the state once the row is
//! done, since every unit's gates read the old one.

use super::{check_quant, general_multiplier, Quant};
use crate::fixed_point::multiply_by_quantized_multiplier;
use crate::packed::{Packed, WordReader, Words};
use crate::{check_len, KernelError};

/// `sigmoid(i / 24)` in 0.16 fixed point: TFLM's `sigmoid_table_uint16` (`internal/common.h`),
/// shared by its int16 logistic and tanh (`tanh(x) = 2·sigmoid(2x) − 1`).
const SIGMOID_TABLE: [u16; 256] = [
    32768, 33451, 34133, 34813, 35493, 36169, 36843, 37513, 38180, 38841, 39498, 40149, 40794,
    41432, 42064, 42688, 43304, 43912, 44511, 45102, 45683, 46255, 46817, 47369, 47911, 48443,
    48964, 49475, 49975, 50464, 50942, 51409, 51865, 52311, 52745, 53169, 53581, 53983, 54374,
    54755, 55125, 55485, 55834, 56174, 56503, 56823, 57133, 57433, 57724, 58007, 58280, 58544,
    58800, 59048, 59288, 59519, 59743, 59959, 60168, 60370, 60565, 60753, 60935, 61110, 61279,
    61441, 61599, 61750, 61896, 62036, 62172, 62302, 62428, 62549, 62666, 62778, 62886, 62990,
    63090, 63186, 63279, 63368, 63454, 63536, 63615, 63691, 63765, 63835, 63903, 63968, 64030,
    64090, 64148, 64204, 64257, 64308, 64357, 64405, 64450, 64494, 64536, 64576, 64614, 64652,
    64687, 64721, 64754, 64786, 64816, 64845, 64873, 64900, 64926, 64950, 64974, 64997, 65019,
    65039, 65060, 65079, 65097, 65115, 65132, 65149, 65164, 65179, 65194, 65208, 65221, 65234,
    65246, 65258, 65269, 65280, 65291, 65301, 65310, 65319, 65328, 65337, 65345, 65352, 65360,
    65367, 65374, 65381, 65387, 65393, 65399, 65404, 65410, 65415, 65420, 65425, 65429, 65433,
    65438, 65442, 65445, 65449, 65453, 65456, 65459, 65462, 65465, 65468, 65471, 65474, 65476,
    65479, 65481, 65483, 65485, 65488, 65489, 65491, 65493, 65495, 65497, 65498, 65500, 65501,
    65503, 65504, 65505, 65507, 65508, 65509, 65510, 65511, 65512, 65513, 65514, 65515, 65516,
    65517, 65517, 65518, 65519, 65520, 65520, 65521, 65522, 65522, 65523, 65523, 65524, 65524,
    65525, 65525, 65526, 65526, 65526, 65527, 65527, 65528, 65528, 65528, 65529, 65529, 65529,
    65529, 65530, 65530, 65530, 65530, 65531, 65531, 65531, 65531, 65531, 65532, 65532, 65532,
    65532, 65532, 65532, 65533, 65533, 65533, 65533, 65533, 65533, 65533, 65533, 65534, 65534,
    65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65535,
];

/// The scale of a gate's input (the sum of its two products): `2^-12`, Q3.12.
const GATE_INPUT_SCALE: f32 = 1.0 / 4096.0;
/// The scale of a gate's output: `2^-15`, Q0.15.
const GATE_OUTPUT_SCALE: f32 = 1.0 / 32768.0;

/// TFLM's int16 logistic (`reference_integer_ops::Logistic` with input multiplier 0 and
/// shift 0: the input at scale `2^-12`, the output at `2^-15`).
fn sigmoid_i16(x: i16) -> i16 {
    let v = i32::from(x) * 3;
    let abs = v.unsigned_abs();
    let uh = abs >> 9;
    let result: u32 = if uh >= 255 {
        0x7FFF << 10
    } else {
        let ua = u32::from(SIGMOID_TABLE[uh as usize]);
        let ub = u32::from(SIGMOID_TABLE[uh as usize + 1]);
        let ut = abs & 0x1ff;
        (ua << 9) + ut * (ub - ua)
    };
    let result = if v >= 0 {
        result + (1 << 9)
    } else {
        (1u32 << 25) - result + (1 << 9) - 1
    };
    (result >> 10) as i16
}

/// TFLM's int16 tanh (`reference_integer_ops::Tanh`) for an input at scale `2^power`, as
/// `lstm_internal::Tanh` sets its multiplier and shift; the output at scale `2^-15`.
fn tanh_i16(x: i16, power: i32) -> i16 {
    let mut shift = 15 + power - 3;
    let mut multiplier = 0i32;
    if shift < 0 {
        shift = -shift;
        multiplier = 3;
    }
    if multiplier == 0 {
        multiplier = 3i32.wrapping_shl(shift as u32);
        shift = 0;
    }
    let round = if shift > 0 {
        1i32 << (shift - 1).min(30)
    } else {
        0
    };
    let v = i32::from(x)
        .wrapping_mul(multiplier)
        .wrapping_add(round)
        .wrapping_shr(shift.min(31) as u32);
    let abs = v.unsigned_abs();
    let uh = abs >> 8;
    let result: i32 = if uh >= 255 {
        0xFFFF << 8
    } else {
        let ua = u32::from(SIGMOID_TABLE[uh as usize]);
        let ub = u32::from(SIGMOID_TABLE[uh as usize + 1]);
        let ut = abs & 0xff;
        ((ua << 8) + ut * (ub - ua)) as i32
    };
    let result = if v >= 0 {
        result - (1 << 23) + (1 << 7)
    } else {
        -result + (1 << 23) + (1 << 7) - 1
    };
    (result >> 8) as i16
}

/// TFLM's `MultiplyByQuantizedMultiplier(int64_t x, int32_t, int)` (the double-rounding
/// build's): the multiplier reduced to 16 bits, one rounding shift. `shift` is below 8 (the
/// parameters refuse others), so the total shift is 8 to 46.
fn multiply_by_quantized_multiplier_64(x: i64, multiplier: i32, shift: i32) -> i32 {
    let reduced = if multiplier < 0x7FFF_0000 {
        (multiplier + (1 << 15)) >> 16
    } else {
        0x7FFF
    };
    let total_shift = (15 - shift).clamp(1, 62);
    let v = x
        .wrapping_mul(i64::from(reduced))
        .wrapping_add(1i64 << (total_shift - 1));
    (v >> total_shift) as i32
}

/// An activation type of the LSTM (its input, hidden state and output): int8 with int32
/// biases, or int16 with int64 biases.
pub trait LstmActivation: Copy + Into<i32> + sealed::Sealed {
    /// The biases' element type.
    type Bias: Copy + Default;
    /// Smallest value.
    const MIN: i32;
    /// Largest value.
    const MAX: i32;
    /// `v` (in range) as the type.
    fn from_clamped(v: i32) -> Self;
    /// TFLM's fully connected requantization of a dot product plus bias: int32 wrapping
    /// arithmetic for int8, int64 for int16.
    fn requantize(dot: i64, bias: Self::Bias, multiplier: Multiplier) -> i32;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for i8 {}
    impl Sealed for i16 {}
}

impl LstmActivation for i8 {
    type Bias = i32;
    const MIN: i32 = i8::MIN as i32;
    const MAX: i32 = i8::MAX as i32;
    fn from_clamped(v: i32) -> Self {
        v as i8
    }
    fn requantize(dot: i64, bias: i32, (m, s): Multiplier) -> i32 {
        // The low 32 bits of the exact sum: TFLM's int32 accumulation, wrapped.
        multiply_by_quantized_multiplier((dot as i32).wrapping_add(bias), m, s)
    }
}

impl LstmActivation for i16 {
    type Bias = i64;
    const MIN: i32 = i16::MIN as i32;
    const MAX: i32 = i16::MAX as i32;
    fn from_clamped(v: i32) -> Self {
        v as i16
    }
    fn requantize(dot: i64, bias: i64, (m, s): Multiplier) -> i32 {
        multiply_by_quantized_multiplier_64(dot.wrapping_add(bias), m, s)
    }
}

fn sat16(v: i32) -> i16 {
    v.clamp(i32::from(i16::MIN), i32::from(i16::MAX)) as i16
}

/// The nonlinearity of the cell gate (the options' fused activation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CellGate {
    /// `tanh` (Keras' default).
    Tanh,
    /// The logistic function.
    Sigmoid,
}

/// Shape of an LSTM over a sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LstmShape {
    /// Independent sequences.
    pub batches: u32,
    /// Time steps per sequence.
    pub time_steps: u32,
    /// Input features per step.
    pub input_size: u32,
    /// Units: the hidden and cell state per sequence, and the output per step.
    pub units: u32,
    /// The input and output are `[time][batch][...]` (else `[batch][time][...]`).
    pub time_major: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct LstmLens {
    input: usize,
    input_weights: usize,
    recurrent_weights: usize,
    bias: usize,
    state: usize,
    output: usize,
}

impl LstmShape {
    fn lens(&self) -> Result<LstmLens, KernelError> {
        let n = |d: u32| usize::try_from(d).map_err(|_| KernelError::ShapeOverflow);
        let max = isize::MAX as usize / 4;
        let mul = |a: usize, b: usize| {
            a.checked_mul(b)
                .filter(|&v| v <= max)
                .ok_or(KernelError::ShapeOverflow)
        };
        let (b, t, i, u) = (
            n(self.batches)?,
            n(self.time_steps)?,
            n(self.input_size)?,
            n(self.units)?,
        );
        Ok(LstmLens {
            input: mul(mul(b, t)?, i)?,
            input_weights: mul(mul(4, u)?, i)?,
            recurrent_weights: mul(mul(4, u)?, u)?,
            bias: mul(4, u)?,
            state: mul(b, u)?,
            output: mul(mul(b, t)?, u)?,
        })
    }
}

/// A requantization: TFLM's `(output_multiplier, output_shift)`.
type Multiplier = (i32, i32);

/// Precomputed parameters of an LSTM (TFLM's `OpDataLSTM`), for the activation type they
/// were made for ([`LstmParams::new`]); see the [module docs](self).
/// Gates are in TFLite's order: input, forget, cell, output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LstmParams {
    /// The shape.
    pub shape: LstmShape,
    input_zero_point: i32,
    hidden_zero_point: i32,
    /// Each gate's input and recurrent products' requantization.
    gates: [(Multiplier, Multiplier); 4],
    forget_cell_mul: Multiplier,
    input_mul: Multiplier,
    output_mul: Multiplier,
    /// The quantized cell clip, when the options' clip is above 0.
    cell_clip: Option<i16>,
    cell_scale_power: i32,
    cell_gate: CellGate,
}

/// Quantization of an LSTM's tensors, as [`LstmParams::new`] takes it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LstmQuant {
    /// The input.
    pub input: Quant,
    /// The input weights' scale per gate (input, forget, cell, output).
    pub input_weights: [f32; 4],
    /// The recurrent weights' scale per gate.
    pub recurrent_weights: [f32; 4],
    /// The hidden state (and output).
    pub hidden: Quant,
    /// The cell state's scale (its zero point is 0).
    pub cell_scale: f32,
}

impl LstmParams {
    /// Parameters as TFLM's Prepare computes them, from the tensors' quantization `q`, the
    /// options' cell clip (0: none) and cell gate nonlinearity.
    ///
    /// Errors: [`KernelError::ShapeOverflow`] for buffers that cannot exist,
    /// [`KernelError::InvalidQuantization`] for a scale that is not finite and positive, a
    /// zero point outside int8 (int16 activations: other than 0), or a multiplier of `2^31`
    /// or more (int16 activations: a gate multiplier of `2^8` or more, which TFLM's int64
    /// multiply does not take).
    pub fn new<A: LstmActivation>(
        shape: LstmShape,
        q: &LstmQuant,
        cell_clip: f32,
        cell_gate: CellGate,
    ) -> Result<Self, KernelError> {
        shape.lens()?;
        check_quant(q.input, "input scale", "input zero point")?;
        check_quant(q.hidden, "hidden state scale", "hidden state zero point")?;
        let int16 = A::MAX > i32::from(i8::MAX);
        if int16 && (q.input.zero_point != 0 || q.hidden.zero_point != 0) {
            return Err(KernelError::InvalidQuantization {
                what: "int16 zero point",
            });
        }
        let positive = |s: f32, what| {
            if s.is_finite() && s > 0.0 {
                Ok(s)
            } else {
                Err(KernelError::InvalidQuantization { what })
            }
        };
        let cell_scale = positive(q.cell_scale, "cell state scale")?;
        // GetQuantizedConvolutionMultipler: the product in float, the quotient in double.
        let fc = |x: f32, w: f32| {
            let w = positive(w, "weights scale")?;
            let m = general_multiplier(
                f64::from(x * w) / f64::from(GATE_INPUT_SCALE),
                "gate multiplier",
            )?;
            if int16 && m.1 >= 8 {
                return Err(KernelError::InvalidQuantization {
                    what: "gate multiplier",
                });
            }
            Ok(m)
        };
        let mut gates = [((0, 0), (0, 0)); 4];
        for (g, gate) in gates.iter_mut().enumerate() {
            *gate = (
                fc(q.input.scale, q.input_weights[g])?,
                fc(q.hidden.scale, q.recurrent_weights[g])?,
            );
        }
        // CreateInterGateMulParams: the product and the quotient in double.
        let mul = |a: f32, b: f32, out: f32| {
            general_multiplier(
                f64::from(a) * f64::from(b) / f64::from(out),
                "gate product multiplier",
            )
        };
        let cell_clip = (cell_clip > 0.0).then(|| {
            let v = (f64::from(cell_clip) / f64::from(cell_scale)).clamp(-32768.0, 32767.0);
            v as i16
        });
        Ok(LstmParams {
            shape,
            input_zero_point: q.input.zero_point,
            hidden_zero_point: q.hidden.zero_point,
            gates,
            forget_cell_mul: mul(GATE_OUTPUT_SCALE, cell_scale, cell_scale)?,
            input_mul: mul(GATE_OUTPUT_SCALE, GATE_OUTPUT_SCALE, cell_scale)?,
            output_mul: mul(GATE_OUTPUT_SCALE, GATE_OUTPUT_SCALE, q.hidden.scale)?,
            cell_clip,
            cell_scale_power: rounded_log2(cell_scale),
            cell_gate,
        })
    }
}

impl LstmParams {
    /// Writes the parameters ([`packed`](crate::packed)): the shape, the zero points, every
    /// rescaling, the quantized cell clip, the cell scale's power of two and the cell gate.
    pub fn pack(&self, w: &mut Words<'_>) {
        let s = self.shape;
        for d in [s.batches, s.time_steps, s.input_size, s.units] {
            w.put(d);
        }
        s.time_major.pack(w);
        w.put_i32(self.input_zero_point);
        w.put_i32(self.hidden_zero_point);
        for &(input, recurrent) in &self.gates {
            w.put_multiplier(input);
            w.put_multiplier(recurrent);
        }
        for m in [self.forget_cell_mul, self.input_mul, self.output_mul] {
            w.put_multiplier(m);
        }
        self.cell_clip.is_some().pack(w);
        w.put_i32(self.cell_clip.map_or(0, i32::from));
        w.put_i32(self.cell_scale_power);
        (self.cell_gate == CellGate::Sigmoid).pack(w);
    }

    /// Reads what [`pack`](Self::pack) wrote for activations of type `A`, each field checked
    /// against what [`new`](Self::new) makes: zero points in int8 (0 for int16), rescalings as
    /// `QuantizeMultiplier` makes them (gate shifts below 8 for int16), a clip in
    /// `0..=32767`, the power of two of a finite `f32`.
    ///
    /// Errors as [`new`](Self::new).
    pub fn unpack<A: LstmActivation>(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        let shape = LstmShape {
            batches: r.take()?,
            time_steps: r.take()?,
            input_size: r.take()?,
            units: r.take()?,
            time_major: bool::unpack(r)?,
        };
        shape.lens()?;
        let int16 = A::MAX > i32::from(i8::MAX);
        let zero_point = if int16 { (0, 0) } else { (-128, 127) };
        let input_zero_point = r.take_in(zero_point.0, zero_point.1, "input zero point")?;
        let hidden_zero_point = r.take_in(zero_point.0, zero_point.1, "hidden state zero point")?;
        let gate_shift = if int16 { 7 } else { 31 };
        let mut gates = [((0, 0), (0, 0)); 4];
        for gate in &mut gates {
            *gate = (
                r.take_multiplier(gate_shift, "gate multiplier")?,
                r.take_multiplier(gate_shift, "gate multiplier")?,
            );
        }
        let mut muls = [(0, 0); 3];
        for m in &mut muls {
            *m = r.take_multiplier(31, "gate product multiplier")?;
        }
        let clipped = bool::unpack(r)?;
        // In 0..=32767: checked.
        let clip = r.take_in(0, i32::from(i16::MAX), "cell clip")? as i16;
        // rounded_log2 of a positive finite f32: from its smallest subnormal to its largest.
        let cell_scale_power = r.take_in(-149, 128, "cell state scale")?;
        let cell_gate = if bool::unpack(r)? {
            CellGate::Sigmoid
        } else {
            CellGate::Tanh
        };
        Ok(LstmParams {
            shape,
            input_zero_point,
            hidden_zero_point,
            gates,
            forget_cell_mul: muls[0],
            input_mul: muls[1],
            output_mul: muls[2],
            cell_clip: clipped.then_some(clip),
            cell_scale_power,
            cell_gate,
        })
    }
}

/// `round(log2(x))` for a positive finite `x`, as TFLM's `CheckedLog2` rounds it: the
/// exponent of `x`, plus one when its mantissa is `√2` or more.
fn rounded_log2(x: f32) -> i32 {
    let bits = x.to_bits();
    let biased = ((bits >> 23) & 0xff) as i32;
    let (mantissa, exponent) = if biased == 0 {
        // Subnormal: normalize.
        let m = bits & 0x7f_ffff;
        let shift = m.leading_zeros() as i32 - 8;
        ((m << shift) & 0x7f_ffff, -126 - shift)
    } else {
        (bits & 0x7f_ffff, biased - 127)
    };
    // √2 = 1.0110101000001001111001...: the 23-bit fraction rounded up.
    const SQRT2_FRACTION: u32 = 0x35_04f3;
    exponent + i32::from(mantissa >= SQRT2_FRACTION)
}

/// One gate's pre-activation for unit `u`: the input and recurrent products, each requantized
/// to int16, saturated sum.
#[allow(clippy::too_many_arguments)]
fn gate_input<A: LstmActivation>(
    p: &LstmParams,
    gate: usize,
    u: usize,
    x: &[A],
    h: &[A],
    input_weights: &[i8],
    recurrent_weights: &[i8],
    bias: &[A::Bias],
) -> i16 {
    // Each product fits an i32 (TFLM's `int32_t` product); their sum is exact in an i64.
    let dot = |v: &[A], w: &[i8], zero_point: i32| {
        v.iter().zip(w).fold(0i64, |acc, (&v, &w)| {
            let v: i32 = v.into();
            acc.wrapping_add(i64::from(
                i32::from(w).wrapping_mul(v.wrapping_sub(zero_point)),
            ))
        })
    };
    let (units, input_size) = (p.shape.units as usize, p.shape.input_size as usize);
    let (mi, mr) = p.gates[gate];
    let row = gate * units + u;
    let w = &input_weights[row * input_size..(row + 1) * input_size];
    let a = sat16(A::requantize(dot(x, w, p.input_zero_point), bias[row], mi));
    let r_w = &recurrent_weights[row * units..(row + 1) * units];
    let r = sat16(A::requantize(
        dot(h, r_w, p.hidden_zero_point),
        A::Bias::default(),
        mr,
    ));
    sat16(i32::from(a) + i32::from(r))
}

/// A requantized int16 product (TFLM's `MulElementwise`, offsets 0), before the offset and
/// clamp of its output type.
fn product(a: i16, b: i16, (m, s): Multiplier) -> i32 {
    multiply_by_quantized_multiplier(i32::from(a) * i32::from(b), m, s)
}

/// LSTM over a sequence: reads `input` and the states `hidden` (`[batches][units]`, of the
/// activation type `A`) and `cell` (`[batches][units]`, int16), writes every step's hidden row to `output`
/// and leaves the last step's states in `hidden` and `cell`. `input_weights` are the four
/// gates' `[units][input_size]` matrices end to end (input, forget, cell, output gate),
/// `recurrent_weights` their `[units][units]` ones, `bias` their `[units]` biases.
///
/// Errors: [`KernelError::LengthMismatch`] for a buffer whose length is not the shape's;
/// nothing is written then.
#[allow(clippy::too_many_arguments)]
pub fn lstm<A: LstmActivation>(
    p: &LstmParams,
    hidden: &mut [A],
    cell: &mut [i16],
    input: &[A],
    input_weights: &[i8],
    recurrent_weights: &[i8],
    bias: &[A::Bias],
    output: &mut [A],
) -> Result<(), KernelError> {
    let s = p.shape;
    let lens = s.lens()?;
    check_len("hidden state", lens.state, hidden.len())?;
    check_len("cell state", lens.state, cell.len())?;
    check_len("input", lens.input, input.len())?;
    check_len("weights", lens.input_weights, input_weights.len())?;
    check_len(
        "recurrent weights",
        lens.recurrent_weights,
        recurrent_weights.len(),
    )?;
    check_len("bias", lens.bias, bias.len())?;
    check_len("output", lens.output, output.len())?;
    let (batches, steps) = (s.batches as usize, s.time_steps as usize);
    let (input_size, units) = (s.input_size as usize, s.units as usize);
    for b in 0..batches {
        for t in 0..steps {
            // The row of input and output this step reads and writes.
            let row = if s.time_major {
                t * batches + b
            } else {
                b * steps + t
            };
            let x = &input[row * input_size..(row + 1) * input_size];
            let h = &hidden[b * units..(b + 1) * units];
            let c = &mut cell[b * units..(b + 1) * units];
            let out = &mut output[row * units..(row + 1) * units];
            for u in 0..units {
                let gate = |g| gate_input(p, g, u, x, h, input_weights, recurrent_weights, bias);
                let f = sigmoid_i16(gate(1));
                let i = sigmoid_i16(gate(0));
                let g = match p.cell_gate {
                    CellGate::Tanh => tanh_i16(gate(2), -12),
                    CellGate::Sigmoid => sigmoid_i16(gate(2)),
                };
                let kept = sat16(product(f, c[u], p.forget_cell_mul));
                let added = sat16(product(i, g, p.input_mul));
                let mut cu = sat16(i32::from(kept) + i32::from(added));
                if let Some(clip) = p.cell_clip {
                    cu = cu.min(clip).max(clip.wrapping_neg());
                }
                c[u] = cu;
                let o = sigmoid_i16(gate(3));
                let t = tanh_i16(cu, p.cell_scale_power);
                let v = product(t, o, p.output_mul).wrapping_add(p.hidden_zero_point);
                out[u] = A::from_clamped(v.clamp(A::MIN, A::MAX));
            }
            hidden[b * units..(b + 1) * units].copy_from_slice(out);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sigmoid_and_tanh_match_tflm_at_known_points() {
        // sigmoid(0) = 0.5 in Q0.15; the Q3.12 input range ends short of saturation
        // (sigmoid(8) = 0.99966), symmetric about 0.5.
        assert_eq!(sigmoid_i16(0), 16384);
        assert_eq!(sigmoid_i16(i16::MAX), 32757);
        assert_eq!(sigmoid_i16(-i16::MAX), 11);
        assert_eq!(tanh_i16(0, -12), 0);
        assert_eq!(tanh_i16(i16::MAX, -12), 32767);
        assert_eq!(tanh_i16(i16::MIN, -12), -32767);
        // Monotone.
        let mut last = i16::MIN;
        for x in (i16::MIN..=i16::MAX).step_by(97) {
            let y = sigmoid_i16(x);
            assert!(y >= last);
            last = y;
        }
    }

    #[test]
    fn int64_multiply_rounds_once() {
        // 0.5 as (2^30, 0): x / 2, rounded half up.
        assert_eq!(multiply_by_quantized_multiplier_64(3, 1 << 30, 0), 2);
        assert_eq!(multiply_by_quantized_multiplier_64(-3, 1 << 30, 0), -1);
        assert_eq!(
            multiply_by_quantized_multiplier_64(1 << 40, 1 << 30, -10),
            1 << 29
        );
        // A multiplier near 2^31 reduces to 0x7FFF.
        assert_eq!(
            multiply_by_quantized_multiplier_64(1 << 16, i32::MAX, 0),
            65534
        );
    }

    #[test]
    fn int16_parameters_refuse_offsets_and_large_multipliers() {
        let q = quant();
        assert!(LstmParams::new::<i16>(shape(), &q, 0.0, CellGate::Tanh).is_err());
        let mut q = quant();
        q.input.zero_point = 0;
        q.hidden.zero_point = 0;
        assert!(LstmParams::new::<i16>(shape(), &q, 0.0, CellGate::Tanh).is_ok());
        q.input_weights[2] = 1000.0;
        assert!(LstmParams::new::<i16>(shape(), &q, 0.0, CellGate::Tanh).is_err());
        assert!(LstmParams::new::<i8>(shape(), &q, 0.0, CellGate::Tanh).is_ok());
    }

    #[test]
    fn log2_rounds_like_tflm() {
        assert_eq!(rounded_log2(1.0), 0);
        assert_eq!(rounded_log2(1.0 / 32768.0), -15);
        assert_eq!(rounded_log2(1.4), 0);
        assert_eq!(rounded_log2(1.5), 1);
        assert_eq!(rounded_log2(0.7), -1);
        assert_eq!(rounded_log2(f32::from_bits(1)), -149);
    }

    fn shape() -> LstmShape {
        LstmShape {
            batches: 2,
            time_steps: 3,
            input_size: 2,
            units: 2,
            time_major: false,
        }
    }

    fn quant() -> LstmQuant {
        LstmQuant {
            input: Quant {
                scale: 0.01,
                zero_point: -1,
            },
            input_weights: [0.01; 4],
            recurrent_weights: [0.02; 4],
            hidden: Quant {
                scale: 0.008,
                zero_point: 3,
            },
            cell_scale: 1.0 / 32768.0,
        }
    }

    #[test]
    fn refuses_bad_parameters_and_lengths() {
        let mut q = quant();
        q.cell_scale = 0.0;
        assert!(LstmParams::new::<i8>(shape(), &q, 0.0, CellGate::Tanh).is_err());
        let mut q = quant();
        q.hidden.zero_point = 300;
        assert!(LstmParams::new::<i8>(shape(), &q, 0.0, CellGate::Tanh).is_err());
        let huge = LstmShape {
            batches: u32::MAX,
            time_steps: u32::MAX,
            ..shape()
        };
        assert_eq!(
            LstmParams::new::<i8>(huge, &quant(), 0.0, CellGate::Tanh),
            Err(KernelError::ShapeOverflow)
        );
        let p = LstmParams::new::<i8>(shape(), &quant(), 10.0, CellGate::Tanh).unwrap();
        let (mut h, mut c, mut out) = ([0i8; 4], [0i16; 4], [7i8; 12]);
        let r = lstm(
            &p, &mut h, &mut c, &[0; 12], &[0; 16], &[0; 16], &[0; 8], &mut out,
        );
        assert!(r.is_ok());
        let r = lstm(
            &p, &mut h, &mut c, &[0; 11], &[0; 16], &[0; 16], &[0; 8], &mut out,
        );
        assert!(matches!(r, Err(KernelError::LengthMismatch { .. })));
        let r = lstm(
            &p,
            &mut h,
            &mut [0; 3],
            &[0; 12],
            &[0; 16],
            &[0; 16],
            &[0; 8],
            &mut out,
        );
        assert!(matches!(r, Err(KernelError::LengthMismatch { .. })));
    }

    #[test]
    fn the_clip_bounds_the_cell_state() {
        let p = LstmParams::new::<i8>(shape(), &quant(), 0.5, CellGate::Sigmoid).unwrap();
        assert_eq!(p.cell_clip, Some(16384));
        let (mut h, mut c, mut out) = ([0i8; 4], [i16::MAX; 4], [0i8; 12]);
        lstm(
            &p, &mut h, &mut c, &[0; 12], &[0; 16], &[0; 16], &[0; 8], &mut out,
        )
        .unwrap();
        assert!(c.iter().all(|&v| v <= 16384));
    }
}
