//! A graph's static schedule as bytes: planned once on a host (`npu-sim plan --schedule
//! FILE`) and replayed by firmware, which then does no scheduling work at prepare.
//!
//! # Layout
//!
//! A graph section, then the schedule itself as [`Schedule::export`] writes it (the
//! [`schedule`](crate::schedule) module's table, which says which unit runs each task and in
//! which order they are submitted). The graph section says what each task is: which step of
//! the model, and for a band, which rows of its output. All little-endian:
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 4 | magic `NPUG` |
//! | 4 | 2 | format, 1 |
//! | 6 | 2 | tasks `N` |
//! | 8 | 8 | fingerprint of the model and the units ([`fingerprint`]) |
//! | 16 | 4 | CRC-32 of the section's other bytes |
//! | 20 | 10·N | per task: step (u16), first and one-past-last output unit of a band (u32 each: rows, or elements of an elementwise operator; 0, 0 for the whole operator) |
//! | 20 + 10·N | | the schedule table, with the same fingerprint |
//!
//! The fingerprint covers the model's bytes and what the HAL declares of its units (their
//! number, names and throughputs, the operators the NPU runs, the alignment): a table made
//! for another model or another part is refused, never followed. Every field is checked
//! before anything is followed: steps that exist and run, bands whose rows tile their
//! operator's output in order, each step covered once.

// Without the planner (`static-schedule`) no table is imported or exported: only the format
// (its public constants, error and fingerprint) stays.
#![cfg_attr(not(feature = "static-schedule"), allow(dead_code))]

use super::schedule::Band;
use super::GraphError;
use crate::hal::{Capabilities, ExecutionUnit, MAX_EXECUTION_UNITS};
use crate::schedule::{Schedule, ScheduleTableError};
use crate::tune::crc_update;

/// The first four bytes of a graph's schedule table.
pub const GRAPH_TABLE_MAGIC: [u8; 4] = *b"NPUG";
/// The layout this crate reads and writes.
pub const GRAPH_TABLE_FORMAT: u16 = 1;
/// Bytes of the graph section's header.
const HEADER: usize = 20;
/// Bytes of one task's entry in the graph section.
const ENTRY: usize = 10;

/// A task as a table names it: its step, and the output units of a band, rows or elements
/// (`(0, 0)` for the whole operator).
pub(super) type TaskEntry = (u16, (u32, u32));

/// Why a graph's schedule table was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum GraphTableError {
    /// Shorter than its header and entries say.
    Truncated {
        /// Bytes needed.
        needed: usize,
        /// Bytes given.
        len: usize,
    },
    /// Not a graph schedule table (wrong magic) or a layout this crate does not read.
    BadFormat,
    /// The section's CRC does not match: the bytes were damaged.
    Checksum,
    /// Made for another model or other execution units.
    OtherModel {
        /// The table's fingerprint.
        found: u64,
        /// This graph's.
        expected: u64,
    },
    /// A task names a step that does not exist or runs nothing, or rows its operator does
    /// not have, or the bands of a step do not tile its output once, in order.
    BadTask {
        /// The task's index.
        task: u16,
    },
    /// More tasks than the graph holds (`OPS`).
    TooManyTasks {
        /// Tasks in the table.
        tasks: u16,
    },
    /// The schedule section was refused.
    Schedule(ScheduleTableError),
    /// Nothing to export: the graph follows no static schedule.
    NoSchedule,
    /// The buffer given to export into is smaller than the table.
    BufferTooSmall {
        /// Bytes the table takes.
        needed: usize,
        /// Bytes given.
        len: usize,
    },
}

impl core::fmt::Display for GraphTableError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        const AGAIN: &str = "export it again with `npu-sim plan MODEL --schedule FILE`";
        match self {
            GraphTableError::Truncated { needed, len } => write!(
                f,
                "schedule table truncated: {len} bytes, its header needs {needed}; {AGAIN}"
            ),
            GraphTableError::BadFormat => write!(
                f,
                "not a graph schedule table of format {GRAPH_TABLE_FORMAT}; {AGAIN}"
            ),
            GraphTableError::Checksum => write!(f, "schedule table damaged (CRC); {AGAIN}"),
            GraphTableError::OtherModel { found, expected } => write!(
                f,
                "schedule table made for another model or other units (fingerprint {found:#018x}, this one {expected:#018x}); {AGAIN}"
            ),
            GraphTableError::BadTask { task } => write!(
                f,
                "schedule table task {task} names no step or rows of this model; {AGAIN}"
            ),
            GraphTableError::TooManyTasks { tasks } => write!(
                f,
                "schedule table has {tasks} tasks, more than the graph's OPS: raise OPS"
            ),
            GraphTableError::Schedule(e) => write!(f, "{e}"),
            GraphTableError::BufferTooSmall { needed, len } => write!(
                f,
                "the schedule table takes {needed} bytes, the buffer has {len}: give it at least {needed}"
            ),
            GraphTableError::NoSchedule => f.write_str(
                "the graph follows no static schedule (dynamic scheduling, tiled chains, or a HAL that gives no estimates): nothing to export",
            ),
        }
    }
}

/// FNV-1a, 64 bits: the fingerprint needs no more than telling tables apart.
pub(super) fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The fingerprint of `model` on a part with `caps` and `units` (one per execution unit).
pub fn fingerprint(model: &[u8], caps: &Capabilities, units: &[ExecutionUnit]) -> u64 {
    let mut h = fnv(0xcbf2_9ce4_8422_2325, model);
    h = fnv(h, &[caps.execution_units]);
    h = fnv(h, &caps.alignment.to_le_bytes());
    for word in caps.ops.words() {
        h = fnv(h, &word.to_le_bytes());
    }
    for u in units.iter().take(MAX_EXECUTION_UNITS) {
        h = fnv(h, u.name.as_bytes());
        h = fnv(h, &u.macs_per_cycle.to_le_bytes());
    }
    h
}

/// Writes the graph section of `tasks` (`(step, rows)` per task) and `schedule` into `out`;
/// returns the bytes written, or `None` when `out` is too small.
pub(super) fn export<const OPS: usize>(
    tasks: &[TaskEntry],
    schedule: &Schedule<OPS>,
    fingerprint: u64,
    out: &mut [u8],
) -> Result<usize, GraphTableError> {
    let section = HEADER + ENTRY * tasks.len();
    let count = u16::try_from(tasks.len())
        .map_err(|_| GraphTableError::TooManyTasks { tasks: u16::MAX })?;
    let needed = section + crate::schedule::table_bytes(schedule.len());
    let len = out.len();
    let too_small = GraphTableError::BufferTooSmall { needed, len };
    if len < needed {
        return Err(too_small);
    }
    let (head, rest) = out.split_at_mut(section);
    head[0..4].copy_from_slice(&GRAPH_TABLE_MAGIC);
    head[4..6].copy_from_slice(&GRAPH_TABLE_FORMAT.to_le_bytes());
    head[6..8].copy_from_slice(&count.to_le_bytes());
    head[8..16].copy_from_slice(&fingerprint.to_le_bytes());
    for (k, &(step, (a, b))) in tasks.iter().enumerate() {
        let at = HEADER + ENTRY * k;
        head[at..at + 2].copy_from_slice(&step.to_le_bytes());
        head[at + 2..at + 6].copy_from_slice(&a.to_le_bytes());
        head[at + 6..at + 10].copy_from_slice(&b.to_le_bytes());
    }
    let crc = section_crc(head);
    head[16..20].copy_from_slice(&crc.to_le_bytes());
    let n = schedule
        .export(fingerprint, rest)
        .map_err(GraphTableError::Schedule)?;
    Ok(section + n)
}

fn section_crc(section: &[u8]) -> u32 {
    let crc = crc_update(0xFFFF_FFFF, section.get(..16).unwrap_or(&[]));
    !crc_update(crc, section.get(HEADER..).unwrap_or(&[]))
}

/// The tasks of a table: `(step, rows)` each, rows `(0, 0)` for a whole operator, and the
/// schedule; checked against `fingerprint` (the steps and rows are checked by the graph).
pub(super) fn import<const OPS: usize>(
    bytes: &[u8],
    fingerprint: u64,
) -> Result<(heapless::Vec<TaskEntry, OPS>, Schedule<OPS>), GraphTableError> {
    let len = bytes.len();
    let head = bytes.get(..HEADER).ok_or(GraphTableError::Truncated {
        needed: HEADER,
        len,
    })?;
    if head[0..4] != GRAPH_TABLE_MAGIC
        || u16::from_le_bytes([head[4], head[5]]) != GRAPH_TABLE_FORMAT
    {
        return Err(GraphTableError::BadFormat);
    }
    let count = u16::from_le_bytes([head[6], head[7]]);
    let section = HEADER + ENTRY * usize::from(count);
    let head = bytes.get(..section).ok_or(GraphTableError::Truncated {
        needed: section,
        len,
    })?;
    let crc = u32::from_le_bytes([head[16], head[17], head[18], head[19]]);
    if crc != section_crc(head) {
        return Err(GraphTableError::Checksum);
    }
    let mut found = [0u8; 8];
    found.copy_from_slice(&head[8..16]);
    let found = u64::from_le_bytes(found);
    if found != fingerprint {
        return Err(GraphTableError::OtherModel {
            found,
            expected: fingerprint,
        });
    }
    let mut tasks = heapless::Vec::new();
    for k in 0..usize::from(count) {
        let at = HEADER + ENTRY * k;
        let half = |i: usize| u16::from_le_bytes([head[at + i], head[at + i + 1]]);
        let word = |i: usize| {
            u32::from_le_bytes([
                head[at + i],
                head[at + i + 1],
                head[at + i + 2],
                head[at + i + 3],
            ])
        };
        tasks
            .push((half(0), (word(2), word(6))))
            .map_err(|_| GraphTableError::TooManyTasks { tasks: count })?;
    }
    let schedule = Schedule::<OPS>::import(bytes.get(section..).unwrap_or(&[]), fingerprint)
        .map_err(GraphTableError::Schedule)?;
    if schedule.len() != tasks.len() {
        return Err(GraphTableError::BadTask { task: count });
    }
    Ok((tasks, schedule))
}

/// A band step's entry.
pub(super) fn band_entry(band: &Band) -> TaskEntry {
    (band.parent, band.out_rows)
}

impl From<GraphTableError> for GraphError {
    fn from(e: GraphTableError) -> Self {
        GraphError::ScheduleTable(e)
    }
}
