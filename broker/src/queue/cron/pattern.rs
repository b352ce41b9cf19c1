//! Cron patterns as bunqueue 2.9.5 reads them: its own leading seconds field
//! (`cronParser.js`), and the five calendar fields as Bun 1.4's native `Bun.cron.parse` does
//! (fields, lists, ranges, steps, names, `7` for Sunday, nicknames, its error texts, POSIX
//! day matching, no match within 8 years meaning none). In UTC, or on a time zone's wall
//! clock (see `zone`).
//!
//! Rules taken from bunqueue's source and Bun's, and checked against Bun 1.4.5 (the cases in
//! the tests below were run through `Bun.cron.parse`).

use super::zone::Zone;

const MINUTE_MS: f64 = 60_000.0;
const DAY_MS: i64 = 86_400_000;

/// bunqueue's `CRON_SHORTCUTS` (`expandCronShortcut`: trimmed, lower-cased).
pub(crate) fn expand_shortcut(expr: &str) -> &str {
    match expr.trim().to_ascii_lowercase().as_str() {
        "@yearly" | "@annually" => "0 0 1 1 *",
        "@monthly" => "0 0 1 * *",
        "@weekly" => "0 0 * * 0",
        "@daily" | "@midnight" => "0 0 * * *",
        "@hourly" => "0 * * * *",
        _ => expr,
    }
}

/// Bun's calendar fields, as bit sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Calendar {
    minutes: u64,
    hours: u32,
    days: u32,
    months: u16,
    weekdays: u8,
    days_any: bool,
    weekdays_any: bool,
}

/// A parsed pattern: the calendar, and bunqueue's seconds when six fields were given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pattern {
    calendar: Calendar,
    seconds: Option<Vec<u32>>,
    /// The time zone whose wall clock the calendar matches (UTC without one).
    zone: Option<Zone>,
}

const BUN_TOO_FEW: &str =
    "Invalid cron expression: expected 5 space-separated fields (minute hour day month weekday)";
const BUN_TOO_MANY: &str = "Invalid cron expression: too many fields. Bun.cron uses 5 fields \
(minute hour day month weekday) — seconds are not supported";
const BUN_STEP: &str = "Invalid cron expression: step value must be a positive integer";
const BUN_RANGE: &str = "Invalid cron expression: range must be ascending (use 'a,b' or \
'a-max,0-b' for wrap-around)";
const BUN_NUMBER: &str = "Invalid cron expression: value out of range for field";
const BUN_FIELD: &str = "Invalid cron expression: unrecognized field syntax";

/// Zig's `std.fmt.parseInt` in base 10 into an unsigned type whose largest value is `max`,
/// which Bun uses: one optional sign (`-` only for zero), digits with `_` between them.
fn zig_uint(s: &str, max: u64) -> Option<u64> {
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'+') => (false, &s[1..]),
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    let b = digits.as_bytes();
    if b.is_empty() || b[0] == b'_' || b[b.len() - 1] == b'_' {
        return None;
    }
    let mut x: u64 = 0;
    for &c in b {
        if c == b'_' {
            continue;
        }
        if !c.is_ascii_digit() {
            return None;
        }
        x = x * 10 + u64::from(c - b'0');
        if x > max {
            return None;
        }
    }
    (!neg || x == 0).then_some(x)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Names {
    None,
    Weekday,
    Month,
}

fn named(s: &str, names: Names) -> Option<u64> {
    let s = s.to_ascii_lowercase();
    let v = match names {
        Names::None => return None,
        Names::Weekday => match s.as_str() {
            "sun" | "sunday" => 0,
            "mon" | "monday" => 1,
            "tue" | "tuesday" => 2,
            "wed" | "wednesday" => 3,
            "thu" | "thursday" => 4,
            "fri" | "friday" => 5,
            "sat" | "saturday" => 6,
            _ => return None,
        },
        Names::Month => match s.as_str() {
            "jan" | "january" => 1,
            "feb" | "february" => 2,
            "mar" | "march" => 3,
            "apr" | "april" => 4,
            "may" => 5,
            "jun" | "june" => 6,
            "jul" | "july" => 7,
            "aug" | "august" => 8,
            "sep" | "september" => 9,
            "oct" | "october" => 10,
            "nov" | "november" => 11,
            "dec" | "december" => 12,
            _ => return None,
        },
    };
    Some(v)
}

fn value(s: &str, min: u64, max: u64, names: Names) -> Result<u64, &'static str> {
    if let Some(v) = named(s, names) {
        return Ok(v);
    }
    match zig_uint(s, 255) {
        Some(v) if (min..=max).contains(&v) => Ok(v),
        _ => Err(BUN_NUMBER),
    }
}

/// One calendar field as a bit set (bit `i` for value `i`).
fn field(f: &str, min: u64, max: u64, names: Names) -> Result<u64, &'static str> {
    let mut bits = 0u64;
    for part in f.split(',') {
        if part.is_empty() {
            return Err(BUN_FIELD);
        }
        let mut it = part.split('/');
        let base = it.next().unwrap_or("");
        let step = it.next();
        if it.next().is_some() {
            return Err(BUN_STEP);
        }
        let step = match step {
            None => 1,
            Some(s) => match zig_uint(s, 127) {
                Some(n) if n > 0 => n,
                _ => return Err(BUN_STEP),
            },
        };
        let (lo, hi) = if base == "*" {
            (min, max)
        } else {
            // A range needs one `-` with something on each side; otherwise it is one value.
            let range = base
                .find('-')
                .filter(|&i| i > 0 && i < base.len() - 1 && !base[i + 1..].contains('-'));
            match range {
                Some(i) => {
                    let lo = value(&base[..i], min, max, names)?;
                    let hi = value(&base[i + 1..], min, max, names)?;
                    if lo > hi {
                        return Err(BUN_RANGE);
                    }
                    (lo, hi)
                }
                None => {
                    let lo = value(base, min, max, names)?;
                    (lo, if step_given(part) { max } else { lo })
                }
            }
        };
        let mut i = lo;
        while i <= hi {
            bits |= 1 << i;
            i += step;
        }
    }
    if names == Names::Weekday {
        // 7 is Sunday, folded after the ranges so that 5-7 and 0-7 work.
        bits = (bits | (bits >> 7)) & 0x7f;
    }
    Ok(bits)
}

fn step_given(part: &str) -> bool {
    part.contains('/')
}

/// `Bun.cron.parse`'s expression check.
fn calendar(expr: &str) -> Result<Calendar, &'static str> {
    let expr = expr.trim_matches([' ', '\t']);
    // Day-of-month bits 1-31 (bit 0 unused), month bits 1-12.
    const ALL_DAYS: u32 = !1;
    const ALL_MONTHS: u16 = 0x1ffe;
    let nick = |minutes, hours, days, months, weekdays, days_any, weekdays_any| Calendar {
        minutes,
        hours,
        days,
        months,
        weekdays,
        days_any,
        weekdays_any,
    };
    if expr.starts_with('@') {
        return match expr.to_ascii_lowercase().as_str() {
            "@yearly" | "@annually" => Ok(nick(1, 1, 2, 2, 0x7f, false, true)),
            "@monthly" => Ok(nick(1, 1, 2, ALL_MONTHS, 0x7f, false, true)),
            "@weekly" => Ok(nick(1, 1, ALL_DAYS, ALL_MONTHS, 1, true, false)),
            "@daily" | "@midnight" => Ok(nick(1, 1, ALL_DAYS, ALL_MONTHS, 0x7f, true, true)),
            "@hourly" => Ok(nick(1, 0xff_ffff, ALL_DAYS, ALL_MONTHS, 0x7f, true, true)),
            _ => Err(BUN_FIELD),
        };
    }
    let f: Vec<&str> = expr.split([' ', '\t']).filter(|s| !s.is_empty()).collect();
    if f.len() > 5 {
        return Err(BUN_TOO_MANY);
    }
    if f.len() < 5 {
        return Err(BUN_TOO_FEW);
    }
    Ok(Calendar {
        minutes: field(f[0], 0, 59, Names::None)?,
        hours: field(f[1], 0, 23, Names::None)? as u32,
        days: field(f[2], 1, 31, Names::None)? as u32,
        months: field(f[3], 1, 12, Names::Month)? as u16,
        weekdays: field(f[4], 0, 7, Names::Weekday)? as u8,
        days_any: f[2] == "*",
        weekdays_any: f[4] == "*",
    })
}

/// bunqueue's `parseSeconds`, with its texts.
fn seconds(field: &str) -> Result<Vec<u32>, String> {
    let bad = |reason: &str| Err(format!("Invalid cron seconds field \"{field}\": {reason}"));
    let int = |v: &str, label: &str| -> Result<u32, String> {
        if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!(
                "Invalid cron seconds field \"{field}\": {label} must be an integer"
            ));
        }
        // JS Number(): a long run of digits is a huge number, out of every range below.
        Ok(v.parse::<u32>().unwrap_or(u32::MAX))
    };
    let mut set = std::collections::BTreeSet::new();
    for segment in field.split(',') {
        if segment.is_empty() {
            return bad("list entries cannot be empty");
        }
        let parts: Vec<&str> = segment.split('/').collect();
        if parts.len() > 2 || parts[0].is_empty() || parts.get(1) == Some(&"") {
            return bad(&format!("invalid segment \"{segment}\""));
        }
        let base = parts[0];
        let step = match parts.get(1) {
            Some(s) => int(s, "step")?,
            None => 1,
        };
        if !(1..=60).contains(&step) {
            return bad("step must be between 1 and 60");
        }
        let (start, end) = if base == "*" {
            (0, 59)
        } else if base.contains('-') {
            let r: Vec<&str> = base.split('-').collect();
            if r.len() != 2 || r[0].is_empty() || r[1].is_empty() {
                return bad(&format!("invalid range \"{base}\""));
            }
            (int(r[0], "range start")?, int(r[1], "range end")?)
        } else {
            if parts.len() == 2 {
                return bad("steps require a wildcard or range");
            }
            let v = int(base, "value")?;
            (v, v)
        };
        if start > 59 || end > 59 {
            return bad("values must be between 0 and 59");
        }
        if start > end {
            return bad("range start must not exceed range end");
        }
        set.extend((start..=end).step_by(step as usize));
    }
    Ok(set.into_iter().collect())
}

impl Pattern {
    /// bunqueue's `parseCronExpression` (the expression already through
    /// [`expand_shortcut`]), then Bun's check of the calendar part. The error is the text
    /// bunqueue puts after `Invalid cron expression: `.
    pub(crate) fn parse(expr: &str) -> Result<Pattern, String> {
        let t = expr.trim();
        if t.starts_with('@') && !t.chars().any(char::is_whitespace) {
            return Ok(Pattern {
                calendar: calendar(t)?,
                seconds: None,
                zone: None,
            });
        }
        let f: Vec<&str> = t.split_whitespace().collect();
        match f.len() {
            5 => Ok(Pattern {
                calendar: calendar(&f.join(" "))?,
                seconds: None,
                zone: None,
            }),
            6 => {
                // bunqueue reads the seconds first, but only after Bun has taken the rest:
                // `{ calendar, seconds: parseSeconds(..) }` evaluates seconds, then the
                // calendar is checked on the first next-run computation.
                let s = seconds(f[0])?;
                Ok(Pattern {
                    calendar: calendar(&f[1..].join(" "))?,
                    seconds: Some(s),
                    zone: None,
                })
            }
            _ => Err("Cron expression must have 5 fields, or 6 fields with leading seconds".into()),
        }
    }

    /// The pattern matched on `zone`'s wall clock.
    pub(crate) fn in_zone(mut self, zone: Option<Zone>) -> Pattern {
        self.zone = zone;
        self
    }

    /// Bun's next matching minute strictly after `from`, on the zone's wall clock if any: the
    /// next matching wall minute after `from`'s wall time, a wall time that resolves to an
    /// instant not after `from` (the second pass of a repeated hour) skipped.
    fn next_minute(&self, from: f64) -> Option<f64> {
        let Some(zone) = &self.zone else {
            return self.calendar.next(from);
        };
        let mut wall = from + zone.offset_ms(from);
        loop {
            wall = self.calendar.next(wall)?;
            let at = zone.instant(wall)?;
            if at > from {
                return Some(at);
            }
        }
    }

    /// bunqueue's `getNextParsedRun`: the first run strictly after `from` (epoch ms), or 0
    /// when there is none.
    pub(crate) fn next_after(&self, from: f64) -> f64 {
        let Some(secs) = &self.seconds else {
            return self.next_minute(from).unwrap_or(0.0);
        };
        let current = (from / MINUTE_MS).floor() * MINUTE_MS;
        let mut minute = self.next_minute(current - 1.0);
        while let Some(start) = minute {
            for s in secs {
                let at = start + f64::from(*s) * 1000.0;
                if at > from {
                    return at;
                }
            }
            match self.next_minute(start) {
                Some(n) if n > start => minute = Some(n),
                _ => return 0.0,
            }
        }
        0.0
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (month 1-12).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day since 1970-01-01: (year, month 1-12, day).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// A UTC time to the minute, fields allowed to overflow as `Date.UTC`'s.
#[derive(Clone, Copy)]
struct Civil {
    year: i64,
    month: i64,
    day: i64,
    hour: i64,
    minute: i64,
}

impl Civil {
    fn from_ms(ms: i64) -> (Civil, i64) {
        let days = ms.div_euclid(DAY_MS);
        let rest = ms.rem_euclid(DAY_MS);
        let (year, month, day) = civil_from_days(days);
        let c = Civil {
            year,
            month,
            day,
            hour: rest / 3_600_000,
            minute: rest / 60_000 % 60,
        };
        (c, (days + 4).rem_euclid(7))
    }

    fn to_ms(self) -> i64 {
        let y = self.year + (self.month - 1).div_euclid(12);
        let m = (self.month - 1).rem_euclid(12) + 1;
        let days = days_from_civil(y, m, 1) + self.day - 1;
        days * DAY_MS + self.hour * 3_600_000 + self.minute * 60_000
    }
}

impl Calendar {
    /// Bun's `CronExpression.next`: the first matching minute strictly after `from`, looked
    /// for until 8 years after `from`'s year.
    fn next(&self, from: f64) -> Option<f64> {
        let (mut dt, _) = Civil::from_ms(from.floor() as i64);
        let start_year = dt.year;
        dt.minute += 1;
        while dt.year - start_year <= 8 {
            let (n, weekday) = Civil::from_ms(dt.to_ms());
            dt = n;
            if self.months >> dt.month & 1 == 0 {
                dt.month += 1;
                dt.day = 1;
                dt.hour = 0;
                dt.minute = 0;
                continue;
            }
            let day_ok = self.days >> dt.day & 1 != 0;
            let weekday_ok = self.weekdays >> weekday & 1 != 0;
            let day_match = if !self.days_any && !self.weekdays_any {
                day_ok || weekday_ok
            } else {
                day_ok && weekday_ok
            };
            if !day_match {
                dt.day += 1;
                dt.hour = 0;
                dt.minute = 0;
                continue;
            }
            if self.hours >> dt.hour & 1 == 0 {
                dt.hour += 1;
                dt.minute = 0;
                continue;
            }
            if self.minutes >> dt.minute & 1 == 0 {
                dt.minute += 1;
                continue;
            }
            return Some(dt.to_ms() as f64);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-01-01T00:00:00Z, a Thursday.
    const FROM: f64 = 1_767_225_600_000.0;

    fn next(expr: &str) -> Result<f64, String> {
        Pattern::parse(expand_shortcut(expr)).map(|p| p.next_after(FROM))
    }

    fn iso(ms: f64) -> String {
        let (c, _) = Civil::from_ms(ms as i64);
        let s = (ms as i64).rem_euclid(60_000) / 1000;
        format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
            c.year, c.month, c.day, c.hour, c.minute, s
        )
    }

    /// Each case as Bun 1.4.5's `Bun.cron.parse(expr, FROM)` answered it.
    #[test]
    fn next_runs_match_bun() {
        for (expr, want) in [
            ("* * * * *", "2026-01-01T00:01:00"),
            ("*/15 * * * *", "2026-01-01T00:15:00"),
            ("0 0 * * MON", "2026-01-05T00:00:00"),
            ("0 0 * JAN *", "2026-01-02T00:00:00"),
            ("0 0 * * 7", "2026-01-04T00:00:00"),
            ("1-5/2 * * * *", "2026-01-01T00:01:00"),
            ("5/10 * * * *", "2026-01-01T00:05:00"),
            ("@daily", "2026-01-02T00:00:00"),
            ("@DAILY", "2026-01-02T00:00:00"),
            ("@weekly", "2026-01-04T00:00:00"),
            ("0 0 1 * 1", "2026-01-05T00:00:00"),
            ("0 0 30 * *", "2026-01-30T00:00:00"),
            ("0,30 * * * *", "2026-01-01T00:30:00"),
            ("0 12 * * mon-fri", "2026-01-01T12:00:00"),
            ("0 0 1 1 *", "2027-01-01T00:00:00"),
            ("+5 * * * *", "2026-01-01T00:05:00"),
            ("1_0 * * * *", "2026-01-01T00:10:00"),
            ("1__0 * * * *", "2026-01-01T00:10:00"),
            ("-0 * * * *", "2026-01-01T01:00:00"),
            ("05 * * * *", "2026-01-01T00:05:00"),
            ("*/+2 * * * *", "2026-01-01T00:02:00"),
            ("*/1_0 * * * *", "2026-01-01T00:10:00"),
            ("0-+5/2 * * * *", "2026-01-01T00:02:00"),
            ("* * * * 5-7", "2026-01-02T00:00:00"),
            ("* * * * 0-7/7", "2026-01-04T00:00:00"),
            ("* * * * sunday", "2026-01-04T00:00:00"),
            ("* * * FEBRUARY *", "2026-02-01T00:00:00"),
            ("*/100 * * * *", "2026-01-01T01:00:00"),
            ("0 0 29 2 *", "2028-02-29T00:00:00"),
        ] {
            assert_eq!(next(expr).map(iso).as_deref(), Ok(want), "{expr}");
        }
        // 31 February: none within 8 years, 0 in bunqueue.
        assert_eq!(next("0 0 31 2 *"), Ok(0.0));
    }

    /// Each refusal with Bun 1.4.5's text.
    #[test]
    fn refusals_match_bun() {
        for (expr, want) in [
            ("61 * * * *", BUN_NUMBER),
            ("a * * * *", BUN_NUMBER),
            ("L * * * *", BUN_NUMBER),
            ("0 0 ? * *", BUN_NUMBER),
            ("0 0 * * 1#2", BUN_NUMBER),
            ("-5 * * * *", BUN_NUMBER),
            ("5- * * * *", BUN_NUMBER),
            ("1-2-3 * * * *", BUN_NUMBER),
            ("10_ * * * *", BUN_NUMBER),
            ("_1 * * * *", BUN_NUMBER),
            ("+ * * * *", BUN_NUMBER),
            ("+_1 * * * *", BUN_NUMBER),
            ("++1 * * * *", BUN_NUMBER),
            ("+mon * * * *", BUN_NUMBER),
            ("* * * * +mon", BUN_NUMBER),
            ("@every", BUN_FIELD),
            ("1,,2 * * * *", BUN_FIELD),
            ("*/0 * * * *", BUN_STEP),
            ("*/200 * * * *", BUN_STEP),
            ("*/ * * * *", BUN_STEP),
            ("1/2/3 * * * *", BUN_STEP),
            ("59-1 * * * *", BUN_RANGE),
        ] {
            assert_eq!(next(expr), Err(want.to_owned()), "{expr}");
        }
        // bunqueue's own field count check comes first.
        assert_eq!(
            next("* * * *"),
            Err("Cron expression must have 5 fields, or 6 fields with leading seconds".into())
        );
    }

    #[test]
    fn bunqueue_seconds_field() {
        assert_eq!(
            next("*/20 * * * * *").map(iso).as_deref(),
            Ok("2026-01-01T00:00:20")
        );
        assert_eq!(
            next("0 30 * * * *").map(iso).as_deref(),
            Ok("2026-01-01T00:30:00")
        );
        assert_eq!(
            next("5,1-2 0 0 * * *").map(iso).as_deref(),
            Ok("2026-01-01T00:00:01")
        );
        for (expr, reason) in [
            ("5/2 * * * * *", "steps require a wildcard or range"),
            ("60 * * * * *", "values must be between 0 and 59"),
            ("*/61 * * * * *", "step must be between 1 and 60"),
            ("x * * * * *", "value must be an integer"),
            ("1,,2 * * * * *", "list entries cannot be empty"),
            ("5-1 * * * * *", "range start must not exceed range end"),
        ] {
            let field = expr.split(' ').next().unwrap();
            assert_eq!(
                next(expr),
                Err(format!("Invalid cron seconds field \"{field}\": {reason}")),
                "{expr}"
            );
        }
    }
}

/// 800 runs of expressions (generated at random from valid and invalid pieces, three start
/// times), as bunqueue 2.9.5's `getNextCronRun(expandCronShortcut(e), from)` answered
/// them on Bun 1.4.5: the next run in epoch ms (0 for none) or `ERR` and the thrown text.
#[cfg(test)]
mod bun_cases {
    use super::*;

    #[test]
    fn every_recorded_case_matches() {
        let mut differ = Vec::new();
        let cases = include_str!("bun_cases.tsv");
        for line in cases.lines() {
            let mut it = line.split('\t');
            let (e, from, want) = (it.next().unwrap(), it.next().unwrap(), it.next().unwrap());
            let from: f64 = from.parse().unwrap();
            let got = match Pattern::parse(expand_shortcut(e)) {
                Ok(p) => format!("{}", p.next_after(from) as i64),
                Err(m) => format!("ERR {m}"),
            };
            if got != want {
                differ.push(format!("{e:?} from {from}: Bun {want}, broker {got}"));
            }
        }
        assert_eq!(cases.lines().count(), 800);
        assert!(differ.is_empty(), "{}", differ.join("\n"));
    }

    /// America/New_York across 2026's DST changes, as Bun 1.4.5's
    /// `Bun.cron.parse(expr, from, {tz})` answered: the skipped 02:30 runs at 03:30 EDT, the
    /// doubled 01:30 runs once, at its first pass.
    #[test]
    fn zoned_runs_across_dst_match_bun() {
        let ny = || Some(Zone::get("America/New_York").expect("zone"));
        for (expr, from, want) in [
            ("30 2 * * *", 1_772_884_800_000.0, 1_772_955_000_000.0),
            ("30 1 * * *", 1_793_448_000_000.0, 1_793_511_000_000.0),
            ("30 1 * * *", 1_793_511_900_000.0, 1_793_601_000_000.0),
        ] {
            let p = Pattern::parse(expr).expect("pattern").in_zone(ny());
            assert_eq!(p.next_after(from), want, "{expr} from {from}");
        }
    }
}
