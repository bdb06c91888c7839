//! Generic, validated, zero-copy access to flatbuffer tables, vectors and strings.
//!
//! Every read goes through [`read`]/[`slice`], which check bounds with checked arithmetic, and
//! every multi-byte scalar is decoded with `from_le_bytes` from a byte slice, so nothing needs
//! the file to be aligned in memory. Alignment is still *checked* (relative to the start of the
//! file) for tables, vtables, vectors and table fields, as the flatbuffers verifier does: a
//! builder always aligns them, so misalignment means a corrupt or hand-made file.
//!
//! Positions are `u32`: flatbuffers cannot address more than 2 GiB, and the caller hands in a
//! slice of at most `u32::MAX` bytes.

use core::marker::PhantomData;

use super::error::ModelError;

type Result<T> = core::result::Result<T, ModelError>;

/// Size of the flatbuffer, saturated to `u32` (callers slice it to at most `u32::MAX` bytes).
fn buf_len(buf: &[u8]) -> u32 {
    u32::try_from(buf.len()).unwrap_or(u32::MAX)
}

/// The `len` bytes at `offset`, or [`ModelError::OutOfBounds`].
pub(crate) fn slice<'a>(
    buf: &'a [u8],
    offset: u32,
    len: u32,
    what: &'static str,
) -> Result<&'a [u8]> {
    let oob = ModelError::OutOfBounds {
        what,
        offset,
        len,
        buffer: buf_len(buf),
    };
    let end = offset.checked_add(len).ok_or(oob)?;
    buf.get(offset as usize..end as usize).ok_or(oob)
}

/// Reads a little-endian scalar at `offset` (no alignment needed).
pub(crate) fn read<T: Scalar>(buf: &[u8], offset: u32, what: &'static str) -> Result<T> {
    slice(buf, offset, T::SIZE, what).map(T::from_le)
}

fn check_align(offset: u32, align: u32, what: &'static str) -> Result<()> {
    if offset.is_multiple_of(align) {
        Ok(())
    } else {
        Err(ModelError::Misaligned {
            what,
            offset,
            align,
        })
    }
}

/// Follows the `uoffset` stored at `at`: returns `at + value`, checked to be non-zero, not to
/// overflow and to point inside the buffer.
pub(crate) fn follow(buf: &[u8], at: u32, what: &'static str) -> Result<u32> {
    let value: u32 = read(buf, at, what)?;
    let target = at.checked_add(value).filter(|_| value != 0);
    match target {
        Some(t) if t < buf_len(buf) => Ok(t),
        _ => Err(ModelError::BadOffset { what, at, value }),
    }
}

/// A little-endian scalar that may appear in a table field or vector.
pub(crate) trait Scalar: Copy {
    /// Size in bytes (also its flatbuffer alignment).
    const SIZE: u32;
    /// Decodes from exactly `SIZE` bytes.
    fn from_le(bytes: &[u8]) -> Self;
}

macro_rules! scalar {
    ($($t:ty),*) => {$(
        impl Scalar for $t {
            const SIZE: u32 = core::mem::size_of::<$t>() as u32;
            fn from_le(bytes: &[u8]) -> Self {
                let mut raw = [0u8; core::mem::size_of::<$t>()];
                // `slice` returned exactly SIZE bytes; copy defensively anyway.
                let n = raw.len().min(bytes.len());
                raw[..n].copy_from_slice(&bytes[..n]);
                <$t>::from_le_bytes(raw)
            }
        }
    )*};
}
scalar!(u8, i8, u16, i16, u32, i32, u64, i64, f32);

/// A validated table: its vtable lies inside the buffer and is well formed, and the table's
/// inline size lies inside the buffer. Fields are checked against the table size when read.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Table<'a> {
    buf: &'a [u8],
    pos: u32,
    vtable: u32,
    vtable_len: u16,
    table_len: u16,
    what: &'static str,
}

impl<'a> Table<'a> {
    /// Validates the table at `pos` (its vtable and inline size).
    pub(crate) fn new(buf: &'a [u8], pos: u32, what: &'static str) -> Result<Self> {
        check_align(pos, 4, what)?;
        let soffset: i32 = read(buf, pos, what)?;
        let bad = |reason| ModelError::BadVtable {
            what,
            table: pos,
            reason,
        };
        let vtable = i64::from(pos) - i64::from(soffset);
        let vtable = u32::try_from(vtable).map_err(|_| bad("vtable offset outside the file"))?;
        if vtable.checked_add(4).is_none_or(|end| end > buf_len(buf)) {
            return Err(bad("vtable offset outside the file"));
        }
        if vtable % 2 != 0 {
            return Err(ModelError::Misaligned {
                what: "vtable",
                offset: vtable,
                align: 2,
            });
        }
        let vtable_len: u16 = read(buf, vtable, what)?;
        let table_len: u16 = read(buf, vtable + 2, what)?;
        if vtable_len < 4 || !vtable_len.is_multiple_of(2) {
            return Err(bad("vtable size is not an even number >= 4"));
        }
        if vtable
            .checked_add(u32::from(vtable_len))
            .is_none_or(|end| end > buf_len(buf))
        {
            return Err(bad("vtable runs past the end of the file"));
        }
        if table_len < 4 {
            return Err(bad("table size < 4"));
        }
        if pos
            .checked_add(u32::from(table_len))
            .is_none_or(|end| end > buf_len(buf))
        {
            return Err(bad("table runs past the end of the file"));
        }
        Ok(Self {
            buf,
            pos,
            vtable,
            vtable_len,
            table_len,
            what,
        })
    }

    /// Follows the `uoffset` at `at` and validates the table there.
    pub(crate) fn at_offset(buf: &'a [u8], at: u32, what: &'static str) -> Result<Self> {
        let pos = follow(buf, at, what)?;
        Self::new(buf, pos, what)
    }

    /// Absolute position of field `slot` (the n-th field in schema order, unions counting two),
    /// or `None` when absent. Checks that `size` bytes fit inside the table and are aligned.
    fn field(&self, slot: u16, size: u32, field: &'static str) -> Result<Option<u32>> {
        let entry = 4 + 2 * u32::from(slot);
        if entry + 2 > u32::from(self.vtable_len) {
            return Ok(None);
        }
        // vtable + vtable_len <= buffer length was checked in `new`.
        let voffset: u16 = read(self.buf, self.vtable + entry, self.what)?;
        if voffset == 0 {
            return Ok(None);
        }
        let bad = |reason| ModelError::BadVtable {
            what: self.what,
            table: self.pos,
            reason,
        };
        if voffset < 4 {
            return Err(bad("field overlaps the vtable offset"));
        }
        if u32::from(voffset) + size > u32::from(self.table_len) {
            return Err(bad("field runs past the end of its table"));
        }
        // pos + table_len <= buffer length was checked in `new`.
        let at = self.pos + u32::from(voffset);
        check_align(at, size, field)?;
        Ok(Some(at))
    }

    /// A scalar field, or `default` when absent.
    pub(crate) fn scalar<T: Scalar>(
        &self,
        slot: u16,
        field: &'static str,
        default: T,
    ) -> Result<T> {
        match self.field(slot, T::SIZE, field)? {
            Some(at) => read(self.buf, at, field),
            None => Ok(default),
        }
    }

    /// A bool field (any non-zero byte is true, as in flatbuffers).
    pub(crate) fn boolean(&self, slot: u16, field: &'static str, default: bool) -> Result<bool> {
        Ok(self.scalar::<u8>(slot, field, u8::from(default))? != 0)
    }

    /// Position the `uoffset` field `slot` points to, if present.
    fn offset(&self, slot: u16, field: &'static str) -> Result<Option<u32>> {
        match self.field(slot, 4, field)? {
            Some(at) => follow(self.buf, at, field).map(Some),
            None => Ok(None),
        }
    }

    /// A sub-table field, if present.
    pub(crate) fn table(&self, slot: u16, what: &'static str) -> Result<Option<Table<'a>>> {
        match self.offset(slot, what)? {
            Some(pos) => Table::new(self.buf, pos, what).map(Some),
            None => Ok(None),
        }
    }

    /// A vector-of-scalars field, if present.
    pub(crate) fn vector<T: Scalar>(
        &self,
        slot: u16,
        what: &'static str,
    ) -> Result<Option<Vector<'a, T>>> {
        match self.offset(slot, what)? {
            Some(pos) => Vector::new(self.buf, pos, what).map(Some),
            None => Ok(None),
        }
    }

    /// A vector-of-scalars field; absent reads as empty.
    pub(crate) fn vector_or_empty<T: Scalar>(
        &self,
        slot: u16,
        what: &'static str,
    ) -> Result<Vector<'a, T>> {
        Ok(self.vector(slot, what)?.unwrap_or(Vector::empty()))
    }

    /// A vector-of-tables field; absent reads as empty.
    pub(crate) fn tables(&self, slot: u16, what: &'static str) -> Result<Tables<'a>> {
        match self.offset(slot, what)? {
            Some(pos) => Tables::new(self.buf, pos, what),
            None => Ok(Tables::empty(self.buf, what)),
        }
    }

    /// A string field, if present.
    pub(crate) fn string(&self, slot: u16, what: &'static str) -> Result<Option<&'a str>> {
        match self.offset(slot, what)? {
            Some(pos) => string_at(self.buf, pos, what).map(Some),
            None => Ok(None),
        }
    }
}

/// The validated UTF-8 string at `pos` (u32 length, bytes, NUL).
pub(crate) fn string_at<'a>(buf: &'a [u8], pos: u32, what: &'static str) -> Result<&'a str> {
    let bytes = Vector::<u8>::new(buf, pos, what)?.bytes();
    // The bytes end inside the buffer; the NUL must too.
    let end = pos + 4 + buf_len(bytes);
    if read::<u8>(buf, end, what).ok() != Some(0) {
        return Err(ModelError::NotNulTerminated { what, offset: pos });
    }
    core::str::from_utf8(bytes).map_err(|_| ModelError::InvalidUtf8 { what, offset: pos })
}

/// A validated vector of little-endian scalars: its length and all its elements lie inside the
/// buffer. Elements are decoded one by one with [`Vector::get`] (never cast in place).
///
/// Just its bytes: a tensor holds two (its quantization's), and is moved whole through every
/// `?` that decodes one.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Vector<'a, T> {
    /// Exactly `len * T::SIZE` bytes (fewer than 4 GiB).
    data: &'a [u8],
    _t: PhantomData<T>,
}

impl<'a, T: Scalar> Vector<'a, T> {
    /// Validates the vector whose length field is at `pos`.
    pub(crate) fn new(buf: &'a [u8], pos: u32, what: &'static str) -> Result<Self> {
        check_align(pos, 4, what)?;
        let len: u32 = read(buf, pos, what)?;
        check_align(pos + 4, T::SIZE.min(8), what)?;
        let oob = ModelError::OutOfBounds {
            what,
            offset: pos.saturating_add(4),
            len: len.saturating_mul(T::SIZE),
            buffer: buf_len(buf),
        };
        let bytes = len.checked_mul(T::SIZE).ok_or(oob)?;
        let data = slice(buf, pos + 4, bytes, what)?;
        Ok(Self {
            data,
            _t: PhantomData,
        })
    }

    /// An empty vector (for an absent optional field).
    pub(crate) fn empty() -> Self {
        Self {
            data: &[],
            _t: PhantomData,
        }
    }

    /// Number of elements.
    pub(crate) fn len(&self) -> u32 {
        // Fewer than 4 GiB of bytes (`new`).
        (self.data.len() / T::SIZE as usize) as u32
    }

    /// Element `i`, or `None` past the end.
    pub(crate) fn get(&self, i: u32) -> Option<T> {
        let start = usize::try_from(i).ok()?.checked_mul(T::SIZE as usize)?;
        let bytes = self.data.get(start..start.checked_add(T::SIZE as usize)?)?;
        Some(T::from_le(bytes))
    }

    /// The raw little-endian bytes of the elements.
    pub(crate) fn bytes(&self) -> &'a [u8] {
        self.data
    }

    /// Iterates the elements.
    pub(crate) fn iter(&self) -> impl Iterator<Item = T> + 'a {
        self.data
            .chunks_exact(T::SIZE as usize)
            .map(|c| T::from_le(c))
    }
}

/// A validated vector of offsets to tables: the offsets lie inside the buffer; each table is
/// validated when fetched with [`Tables::get`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tables<'a> {
    buf: &'a [u8],
    /// Position of the first offset.
    start: u32,
    len: u32,
    what: &'static str,
}

impl<'a> Tables<'a> {
    fn new(buf: &'a [u8], pos: u32, what: &'static str) -> Result<Self> {
        let v = Vector::<u32>::new(buf, pos, what)?;
        Ok(Self {
            buf,
            start: pos + 4,
            len: v.len(),
            what,
        })
    }

    fn empty(buf: &'a [u8], what: &'static str) -> Self {
        Self {
            buf,
            start: 0,
            len: 0,
            what,
        }
    }

    /// Number of tables.
    pub(crate) fn len(&self) -> u32 {
        self.len
    }

    /// Table `i`, validated.
    pub(crate) fn get(&self, i: u32) -> Result<Table<'a>> {
        if i >= self.len {
            return Err(ModelError::BadIndex {
                what: self.what,
                item: 0,
                index: ModelError::index(i),
                len: self.len,
            });
        }
        // start + 4 * len <= buffer length was checked in `new`.
        Table::at_offset(self.buf, self.start + 4 * i, self.what)
    }
}
