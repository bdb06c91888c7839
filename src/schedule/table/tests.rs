//! Tests of the schedule table: layout, round trips, every refusal, and that no bytes panic.

use super::*;
use crate::schedule::tests::{random_tasks, Rng};
use crate::schedule::{schedule, Policy, Task, TaskCost};

const N: usize = 64;
const FP: u64 = 0x0123_4567_89AB_CDEF;

/// Three tasks on two NPU units and the CPU: 0 on the CPU, 1 on unit 1 reading it, 2 on unit 0.
fn small() -> Schedule<N> {
    let mut cpu_only = TaskCost::NONE;
    cpu_only.cpu = Some(100);
    let mut npu = TaskCost::NONE;
    npu.npu[0] = Some(30);
    npu.npu[1] = Some(10);
    let mut slow_one = TaskCost::NONE;
    slow_one.npu[0] = Some(10);
    slow_one.npu[1] = Some(40);
    let tasks = [
        Task::new(cpu_only),
        Task::with_deps(&[0], npu).unwrap(),
        Task::new(slow_one),
    ];
    schedule::<N>(&tasks, 2, Policy::CostEffective).unwrap()
}

fn exported(s: &Schedule<N>) -> ([u8; table_bytes(N)], usize) {
    let mut out = [0u8; table_bytes(N)];
    let len = s.export(FP, &mut out).unwrap();
    assert_eq!(len, table_bytes(s.len()));
    (out, len)
}

/// Recomputes a doctored table's CRC, so a test reaches the checks after it.
fn reseal(t: &mut [u8]) {
    let crc = table_crc(t).unwrap();
    t[CRC_AT..TABLE_HEADER_BYTES].copy_from_slice(&crc.to_le_bytes());
}

#[test]
fn the_layout_is_the_documented_one() {
    let s = small();
    assert_eq!(s.order(), &[2, 0, 1]);
    let (t, len) = exported(&s);
    assert_eq!(len, 32 + 3 * 20);
    assert_eq!(&t[0..4], b"NPUS");
    assert_eq!(t[4..6], 1u16.to_le_bytes());
    assert_eq!(t[6], 2);
    assert_eq!(t[7], 0);
    assert_eq!(t[8..12], CRATE_VERSION.to_le_bytes());
    assert_eq!(t[12..20], FP.to_le_bytes());
    assert_eq!(t[20..22], 3u16.to_le_bytes());
    assert_eq!(t[22..24], 20u16.to_le_bytes());
    assert_eq!(t[24..28], [0; 4]);
    let crc = crate::tune::crc32(&[&t[..28], &t[32..len]].concat_into::<{ 28 + 60 }>());
    assert_eq!(t[28..32], crc.to_le_bytes());
    // Entries in submission order: task, unit, reserved, start, end.
    let entry = |k: usize| &t[32 + 20 * k..32 + 20 * (k + 1)];
    for (k, &task) in s.order().iter().enumerate() {
        let p = s.placed(usize::from(task)).unwrap();
        let unit = match p.unit {
            Unit::Npu(n) => n,
            Unit::Cpu => 0xFF,
        };
        assert_eq!(entry(k)[0..2], task.to_le_bytes());
        assert_eq!(entry(k)[2..4], [unit, 0]);
        assert_eq!(entry(k)[4..12], p.start.to_le_bytes());
        assert_eq!(entry(k)[12..20], p.end.to_le_bytes());
    }
    assert_eq!(entry(1)[2], 0xFF);
}

/// Concatenation into a fixed array, for the CRC check above (no alloc in this crate).
trait ConcatInto {
    fn concat_into<const M: usize>(&self) -> [u8; M];
}

impl ConcatInto for [&[u8]; 2] {
    fn concat_into<const M: usize>(&self) -> [u8; M] {
        let mut out = [0; M];
        let (a, b) = out.split_at_mut(self[0].len());
        a.copy_from_slice(self[0]);
        b.copy_from_slice(self[1]);
        out
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "over 30 s each under miri, which interprets every step (schedule searches, sweeps of many cases)"
)]
fn random_schedules_round_trip() {
    let mut rng = Rng(0x5EED);
    for round in 0..30 {
        let units = 1 + (round % 3) as u8;
        let n = rng.below(N as u64 + 1) as usize;
        let tasks = random_tasks(&mut rng, n, units);
        let s = schedule::<N>(&tasks, units, Policy::CostEffective).unwrap();
        let (t, len) = exported(&s);
        let back = Schedule::<N>::import(&t[..len], FP).unwrap();
        assert_eq!(back, s);
        assert_eq!(back.makespan(), s.makespan());
        assert_eq!(back.npu_busy(), s.npu_busy());
        // The same schedule, the same bytes.
        let (again, _) = exported(&back);
        assert_eq!(again[..len], t[..len]);
    }
}

fn refused(t: &[u8]) -> ScheduleTableError {
    Schedule::<N>::import(t, FP).unwrap_err()
}

#[test]
fn every_refusal_says_what_was_wrong() {
    let (good, len) = exported(&small());
    let good = &good[..len];

    assert_eq!(
        refused(&good[..31]),
        ScheduleTableError::Truncated {
            needed: 32,
            len: 31
        }
    );
    let mut t = [0u8; 32 + 60];
    t.copy_from_slice(good);

    let doctored = |f: &dyn Fn(&mut [u8; 92]), seal: bool| {
        let mut x = t;
        f(&mut x);
        if seal {
            reseal(&mut x);
        }
        refused(&x)
    };
    assert_eq!(
        doctored(&|x| x[0] = b'X', true),
        ScheduleTableError::BadMagic
    );
    assert_eq!(
        doctored(&|x| x[4] = 2, true),
        ScheduleTableError::Format {
            found: 2,
            supported: TABLE_FORMAT
        }
    );
    assert_eq!(
        doctored(&|x| x[22] = 24, true),
        ScheduleTableError::EntrySize { found: 24 }
    );
    assert_eq!(
        doctored(&|x| x[20] = 4, true),
        ScheduleTableError::Length {
            expected: 32 + 80,
            len: 92
        }
    );
    assert_eq!(
        refused(&good[..len - 1]),
        ScheduleTableError::Length {
            expected: 92,
            len: 91
        }
    );
    assert!(matches!(
        doctored(&|x| x[40] ^= 1, false),
        ScheduleTableError::Checksum { .. }
    ));
    assert_eq!(
        doctored(&|x| x[7] = 3, true),
        ScheduleTableError::Reserved {
            offset: 7,
            found: 3
        }
    );
    assert_eq!(
        doctored(&|x| x[25] = 1, true),
        ScheduleTableError::Reserved {
            offset: 24,
            found: 0x100
        }
    );
    assert_eq!(
        doctored(&|x| x[8] ^= 1, true),
        ScheduleTableError::CrateVersion {
            found: CRATE_VERSION ^ 1,
            expected: CRATE_VERSION
        }
    );
    let other = Schedule::<N>::import(good, FP ^ 1).unwrap_err();
    assert_eq!(
        other,
        ScheduleTableError::OtherModel {
            found: FP,
            expected: FP ^ 1
        }
    );
    let mut text = heapless::String::<300>::new();
    core::fmt::write(&mut text, format_args!("{other}")).unwrap();
    assert!(text.contains("another model or other units"), "{text}");
    assert!(text.contains("npu-sim plan --schedule FILE"), "{text}");
    for units in [0, 9] {
        assert_eq!(
            doctored(&|x| x[6] = units, true),
            ScheduleTableError::Units { found: units }
        );
    }
    assert_eq!(
        Schedule::<2>::import(good, FP).unwrap_err(),
        ScheduleTableError::CapacityExceeded {
            capacity: Capacity::ScheduleTasks,
            limit: 2,
            tasks: 3
        }
    );
    assert!(Schedule::<3>::import(good, FP).is_ok());

    // Entries: the second one (the CPU task, 0) is at 52..72.
    assert_eq!(
        doctored(&|x| x[52] = 3, true),
        ScheduleTableError::BadTask { index: 1, task: 3 }
    );
    assert_eq!(
        doctored(&|x| x[52] = 2, true),
        ScheduleTableError::Repeated { index: 1, task: 2 }
    );
    assert_eq!(
        doctored(&|x| x[54] = 2, true),
        ScheduleTableError::BadUnit { index: 1, unit: 2 }
    );
    assert_eq!(
        doctored(&|x| x[55] = 1, true),
        ScheduleTableError::BadEntry { index: 1 }
    );
    // Start after end.
    assert_eq!(
        doctored(&|x| x[56 + 7] = 0x80, true),
        ScheduleTableError::BadEntry { index: 1 }
    );
    // The third entry (task 1, on unit 1 from 100) moved to start before task 2 ends there.
    let third = small().placed(1).unwrap();
    assert_eq!(third.unit, Unit::Npu(1));
    let mut x = t;
    x[74] = 0; // onto unit 0, where task 2 runs until 10
    x[76..84].copy_from_slice(&5u64.to_le_bytes());
    reseal(&mut x);
    assert_eq!(refused(&x), ScheduleTableError::BadEntry { index: 2 });

    let mut short = [0u8; 91];
    assert_eq!(
        small().export(FP, &mut short),
        Err(ScheduleTableError::BufferTooSmall { needed: 92 })
    );
}

#[test]
#[cfg_attr(
    miri,
    ignore = "over 30 s each under miri, which interprets every step (schedule searches, sweeps of many cases)"
)]
fn no_bytes_panic_and_no_flip_goes_unnoticed() {
    let mut rng = Rng(0xF1F1_F1F1);
    let tasks = random_tasks(&mut rng, 24, 3);
    let s = schedule::<N>(&tasks, 3, Policy::CostEffective).unwrap();
    let (t, len) = exported(&s);
    let t = &t[..len];
    for cut in 0..len {
        assert!(Schedule::<N>::import(&t[..cut], FP).is_err());
    }
    // Every single bit flipped is refused: the CRC covers every byte but its own, and a flip
    // there no longer matches.
    for byte in 0..len {
        for bit in 0..8 {
            let mut x = [0u8; table_bytes(24)];
            x.copy_from_slice(t);
            x[byte] ^= 1 << bit;
            assert!(
                Schedule::<N>::import(&x, FP).is_err(),
                "byte {byte} bit {bit}"
            );
        }
    }
    // Random damage, resealed so that the checks of meaning see it: never a panic, and what
    // is accepted is a well-formed schedule.
    for _ in 0..20_000 {
        let mut x = [0u8; table_bytes(24)];
        x.copy_from_slice(t);
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(len as u64) as usize;
            x[at] = rng.next() as u8;
        }
        reseal(&mut x);
        if let Ok(back) = Schedule::<N>::import(&x, FP) {
            let mut seen = [false; N];
            for &task in back.order() {
                assert!(!core::mem::replace(&mut seen[usize::from(task)], true));
                let p = back.placed(usize::from(task)).unwrap();
                assert!(p.start <= p.end);
                if let Unit::Npu(n) = p.unit {
                    assert!(n < back.npu_units());
                }
            }
            assert_eq!(back.order().len(), back.len());
        }
    }
}
