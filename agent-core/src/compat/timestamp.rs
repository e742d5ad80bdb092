//! UTC timestamps in the formats the upstream agents write (SPEC appendix).

use std::time::{SystemTime, UNIX_EPOCH};

use time::format_description::FormatItem;
use time::macros::format_description;
use time::{OffsetDateTime, PrimitiveDateTime};

/// Date and time of day of RFC 3339; the fraction is trimmed by hand because Go trims trailing
/// zeros, which no `time` format component does.
const RFC3339_SECONDS: &[FormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]");

/// New log-name stamp (SPEC §8.10).
const LOG_STAMP: &[FormatItem<'static>] =
    format_description!("[year]-[month]-[day]-[hour][minute][second].[subsecond digits:9]");

/// Legacy (Python agent) log-name stamp, whole seconds.
const LEGACY_LOG_STAMP: &[FormatItem<'static>] =
    format_description!("[year]-[month]-[day]-[hour][minute][second]");

/// Go's `time.RFC3339Nano` in UTC: `2026-11-30T10:27:28.136997Z` (fraction trimmed of trailing
/// zeros, omitted when zero).
pub fn rfc3339_nano(t: SystemTime) -> String {
    let utc = to_utc(t);
    let mut out = utc
        .format(RFC3339_SECONDS)
        .expect("every supported date formats");
    let nanos = utc.nanosecond();
    if nanos != 0 {
        let fraction = format!("{nanos:09}");
        out.push('.');
        out.push_str(fraction.trim_end_matches('0'));
    }
    out.push('Z');
    out
}

/// Log-name stamp: `YYYY-MM-DD-HHMMSS.nnnnnnnnn` (9 digits, UTC).
pub fn log_stamp(t: SystemTime) -> String {
    to_utc(t)
        .format(LOG_STAMP)
        .expect("every supported date formats")
}

/// The stamp [`parse_log_stamp`] read `unix_nanos` from, in the new format or (`legacy`) the
/// legacy one: both formats are fixed-width and name every field, so parsing and formatting
/// are inverse (property-tested below). `None` outside the years a stamp can hold.
pub(crate) fn format_log_stamp(unix_nanos: i128, legacy: bool) -> Option<String> {
    let utc = OffsetDateTime::from_unix_timestamp_nanos(unix_nanos).ok()?;
    utc.format(if legacy { LEGACY_LOG_STAMP } else { LOG_STAMP })
        .ok()
}

/// Parse a log-name stamp, new (`YYYY-MM-DD-HHMMSS.nnnnnnnnn`) or legacy (`YYYY-MM-DD-HHMMSS`,
/// written by the Python agent), into Unix nanoseconds, the order of retention (SPEC §8.10).
/// Anything else, including signs, spaces or another number of fraction digits, is `None`:
/// a near miss is another file, not one of our logs.
pub fn parse_log_stamp(s: &str) -> Option<i128> {
    const LEGACY_LEN: usize = "2026-11-30-102740".len();
    const NEW_LEN: usize = "2026-11-30-102740.123456789".len();
    let bytes = s.as_bytes();
    let digit_positions_ok = bytes.iter().enumerate().all(|(i, &b)| match i {
        4 | 7 | 10 => b == b'-',
        LEGACY_LEN => b == b'.',
        _ => b.is_ascii_digit(),
    });
    let format = match bytes.len() {
        LEGACY_LEN => LEGACY_LOG_STAMP,
        NEW_LEN => LOG_STAMP,
        _ => return None,
    };
    if !digit_positions_ok {
        return None;
    }
    let parsed = PrimitiveDateTime::parse(s, format).ok()?;
    Some(parsed.assume_utc().unix_timestamp_nanos())
}

/// `t` in UTC, clamped to the years `time` supports (±9999) so a wild clock yields a wrong
/// stamp rather than a panic.
fn to_utc(t: SystemTime) -> OffsetDateTime {
    let nanos = match t.duration_since(UNIX_EPOCH) {
        Ok(after) => i128::try_from(after.as_nanos()).unwrap_or(i128::MAX),
        Err(before) => i128::try_from(before.duration().as_nanos()).map_or(i128::MIN, |n| -n),
    };
    let min = PrimitiveDateTime::MIN.assume_utc().unix_timestamp_nanos();
    let max = PrimitiveDateTime::MAX.assume_utc().unix_timestamp_nanos();
    OffsetDateTime::from_unix_timestamp_nanos(nanos.clamp(min, max))
        .expect("clamped to the supported range")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use proptest::prelude::*;

    use super::*;

    /// 2026-11-30T10:27:28Z
    const BASE_SECS: u64 = 1_796_034_448;

    fn at(secs: u64, nanos: u32) -> SystemTime {
        UNIX_EPOCH + Duration::new(secs, nanos)
    }

    #[test]
    fn rfc3339_nano_trims_trailing_zeros_like_go() {
        assert_eq!(
            rfc3339_nano(at(BASE_SECS, 136_997_000)),
            "2026-11-30T10:27:28.136997Z"
        );
        assert_eq!(
            rfc3339_nano(at(BASE_SECS, 136_997_001)),
            "2026-11-30T10:27:28.136997001Z"
        );
        assert_eq!(
            rfc3339_nano(at(BASE_SECS, 100_000_000)),
            "2026-11-30T10:27:28.1Z"
        );
        assert_eq!(
            rfc3339_nano(at(BASE_SECS, 1)),
            "2026-11-30T10:27:28.000000001Z"
        );
    }

    #[test]
    fn rfc3339_nano_has_no_fraction_on_whole_seconds() {
        assert_eq!(rfc3339_nano(at(BASE_SECS, 0)), "2026-11-30T10:27:28Z");
        assert_eq!(rfc3339_nano(UNIX_EPOCH), "1970-01-01T00:00:00Z");
    }

    #[test]
    fn rfc3339_nano_before_the_epoch() {
        assert_eq!(
            rfc3339_nano(UNIX_EPOCH - Duration::from_millis(1500)),
            "1969-12-31T23:59:58.5Z"
        );
    }

    #[test]
    fn log_stamp_has_nine_fraction_digits() {
        assert_eq!(
            log_stamp(at(BASE_SECS, 136_997_000)),
            "2026-11-30-102728.136997000"
        );
        assert_eq!(log_stamp(at(BASE_SECS, 0)), "2026-11-30-102728.000000000");
        assert_eq!(log_stamp(at(BASE_SECS, 5)), "2026-11-30-102728.000000005");
    }

    #[test]
    fn wild_clocks_are_clamped_not_panics() {
        assert_eq!(
            rfc3339_nano(at(u64::MAX / 2, 0)),
            "9999-12-31T23:59:59.999999999Z"
        );
        assert_eq!(
            log_stamp(at(u64::MAX / 2, 0)),
            "9999-12-31-235959.999999999"
        );
    }

    #[test]
    fn parse_log_stamp_reads_new_and_legacy_stamps() {
        let base = i128::from(BASE_SECS) * 1_000_000_000;
        assert_eq!(
            parse_log_stamp("2026-11-30-102728.136997000"),
            Some(base + 136_997_000)
        );
        assert_eq!(parse_log_stamp("2026-11-30-102728.000000000"), Some(base));
        assert_eq!(parse_log_stamp("2026-11-30-102728"), Some(base));
        assert!(
            parse_log_stamp("2026-11-30-102728") < parse_log_stamp("2026-11-30-102728.000000001")
        );
        assert!(
            parse_log_stamp("2026-11-30-102729") > parse_log_stamp("2026-11-30-102728.999999999")
        );
    }

    #[test]
    fn parse_log_stamp_rejects_near_misses() {
        for bad in [
            "",
            "2026-11-30",
            "2026-11-30-10272",
            "2026-11-30-1027288",
            "2026-11-30-102728.",
            "2026-11-30-102728.13699700",
            "2026-11-30-102728.1369970000",
            "2026-11-30-102728-1",
            "2026-11-30T102728",
            "2026-13-30-102728",
            "2026-02-30-102728",
            "2026-11-30-246060",
            "+026-11-30-102728",
            "2026-11-30-10272a",
            "2026-11-30-102728.13699700a",
            "２026-11-30-102728",
        ] {
            assert_eq!(parse_log_stamp(bad), None, "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn log_stamp_round_trips(secs in 0u64..253_402_300_799, nanos in 0u32..1_000_000_000) {
            let stamp = log_stamp(at(secs, nanos));
            prop_assert_eq!(
                parse_log_stamp(&stamp),
                Some(i128::from(secs) * 1_000_000_000 + i128::from(nanos))
            );
        }

        /// What retention deletes is named from the parsed stamp: every stamp that parses
        /// must format back to exactly its text, in both formats, before 1970 too.
        #[test]
        fn parsed_log_stamps_format_back_to_their_text(
            year in 0u32..=9999, month in 1u32..=12, day in 1u32..=31,
            hour in 0u32..24, minute in 0u32..60, second in 0u32..60,
            nanos in 0u32..1_000_000_000, legacy: bool,
        ) {
            let date = format!("{year:04}-{month:02}-{day:02}-{hour:02}{minute:02}{second:02}");
            let text = if legacy { date } else { format!("{date}.{nanos:09}") };
            if let Some(parsed) = parse_log_stamp(&text) {
                prop_assert_eq!(format_log_stamp(parsed, legacy), Some(text));
            } else {
                // Only impossible dates (the 31st of a short month, 29 February) are refused.
                prop_assert!(day > 28);
            }
        }

        #[test]
        fn rfc3339_nano_parses_back(secs in 0u64..253_402_300_799, nanos in 0u32..1_000_000_000) {
            let text = rfc3339_nano(at(secs, nanos));
            let parsed = OffsetDateTime::parse(&text, &time::format_description::well_known::Rfc3339).unwrap();
            prop_assert_eq!(
                parsed.unix_timestamp_nanos(),
                i128::from(secs) * 1_000_000_000 + i128::from(nanos)
            );
            prop_assert!(text.ends_with('Z'));
            if let Some((_, fraction)) = text.split_once('.') {
                prop_assert!(!fraction.ends_with("0Z") && fraction != "Z");
            }
        }
    }
}
