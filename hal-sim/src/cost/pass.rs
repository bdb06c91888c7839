//! The NPU pass: the unit Vela's performance model costs, and the one currency between the
//! stages. Lowering produces passes; the block search, compute and traffic read them. Keeping
//! the shapes, formats and output-stage rates here lets each stage name them without depending
//! on another stage.

use core::cmp::min;

/// The NPU's operation types, as the performance model distinguishes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum NpuOp {
    Conv,
    Depthwise,
    VectorProduct,
    Pooling,
    ReduceSum,
    Elementwise,
    MatMul,
    Transpose,
}

/// Feature-map storage format: NHWC, or Ethos-U bricks of 16 channels (NHCWB16).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fmt {
    Nhwc,
    Brick,
}

/// A feature-map (or block) shape with the batch folded into the height.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Shp {
    pub(super) h: u32,
    pub(super) w: u32,
    pub(super) c: u32,
}

impl Shp {
    pub(super) const fn new(h: u32, w: u32, c: u32) -> Self {
        Self { h, w, c }
    }

    /// NHWC to `Shp`, the batch folded into H.
    pub(super) fn nhwc(s: [u32; 4]) -> Self {
        Self::new(s[0].saturating_mul(s[1]), s[2], s[3])
    }

    pub(super) fn elems(self) -> u64 {
        self.wh().saturating_mul(u64::from(self.c))
    }

    pub(super) fn wh(self) -> u64 {
        u64::from(self.h) * u64::from(self.w)
    }

    pub(super) fn min(self, o: Shp) -> Shp {
        Shp::new(min(self.h, o.h), min(self.w, o.w), min(self.c, o.c))
    }

    /// The shape as stored: the depth rounded up to 16 in the brick format.
    pub(super) fn stored(self, fmt: Fmt) -> Shp {
        match fmt {
            Fmt::Brick => Shp::new(self.h, self.w, round_up(self.c, 16)),
            Fmt::Nhwc => self,
        }
    }

    pub(super) fn is_scalar(self) -> bool {
        self.elems() == 1
    }
}

/// The format Vela would most likely pick: bricks, except for maps shallower than one
/// micro-block (8 channels), where bricks would be mostly padding.
pub(super) fn fmt_for(depth: u32) -> Fmt {
    if depth >= 8 {
        Fmt::Brick
    } else {
        Fmt::Nhwc
    }
}

/// Output-stage cost per element, in quarter cycles (Vela's `s_EthosU55PerfInfo` for the
/// 128-MAC part).
pub(super) mod ao {
    /// 32-bit unary elementwise (0.75).
    pub const EW32_UNARY: u32 = 3;
    /// 32-bit binary elementwise (1.25).
    pub const EW32_BINARY: u32 = 5;
    /// Multiply, any width (0.75).
    pub const MUL: u32 = 3;
    /// 8-bit add and subtract (1.5: rescaling both operands).
    pub const ADD_SUB: u32 = 6;
    /// Max pooling (0.25).
    pub const MAX_POOL: u32 = 1;
    /// Everything else: convolutions, average pooling, rescales (0.5).
    pub const OTHER: u32 = 2;
    /// Activation through the lookup table (sigmoid, tanh, LUT).
    pub const LUT: u32 = 4;
}

/// One NPU pass.
#[derive(Clone, Copy, Debug)]
pub(super) struct Pass {
    pub(super) op: NpuOp,
    pub(super) ifm: Shp,
    pub(super) ifm2: Option<Shp>,
    pub(super) ofm: Shp,
    pub(super) kernel: (u32, u32),
    pub(super) stride: (u32, u32),
    pub(super) dilation: (u32, u32),
    pub(super) ifm_bits: u32,
    pub(super) ifm2_bits: u32,
    pub(super) ofm_bits: u32,
    /// Output-stage quarter cycles per element (already the max with the activation's).
    pub(super) ao_quarters: u32,
    pub(super) lut_bytes: u32,
    /// Encoded weight-stream bytes and scale bytes.
    pub(super) weights: u64,
    pub(super) scales: u64,
    /// Weights and scales live in flash.
    pub(super) consts_in_flash: bool,
    pub(super) ifm_in_flash: bool,
    pub(super) ifm2_in_flash: bool,
    pub(super) ifm_fmt: Fmt,
    pub(super) ifm2_fmt: Fmt,
    pub(super) ofm_fmt: Fmt,
}

impl Pass {
    pub(super) fn new(op: NpuOp, ifm: Shp, ofm: Shp) -> Self {
        Self {
            op,
            ifm,
            ifm2: None,
            ofm,
            kernel: (1, 1),
            stride: (1, 1),
            dilation: (1, 1),
            ifm_bits: 8,
            ifm2_bits: 8,
            ofm_bits: 8,
            ao_quarters: ao::OTHER,
            lut_bytes: 0,
            weights: 0,
            scales: 0,
            consts_in_flash: false,
            ifm_in_flash: false,
            ifm2_in_flash: false,
            ifm_fmt: fmt_for(ifm.c),
            ifm2_fmt: Fmt::Nhwc,
            ofm_fmt: fmt_for(ofm.c),
        }
    }

    pub(super) fn with_ifm2(mut self, ifm2: Shp, fmt: Fmt) -> Self {
        self.ifm2 = Some(ifm2);
        self.ifm2_fmt = fmt;
        self
    }

    pub(super) fn bits(mut self, ifm: u32, ifm2: u32, ofm: u32) -> Self {
        self.ifm_bits = ifm;
        self.ifm2_bits = ifm2;
        self.ofm_bits = ofm;
        self
    }

    pub(super) fn formats(mut self, ifm: Fmt, ofm: Fmt) -> Self {
        self.ifm_fmt = ifm;
        self.ofm_fmt = ofm;
        self
    }

    pub(super) fn ao(mut self, quarters: u32) -> Self {
        self.ao_quarters = quarters;
        self
    }
}

pub(super) fn round_up(v: u32, to: u32) -> u32 {
    v.div_ceil(to.max(1)).saturating_mul(to.max(1))
}

pub(super) fn div_ceil_shape(a: Shp, b: Shp) -> Shp {
    Shp::new(
        a.h.div_ceil(b.h.max(1)),
        a.w.div_ceil(b.w.max(1)),
        a.c.div_ceil(b.c.max(1)),
    )
}
