//! Every SQL statement of the index: [`terms`] (passages and their term
//! counts, what ranking reads) and [`segments`] (documents, masks, segments
//! and merges).

pub mod segments;
pub mod terms;
