//! Compiled models: a model prepared on a host, run on a device's CPU over one arena.
//!
//! # Design
//!
//! Preparing a `.tflite` model on the device (a [`Graph`](crate::graph::Graph)) reads the
//! flatbuffer, lowers each operator, turns quantization into fixed-point multipliers, plans the
//! arena and builds the state that drives an NPU: tensors, transfers, fences, job plans. A part
//! that runs its models on its CPU alone needs none of that at run time, and the code for it is
//! most of the firmware's flash. So the host prepares the model once, as a graph would, and
//! writes what an invoke does as a *compiled model* ([`Graph::compile`](crate::graph::Graph::compile),
//! `npu-sim compile MODEL --output FILE`); the device keeps the image in flash and runs it:
//!
//! - each **step** is one operator: its [`Op`] with its parameters packed as words (shapes,
//!   and quantization already resolved: see [`npu_kernels::packed`]), where its output lies in
//!   the arena, and where each input lies: in the arena, or among the image's constants
//!   (weights, biases and per-channel multipliers, copied from the model and prepared);
//! - the **arena** holds every activation at the offset the graph's arena plan gave it (in
//!   place where the graph computes in place); the firmware gives one buffer of the size the
//!   image says, and nothing else is allocated;
//! - an **invoke** reads each step's op back and runs it over the arena with the same
//!   operator code as the graph's CPU fallback ([`run_over`]): outputs are the graph's, byte
//!   for byte.
//!
//! The image is never trusted: [`CompiledModel::new`] checks its header, its CRC, the
//! operator registry it was written with, every region against the arena and the image, and
//! reads every step's operator back (its geometry derived again, its quantization range
//! checked) with the operand sizes it needs, before anything runs. What this build leaves out
//! (an operator whose `op-` feature is off) is refused there, naming the step.
//!
//! ```
//! use npu_compute::compiled::CompiledModel;
//! # use npu_compute::graph::Graph;
//! # use npu_compute::prelude::*;
//! # use npu_compute::hal::CpuOnly;
//! # static MODEL: &[u8] = npu_compute::include_aligned!("../../examples/models/kws_dscnn/model.tflite");
//! # #[repr(C, align(16))] struct Aligned<const N: usize>([u8; N]);
//! # let (mut device, mut host) = (Aligned([0u8; 65536]), Aligned([0u8; 4096]));
//! # let channel: RefCellChannel<_> = RefCellChannel::new(
//! #     NpuServer::<_>::new(CpuOnly::new(&mut device.0, &mut host.0), MemoryConfig::default()).unwrap());
//! # let graph: Graph<_> = Graph::prepare(ComputeClient::new(&channel), MODEL).unwrap();
//! # let mut image = Aligned([0u8; 32768]);
//! # let len = graph.compile(MODEL, &mut image.0).unwrap();
//! # let image: &[u8] = &image.0[..len];
//! // `image`: what `npu-sim compile` wrote, in flash (`include_aligned!`).
//! let model = CompiledModel::new(image).unwrap();
//! let mut arena = Aligned([0u8; 16384]);
//! let mut session = model.session(&mut arena.0).unwrap();
//! session.input_mut(0).unwrap().copy_from_slice(include_bytes!("../../examples/models/kws_dscnn/input_0.bin"));
//! session.invoke().unwrap();
//! assert_eq!(session.output(0).unwrap(), include_bytes!("../../examples/models/kws_dscnn/expected_tflm_0.bin"));
//! ```

mod error;
pub mod format;

pub use error::CompiledError;

use format::{
    checksum, registry, word, CONSTANT_ALIGNMENT, FORMAT, HEADER, INPUT_ENTRY, IN_IMAGE, IO_ENTRY,
    MAGIC, STEP_HEAD, VARIABLE_ENTRY,
};

use crate::ops::{run_over, InputBytes, Op, MAX_INPUTS, VIEW_ALIGNMENT};
use npu_kernels::packed::WordReader;

/// A compiled model, checked (see the [module docs](self)).
#[derive(Clone, Copy, Debug)]
pub struct CompiledModel<'i> {
    bytes: &'i [u8],
    steps: u16,
    arena: u32,
    alignment: u32,
    inputs: u8,
    outputs: u8,
    variables: u8,
    constants_at: u32,
}

/// One step as the image lays it out.
struct Step<'i> {
    tag: u16,
    output: (u32, u32),
    /// `(location, bytes)` words of each input.
    inputs: &'i [u8],
    params: &'i [u8],
}

impl<'i> CompiledModel<'i> {
    /// Checks `bytes` as a compiled model: header, CRC, operator registry, every region, and
    /// every step's operator and operands (see the [module docs](self)).
    ///
    /// Errors: the [`CompiledError`] naming what is wrong, and for a step, which.
    pub fn new(bytes: &'i [u8]) -> Result<Self, CompiledError> {
        let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
        let field = |at| word(bytes, at).ok_or(CompiledError::BadFormat);
        if bytes.len() < HEADER {
            return Err(CompiledError::Truncated {
                needed: HEADER as u32,
                len,
            });
        }
        if bytes[0..4] != MAGIC || bytes[4..6] != FORMAT.to_le_bytes() {
            return Err(CompiledError::BadFormat);
        }
        let found = field(8)?;
        if found != registry() {
            return Err(CompiledError::OtherRegistry {
                found,
                expected: registry(),
            });
        }
        let needed = field(12)?;
        if needed > len {
            return Err(CompiledError::Truncated { needed, len });
        }
        if needed < len {
            return Err(CompiledError::BadFormat);
        }
        if field(40)? != checksum(bytes) {
            return Err(CompiledError::Checksum);
        }
        if !(bytes.as_ptr() as usize).is_multiple_of(VIEW_ALIGNMENT) {
            return Err(CompiledError::Misaligned {
                what: "image",
                alignment: VIEW_ALIGNMENT as u32,
            });
        }
        let model = CompiledModel {
            bytes,
            steps: u16::from_le_bytes([bytes[6], bytes[7]]),
            arena: field(16)?,
            alignment: field(20)?,
            inputs: bytes[24],
            outputs: bytes[25],
            variables: bytes[26],
            constants_at: field(28)?,
        };
        let alignment_ok =
            model.alignment.is_power_of_two() && model.alignment as usize >= VIEW_ALIGNMENT;
        let constants = model.constants_at as usize;
        if !alignment_ok || !constants.is_multiple_of(CONSTANT_ALIGNMENT) || constants > bytes.len()
        {
            return Err(CompiledError::BadFormat);
        }
        model.check()?;
        Ok(model)
    }

    /// Checks every region and step; the header is checked.
    fn check(&self) -> Result<(), CompiledError> {
        let tables = [
            ("input", self.inputs, HEADER, IO_ENTRY),
            (
                "output",
                self.outputs,
                HEADER + usize::from(self.inputs) * IO_ENTRY,
                IO_ENTRY,
            ),
            (
                "variable",
                self.variables,
                self.variables_at(),
                VARIABLE_ENTRY,
            ),
        ];
        for (what, count, start, entry) in tables {
            for k in 0..count {
                let at = start + usize::from(k) * entry;
                if !self.region(at).is_some_and(|r| self.in_arena(r)) {
                    let index = u16::from(k);
                    return Err(CompiledError::BadRegion { what, index });
                }
            }
        }
        let mut at = self.steps_at();
        for s in 0..self.steps {
            let bad = |what| CompiledError::BadStep { step: s, what };
            let (step, next) = self.step(at).ok_or(bad("it runs past the image's steps"))?;
            let op = self.op(s, &step)?;
            let sizes = op.operands().ok_or(bad("its operand sizes overflow"))?;
            let given = step.inputs.len() / INPUT_ENTRY;
            if !sizes.accepts(given) {
                return Err(bad(
                    "it has another number of inputs than its operator takes",
                ));
            }
            if step.output.1 != sizes.output || !self.in_arena(step.output) {
                return Err(bad("its output has another size or lies outside the arena"));
            }
            for (i, &bytes) in sizes.inputs.iter().enumerate().take(given) {
                let region = self
                    .input(&step, i)
                    .ok_or(bad("an input lies outside the image"))?;
                let len = match region {
                    InputBytes::At(_, len) => len,
                    InputBytes::Outside(b) => b.len(),
                };
                if len != bytes as usize {
                    return Err(bad("an input has another size than its operator takes"));
                }
            }
            at = next;
        }
        // The constants follow the steps at the next multiple of their alignment.
        if at.next_multiple_of(CONSTANT_ALIGNMENT) != self.constants_at as usize {
            return Err(CompiledError::BadFormat);
        }
        Ok(())
    }

    /// Bytes of arena the model runs in.
    pub fn arena_bytes(&self) -> u32 {
        self.arena
    }

    /// The alignment the arena must start at.
    pub fn arena_alignment(&self) -> u32 {
        self.alignment
    }

    /// Steps (operators that compute) per invoke.
    pub fn steps(&self) -> u16 {
        self.steps
    }

    /// Bytes of model input `k`, if it exists.
    pub fn input_bytes(&self, k: usize) -> Option<u32> {
        self.io(k, 0, self.inputs).map(|(_, len)| len)
    }

    /// Bytes of model output `k`, if it exists.
    pub fn output_bytes(&self, k: usize) -> Option<u32> {
        self.io(k, self.inputs, self.outputs).map(|(_, len)| len)
    }

    /// Runs in `arena` (at least [`arena_bytes`](Self::arena_bytes), starting at a multiple
    /// of [`arena_alignment`](Self::arena_alignment)), its variables set to their initial
    /// values.
    ///
    /// Errors: [`CompiledError::ArenaTooSmall`], [`CompiledError::Misaligned`].
    pub fn session<'s>(&'s self, arena: &'s mut [u8]) -> Result<Session<'s, 'i>, CompiledError> {
        if arena.len() < self.arena as usize {
            return Err(CompiledError::ArenaTooSmall {
                needed: self.arena,
                len: u32::try_from(arena.len()).unwrap_or(u32::MAX),
            });
        }
        if !(arena.as_ptr() as usize).is_multiple_of(self.alignment as usize) {
            return Err(CompiledError::Misaligned {
                what: "arena",
                alignment: self.alignment,
            });
        }
        let mut session = Session { model: self, arena };
        session.reset_state();
        Ok(session)
    }

    fn variables_at(&self) -> usize {
        HEADER + (usize::from(self.inputs) + usize::from(self.outputs)) * IO_ENTRY
    }

    fn steps_at(&self) -> usize {
        self.variables_at() + usize::from(self.variables) * VARIABLE_ENTRY
    }

    /// The `(offset, bytes)` pair at `at`.
    fn region(&self, at: usize) -> Option<(u32, u32)> {
        Some((word(self.bytes, at)?, word(self.bytes, at + 4)?))
    }

    fn in_arena(&self, (offset, len): (u32, u32)) -> bool {
        offset.checked_add(len).is_some_and(|end| end <= self.arena)
    }

    /// Entry `k` of the `count` entries from `first` of the inputs and outputs.
    fn io(&self, k: usize, first: u8, count: u8) -> Option<(u32, u32)> {
        (k < usize::from(count))
            .then(|| self.region(HEADER + (usize::from(first) + k) * IO_ENTRY))
            .flatten()
    }

    /// The step at `at`, and where the next one starts.
    fn step(&self, at: usize) -> Option<(Step<'i>, usize)> {
        let head = word(self.bytes, at)?;
        let params = word(self.bytes, at + 4)? as usize;
        let inputs = usize::from((head >> 16) as u8);
        let inputs_at = at + STEP_HEAD;
        let params_at = inputs_at + inputs * INPUT_ENTRY;
        let next = params_at.checked_add(params.checked_mul(4)?)?;
        let step = Step {
            tag: head as u16,
            output: self.region(at + 8)?,
            inputs: self.bytes.get(inputs_at..params_at)?,
            params: self.bytes.get(params_at..next)?,
        };
        (next <= self.constants_at as usize).then_some((step, next))
    }

    /// The step's operator, read back.
    fn op(&self, s: u16, step: &Step<'_>) -> Result<Op, CompiledError> {
        let mut r = WordReader::new(step.params);
        let op =
            Op::unpack(step.tag, &mut r).map_err(|error| CompiledError::Op { step: s, error })?;
        if r.remaining() != 0 {
            let what = "its parameter words outnumber its operator's";
            return Err(CompiledError::BadStep { step: s, what });
        }
        Ok(op)
    }

    /// Where input `i` of `step` lies: in the arena, or among the image's constants.
    fn input(&self, step: &Step<'_>, i: usize) -> Option<InputBytes<'i>> {
        let (location, len) = (
            word(step.inputs, i * INPUT_ENTRY)?,
            word(step.inputs, i * INPUT_ENTRY + 4)?,
        );
        if location & IN_IMAGE == 0 {
            self.in_arena((location, len))
                .then_some(InputBytes::At(location as usize, len as usize))
        } else {
            let start = (location & !IN_IMAGE) as usize;
            let bytes = self.bytes.get(start..start.checked_add(len as usize)?)?;
            (start >= self.constants_at as usize).then_some(InputBytes::Outside(bytes))
        }
    }
}

/// A compiled model running in its arena ([`CompiledModel::session`]): write the inputs,
/// invoke, read the outputs.
#[derive(Debug)]
pub struct Session<'s, 'i> {
    model: &'s CompiledModel<'i>,
    arena: &'s mut [u8],
}

impl Session<'_, '_> {
    /// Model input `k`'s bytes in the arena, to write before [`invoke`](Self::invoke).
    pub fn input_mut(&mut self, k: usize) -> Option<&mut [u8]> {
        let (at, len) = self.model.io(k, 0, self.model.inputs)?;
        self.arena.get_mut(at as usize..(at + len) as usize)
    }

    /// Model output `k`'s bytes in the arena, as the last [`invoke`](Self::invoke) left them.
    pub fn output(&self, k: usize) -> Option<&[u8]> {
        let m = self.model;
        let (at, len) = m.io(k, m.inputs, m.outputs)?;
        self.arena.get(at as usize..(at + len) as usize)
    }

    /// Runs every step over the arena, in order.
    ///
    /// Errors: [`CompiledError::Op`] when a kernel refuses its operands (which the checks
    /// made at [`CompiledModel::new`] leave to none but a kernel's own limits).
    pub fn invoke(&mut self) -> Result<(), CompiledError> {
        let m = self.model;
        let mut at = m.steps_at();
        for s in 0..m.steps {
            let bad = |what| CompiledError::BadStep { step: s, what };
            // Checked at `new`: the image is borrowed unchanged since.
            let (step, next) = m.step(at).ok_or(bad("it runs past the image's steps"))?;
            let op = m.op(s, &step)?;
            let mut inputs: heapless::Vec<InputBytes<'_>, MAX_INPUTS> = heapless::Vec::new();
            for i in 0..step.inputs.len() / INPUT_ENTRY {
                let input = m
                    .input(&step, i)
                    .ok_or(bad("an input lies outside the image"))?;
                inputs
                    .push(input)
                    .map_err(|_| bad("it has more inputs than an operator takes"))?;
            }
            let output = (step.output.0 as usize, step.output.1 as usize);
            match run_over(&op, self.arena, output, &inputs) {
                Some(Ok(())) => {}
                Some(Err(error)) => return Err(CompiledError::Op { step: s, error }),
                None => return Err(bad("its operands overlap where they must not")),
            }
            at = next;
        }
        Ok(())
    }

    /// Sets every variable (the state of stateful operators) to its initial value, as
    /// [`CompiledModel::session`] does.
    pub fn reset_state(&mut self) {
        let m = self.model;
        for k in 0..usize::from(m.variables) {
            let at = m.variables_at() + k * VARIABLE_ENTRY;
            // Checked at `new`: inside the arena.
            if let (Some((offset, len)), Some(initial)) = (m.region(at), word(m.bytes, at + 8)) {
                if let Some(bytes) = self.arena.get_mut(offset as usize..(offset + len) as usize) {
                    bytes.fill(initial as u8);
                }
            }
        }
    }
}
