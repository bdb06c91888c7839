//! Tests of the table format: layout, round trips, every refusal, and that no bytes panic.

use super::*;
use crate::hal::Variant;
use crate::ops::OpSet;
use crate::tune::cache::Lookup;

const FP: u64 = 0x0123_4567_89AB_CDEF;

fn key(a: u8, b: u8) -> TuneKey {
    let mut k = [0; 16];
    k[0] = a;
    k[15] = b;
    TuneKey(k)
}

fn choice(candidate: Candidate, cycles: u32, verified: bool) -> Choice {
    Choice {
        candidate,
        cycles,
        auto_cycles: cycles.saturating_add(1000),
        timed: 7,
        samples: 3,
        verified,
        measured: true,
    }
}

/// A cache with four measured choices inserted out of key order, one failed tuning and one
/// claim: the last two are not exported.
fn tuned() -> TuneCache<8> {
    let mut c = TuneCache::new();
    let block = Candidate::Npu(Variant::Block { h: 16, w: 4 });
    c.finish(key(4, 9), choice(block, 3_832, true)).unwrap();
    c.finish(
        key(4, 1),
        choice(Candidate::Npu(Variant::Im2col), 11_884, false),
    )
    .unwrap();
    c.finish(key(3, 200), choice(Candidate::Cpu, u32::MAX, true))
        .unwrap();
    c.finish(key(9, 0), choice(Candidate::Npu(Variant::Auto), 5, false))
        .unwrap();
    c.finish(key(5, 5), Choice::FAILED).unwrap();
    c.claim(key(6, 6)).unwrap();
    c
}

const LEN: usize = HEADER_BYTES + 4 * ENTRY_BYTES;

fn exported() -> [u8; LEN] {
    let mut out = [0u8; LEN];
    assert_eq!(export(&tuned(), FP, &mut out), Ok(LEN));
    out
}

/// Recomputes a doctored table's CRC, so a test reaches the checks after it.
fn reseal(t: &mut [u8]) {
    let crc = table_crc(t).unwrap();
    t[CRC_AT..HEADER_BYTES].copy_from_slice(&crc.to_le_bytes());
}

fn entry_at(i: usize) -> core::ops::Range<usize> {
    HEADER_BYTES + i * ENTRY_BYTES..HEADER_BYTES + (i + 1) * ENTRY_BYTES
}

/// Every key and entry of a cache, in a comparable form.
fn snapshot<const N: usize>(c: &TuneCache<N>) -> heapless::Vec<(TuneKey, Lookup), 16> {
    let mut v = heapless::Vec::new();
    for a in 0..=10 {
        for b in [0, 1, 5, 6, 9, 200] {
            let k = key(a, b);
            let l = c.lookup(k);
            if l != Lookup::Miss {
                v.push((k, l)).unwrap();
            }
        }
    }
    v
}

#[test]
fn crc32_check_value() {
    assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    assert_eq!(crc32(b""), 0);
}

#[test]
fn crate_version_is_packed() {
    assert_eq!(parse_decimal("0"), 0);
    assert_eq!(parse_decimal("42"), 42);
    assert_eq!(parse_decimal("99999999999"), u32::MAX);
    assert_eq!(pack_version("1", "2", "3"), 1 << 20 | 2 << 10 | 3);
    assert_eq!(pack_version("1", "5000", "0"), 1 << 20 | 1023 << 10);
    let major: u32 = env!("CARGO_PKG_VERSION_MAJOR").parse().unwrap();
    let minor: u32 = env!("CARGO_PKG_VERSION_MINOR").parse().unwrap();
    let patch: u32 = env!("CARGO_PKG_VERSION_PATCH").parse().unwrap();
    assert_eq!(CRATE_VERSION, major << 20 | minor << 10 | patch);
}

#[test]
fn layout_of_an_exported_table() {
    let t = exported();
    assert_eq!(&t[0..4], b"NPUT");
    assert_eq!(t[4..6], 1u16.to_le_bytes());
    assert_eq!(t[6..8], 1u16.to_le_bytes());
    assert_eq!(t[8..12], CRATE_VERSION.to_le_bytes());
    assert_eq!(t[12..20], FP.to_le_bytes());
    assert_eq!(t[20..22], 4u16.to_le_bytes());
    assert_eq!(t[22..24], 32u16.to_le_bytes());
    assert_eq!(t[24..28], [0; 4]);
    let crc = u32::from_le_bytes(t[28..32].try_into().unwrap());
    assert_eq!(Some(crc), table_crc(&t));
    // Sorted by key, whatever the insertion order; failed and claimed keys left out.
    let keys = [key(3, 200), key(4, 1), key(4, 9), key(9, 0)];
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(t[entry_at(i)][..16], k.0);
    }
    // The 16×4 entry in full.
    let e = &t[entry_at(2)];
    assert_eq!(e[16..20], [1, 16, 4, 0]);
    assert_eq!(e[20..24], 3_832u32.to_le_bytes());
    assert_eq!(e[24..28], 4_832u32.to_le_bytes());
    assert_eq!(e[28..32], [7, 3, 1, 0]);
}

#[test]
fn round_trip_is_byte_identical() {
    let t = exported();
    let mut c = TuneCache::<8>::new();
    assert_eq!(import(&mut c, FP, &t), Ok(4));
    assert_eq!(c.len(), 4);
    let Lookup::Hit(cpu) = c.lookup(key(3, 200)) else {
        panic!("not imported")
    };
    assert_eq!(cpu, choice(Candidate::Cpu, u32::MAX, true));
    let mut again = [0u8; LEN];
    assert_eq!(export(&c, FP, &mut again), Ok(LEN));
    assert_eq!(again, t);
    // Into a smaller cache, and over existing entries.
    let mut small = TuneCache::<4>::new();
    assert_eq!(import(&mut small, FP, &t), Ok(4));
    assert_eq!(import(&mut small, FP, &t), Ok(4));
    assert_eq!(small.len(), 4);
}

#[test]
fn an_empty_table() {
    let mut out = [0u8; HEADER_BYTES];
    assert_eq!(export(&TuneCache::<2>::new(), FP, &mut out), Ok(32));
    let mut c = TuneCache::<2>::new();
    assert_eq!(import(&mut c, FP, &out), Ok(0));
    assert!(c.is_empty());
}

#[test]
fn imported_choices_replace_tuned_ones() {
    let mut c = TuneCache::<8>::new();
    c.finish(key(4, 9), Choice::FAILED).unwrap();
    import(&mut c, FP, &exported()).unwrap();
    let Lookup::Hit(got) = c.lookup(key(4, 9)) else {
        panic!()
    };
    assert_eq!(
        got.candidate,
        Candidate::Npu(Variant::Block { h: 16, w: 4 })
    );
    assert!(got.measured);
}

#[test]
fn export_needs_room() {
    let mut out = [0u8; LEN - 1];
    assert_eq!(
        export(&tuned(), FP, &mut out),
        Err(TableError::BufferTooSmall { needed: LEN })
    );
    let mut big = [0xAAu8; LEN + 10];
    assert_eq!(export(&tuned(), FP, &mut big), Ok(LEN));
    assert_eq!(big[..LEN], exported());
    assert_eq!(big[LEN..], [0xAA; 10]);
}

/// Imports `t` into a copy of a non-empty cache, checks the error and that the cache did
/// not change.
fn refused(t: &[u8], fp: u64) -> TableError {
    let mut c = TuneCache::<8>::new();
    c.finish(key(10, 0), choice(Candidate::Cpu, 1, false))
        .unwrap();
    c.claim(key(10, 1)).unwrap();
    let before = snapshot(&c);
    let err = import(&mut c, fp, t).expect_err("accepted");
    assert_eq!(snapshot(&c), before, "{err:?} changed the cache");
    assert_eq!(c.len(), 2);
    err
}

#[test]
#[cfg_attr(
    miri,
    ignore = "over 30 s each under miri, which interprets every step (schedule searches, sweeps of many cases)"
)]
fn each_table_error() {
    let good = exported();
    assert_eq!(
        refused(&good[..31], FP),
        TableError::Truncated {
            needed: 32,
            len: 31
        }
    );
    assert_eq!(
        refused(&[], FP),
        TableError::Truncated { needed: 32, len: 0 }
    );

    let mut t = good;
    t[0] = b'X';
    assert_eq!(refused(&t, FP), TableError::BadMagic);

    let mut t = good;
    t[4] = 2;
    assert_eq!(
        refused(&t, FP),
        TableError::Format {
            found: 2,
            supported: 1
        }
    );

    let mut t = good;
    t[22] = 16;
    assert_eq!(refused(&t, FP), TableError::EntrySize { found: 16 });

    assert_eq!(
        refused(&good[..LEN - 1], FP),
        TableError::Length {
            expected: LEN,
            len: LEN - 1
        }
    );
    let mut long = [0u8; LEN + 32];
    long[..LEN].copy_from_slice(&good);
    assert_eq!(
        refused(&long, FP),
        TableError::Length {
            expected: LEN,
            len: LEN + 32
        }
    );

    let mut t = good;
    t[HEADER_BYTES + 20] ^= 1;
    let computed = table_crc(&t).unwrap();
    let stored = u32::from_le_bytes(good[28..32].try_into().unwrap());
    assert_eq!(refused(&t, FP), TableError::Checksum { stored, computed });

    let mut t = good;
    t[25] = 1;
    reseal(&mut t);
    assert_eq!(refused(&t, FP), TableError::Reserved { found: 0x100 });

    let mut t = good;
    t[6] = 2;
    reseal(&mut t);
    assert_eq!(
        refused(&t, FP),
        TableError::Schema {
            found: 2,
            expected: 1
        }
    );

    let mut t = good;
    t[8..12].copy_from_slice(&(CRATE_VERSION + 1).to_le_bytes());
    reseal(&mut t);
    assert_eq!(
        refused(&t, FP),
        TableError::CrateVersion {
            found: CRATE_VERSION + 1,
            expected: CRATE_VERSION
        }
    );

    assert_eq!(
        refused(&good, FP ^ 1),
        TableError::OtherHal {
            found: FP,
            expected: FP ^ 1
        }
    );
}

#[test]
fn entry_errors() {
    let good = exported();
    // Two entries swapped.
    let mut t = good;
    t[entry_at(1)].copy_from_slice(&good[entry_at(2)]);
    t[entry_at(2)].copy_from_slice(&good[entry_at(1)]);
    reseal(&mut t);
    assert_eq!(refused(&t, FP), TableError::Unsorted { index: 2 });
    // A repeated key.
    let mut t = good;
    t[entry_at(3)].copy_from_slice(&good[entry_at(2)]);
    reseal(&mut t);
    assert_eq!(refused(&t, FP), TableError::Unsorted { index: 3 });
    // An unknown candidate tag, a non-canonical candidate, unknown flags, reserved byte.
    for (at, value) in [(16, 0x7F), (18, 1), (30, 2), (31, 1)] {
        let mut t = good;
        t[HEADER_BYTES + ENTRY_BYTES + at] = value;
        reseal(&mut t);
        assert_eq!(
            refused(&t, FP),
            TableError::BadEntry { index: 1 },
            "byte {at}"
        );
    }
}

#[test]
fn capacity_and_busy() {
    let t = exported();
    // Four keys cannot fit in two slots.
    let mut two = TuneCache::<2>::new();
    assert_eq!(
        import(&mut two, FP, &t),
        Err(TableError::Capacity {
            entries: 4,
            capacity: 2
        })
    );
    assert!(two.is_empty());
    // Four slots, one held by another key: five keys needed.
    let mut four = TuneCache::<4>::new();
    four.finish(key(10, 0), Choice::FAILED).unwrap();
    assert_eq!(
        import(&mut four, FP, &t),
        Err(TableError::Capacity {
            entries: 5,
            capacity: 4
        })
    );
    assert_eq!(four.len(), 1);
    // One of the table's keys is being tuned.
    let mut busy = TuneCache::<8>::new();
    busy.claim(key(4, 9)).unwrap();
    assert_eq!(import(&mut busy, FP, &t), Err(TableError::Busy));
    assert_eq!(busy.lookup(key(4, 9)), Lookup::InProgress);
    assert_eq!(busy.len(), 1);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "over 30 s each under miri, which interprets every step (schedule searches, sweeps of many cases)"
)]
fn every_truncation_and_bit_flip_is_refused() {
    let good = exported();
    for len in 0..LEN {
        let err = refused(&good[..len], FP);
        if len < HEADER_BYTES {
            assert_eq!(err, TableError::Truncated { needed: 32, len });
        } else {
            assert!(matches!(err, TableError::Length { .. }), "{len}: {err:?}");
        }
    }
    for bit in 0..LEN * 8 {
        let mut t = good;
        t[bit / 8] ^= 1 << (bit % 8);
        let err = refused(&t, FP);
        // The layout fields are checked before the CRC; every other flip is a checksum
        // error, never a misleading "other HAL" or "schema".
        let expected = match bit / 8 {
            0..4 => matches!(err, TableError::BadMagic),
            4..6 => matches!(err, TableError::Format { .. }),
            20..22 => matches!(err, TableError::Length { .. }),
            22..24 => matches!(err, TableError::EntrySize { .. }),
            _ => matches!(err, TableError::Checksum { .. }),
        };
        assert!(expected, "bit {bit}: {err:?}");
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "over 30 s each under miri, which interprets every step (schedule searches, sweeps of many cases)"
)]
fn arbitrary_bytes_never_panic() {
    // A deterministic xorshift stream: random tables, and valid tables with random bytes
    // overwritten (resealed, so the checks after the CRC see them too).
    let mut s = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let good = exported();
    for round in 0..4000 {
        let mut t = good;
        if round % 2 == 0 {
            for b in t.iter_mut() {
                *b = next() as u8;
            }
            t[..4].copy_from_slice(&MAGIC);
        } else {
            for _ in 0..1 + next() % 4 {
                let at = (next() % LEN as u64) as usize;
                t[at] = next() as u8;
            }
            reseal(&mut t);
        }
        let len = if round % 3 == 0 {
            (next() % (LEN as u64 + 1)) as usize
        } else {
            LEN
        };
        let mut c = TuneCache::<8>::new();
        if let Ok(n) = import(&mut c, FP, &t[..len]) {
            // Whatever is accepted re-exports to the same bytes.
            let mut out = [0u8; LEN];
            let written = export(&c, FP, &mut out).unwrap();
            assert_eq!(usize::from(n), c.len());
            assert_eq!(out[..written], t[..len]);
        }
    }
}

#[test]
fn fingerprint_covers_cycle_fields_only() {
    let caps = Capabilities {
        device_memory_bytes: 1 << 20,
        host_memory_bytes: 1 << 16,
        slow_memory_bytes: 0,
        alignment: 16,
        execution_units: 1,
        max_in_flight: 8,
        ops: OpSet::all(),
        reads_flash: true,
        flash_alignment: 1,
    };
    let base = fingerprint(&caps, 7);
    assert_eq!(fingerprint(&caps, 7), base);
    let same = Capabilities {
        device_memory_bytes: 1 << 10,
        host_memory_bytes: 1 << 10,
        slow_memory_bytes: 1 << 20,
        max_in_flight: 1,
        ..caps
    };
    assert_eq!(fingerprint(&same, 7), base, "sizes are left out");
    assert_ne!(fingerprint(&caps, 8), base);
    let changes = [
        Capabilities {
            alignment: 32,
            ..caps
        },
        Capabilities {
            execution_units: 2,
            ..caps
        },
        Capabilities {
            ops: OpSet::EMPTY,
            ..caps
        },
        Capabilities {
            reads_flash: false,
            ..caps
        },
        Capabilities {
            flash_alignment: 16,
            ..caps
        },
    ];
    for c in changes {
        assert_ne!(fingerprint(&c, 7), base, "{c:?}");
    }
    // FNV-1a-64 itself: the empty input is the offset basis, "a" a known value.
    assert_eq!(Fnv::new().0, 0xCBF2_9CE4_8422_2325);
    let mut a = Fnv::new();
    a.write(b"a");
    assert_eq!(a.0, 0xAF63_DC4C_8601_EC8C);
}
