//! Subgraphs: their tensors and operators in execution order, their inputs and outputs, and the
//! iterators over them.

use super::flatbuffer::{Tables, Vector};
use super::schema::slot;
use super::{ModelError, OperatorInfo, Result, Shared, TensorInfo, MAX_TENSORS};

/// A subgraph: tensors, operators in execution order, and the graph's inputs and outputs.
#[derive(Clone, Copy, Debug)]
pub struct SubGraph<'a> {
    shared: Shared<'a>,
    index: u32,
    name: Option<&'a str>,
    tensors: Tables<'a>,
    operators: Tables<'a>,
    inputs: Vector<'a, i32>,
    outputs: Vector<'a, i32>,
}

impl<'a> SubGraph<'a> {
    /// Subgraph `index`; [`validate`](Self::validate) checks what it holds.
    pub(super) fn new(shared: Shared<'a>, subgraphs: Tables<'a>, index: u32) -> Result<Self> {
        let t = subgraphs.get(index)?;
        let tensors = t.tables(slot::subgraph::TENSORS, "Tensor")?;
        if tensors.len() > MAX_TENSORS {
            return Err(ModelError::CapacityExceeded {
                what: "SubGraph.tensors",
                capacity: "MAX_TENSORS",
                // MAX_TENSORS is u16::MAX.
                limit: MAX_TENSORS as u16,
                actual: tensors.len(),
            });
        }
        Ok(Self {
            shared,
            index,
            name: t.string(slot::subgraph::NAME, "SubGraph.name")?,
            tensors,
            operators: t.tables(slot::subgraph::OPERATORS, "Operator")?,
            inputs: t.vector_or_empty(slot::subgraph::INPUTS, "SubGraph.inputs")?,
            outputs: t.vector_or_empty(slot::subgraph::OUTPUTS, "SubGraph.outputs")?,
        })
    }

    /// Decodes everything once, so that later accessors cannot fail.
    pub(super) fn validate(&self) -> Result<()> {
        for i in 0..self.tensors.len() {
            self.tensor(i as u16)?;
        }
        for i in 0..self.operators.len() {
            self.operator(i)?;
        }
        for (list, what) in [
            (self.inputs, "SubGraph.inputs"),
            (self.outputs, "SubGraph.outputs"),
        ] {
            for index in list.iter() {
                if index < 0 || index as u32 >= self.tensors.len() {
                    return Err(ModelError::BadIndex {
                        what,
                        item: self.index,
                        index,
                        len: self.tensors.len(),
                    });
                }
            }
        }
        Ok(())
    }

    /// This subgraph's index in the model (0 for the main subgraph).
    pub fn index(&self) -> u32 {
        self.index
    }

    /// `SubGraph.name`, if present.
    pub fn name(&self) -> Option<&'a str> {
        self.name
    }

    /// Number of tensors (at most [`MAX_TENSORS`]).
    pub fn tensor_count(&self) -> u16 {
        // Checked against MAX_TENSORS (= u16::MAX) in `new`.
        u16::try_from(self.tensors.len()).unwrap_or(u16::MAX)
    }

    /// Tensor `index`.
    ///
    /// # Errors
    ///
    /// [`ModelError::BadIndex`] if `index >= tensor_count()`.
    pub fn tensor(&self, index: u16) -> Result<TensorInfo<'a>> {
        TensorInfo::decode(&self.shared, self.tensors, index)
    }

    /// All tensors, in index order.
    pub fn tensors(&self) -> Tensors<'a> {
        Tensors {
            graph: *self,
            next: 0,
        }
    }

    /// Number of operators.
    pub fn operator_count(&self) -> u32 {
        self.operators.len()
    }

    /// Operator `index` (execution order).
    ///
    /// # Errors
    ///
    /// [`ModelError::BadIndex`] if `index >= operator_count()`.
    pub fn operator(&self, index: u32) -> Result<OperatorInfo<'a>> {
        OperatorInfo::decode(
            &self.shared,
            self.operators.get(index)?,
            index,
            self.tensors.len(),
        )
    }

    /// All operators, in execution order.
    pub fn operators(&self) -> Operators<'a> {
        Operators {
            graph: *self,
            next: 0,
        }
    }

    /// Indices of the graph's input tensors.
    pub fn inputs(&self) -> TensorIndices<'a> {
        TensorIndices {
            list: self.inputs,
            next: 0,
        }
    }

    /// Indices of the graph's output tensors.
    pub fn outputs(&self) -> TensorIndices<'a> {
        TensorIndices {
            list: self.outputs,
            next: 0,
        }
    }
}

/// Iterator over a subgraph's tensors ([`SubGraph::tensors`]).
#[derive(Clone, Debug)]
pub struct Tensors<'a> {
    graph: SubGraph<'a>,
    next: u16,
}

impl<'a> Iterator for Tensors<'a> {
    type Item = Result<TensorInfo<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.graph.tensor_count() {
            return None;
        }
        let item = self.graph.tensor(self.next);
        self.next += 1;
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = usize::from(self.graph.tensor_count().saturating_sub(self.next));
        (left, Some(left))
    }
}

impl ExactSizeIterator for Tensors<'_> {}

/// Iterator over a subgraph's operators ([`SubGraph::operators`]).
#[derive(Clone, Debug)]
pub struct Operators<'a> {
    graph: SubGraph<'a>,
    next: u32,
}

impl<'a> Iterator for Operators<'a> {
    type Item = Result<OperatorInfo<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.graph.operator_count() {
            return None;
        }
        let item = self.graph.operator(self.next);
        self.next += 1;
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.graph.operator_count().saturating_sub(self.next) as usize;
        (left, Some(left))
    }
}

impl ExactSizeIterator for Operators<'_> {}

/// The validated tensor indices of a subgraph's inputs or outputs (zero-copy, read from the
/// file). Iterates `u16` indices, each less than [`SubGraph::tensor_count`].
#[derive(Clone, Debug)]
pub struct TensorIndices<'a> {
    list: Vector<'a, i32>,
    next: u32,
}

impl TensorIndices<'_> {
    /// Number of indices (including those already iterated).
    pub fn len(&self) -> usize {
        self.list.len() as usize
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.list.len() == 0
    }

    /// Index `i` of the list.
    pub fn get(&self, i: usize) -> Option<u16> {
        let i = u32::try_from(i).ok()?;
        self.list.get(i).and_then(|v| u16::try_from(v).ok())
    }
}

impl Iterator for TensorIndices<'_> {
    type Item = u16;

    fn next(&mut self) -> Option<u16> {
        while self.next < self.list.len() {
            let v = self.list.get(self.next);
            self.next += 1;
            // Validated by `Model::parse`: every entry converts.
            if let Some(v) = v.and_then(|v| u16::try_from(v).ok()) {
                return Some(v);
            }
        }
        None
    }
}
