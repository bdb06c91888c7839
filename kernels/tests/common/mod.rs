//! The TFLM layer fixtures' file format, shared by the `tflm_*` tests: named records, each
//! `u8 name_len, name, u8 kind (0 = i8, 1 = i32, 2 = f32), u32 count, count elements`
//! (little-endian), as `tflm/extract_fixtures.py` writes them.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::Path;

use npu_kernels::int8::{Activation, Nhwc, Padding, Quant};

pub enum Rec {
    I8(Vec<i8>),
    I32(Vec<i32>),
    F32(Vec<f32>),
}

pub struct Fixture(HashMap<String, Rec>);

impl Fixture {
    pub fn load(path: &Path) -> Self {
        let bytes = std::fs::read(path).unwrap();
        let mut map = HashMap::new();
        let mut at = 0;
        while at < bytes.len() {
            let name_len = usize::from(bytes[at]);
            let name = String::from_utf8(bytes[at + 1..at + 1 + name_len].to_vec()).unwrap();
            at += 1 + name_len;
            let kind = bytes[at];
            let count = u32::from_le_bytes(bytes[at + 1..at + 5].try_into().unwrap()) as usize;
            at += 5;
            let rec = match kind {
                0 => {
                    let v = bytes[at..at + count].iter().map(|&b| b as i8).collect();
                    at += count;
                    Rec::I8(v)
                }
                1 | 2 => {
                    let words: Vec<[u8; 4]> = bytes[at..at + 4 * count]
                        .chunks_exact(4)
                        .map(|c| c.try_into().unwrap())
                        .collect();
                    at += 4 * count;
                    if kind == 1 {
                        Rec::I32(words.into_iter().map(i32::from_le_bytes).collect())
                    } else {
                        Rec::F32(words.into_iter().map(f32::from_le_bytes).collect())
                    }
                }
                k => panic!("unknown record kind {k}"),
            };
            map.insert(name, rec);
        }
        Self(map)
    }

    pub fn i8(&self, k: &str) -> &[i8] {
        match &self.0[k] {
            Rec::I8(v) => v,
            _ => panic!("{k} is not i8"),
        }
    }

    pub fn i32(&self, k: &str) -> Option<&[i32]> {
        match self.0.get(k)? {
            Rec::I32(v) => Some(v),
            _ => panic!("{k} is not i32"),
        }
    }

    pub fn u32s(&self, k: &str) -> Vec<u32> {
        self.i32(k).unwrap().iter().map(|&v| v as u32).collect()
    }

    pub fn f32(&self, k: &str) -> &[f32] {
        match &self.0[k] {
            Rec::F32(v) => v,
            _ => panic!("{k} is not f32"),
        }
    }

    pub fn is_f32(&self, k: &str) -> bool {
        matches!(self.0[k], Rec::F32(_))
    }

    pub fn has(&self, k: &str) -> bool {
        self.0.contains_key(k)
    }

    pub fn quant(&self, tensor: &str) -> Quant {
        Quant {
            scale: self.f32(&format!("{tensor}_scale"))[0],
            zero_point: self.i32(&format!("{tensor}_zero_point")).unwrap()[0],
        }
    }

    pub fn nhwc(&self, k: &str) -> Nhwc {
        let s = self.u32s(k);
        assert_eq!(s.len(), 4, "{k}");
        Nhwc {
            batches: s[0],
            height: s[1],
            width: s[2],
            channels: s[3],
        }
    }
}

pub fn padding(code: u32) -> Padding {
    match code {
        0 => Padding::Same,
        1 => Padding::Valid,
        p => panic!("padding {p}"),
    }
}

pub fn activation(code: u32) -> Activation {
    match code {
        0 => Activation::None,
        1 => Activation::Relu,
        2 => Activation::ReluN1To1,
        3 => Activation::Relu6,
        a => panic!("activation {a}"),
    }
}
