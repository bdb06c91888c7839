//! Schedule tables: a schedule as bytes, made once on a host and replayed by firmware (the
//! layout and the order of the checks are in the [module docs](super#tables)).

use super::{Placed, Schedule, Unit, MAX_TASKS};
use crate::error::Capacity;
use crate::hal::{Cycles, MAX_EXECUTION_UNITS};
use crate::tune::{crc_update, CRATE_VERSION};

/// The first four bytes of every schedule table.
pub const TABLE_MAGIC: [u8; 4] = *b"NPUS";
/// The header and entry layout this crate reads and writes.
pub const TABLE_FORMAT: u16 = 1;
/// Bytes of a table's header.
pub const TABLE_HEADER_BYTES: usize = 32;
/// Bytes of one task's entry.
pub const TABLE_ENTRY_BYTES: usize = 20;

/// Offset of the CRC in the header; the CRC covers the bytes before it and the entries.
const CRC_AT: usize = 28;
/// The unit byte of the CPU.
const CPU_BYTE: u8 = 0xFF;
/// The command that makes a table, for the errors that say to make it again.
const MAKE_AGAIN: &str = "export it again with `npu-sim plan --schedule FILE`";

/// Bytes of the table of a schedule of `tasks` tasks (saturating).
pub const fn table_bytes(tasks: usize) -> usize {
    TABLE_HEADER_BYTES.saturating_add(TABLE_ENTRY_BYTES.saturating_mul(tasks))
}

/// Why a schedule table was refused, or could not be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ScheduleTableError {
    /// Shorter than a header.
    Truncated {
        /// Bytes a header needs.
        needed: usize,
        /// Bytes given.
        len: usize,
    },
    /// The first four bytes are not `b"NPUS"`: not a schedule table.
    BadMagic,
    /// A header and entry layout this crate does not read.
    Format {
        /// The table's format.
        found: u16,
        /// The format this crate reads ([`TABLE_FORMAT`]).
        supported: u16,
    },
    /// An entry size other than [`TABLE_ENTRY_BYTES`].
    EntrySize {
        /// The table's entry size.
        found: u16,
    },
    /// The length is not the header plus one entry per task.
    Length {
        /// Bytes the header's task count implies.
        expected: usize,
        /// Bytes given.
        len: usize,
    },
    /// The CRC does not match: the table was corrupted.
    Checksum {
        /// The CRC in the header.
        stored: u32,
        /// The CRC of the bytes.
        computed: u32,
    },
    /// A reserved header field is not 0: written by a later layout.
    Reserved {
        /// The field's offset in the header.
        offset: u8,
        /// Its value.
        found: u32,
    },
    /// Made by another version of this crate, which may split a model into other tasks.
    CrateVersion {
        /// The table's packed version.
        found: u32,
        /// This crate's ([`CRATE_VERSION`]).
        expected: u32,
    },
    /// Made for another model or other units: its tasks are not this model's.
    OtherModel {
        /// The table's fingerprint.
        found: u64,
        /// The one expected.
        expected: u64,
    },
    /// The unit count is 0 or above [`MAX_EXECUTION_UNITS`].
    Units {
        /// The table's count.
        found: u8,
    },
    /// More tasks than the schedule holds.
    CapacityExceeded {
        /// Which knob: [`Capacity::ScheduleTasks`].
        capacity: Capacity,
        /// Its value.
        limit: u32,
        /// Tasks in the table.
        tasks: u16,
    },
    /// An entry names a task past the task count.
    BadTask {
        /// The entry's position.
        index: u16,
        /// The task it names.
        task: u16,
    },
    /// An entry names a task an earlier entry named.
    Repeated {
        /// The entry's position.
        index: u16,
        /// The task it names.
        task: u16,
    },
    /// An entry names a unit the schedule does not have.
    BadUnit {
        /// The entry's position.
        index: u16,
        /// The unit byte.
        unit: u8,
    },
    /// An entry's reserved byte is not 0, its start is after its end, or it starts before the
    /// previous task on its unit ends.
    BadEntry {
        /// The entry's position.
        index: u16,
    },
    /// The export buffer is too short.
    BufferTooSmall {
        /// Bytes the table needs.
        needed: usize,
    },
}

impl core::fmt::Display for ScheduleTableError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            ScheduleTableError::Truncated { needed, len } => write!(
                f,
                "{len} bytes are too short for a schedule table (its header alone is {needed}): \
                 the file was cut; {MAKE_AGAIN}"
            ),
            ScheduleTableError::BadMagic => f.write_str("not a schedule table (no \"NPUS\" magic)"),
            ScheduleTableError::Format { found, supported } => write!(
                f,
                "the schedule table's format {found} is not the one this crate reads \
                 ({supported}); {MAKE_AGAIN}"
            ),
            ScheduleTableError::EntrySize { found } => write!(
                f,
                "entries of {found} bytes, where this crate's are {TABLE_ENTRY_BYTES}; \
                 {MAKE_AGAIN}"
            ),
            ScheduleTableError::Length { expected, len } => write!(
                f,
                "the schedule table has {len} bytes where its header implies {expected}: it was \
                 cut or padded; {MAKE_AGAIN}"
            ),
            ScheduleTableError::Checksum { stored, computed } => write!(
                f,
                "checksum mismatch (stored {stored:#010x}, computed {computed:#010x}): the \
                 schedule table is corrupted; {MAKE_AGAIN}"
            ),
            ScheduleTableError::Reserved { offset, found } => write!(
                f,
                "the header's reserved field at byte {offset} is {found:#x}, not 0: written by a \
                 later layout; {MAKE_AGAIN}"
            ),
            ScheduleTableError::CrateVersion { found, expected } => write!(
                f,
                "made by crate version {found:#x}, this is {expected:#x}, which may split the \
                 model into other tasks; {MAKE_AGAIN}"
            ),
            ScheduleTableError::OtherModel { found, expected } => write!(
                f,
                "the schedule was made for another model or other units (fingerprint \
                 {found:#018x}, expected {expected:#018x}): {MAKE_AGAIN}"
            ),
            ScheduleTableError::Units { found } => write!(
                f,
                "the schedule table names {found} NPU units, where 1 to {MAX_EXECUTION_UNITS} \
                 are possible: it is corrupted; {MAKE_AGAIN}"
            ),
            ScheduleTableError::CapacityExceeded {
                capacity,
                limit,
                tasks,
            } => write!(
                f,
                "the schedule table has {tasks} tasks and the schedule holds {limit} ({}); \
                 raise it",
                capacity.knob()
            ),
            ScheduleTableError::BadTask { index, task } => write!(
                f,
                "entry {index} names task {task}, past the table's task count: it is corrupted; \
                 {MAKE_AGAIN}"
            ),
            ScheduleTableError::Repeated { index, task } => write!(
                f,
                "entry {index} names task {task} a second time: the table is corrupted; \
                 {MAKE_AGAIN}"
            ),
            ScheduleTableError::BadUnit { index, unit } => write!(
                f,
                "entry {index} names unit {unit}, which the schedule does not have: the table is \
                 corrupted; {MAKE_AGAIN}"
            ),
            ScheduleTableError::BadEntry { index } => write!(
                f,
                "entry {index} has a non-zero reserved byte, ends before it starts, or overlaps \
                 the task before it on its unit: the table is corrupted; {MAKE_AGAIN}"
            ),
            ScheduleTableError::BufferTooSmall { needed } => write!(
                f,
                "the export buffer is too short: the schedule table needs {needed} bytes"
            ),
        }
    }
}

impl core::error::Error for ScheduleTableError {}

impl<const TASKS: usize> Schedule<TASKS> {
    /// Writes this schedule as a table for `fingerprint` (of the model and the units: the
    /// caller's) into `out`, and returns its length ([`table_bytes`] of [`len`](Self::len)).
    ///
    /// Errors: [`ScheduleTableError::BufferTooSmall`] when `out` is shorter than the table.
    pub fn export(&self, fingerprint: u64, out: &mut [u8]) -> Result<usize, ScheduleTableError> {
        let needed = table_bytes(self.len());
        let too_small = ScheduleTableError::BufferTooSmall { needed };
        let table = out.get_mut(..needed).ok_or(too_small)?;
        // A schedule holds at most MAX_TASKS = u16::MAX tasks, so the count fits.
        let count = u16::try_from(self.len()).map_err(|_| too_small)?;
        let mut w = Writer { out: table, at: 0 };
        w.put(&TABLE_MAGIC).ok_or(too_small)?;
        w.put(&TABLE_FORMAT.to_le_bytes()).ok_or(too_small)?;
        w.put(&[self.npu_units, 0]).ok_or(too_small)?;
        w.put(&CRATE_VERSION.to_le_bytes()).ok_or(too_small)?;
        w.put(&fingerprint.to_le_bytes()).ok_or(too_small)?;
        w.put(&count.to_le_bytes()).ok_or(too_small)?;
        // TABLE_ENTRY_BYTES is 20: the cast is exact.
        w.put(&(TABLE_ENTRY_BYTES as u16).to_le_bytes())
            .ok_or(too_small)?;
        w.put(&0u32.to_le_bytes()).ok_or(too_small)?; // reserved
        w.put(&0u32.to_le_bytes()).ok_or(too_small)?; // the CRC, filled in below
        for &task in &self.order {
            let p = self.placed(usize::from(task)).ok_or(too_small)?;
            let unit = match p.unit {
                Unit::Npu(n) => n,
                Unit::Cpu => CPU_BYTE,
            };
            w.put(&task.to_le_bytes()).ok_or(too_small)?;
            w.put(&[unit, 0]).ok_or(too_small)?;
            w.put(&p.start.to_le_bytes()).ok_or(too_small)?;
            w.put(&p.end.to_le_bytes()).ok_or(too_small)?;
        }
        let crc = table_crc(w.out).ok_or(too_small)?;
        w.out
            .get_mut(CRC_AT..TABLE_HEADER_BYTES)
            .ok_or(too_small)?
            .copy_from_slice(&crc.to_le_bytes());
        Ok(needed)
    }

    /// Reads a schedule from the table `bytes`, made for `fingerprint` (of the model and the
    /// units: the caller's, as given to [`export`](Self::export)).
    ///
    /// Nothing in `bytes` is trusted: every field is checked, in the order of the
    /// [module docs](super#tables), and each refusal is its own [`ScheduleTableError`]
    /// (every one but [`BufferTooSmall`](ScheduleTableError::BufferTooSmall)). No bytes make
    /// it panic.
    pub fn import(bytes: &[u8], fingerprint: u64) -> Result<Schedule<TASKS>, ScheduleTableError> {
        let len = bytes.len();
        let truncated = ScheduleTableError::Truncated {
            needed: TABLE_HEADER_BYTES,
            len,
        };
        let (header, entries) = bytes
            .split_first_chunk::<TABLE_HEADER_BYTES>()
            .ok_or(truncated)?;
        let mut r = Reader(header);
        let magic = r.take::<4>().ok_or(truncated)?;
        let format = u16::from_le_bytes(r.take().ok_or(truncated)?);
        let [units, reserved_byte] = r.take().ok_or(truncated)?;
        let version = u32::from_le_bytes(r.take().ok_or(truncated)?);
        let found_fingerprint = u64::from_le_bytes(r.take().ok_or(truncated)?);
        let count = u16::from_le_bytes(r.take().ok_or(truncated)?);
        let entry_size = u16::from_le_bytes(r.take().ok_or(truncated)?);
        let reserved_word = u32::from_le_bytes(r.take().ok_or(truncated)?);
        let stored = u32::from_le_bytes(r.take().ok_or(truncated)?);

        if magic != TABLE_MAGIC {
            return Err(ScheduleTableError::BadMagic);
        }
        if format != TABLE_FORMAT {
            return Err(ScheduleTableError::Format {
                found: format,
                supported: TABLE_FORMAT,
            });
        }
        if usize::from(entry_size) != TABLE_ENTRY_BYTES {
            return Err(ScheduleTableError::EntrySize { found: entry_size });
        }
        let expected = table_bytes(usize::from(count));
        if len != expected {
            return Err(ScheduleTableError::Length { expected, len });
        }
        let computed = table_crc(bytes).ok_or(truncated)?;
        if computed != stored {
            return Err(ScheduleTableError::Checksum { stored, computed });
        }
        if reserved_byte != 0 {
            return Err(ScheduleTableError::Reserved {
                offset: 7,
                found: u32::from(reserved_byte),
            });
        }
        if reserved_word != 0 {
            return Err(ScheduleTableError::Reserved {
                offset: 24,
                found: reserved_word,
            });
        }
        if version != CRATE_VERSION {
            return Err(ScheduleTableError::CrateVersion {
                found: version,
                expected: CRATE_VERSION,
            });
        }
        if found_fingerprint != fingerprint {
            return Err(ScheduleTableError::OtherModel {
                found: found_fingerprint,
                expected: fingerprint,
            });
        }
        if units == 0 || usize::from(units) > MAX_EXECUTION_UNITS {
            return Err(ScheduleTableError::Units { found: units });
        }
        let limit = TASKS.min(MAX_TASKS);
        if usize::from(count) > limit {
            return Err(ScheduleTableError::CapacityExceeded {
                capacity: Capacity::ScheduleTasks,
                limit: u32::try_from(limit).unwrap_or(u32::MAX),
                tasks: count,
            });
        }

        const UNSET: Placed = Placed {
            unit: Unit::Cpu,
            start: 0,
            end: 0,
        };
        let mut out = Schedule {
            placed: heapless::Vec::new(),
            order: heapless::Vec::new(),
            npu_units: units,
        };
        // `count` ≤ TASKS was checked, so neither push fails.
        for _ in 0..count {
            let _ = out.placed.push(UNSET);
        }
        let mut seen = [false; TASKS];
        // Per unit (NPU units, then the CPU), where its last task ends.
        let mut unit_end: [Cycles; MAX_EXECUTION_UNITS + 1] = [0; MAX_EXECUTION_UNITS + 1];
        for (i, chunk) in entries.chunks_exact(TABLE_ENTRY_BYTES).enumerate() {
            // i < count ≤ u16::MAX.
            let index = u16::try_from(i).unwrap_or(u16::MAX);
            let bad = ScheduleTableError::BadEntry { index };
            let mut r = Reader(chunk);
            let task = u16::from_le_bytes(r.take().ok_or(bad)?);
            let [unit_byte, reserved] = r.take().ok_or(bad)?;
            let start = u64::from_le_bytes(r.take().ok_or(bad)?);
            let end = u64::from_le_bytes(r.take().ok_or(bad)?);
            if task >= count {
                return Err(ScheduleTableError::BadTask { index, task });
            }
            let seen_it = seen
                .get_mut(usize::from(task))
                .ok_or(ScheduleTableError::BadTask { index, task })?;
            if *seen_it {
                return Err(ScheduleTableError::Repeated { index, task });
            }
            *seen_it = true;
            let (unit, slot) = match unit_byte {
                CPU_BYTE => (Unit::Cpu, MAX_EXECUTION_UNITS),
                n if n < units => (Unit::Npu(n), usize::from(n)),
                _ => {
                    return Err(ScheduleTableError::BadUnit {
                        index,
                        unit: unit_byte,
                    })
                }
            };
            let last_end = unit_end.get_mut(slot).ok_or(bad)?;
            if reserved != 0 || start > end || start < *last_end {
                return Err(bad);
            }
            *last_end = end;
            *out.placed.get_mut(usize::from(task)).ok_or(bad)? = Placed { unit, start, end };
            out.order.push(task).map_err(|_| bad)?;
        }
        Ok(out)
    }
}

/// The table CRC: header bytes `0..28`, then everything after the header. `None` if `table` is
/// shorter than a header.
fn table_crc(table: &[u8]) -> Option<u32> {
    let head = table.get(..CRC_AT)?;
    let entries = table.get(TABLE_HEADER_BYTES..)?;
    Some(!crc_update(crc_update(!0, head), entries))
}

/// Reads fixed-size fields off the front of a slice, never past its end.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const K: usize>(&mut self) -> Option<[u8; K]> {
        let (head, tail) = self.0.split_first_chunk::<K>()?;
        self.0 = tail;
        Some(*head)
    }
}

/// Writes fields at the front of a buffer, never past its end.
struct Writer<'a> {
    out: &'a mut [u8],
    at: usize,
}

impl Writer<'_> {
    /// Appends `bytes`; `None`, writing nothing, if they do not fit.
    fn put(&mut self, bytes: &[u8]) -> Option<()> {
        let end = self.at.checked_add(bytes.len())?;
        self.out.get_mut(self.at..end)?.copy_from_slice(bytes);
        self.at = end;
        Some(())
    }
}

#[cfg(test)]
mod tests;
