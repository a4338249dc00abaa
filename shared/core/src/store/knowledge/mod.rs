//! Knowledge Sources, their revisions, passages and term statistics, along the
//! seams of who uses them: the API's [`sources`], the workers' [`processing`]
//! and leases, ranking's [`search`] index, and [`listening`] for changes.
//! Everything is re-exported here: callers name `store::knowledge::*`.

mod listening;
mod processing;
mod search;
mod segments;
mod sources;

pub use listening::*;
pub use processing::*;
pub use search::*;
pub use segments::*;
pub use sources::*;
