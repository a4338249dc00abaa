//! Opaque keyset cursors: which list they belong to and the last id returned.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use svc_contract::Problem;
use uuid::Uuid;

/// Encodes the position after `last` in the list named `list`.
pub fn encode(list: &str, last: Uuid) -> String {
    URL_SAFE_NO_PAD.encode(format!("{list}:{}", last.simple()))
}

/// Decodes a cursor of the list named `list`; anything else is `invalid_request`.
pub fn decode(list: &str, cursor: &str) -> Result<Uuid, Problem> {
    let invalid = || Problem::invalid("invalid_cursor", "The cursor is not valid for this list.");
    let bytes = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| invalid())?;
    let text = String::from_utf8(bytes).map_err(|_| invalid())?;
    let (name, id) = text.split_once(':').ok_or_else(invalid)?;
    if name != list {
        return Err(invalid());
    }
    Uuid::try_parse(id).map_err(|_| invalid())
}

/// Splits one extra fetched row off a page: returns the page and its next cursor.
pub fn page<T>(mut rows: Vec<T>, page_size: u32, list: &str, id: impl Fn(&T) -> Uuid) -> (Vec<T>, Option<String>) {
    let size = page_size as usize;
    if rows.len() > size {
        rows.truncate(size);
        let next = rows.last().map(|row| encode(list, id(row)));
        (rows, next)
    } else {
        (rows, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejection() {
        let id = Uuid::now_v7();
        let cursor = encode("agents", id);
        assert_eq!(decode("agents", &cursor), Ok(id));
        assert!(decode("workspaces", &cursor).is_err());
        for bad in ["", "!!", "YWdlbnRz", &URL_SAFE_NO_PAD.encode("agents:nope")] {
            assert_eq!(decode("agents", bad).unwrap_err().code, svc_contract::ProblemCode::InvalidRequest);
        }
    }

    #[test]
    fn paging_fetches_one_extra() {
        let ids: Vec<Uuid> = (0..3).map(|_| Uuid::now_v7()).collect();
        let (rows, next) = page(ids.clone(), 2, "x", |u| *u);
        assert_eq!(rows, ids[..2]);
        assert_eq!(next.map(|c| decode("x", &c).unwrap()), Some(ids[1]));
        let (rows, next) = page(ids.clone(), 3, "x", |u| *u);
        assert_eq!((rows.len(), next), (3, None));
    }
}
