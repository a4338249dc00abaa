//! Knowledge Sources and their revisions, along the seams of who uses them:
//! the API's [`sources`], the workers' [`processing`] and leases,
//! [`listening`] for changes, and whose [`turns`] it is to be processed. (The
//! index of their passages is `svc_search`'s.)
//! Everything is re-exported here: callers name `store::knowledge::*`.

mod listening;
mod processing;
mod sources;
mod turns;

pub use listening::*;
pub use processing::*;
pub use sources::*;
pub use turns::*;
