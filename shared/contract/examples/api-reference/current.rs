//! The checked-in `docs/api-reference.md` must equal what this program writes,
//! so a contract change cannot leave the reference behind: CI runs this test
//! with the workspace's (`scripts/test`).

use crate::{PATH, UPDATE_COMMAND, page, repository};

#[test]
fn api_reference_matches_the_catalog() {
    let generated = page::markdown();
    let checked_in = std::fs::read_to_string(repository().join(PATH)).unwrap_or_default();
    if checked_in == generated {
        return;
    }
    let (line, expected, found) = generated
        .lines()
        .map(Some)
        .chain(std::iter::repeat(None))
        .zip(checked_in.lines().map(Some).chain(std::iter::repeat(None)))
        .enumerate()
        .find(|(_, (expected, found))| expected != found)
        .map(|(i, (expected, found))| (i + 1, expected.unwrap_or("<end of file>"), found.unwrap_or("<end of file>")))
        .unwrap_or((0, "<a trailing newline>", "<none>"));
    panic!(
        "{PATH} is stale: it differs from what the catalog generates, first at line {line}.\n\
         expected: {expected}\n\
         found:    {found}\n\
         Do not edit it by hand; run `{UPDATE_COMMAND}` and commit the result."
    );
}
