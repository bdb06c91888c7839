//! Fuzz target: importing a tuning table from arbitrary bytes.
//!
//! Must never panic. The checksum would stop almost every input at the first check, so each
//! input is also tried resealed (its CRC recomputed, its fingerprint taken as the HAL's), which
//! reaches the entry checks. A table that imports must export to the same bytes.

#![no_main]

use libfuzzer_sys::fuzz_target;
use npu_compute::tune::{HEADER_BYTES, MAGIC};
use npu_compute::tune::{crc32, export, import, TuneCache};

fuzz_target!(|data: &[u8]| {
    let mut cache = TuneCache::<64>::new();
    let _ = import(&mut cache, 0, data);

    let mut sealed = data.to_vec();
    if sealed.len() < HEADER_BYTES {
        return;
    }
    sealed[..4].copy_from_slice(&MAGIC);
    let fingerprint = u64::from_le_bytes(sealed[12..20].try_into().unwrap());
    let crc = {
        let mut covered = sealed[..28].to_vec();
        covered.extend_from_slice(&sealed[HEADER_BYTES..]);
        crc32(&covered)
    };
    sealed[28..32].copy_from_slice(&crc.to_le_bytes());
    let mut cache = TuneCache::<64>::new();
    if import(&mut cache, fingerprint, &sealed).is_ok() {
        let mut out = vec![0u8; sealed.len()];
        let n = export(&cache, fingerprint, &mut out).expect("an imported table exports");
        assert_eq!(&out[..n], &sealed[..], "export(import(x)) != x");
    }
});
