//! Public Chat and the Widget configuration of an Agent (contract §12).

mod origin;
mod website;

pub use origin::{Origin, OriginError};
pub use website::{MAX_URL_CHARS, UrlError, check_url};
