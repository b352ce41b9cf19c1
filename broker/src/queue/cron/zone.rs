//! IANA time zones for cron patterns, from the time zone database bundled into the broker
//! (jiff's), so the answer does not depend on the host's `/usr/share/zoneinfo`.
//!
//! A pattern with a zone matches the zone's wall clock, as Bun's `Bun.cron.parse(…, {tz})`
//! does: the next matching wall-clock minute after `from`'s wall time, turned back into an
//! instant. A wall time skipped by a DST change runs at the same wall time on the clock before
//! the change (02:30 that does not exist runs at 03:30 new time); a wall time that occurs twice
//! runs at its first occurrence only.

use jiff::tz::TimeZone;
use jiff::Timestamp;

/// A cron pattern's time zone.
#[derive(Clone, Debug)]
pub(crate) struct Zone(TimeZone);

impl PartialEq for Zone {
    fn eq(&self, other: &Zone) -> bool {
        self.0.iana_name() == other.0.iana_name()
    }
}

impl Eq for Zone {}

impl Zone {
    /// The zone named `name` (an IANA name, case-insensitive), or Bun's error text.
    pub fn get(name: &str) -> Result<Zone, String> {
        TimeZone::get(name)
            .map(Zone)
            .map_err(|_| format!("Bun.cron: unknown time zone '{name}'"))
    }

    /// The zone's offset from UTC at instant `ms` (epoch ms), in ms.
    pub fn offset_ms(&self, ms: f64) -> f64 {
        match Timestamp::from_millisecond(ms.floor() as i64) {
            Ok(t) => f64::from(self.0.to_offset(t).seconds()) * 1000.0,
            Err(_) => 0.0,
        }
    }

    /// The instant (epoch ms) of wall time `wall` (epoch ms read as a wall clock), resolved as
    /// the module docs say; `None` out of range.
    pub fn instant(&self, wall: f64) -> Option<f64> {
        let dt = Timestamp::from_millisecond(wall.floor() as i64)
            .ok()?
            .to_zoned(TimeZone::UTC)
            .datetime();
        let t = self.0.to_ambiguous_timestamp(dt).compatible().ok()?;
        Some(t.as_millisecond() as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-03-08T02:30 and 2026-11-01T01:30 wall time, as epoch ms read as UTC.
    const GAP: f64 = 1_772_937_000_000.0;
    const FOLD: f64 = 1_793_496_600_000.0;

    #[test]
    fn names_and_dst_changes_resolve_as_bun_does() {
        let ny = Zone::get("America/New_York").expect("in the bundled database");
        assert!(Zone::get("utc").is_ok(), "names are case-insensitive");
        assert_eq!(
            Zone::get("Nowhere/Bad").unwrap_err(),
            "Bun.cron: unknown time zone 'Nowhere/Bad'"
        );
        assert_eq!(ny.offset_ms(0.0), -5.0 * 3_600_000.0);
        // The skipped 02:30 runs at 07:30Z (03:30 EDT); the doubled 01:30 first at 05:30Z.
        assert_eq!(ny.instant(GAP), Some(GAP + 5.0 * 3_600_000.0));
        assert_eq!(ny.instant(FOLD), Some(FOLD + 4.0 * 3_600_000.0));
    }
}
