//! Fuzz target: checking and running a compiled model from arbitrary bytes.
//!
//! Must never panic, in `CompiledModel::new` nor in an invoke of an image it accepts. The CRC
//! would stop almost every input at the first check, so each input is also tried resealed
//! (its registry fingerprint and length set to this build's, its CRC recomputed), which
//! reaches the region, step and operator checks. An accepted image is run in an arena of its
//! size (up to 1 MiB) over input bytes taken from the data.

#![no_main]

use libfuzzer_sys::fuzz_target;
use npu_compute::compiled::{format, CompiledModel};

/// CRC-32 (IEEE), as the header holds it.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

/// Checks `bytes` (copied to an aligned buffer) and, if accepted, invokes it once.
fn try_image(bytes: &[u8]) {
    let mut words = vec![0u128; bytes.len().div_ceil(16).max(1)];
    let image: &mut [u8] = &mut bytemuck::cast_slice_mut(&mut words)[..bytes.len()];
    image.copy_from_slice(bytes);
    let Ok(model) = CompiledModel::new(image) else {
        return;
    };
    let n = model.arena_bytes() as usize;
    if n > 1 << 20 {
        return;
    }
    let mut arena = vec![0u128; n.div_ceil(16).max(1)];
    let arena: &mut [u8] = &mut bytemuck::cast_slice_mut(&mut arena)[..n];
    let Ok(mut session) = model.session(arena) else {
        return;
    };
    if let Some(input) = session.input_mut(0) {
        for (i, b) in input.iter_mut().enumerate() {
            *b = bytes[i % bytes.len()];
        }
    }
    let _ = session.invoke();
    let _ = session.output(0);
}

fuzz_target!(|data: &[u8]| {
    try_image(data);
    if data.len() < 48 {
        return;
    }
    let mut sealed = data.to_vec();
    sealed[..4].copy_from_slice(&format::MAGIC);
    sealed[4..6].copy_from_slice(&format::FORMAT.to_le_bytes());
    sealed[8..12].copy_from_slice(&format::registry().to_le_bytes());
    let len = sealed.len() as u32;
    sealed[12..16].copy_from_slice(&len.to_le_bytes());
    let crc = crc32(&sealed[48..]);
    sealed[40..44].copy_from_slice(&crc.to_le_bytes());
    try_image(&sealed);
});
