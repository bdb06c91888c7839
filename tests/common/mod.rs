//! Shared by the integration tests: a tiny flatbuffer writer for hand-made `.tflite` models,
//! drivers that wrap the simulator ([`shim`]), and the operators of the job-plan tests
//! ([`chain`]).
#![allow(dead_code)]

pub mod chain;
pub mod shim;

use std::collections::VecDeque;

// ---------------------------------------------------------------------------------------------
// A tiny flatbuffer writer for hand-made models
// ---------------------------------------------------------------------------------------------

/// An object to serialize.
#[derive(Clone, Debug)]
pub enum V {
    /// A table: fields by vtable slot; `soffset` overrides the offset to the vtable.
    Table(Vec<(u16, F)>, Option<i32>),
    I32s(Vec<i32>),
    I64s(Vec<i64>),
    F32s(Vec<f32>),
    Bytes(Vec<u8>),
    Tables(Vec<V>),
    /// A string; the bool says whether to write the NUL terminator.
    Str(Vec<u8>, bool),
    /// A vector whose length field claims `0` elements but has only 4 bytes after it.
    BadLen(u32),
}

/// A table field.
#[derive(Clone, Debug)]
pub enum F {
    I8(i8),
    U8(u8),
    I32(i32),
    U32(u32),
    U64(u64),
    F32(f32),
    Off(V),
}

pub fn table(fields: Vec<(u16, F)>) -> V {
    V::Table(fields, None)
}

pub struct Writer {
    buf: Vec<u8>,
    queue: VecDeque<(usize, V)>,
}

impl Writer {
    pub fn align(&mut self, a: usize) {
        while !self.buf.len().is_multiple_of(a) {
            self.buf.push(0);
        }
    }

    pub fn u32_at(&mut self, at: usize, v: u32) {
        self.buf[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }

    pub fn vector(&mut self, len: usize, elem_align: usize, data: &[u8]) -> usize {
        self.align(4);
        while !(self.buf.len() + 4).is_multiple_of(elem_align) {
            self.buf.extend_from_slice(&[0; 4]);
        }
        let pos = self.buf.len();
        self.buf.extend_from_slice(&(len as u32).to_le_bytes());
        self.buf.extend_from_slice(data);
        pos
    }

    pub fn write(&mut self, v: V) -> usize {
        match v {
            V::Table(fields, soffset) => {
                let slots = fields.iter().map(|(s, _)| *s + 1).max().unwrap_or(0) as usize;
                self.align(2);
                let vt = self.buf.len();
                self.buf.resize(vt + 4 + 2 * slots, 0);
                self.align(4);
                let tp = self.buf.len();
                self.buf.extend_from_slice(&[0; 4]);
                for (slot, f) in fields {
                    let bytes: Vec<u8> = match &f {
                        F::I8(x) => x.to_le_bytes().to_vec(),
                        F::U8(x) => x.to_le_bytes().to_vec(),
                        F::I32(x) => x.to_le_bytes().to_vec(),
                        F::U32(x) => x.to_le_bytes().to_vec(),
                        F::U64(x) => x.to_le_bytes().to_vec(),
                        F::F32(x) => x.to_le_bytes().to_vec(),
                        F::Off(_) => vec![0; 4],
                    };
                    self.align(bytes.len());
                    let fp = self.buf.len();
                    self.buf.extend_from_slice(&bytes);
                    if let F::Off(child) = f {
                        self.queue.push_back((fp, child));
                    }
                    let e = vt + 4 + 2 * slot as usize;
                    self.buf[e..e + 2].copy_from_slice(&((fp - tp) as u16).to_le_bytes());
                }
                let vt_len = (4 + 2 * slots) as u16;
                let t_len = (self.buf.len() - tp) as u16;
                self.buf[vt..vt + 2].copy_from_slice(&vt_len.to_le_bytes());
                self.buf[vt + 2..vt + 4].copy_from_slice(&t_len.to_le_bytes());
                let so = soffset.unwrap_or((tp - vt) as i32);
                self.buf[tp..tp + 4].copy_from_slice(&so.to_le_bytes());
                tp
            }
            V::I32s(v) => {
                let d: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                self.vector(v.len(), 4, &d)
            }
            V::I64s(v) => {
                let d: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                self.vector(v.len(), 8, &d)
            }
            V::F32s(v) => {
                let d: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                self.vector(v.len(), 4, &d)
            }
            V::Bytes(v) => self.vector(v.len(), 1, &v),
            V::Str(s, nul) => {
                let pos = self.vector(s.len(), 1, &s);
                if nul {
                    self.buf.push(0);
                }
                pos
            }
            V::BadLen(len) => self.vector(len as usize, 1, &[0; 4]),
            V::Tables(items) => {
                let pos = self.vector(items.len(), 4, &vec![0; 4 * items.len()]);
                for (i, item) in items.into_iter().enumerate() {
                    self.queue.push_back((pos + 4 + 4 * i, item));
                }
                pos
            }
        }
    }
}

/// Serializes `root` as a file with identifier `TFL3`.
pub fn build(root: V) -> Vec<u8> {
    let mut w = Writer {
        buf: vec![0; 8],
        queue: VecDeque::from([(0, root)]),
    };
    w.buf[4..8].copy_from_slice(b"TFL3");
    while let Some((at, v)) = w.queue.pop_front() {
        let pos = w.write(v);
        w.u32_at(at, (pos - at) as u32);
    }
    w.align(4);
    w.buf
}

// Schema slots used below (see src/model/schema.rs).
pub fn tensor(shape: &[i32], ty: i8, buffer: u32, name: &str, quant: Option<V>) -> V {
    let mut f = vec![
        (0, F::Off(V::I32s(shape.to_vec()))),
        (1, F::I8(ty)),
        (2, F::U32(buffer)),
        (3, F::Off(V::Str(name.as_bytes().to_vec(), true))),
    ];
    if let Some(q) = quant {
        f.push((4, F::Off(q)));
    }
    table(f)
}

pub fn quant(scale: &[f32], zp: &[i64], qd: i32) -> V {
    table(vec![
        (2, F::Off(V::F32s(scale.to_vec()))),
        (3, F::Off(V::I64s(zp.to_vec()))),
        (6, F::I32(qd)),
    ])
}

pub fn opcode(code: i32) -> V {
    table(vec![(0, F::I8(code.min(127) as i8)), (3, F::I32(code))])
}

pub fn operator(opcode_index: u32, inputs: &[i32], outputs: &[i32], options: Option<(u8, V)>) -> V {
    let mut f = vec![
        (0, F::U32(opcode_index)),
        (1, F::Off(V::I32s(inputs.to_vec()))),
        (2, F::Off(V::I32s(outputs.to_vec()))),
    ];
    if let Some((tag, t)) = options {
        f.push((3, F::U8(tag)));
        f.push((4, F::Off(t)));
    }
    table(f)
}

pub fn buffer(data: &[u8]) -> V {
    if data.is_empty() {
        table(vec![])
    } else {
        table(vec![(0, F::Off(V::Bytes(data.to_vec())))])
    }
}

pub const INT8: i8 = 9;
pub const INT32: i8 = 2;
pub const FC_OPTIONS: u8 = 8;
pub const CONV_OPTIONS: u8 = 1;
pub const CONCAT_OPTIONS: u8 = 10;

/// A small valid model: one FULLY_CONNECTED layer, int8 with per-channel weights.
#[derive(Clone)]
pub struct Spec {
    pub version: u32,
    pub opcodes: Vec<V>,
    pub tensors: Vec<V>,
    pub operators: Vec<V>,
    pub buffers: Vec<V>,
    pub inputs: Vec<i32>,
    pub outputs: Vec<i32>,
    pub extra_subgraphs: Vec<V>,
}

impl Spec {
    pub fn fc() -> Self {
        Spec {
            version: 3,
            opcodes: vec![opcode(9)],
            tensors: vec![
                tensor(&[1, 4], INT8, 1, "input", Some(quant(&[0.5], &[-1], 0))),
                tensor(
                    &[2, 4],
                    INT8,
                    2,
                    "weights",
                    Some(quant(&[0.1, 0.2], &[0, 0], 0)),
                ),
                tensor(&[2], INT32, 3, "bias", None),
                tensor(&[1, 2], INT8, 0, "output", Some(quant(&[0.25], &[3], 0))),
            ],
            operators: vec![operator(
                0,
                &[0, 1, 2],
                &[3],
                Some((FC_OPTIONS, table(vec![(0, F::I8(1))]))),
            )],
            buffers: vec![
                buffer(&[]),
                buffer(&[]),
                buffer(&[1, 2, 3, 4, 5, 6, 7, 8]),
                buffer(&[1, 0, 0, 0, 2, 0, 0, 0]),
            ],
            inputs: vec![0],
            outputs: vec![3],
            extra_subgraphs: vec![],
        }
    }

    pub fn subgraph(&self) -> V {
        table(vec![
            (0, F::Off(V::Tables(self.tensors.clone()))),
            (1, F::Off(V::I32s(self.inputs.clone()))),
            (2, F::Off(V::I32s(self.outputs.clone()))),
            (3, F::Off(V::Tables(self.operators.clone()))),
            (4, F::Off(V::Str(b"main".to_vec(), true))),
        ])
    }

    pub fn build(&self) -> Vec<u8> {
        let mut subgraphs = vec![self.subgraph()];
        subgraphs.extend(self.extra_subgraphs.iter().cloned());
        build(table(vec![
            (0, F::U32(self.version)),
            (1, F::Off(V::Tables(self.opcodes.clone()))),
            (2, F::Off(V::Tables(subgraphs))),
            (3, F::Off(V::Str(b"hand made".to_vec(), true))),
            (4, F::Off(V::Tables(self.buffers.clone()))),
        ]))
    }
}
