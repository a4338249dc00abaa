//! Conversions between database times and the contract's millisecond timestamps.

use svc_contract::schema::Timestamp;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Milliseconds since the Unix epoch.
pub fn millis(at: OffsetDateTime) -> Timestamp {
    (at.unix_timestamp_nanos() / 1_000_000) as Timestamp
}

/// A UTC date-time string ending in `Z`, to the second.
pub fn rfc3339(at: OffsetDateTime) -> String {
    let at = at.to_offset(time::UtcOffset::UTC).replace_nanosecond(0).unwrap_or(at);
    at.format(&Rfc3339).unwrap_or_default()
}

/// The UTC day (`2026-11-22`) of a contract timestamp.
pub fn day(at: Timestamp) -> String {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(at) * 1_000_000)
        .map(|at| at.date().to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;

    #[test]
    fn conversions() {
        let at = datetime!(2026-11-22 10:20:30.456 UTC);
        assert_eq!(millis(at), 1_795_342_830_456);
        assert_eq!(rfc3339(at), "2026-11-22T10:20:30Z");
        assert_eq!(rfc3339(datetime!(2026-11-22 12:00:00 +02:00)), "2026-11-22T10:00:00Z");
        assert_eq!(day(millis(at)), "2026-11-22");
    }
}
