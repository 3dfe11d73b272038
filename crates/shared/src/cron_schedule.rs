//! A cron source's settings, its schedule read with standard cron semantics
//! (Sunday is 0 or 7; a day of the month *or* of the week matches when both are
//! given), though the `cron` crate that computes the ticks numbers Sunday 1 and
//! asks for both.

use chrono::{DateTime, Utc};
use serde_json::Value;

/// A cron source's settings: when, and what it emits.
#[derive(Debug, Clone)]
pub struct Cron {
    /// One schedule, or two whose ticks together are the expression's (a day of
    /// the month or of the week).
    schedules: Vec<cron::Schedule>,
    pub payload: String,
    pub content_type: String,
}

/// The longest payload a cron source emits.
pub const MOST_CRON_PAYLOAD: usize = 64 * 1024;

const NAMED: &[&str] = &["@hourly", "@daily", "@weekly", "@monthly", "@yearly", "@annually", "@midnight"];

/// A standard day-of-week field (0–7, Sunday 0 or 7; names, lists, ranges,
/// steps) in the crate's numbering (1–7, Sunday 1).
fn weekdays(field: &str) -> Result<String, String> {
    let bad = || {
        format!(
            "`config.schedule`: the day of the week `{field}` is not 0–7 (Sunday 0 or 7), a name, a range or a list"
        )
    };
    let day = |t: &str| match t.parse::<u8>() {
        Ok(n @ 0..=6) => Ok((n + 1).to_string()),
        Ok(7) => Ok("1".to_owned()),
        Ok(_) => Err(bad()),
        Err(_) => Ok(t.to_owned()),
    };
    let mut out = Vec::new();
    for item in field.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((r, s)) => (r, Some(s)),
            None => (item, None),
        };
        let converted = match range.split_once('-') {
            // `a-7` runs to Saturday and then Sunday, which is 1 here: two pieces.
            Some((a, "7")) if step.is_none() => format!("{}-7,1", day(a)?),
            Some((_, "7")) => return Err(bad()),
            Some((a, b)) => format!("{}-{}", day(a)?, day(b)?),
            None => day(range)?,
        };
        out.push(match step {
            Some(s) => format!("{converted}/{s}"),
            None => converted,
        });
    }
    Ok(out.join(","))
}

impl Cron {
    /// A cron source's stored settings (`{schedule, payload, contentType}`); an
    /// error naming the field that is wrong. The schedule has five fields (minute,
    /// hour, day of month, month, day of week; UTC) or is one of `@hourly`,
    /// `@daily`, `@weekly`, `@monthly`, `@yearly`: never more often than a minute,
    /// and it must tick at least once.
    pub fn parse(config: &serde_json::Map<String, Value>) -> Result<Cron, String> {
        let text = |field: &str| match config.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(format!("`config.{field}` must be a string")),
        };
        let schedule = text("schedule")?.ok_or("`config.schedule` is required for a `cron` source")?;
        let expressions = match schedule.trim() {
            s if NAMED.contains(&s) => vec![s.to_owned()],
            s => match s.split_whitespace().collect::<Vec<_>>()[..] {
                [min, hour, dom, month, dow] => {
                    let dow = weekdays(dow)?;
                    let restricted = |f: &str| f != "*" && f != "?";
                    if restricted(dom) && restricted(&dow) {
                        // Standard cron: either day matches.
                        vec![format!("0 {min} {hour} {dom} {month} *"), format!("0 {min} {hour} * {month} {dow}")]
                    } else {
                        vec![format!("0 {min} {hour} {dom} {month} {dow}")]
                    }
                }
                _ => {
                    return Err("`config.schedule` must be a cron expression of five fields (minute hour day month \
                                weekday, UTC) or @hourly, @daily, @weekly, @monthly or @yearly"
                        .into())
                }
            },
        };
        let schedules = expressions
            .iter()
            .map(|e| {
                e.parse::<cron::Schedule>().map_err(|e| format!("`config.schedule` is not a cron expression: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if schedules.iter().all(|s| s.upcoming(Utc).next().is_none()) {
            return Err("`config.schedule` never ticks".into());
        }
        let payload = text("payload")?.ok_or("`config.payload` is required for a `cron` source")?;
        if payload.len() > MOST_CRON_PAYLOAD {
            return Err(format!("`config.payload` must be at most {MOST_CRON_PAYLOAD} bytes"));
        }
        let content_type = text("contentType")?.unwrap_or_else(|| "application/json".into());
        if content_type.is_empty() || content_type.len() > 256 || content_type.chars().any(char::is_control) {
            return Err("`config.contentType` must be a media type of 1 to 256 printable characters".into());
        }
        Ok(Cron { schedules, payload, content_type })
    }

    /// The latest tick before `now`.
    pub fn latest_before(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.schedules.iter().filter_map(|s| s.after(&now).next_back()).max()
    }

    /// The next tick after `at`.
    pub fn next_after(&self, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.schedules.iter().filter_map(|s| s.after(&at).next()).min()
    }

    /// The settings as stored and shown back.
    pub fn shown(&self, schedule: &str) -> Value {
        serde_json::json!({ "schedule": schedule.trim(), "payload": self.payload, "contentType": self.content_type })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Datelike, TimeZone, Weekday};
    use serde_json::json;

    fn cron(schedule: &str) -> Result<Cron, String> {
        Cron::parse(json!({ "schedule": schedule, "payload": "{}" }).as_object().unwrap())
    }

    /// The weekdays and days of the month of the next `n` ticks from a Sunday.
    fn ticks(schedule: &str, n: usize) -> Vec<(Weekday, u32)> {
        let c = cron(schedule).unwrap();
        let mut at = Utc.with_ymd_and_hms(2026, 11, 29, 0, 0, 0).unwrap();
        (0..n)
            .map(|_| {
                at = c.next_after(at).unwrap();
                (at.weekday(), at.day())
            })
            .collect()
    }

    #[test]
    fn weekdays_are_numbered_as_in_standard_cron() {
        let days: Vec<Weekday> = ticks("0 9 * * 1-5", 5).into_iter().map(|(d, _)| d).collect();
        assert_eq!(days, [Weekday::Mon, Weekday::Tue, Weekday::Wed, Weekday::Thu, Weekday::Fri]);
        assert!(ticks("0 9 * * 0", 3).iter().all(|(d, _)| *d == Weekday::Sun));
        assert!(ticks("0 9 * * 7", 3).iter().all(|(d, _)| *d == Weekday::Sun));
        let weekend: Vec<Weekday> = ticks("0 9 * * 6-7", 2).into_iter().map(|(d, _)| d).collect();
        assert_eq!(weekend, [Weekday::Sun, Weekday::Sat]);
        assert!(ticks("0 9 * * MON", 2).iter().all(|(d, _)| *d == Weekday::Mon));
        assert!(cron("0 9 * * 8").unwrap_err().contains("day of the week"));
    }

    #[test]
    fn a_day_of_the_month_or_of_the_week_matches_when_both_are_given() {
        let got = ticks("0 0 1 * 1", 6);
        assert!(got.iter().any(|(d, m)| *d == Weekday::Mon && *m != 1), "{got:?}");
        assert!(got.iter().any(|(d, m)| *d != Weekday::Mon && *m == 1), "{got:?}");
    }

    #[test]
    fn a_schedule_has_five_fields_or_a_name_ticks_at_all_and_its_payload_is_bounded() {
        assert!(cron("@hourly").is_ok());
        for bad in ["* * * * * *", "61 * * * *", "", "@every 1s"] {
            assert!(cron(bad).unwrap_err().contains("config.schedule"), "{bad}");
        }
        assert!(cron("0 0 30 2 *").unwrap_err().contains("never ticks"));
        let big = "x".repeat(MOST_CRON_PAYLOAD + 1);
        let e = Cron::parse(json!({"schedule": "* * * * *", "payload": big}).as_object().unwrap()).unwrap_err();
        assert!(e.contains("at most"));
    }
}
