//! Operators: which operator runs, on which tensors, with which options, decoded from the file
//! with every index checked.

use super::flatbuffer::Table;
use super::schema::slot;
use super::{
    BuiltinOp, BuiltinOptions, ModelError, Result, Shared, MAX_OPTIONS_TYPE, MAX_OP_INPUTS,
    MAX_OP_OUTPUTS,
};

/// An operator, decoded from the file.
#[derive(Clone, Debug)]
pub struct OperatorInfo<'a> {
    /// Index in the subgraph (execution order).
    pub index: u32,
    /// Index of its operator code in the model.
    pub opcode_index: u32,
    /// The builtin operator.
    pub builtin: BuiltinOp,
    /// The operator code's version.
    pub version: i32,
    /// The custom operator's name, for [`BuiltinOp::Custom`].
    pub custom_code: Option<&'a str>,
    /// Input tensor indices; `None` for an omitted optional input (`-1` in the file).
    pub inputs: heapless::Vec<Option<u16>, MAX_OP_INPUTS>,
    /// Output tensor indices; `None` for an omitted optional output (`-1` in the file).
    pub outputs: heapless::Vec<Option<u16>, MAX_OP_OUTPUTS>,
    /// The decoded builtin options (checked to be the table this operator takes).
    pub options: BuiltinOptions,
    /// `Operator.custom_options` (opaque bytes, usually a FlexBuffer), if present.
    pub custom_options: Option<&'a [u8]>,
}

impl<'a> OperatorInfo<'a> {
    /// Input `i`, if present (`None` if `i` is out of range or the input is omitted).
    pub fn input(&self, i: usize) -> Option<u16> {
        self.inputs.get(i).copied().flatten()
    }

    /// Output `i`, if present.
    pub fn output(&self, i: usize) -> Option<u16> {
        self.outputs.get(i).copied().flatten()
    }

    /// Decodes operator `index`, checking its operator code, its tensor indices (each below
    /// `tensor_count`) and that its options are the table the operator takes.
    pub(super) fn decode(
        shared: &Shared<'a>,
        t: Table<'a>,
        index: u32,
        tensor_count: u32,
    ) -> Result<Self> {
        let opcode_index: u32 =
            t.scalar(slot::operator::OPCODE_INDEX, "Operator.opcode_index", 0)?;
        if opcode_index >= shared.opcodes.len() {
            return Err(ModelError::BadIndex {
                what: "Operator.opcode_index",
                item: index,
                index: ModelError::index(opcode_index),
                len: shared.opcodes.len(),
            });
        }
        let opcode = shared.opcode(opcode_index)?;
        let inputs = tensor_list::<MAX_OP_INPUTS>(
            &t,
            slot::operator::INPUTS,
            ("Operator.inputs", "MAX_OP_INPUTS"),
            index,
            tensor_count,
        )?;
        let outputs = tensor_list::<MAX_OP_OUTPUTS>(
            &t,
            slot::operator::OUTPUTS,
            ("Operator.outputs", "MAX_OP_OUTPUTS"),
            index,
            tensor_count,
        )?;
        let options_type: u8 = t.scalar(
            slot::operator::BUILTIN_OPTIONS_TYPE,
            "Operator.builtin_options_type",
            0,
        )?;
        let table = if options_type != 0 && options_type <= MAX_OPTIONS_TYPE {
            t.table(slot::operator::BUILTIN_OPTIONS, "Operator.builtin_options")?
        } else {
            None
        };
        let options = BuiltinOptions::decode(opcode.builtin, index, options_type, table)?;
        let custom_options = t
            .vector::<u8>(slot::operator::CUSTOM_OPTIONS, "Operator.custom_options")?
            .map(|v| v.bytes());
        Ok(Self {
            index,
            opcode_index,
            builtin: opcode.builtin,
            version: opcode.version,
            custom_code: opcode.custom_code,
            inputs,
            outputs,
            options,
            custom_options,
        })
    }
}

/// Reads an operator's list of tensor indices (`-1` → `None`), checking each against the
/// subgraph's tensor count and the list against its capacity `N`.
fn tensor_list<const N: usize>(
    t: &Table<'_>,
    slot: u16,
    (what, capacity): (&'static str, &'static str),
    operator: u32,
    tensor_count: u32,
) -> Result<heapless::Vec<Option<u16>, N>> {
    let list = t.vector_or_empty::<i32>(slot, what)?;
    if list.len() > N as u32 {
        return Err(ModelError::CapacityExceeded {
            what,
            capacity,
            limit: u16::try_from(N).unwrap_or(u16::MAX),
            actual: list.len(),
        });
    }
    let mut out = heapless::Vec::new();
    for index in list.iter() {
        let entry = if index == -1 {
            None
        } else {
            match u16::try_from(index) {
                Ok(i) if u32::from(i) < tensor_count => Some(i),
                _ => {
                    return Err(ModelError::BadIndex {
                        what,
                        item: operator,
                        index,
                        len: tensor_count,
                    })
                }
            }
        };
        out.push(entry).map_err(|_| ModelError::CapacityExceeded {
            what,
            capacity,
            limit: u16::try_from(N).unwrap_or(u16::MAX),
            actual: list.len(),
        })?;
    }
    Ok(out)
}
