//! Knowledge Sources, their revisions, passages and term statistics, along the
//! seams of who uses them: the API's [`sources`], the workers' [`processing`]
//! and leases, ranking's [`search`] index, [`listening`] for changes, and whose
//! [`turns`] it is to be processed.
//! Everything is re-exported here: callers name `store::knowledge::*`.

mod listening;
mod processing;
mod search;
mod segments;
mod sources;
mod turns;

pub use listening::*;
pub use processing::*;
pub use search::*;
pub use segments::*;
pub use sources::*;
pub use turns::*;
