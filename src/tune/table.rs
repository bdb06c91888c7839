//! Tuning tables: a cache's measured choices as bytes, to tune once on a host and ship.

use super::cache::{Choice, Entry, TuneCache};
use super::candidate::Candidate;
use super::key::{TuneKey, KEY_BYTES};
use crate::hal::Capabilities;

/// The first four bytes of every table.
pub const MAGIC: [u8; 4] = *b"NPUT";
/// The header and entry layout this crate reads and writes.
pub const FORMAT: u16 = 1;
/// The meaning of keys and candidates: bump it whenever [`TuneKey::of`], the buckets, the
/// candidate encoding or the candidate lists change, since old choices then name other things.
pub const SCHEMA: u16 = 1;
/// Bytes of a table's header.
pub const HEADER_BYTES: usize = 32;
/// Bytes of one table entry.
pub const ENTRY_BYTES: usize = 32;
/// This crate's version as stored in a table: `major << 20 | minor << 10 | patch`, each part
/// saturated to its field.
pub const CRATE_VERSION: u32 = pack_version(
    env!("CARGO_PKG_VERSION_MAJOR"),
    env!("CARGO_PKG_VERSION_MINOR"),
    env!("CARGO_PKG_VERSION_PATCH"),
);

/// Offset of the CRC in the header; the CRC covers the bytes before it.
const CRC_AT: usize = 28;
/// Flag bits an entry may set: bit 0, verified.
const FLAG_VERIFIED: u8 = 1;

/// Bytes of a table with `entries` entries (saturating).
pub const fn table_bytes(entries: usize) -> usize {
    HEADER_BYTES.saturating_add(ENTRY_BYTES.saturating_mul(entries))
}

/// Why a table was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TableError {
    /// Shorter than a header.
    Truncated {
        /// Bytes a header needs.
        needed: usize,
        /// Bytes given.
        len: usize,
    },
    /// The first four bytes are not `b"NPUT"`: not a tuning table.
    BadMagic,
    /// A header and entry layout this crate does not read.
    Format {
        /// The table's format.
        found: u16,
        /// The format this crate reads ([`FORMAT`]).
        supported: u16,
    },
    /// An entry size other than [`ENTRY_BYTES`].
    EntrySize {
        /// The table's entry size.
        found: u16,
    },
    /// The length is not the header plus `count` entries.
    Length {
        /// Bytes the header's entry count implies.
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
    /// The header's reserved word is not 0: written by a later layout.
    Reserved {
        /// The reserved word.
        found: u32,
    },
    /// Keys or candidates derived another way.
    Schema {
        /// The table's schema.
        found: u16,
        /// This crate's ([`SCHEMA`]).
        expected: u16,
    },
    /// Made by another version of this crate.
    CrateVersion {
        /// The table's packed version.
        found: u32,
        /// This crate's ([`CRATE_VERSION`]).
        expected: u32,
    },
    /// Made for another NPU configuration or cost model: its cycles say nothing here.
    OtherHal {
        /// The table's fingerprint.
        found: u64,
        /// This HAL's.
        expected: u64,
    },
    /// An entry's key is not greater than the previous one (out of order or repeated).
    Unsorted {
        /// The entry's index.
        index: u16,
    },
    /// An entry has an unknown candidate or non-zero reserved bits.
    BadEntry {
        /// The entry's index.
        index: u16,
    },
    /// The cache cannot hold the table's keys besides the ones it has.
    Capacity {
        /// Keys the cache would have to hold.
        entries: u16,
        /// Its capacity (the `N` of [`TuneCache`]).
        capacity: u16,
    },
    /// A key of the table is being tuned right now (claimed in the cache).
    Busy,
    /// The export buffer is too short.
    BufferTooSmall {
        /// Bytes the table needs.
        needed: usize,
    },
}

impl core::fmt::Display for TableError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            TableError::Truncated { needed, len } => write!(
                f,
                "{len} bytes are too short for a tuning table (its header alone is {needed})"
            ),
            TableError::BadMagic => f.write_str("not a tuning table (no \"NPUT\" magic)"),
            TableError::Format { found, supported } => write!(
                f,
                "the table's format {found} is not the one this crate reads ({supported}); make it \
                 again with `npu-sim tune`"
            ),
            TableError::EntrySize { found } => write!(
                f,
                "entries of {found} bytes, where this crate's are {ENTRY_BYTES}: make the table \
                 again with `npu-sim tune`"
            ),
            TableError::Length { expected, len } => write!(
                f,
                "the table has {len} bytes where its header implies {expected}: it was cut or \
                 padded"
            ),
            TableError::Checksum { stored, computed } => write!(
                f,
                "checksum mismatch (stored {stored:#010x}, computed {computed:#010x}): the table \
                 is corrupted"
            ),
            TableError::Reserved { found } => write!(
                f,
                "the header's reserved word is {found:#x}, not 0: written by a later layout"
            ),
            TableError::Schema { found, expected } => write!(
                f,
                "keys of schema {found}, where this crate's are {expected}: make the table again \
                 with `npu-sim tune`"
            ),
            TableError::CrateVersion { found, expected } => write!(
                f,
                "made by crate version {found:#x}, this is {expected:#x}: make the table again \
                 with `npu-sim tune`"
            ),
            TableError::OtherHal { found, expected } => write!(
                f,
                "made for another NPU configuration (fingerprint {found:#018x}, this one is \
                 {expected:#018x}): tune on this configuration"
            ),
            TableError::Unsorted { index } => write!(
                f,
                "entry {index} is out of order or repeated: the table is corrupted"
            ),
            TableError::BadEntry { index } => write!(
                f,
                "entry {index} has an unknown candidate or non-zero reserved bits"
            ),
            TableError::Capacity { entries, capacity } => write!(
                f,
                "the tuning cache would need {entries} keys and holds {capacity} (NpuServer's \
                 TUNE); raise TUNE"
            ),
            TableError::Busy => f.write_str("a key of the table is being tuned right now"),
            TableError::BufferTooSmall { needed } => write!(
                f,
                "the export buffer is too short: the table needs {needed} bytes"
            ),
        }
    }
}

impl core::error::Error for TableError {}

/// Writes the measured choices of `cache` as a table for the HAL `fingerprint` into `out`,
/// and returns its length ([`table_bytes`] of the number of measured choices).
///
/// Claimed keys and failed (unmeasured) tunings are left out.
///
/// Errors: [`TableError::BufferTooSmall`] when `out` is shorter than the table;
/// [`TableError::Capacity`] if more than `u16::MAX` choices were measured.
pub fn export<const N: usize>(
    cache: &TuneCache<N>,
    fingerprint: u64,
    out: &mut [u8],
) -> Result<usize, TableError> {
    let measured = || cache.iter_done().filter(|(_, c)| c.measured);
    let count = measured().count();
    let n = u16::try_from(count).map_err(|_| TableError::Capacity {
        entries: u16::MAX,
        capacity: TuneCache::<N>::capacity(),
    })?;
    let needed = table_bytes(count);
    let too_small = TableError::BufferTooSmall { needed };
    let table = out.get_mut(..needed).ok_or(too_small)?;
    let mut w = Writer { out: table, at: 0 };
    w.put(&encode_header(n, fingerprint)).ok_or(too_small)?;
    // Sorted without a buffer: each round takes the smallest key above the last one written.
    // Quadratic in the entries, but a cache holds tens of them and nothing is allocated.
    let mut last: Option<TuneKey> = None;
    for _ in 0..count {
        let next = measured()
            .filter(|(k, _)| last.is_none_or(|l| *k > l))
            .min_by_key(|(k, _)| *k);
        let Some((key, choice)) = next else { break };
        w.put(&encode_entry(key, &choice)).ok_or(too_small)?;
        last = Some(key);
    }
    let crc = table_crc(w.out).ok_or(too_small)?;
    w.out
        .get_mut(CRC_AT..HEADER_BYTES)
        .ok_or(too_small)?
        .copy_from_slice(&crc.to_le_bytes());
    Ok(needed)
}

/// Checks the table `bytes` against this crate and the HAL `fingerprint`, then inserts its
/// choices into `cache` (replacing tuned keys) and returns how many it held.
///
/// All or nothing: on any error the cache is unchanged. Errors: every [`TableError`] but
/// [`BufferTooSmall`](TableError::BufferTooSmall), checked in the order of the
/// [module docs](crate::tune).
pub fn import<const N: usize>(
    cache: &mut TuneCache<N>,
    fingerprint: u64,
    bytes: &[u8],
) -> Result<u16, TableError> {
    let len = bytes.len();
    let truncated = TableError::Truncated {
        needed: HEADER_BYTES,
        len,
    };
    let (header, entries) = bytes.split_first_chunk::<HEADER_BYTES>().ok_or(truncated)?;
    let mut r = Reader(header);
    let magic = r.take::<4>().ok_or(truncated)?;
    let format = u16::from_le_bytes(r.take().ok_or(truncated)?);
    let schema = u16::from_le_bytes(r.take().ok_or(truncated)?);
    let version = u32::from_le_bytes(r.take().ok_or(truncated)?);
    let hal = u64::from_le_bytes(r.take().ok_or(truncated)?);
    let n = u16::from_le_bytes(r.take().ok_or(truncated)?);
    let entry_size = u16::from_le_bytes(r.take().ok_or(truncated)?);
    let reserved = u32::from_le_bytes(r.take().ok_or(truncated)?);
    let stored = u32::from_le_bytes(r.take().ok_or(truncated)?);

    if magic != MAGIC {
        return Err(TableError::BadMagic);
    }
    if format != FORMAT {
        return Err(TableError::Format {
            found: format,
            supported: FORMAT,
        });
    }
    if usize::from(entry_size) != ENTRY_BYTES {
        return Err(TableError::EntrySize { found: entry_size });
    }
    // Checked rather than saturating: on a target whose usize cannot hold the length, no
    // slice has it either.
    let expected = usize::from(n)
        .checked_mul(ENTRY_BYTES)
        .and_then(|b| b.checked_add(HEADER_BYTES))
        .unwrap_or(usize::MAX);
    if len != expected {
        return Err(TableError::Length { expected, len });
    }
    let computed = table_crc(bytes).ok_or(truncated)?;
    if computed != stored {
        return Err(TableError::Checksum { stored, computed });
    }
    if reserved != 0 {
        return Err(TableError::Reserved { found: reserved });
    }
    if schema != SCHEMA {
        return Err(TableError::Schema {
            found: schema,
            expected: SCHEMA,
        });
    }
    if version != CRATE_VERSION {
        return Err(TableError::CrateVersion {
            found: version,
            expected: CRATE_VERSION,
        });
    }
    if hal != fingerprint {
        return Err(TableError::OtherHal {
            found: hal,
            expected: fingerprint,
        });
    }

    // Pass 1: every entry well formed and in order.
    let mut last: Option<TuneKey> = None;
    for (i, (key, choice)) in parsed(entries).enumerate() {
        let index = u16::try_from(i).unwrap_or(u16::MAX);
        let key = key.ok_or(TableError::BadEntry { index })?;
        if last.is_some_and(|l| key <= l) {
            return Err(TableError::Unsorted { index });
        }
        choice.ok_or(TableError::BadEntry { index })?;
        last = Some(key);
    }
    // Pass 2: room for the new keys, and none of the table's keys claimed.
    let capacity = TuneCache::<N>::capacity();
    let mut added = 0usize;
    for (key, _) in parsed(entries) {
        match key.and_then(|k| cache.get(&k)) {
            Some(Entry::InProgress) => return Err(TableError::Busy),
            Some(Entry::Done(_)) => {}
            None => added += 1,
        }
    }
    let total = cache.len().saturating_add(added);
    if total > N {
        return Err(TableError::Capacity {
            entries: u16::try_from(total).unwrap_or(u16::MAX),
            capacity,
        });
    }
    // Pass 3: insert. Every entry was checked and there is room, so this cannot fail; an error
    // would still be reported rather than ignored.
    for (key, choice) in parsed(entries) {
        if let (Some(key), Some(choice)) = (key, choice) {
            cache
                .finish(key, choice)
                .map_err(|_| TableError::Capacity {
                    entries: u16::try_from(total).unwrap_or(u16::MAX),
                    capacity,
                })?;
        }
    }
    Ok(n)
}

/// The fingerprint of an NPU for [`export`] and [`import`]: FNV-1a-64 over the
/// [`Capabilities`] fields that change a job's cycles (`alignment`, `execution_units`,
/// `ops`, `reads_flash`, `flash_alignment`, little-endian, in that order), then `hal`, the
/// driver's own [`Npu::tuning_fingerprint`](crate::hal::Npu::tuning_fingerprint) (its
/// configuration registers, clock ratio, cost model version).
///
/// Memory sizes and the in-flight limit are left out: they do not change how long a job takes,
/// so a table made on a host fits a board with another arena.
pub fn fingerprint(caps: &Capabilities, hal: u64) -> u64 {
    let mut h = Fnv::new();
    h.write(&caps.alignment.to_le_bytes());
    h.write(&[caps.execution_units]);
    h.write(&caps.ops.to_le_bytes());
    h.write(&[u8::from(caps.reads_flash)]);
    h.write(&caps.flash_alignment.to_le_bytes());
    h.write(&hal.to_le_bytes());
    h.0
}

/// CRC-32/IEEE (the zlib and Ethernet CRC: reflected polynomial `0xEDB88320`, initial value
/// and final XOR `0xFFFFFFFF`) of `bytes`.
pub fn crc32(bytes: &[u8]) -> u32 {
    !crc_update(!0, bytes)
}

/// The table CRC: header bytes 0..28, then everything after the header. `None` if `table` is
/// shorter than a header.
fn table_crc(table: &[u8]) -> Option<u32> {
    let head = table.get(..CRC_AT)?;
    let entries = table.get(HEADER_BYTES..)?;
    Some(!crc_update(crc_update(!0, head), entries))
}

/// The CRC lookup table, built at compile time so the crate needs no CRC dependency and no
/// RAM for it.
const CRC_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut bit = 0;
        while bit < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            bit += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
};

pub(crate) fn crc_update(mut crc: u32, bytes: &[u8]) -> u32 {
    for &b in bytes {
        // The index is a byte: always inside the 256-entry table.
        crc = CRC_TABLE[usize::from(crc as u8 ^ b)] ^ (crc >> 8);
    }
    crc
}

/// FNV-1a, 64 bits.
struct Fnv(u64);

impl Fnv {
    const fn new() -> Self {
        Fnv(0xCBF2_9CE4_8422_2325)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01B3);
        }
    }
}

/// Packs a version as `major << 20 | minor << 10 | patch`, each part saturated to its field
/// (12, 10 and 10 bits) so a large part never spills into the next.
const fn pack_version(major: &str, minor: &str, patch: &str) -> u32 {
    saturate(parse_decimal(major), 12) << 20
        | saturate(parse_decimal(minor), 10) << 10
        | saturate(parse_decimal(patch), 10)
}

/// `x`, or the largest value of `bits` bits if it does not fit.
const fn saturate(x: u32, bits: u32) -> u32 {
    let max = (1 << bits) - 1;
    if x > max {
        max
    } else {
        x
    }
}

/// The leading decimal digits of `s` (Cargo's version parts are plain decimals), saturating.
const fn parse_decimal(s: &str) -> u32 {
    let mut rest = s.as_bytes();
    let mut value: u32 = 0;
    while let [d @ b'0'..=b'9', tail @ ..] = rest {
        value = value.saturating_mul(10).saturating_add((*d - b'0') as u32);
        rest = tail;
    }
    value
}

/// The header of a table of `n` entries, with the CRC field 0.
fn encode_header(n: u16, fingerprint: u64) -> [u8; HEADER_BYTES] {
    let mut h = [0u8; HEADER_BYTES];
    let mut w = Writer { out: &mut h, at: 0 };
    // The writer is exactly HEADER_BYTES long and these are HEADER_BYTES bytes: no put fails.
    let _ = w.put(&MAGIC);
    let _ = w.put(&FORMAT.to_le_bytes());
    let _ = w.put(&SCHEMA.to_le_bytes());
    let _ = w.put(&CRATE_VERSION.to_le_bytes());
    let _ = w.put(&fingerprint.to_le_bytes());
    let _ = w.put(&n.to_le_bytes());
    // ENTRY_BYTES is 32: the cast is exact.
    let _ = w.put(&(ENTRY_BYTES as u16).to_le_bytes());
    let _ = w.put(&0u32.to_le_bytes()); // reserved
    let _ = w.put(&0u32.to_le_bytes()); // the CRC, filled in over the whole table
    h
}

fn encode_entry(key: TuneKey, c: &Choice) -> [u8; ENTRY_BYTES] {
    let mut e = [0u8; ENTRY_BYTES];
    let mut w = Writer { out: &mut e, at: 0 };
    let flags = if c.verified { FLAG_VERIFIED } else { 0 };
    // The writer is exactly ENTRY_BYTES long and these are ENTRY_BYTES bytes, so no put fails.
    let _ = w.put(&key.0);
    let _ = w.put(&c.candidate.encode());
    let _ = w.put(&c.cycles.to_le_bytes());
    let _ = w.put(&c.auto_cycles.to_le_bytes());
    let _ = w.put(&[c.timed, c.samples, flags, 0]);
    e
}

/// An entry's key and choice, each `None` if malformed (the key only if the entry is short,
/// which the length check already excludes).
fn decode_entry(e: &[u8; ENTRY_BYTES]) -> (Option<TuneKey>, Option<Choice>) {
    let mut r = Reader(e);
    let key = r.take::<KEY_BYTES>().map(TuneKey);
    let choice = (|| {
        let candidate = Candidate::decode(r.take()?)?;
        let cycles = u32::from_le_bytes(r.take()?);
        let auto_cycles = u32::from_le_bytes(r.take()?);
        let [timed, samples, flags, reserved] = r.take()?;
        if flags & !FLAG_VERIFIED != 0 || reserved != 0 {
            return None;
        }
        Some(Choice {
            candidate,
            cycles,
            auto_cycles,
            timed,
            samples,
            verified: flags & FLAG_VERIFIED != 0,
            // It was exported, so it was measured, and importing it again re-exports it.
            measured: true,
        })
    })();
    (key, choice)
}

/// The entries after the header, decoded. A trailing partial entry is ignored here; the length
/// check refuses it before.
fn parsed(entries: &[u8]) -> impl Iterator<Item = (Option<TuneKey>, Option<Choice>)> + '_ {
    entries
        .chunks_exact(ENTRY_BYTES)
        .map(|chunk| match <&[u8; ENTRY_BYTES]>::try_from(chunk) {
            Ok(e) => decode_entry(e),
            Err(_) => (None, None),
        })
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
