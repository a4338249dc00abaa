//! identity.status

pub use super::Empty as StatusInput;
pub use crate::identity::IdentityStatus as StatusOutput;
