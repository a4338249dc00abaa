//! Every SQL statement of the index: [`terms`] (passages and their term
//! counts, what ranking reads), [`segments`] (documents, masks, segments
//! and merges) and [`vectors`] (the vector store's rows).

pub mod segments;
pub mod terms;
pub mod vectors;
