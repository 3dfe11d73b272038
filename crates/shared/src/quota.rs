//! Tenant quotas: what each one limits, the operator's defaults and a tenant's
//! overrides, and the answer when one is exceeded.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One value per limit; `None` follows the operator's default, `Some(0)` is no
/// limit. The operator's defaults (`Config::quotas`) have every value set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Quotas {
    pub api_requests_per_second: Option<i64>,
    pub messages_per_second: Option<i64>,
    pub messages_per_day: Option<i64>,
    pub inbound_per_second: Option<i64>,
    pub endpoints_per_app: Option<i64>,
    pub apps_per_tenant: Option<i64>,
}

/// The largest value a quota takes.
pub const MAX_VALUE: i64 = 1_000_000_000;

/// A limit, by the name the API gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Limit {
    ApiRequestsPerSecond,
    MessagesPerSecond,
    MessagesPerDay,
    InboundPerSecond,
    EndpointsPerApp,
    AppsPerTenant,
}

impl Limit {
    pub const ALL: [Limit; 6] = [
        Limit::ApiRequestsPerSecond,
        Limit::MessagesPerSecond,
        Limit::MessagesPerDay,
        Limit::InboundPerSecond,
        Limit::EndpointsPerApp,
        Limit::AppsPerTenant,
    ];

    /// The field name in `quotas` and in a 429's body.
    pub fn name(self) -> &'static str {
        match self {
            Limit::ApiRequestsPerSecond => "apiRequestsPerSecond",
            Limit::MessagesPerSecond => "messagesPerSecond",
            Limit::MessagesPerDay => "messagesPerDay",
            Limit::InboundPerSecond => "inboundPerSecond",
            Limit::EndpointsPerApp => "endpointsPerApp",
            Limit::AppsPerTenant => "appsPerTenant",
        }
    }

    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Limit::ApiRequestsPerSecond => "api_requests_per_second",
            Limit::MessagesPerSecond => "messages_per_second",
            Limit::MessagesPerDay => "messages_per_day",
            Limit::InboundPerSecond => "inbound_per_second",
            Limit::EndpointsPerApp => "endpoints_per_app",
            Limit::AppsPerTenant => "apps_per_tenant",
        }
    }

    fn unit(self) -> &'static str {
        match self {
            Limit::ApiRequestsPerSecond => "API requests per second",
            Limit::MessagesPerSecond => "messages per second",
            Limit::MessagesPerDay => "messages per day (UTC)",
            Limit::InboundPerSecond => "inbound events per second",
            Limit::EndpointsPerApp => "endpoints per application",
            Limit::AppsPerTenant => "applications per tenant",
        }
    }
}

impl Quotas {
    fn slot(&self, l: Limit) -> Option<i64> {
        match l {
            Limit::ApiRequestsPerSecond => self.api_requests_per_second,
            Limit::MessagesPerSecond => self.messages_per_second,
            Limit::MessagesPerDay => self.messages_per_day,
            Limit::InboundPerSecond => self.inbound_per_second,
            Limit::EndpointsPerApp => self.endpoints_per_app,
            Limit::AppsPerTenant => self.apps_per_tenant,
        }
    }

    /// These overrides over `defaults`: every value set.
    pub fn over(&self, defaults: &Quotas) -> Quotas {
        let pick = |l: Limit| self.slot(l).or(defaults.slot(l)).or(Some(0));
        Quotas {
            api_requests_per_second: pick(Limit::ApiRequestsPerSecond),
            messages_per_second: pick(Limit::MessagesPerSecond),
            messages_per_day: pick(Limit::MessagesPerDay),
            inbound_per_second: pick(Limit::InboundPerSecond),
            endpoints_per_app: pick(Limit::EndpointsPerApp),
            apps_per_tenant: pick(Limit::AppsPerTenant),
        }
    }

    /// The limit in effect, `None` for no limit (unset or 0).
    pub fn limit(&self, l: Limit) -> Option<u64> {
        self.slot(l).filter(|v| *v > 0).map(|v| v as u64)
    }

    /// Every value set must be 0 (no limit) to [`MAX_VALUE`]; the error names the first that is not.
    pub fn check(&self) -> Result<(), String> {
        for l in Limit::ALL {
            if let Some(v) = self.slot(l) {
                if !(0..=MAX_VALUE).contains(&v) {
                    return Err(format!(
                        "`quotas.{}` must be 0 (no limit) to {MAX_VALUE}, or null for the default",
                        l.name()
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Why an application was not made: the tenant has `n`, its `appsPerTenant` is `cap`.
pub fn apps_full(n: i64, cap: u64) -> String {
    format!("the tenant has {n} applications, the most its quota `appsPerTenant` allows ({cap})")
}

/// A request refused by a quota.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exceeded {
    pub limit: Limit,
    pub value: u64,
    /// When trying again can succeed.
    pub retry_after: Duration,
}

impl Exceeded {
    /// Whole seconds for `Retry-After`, at least 1.
    pub fn retry_after_secs(&self) -> u64 {
        self.retry_after.as_secs_f64().ceil().max(1.0) as u64
    }

    /// The wait until the next UTC day, for a daily cap.
    pub fn until_tomorrow(limit: Limit, value: u64) -> Exceeded {
        let now = chrono::Utc::now();
        let tomorrow = (now.date_naive() + chrono::Days::new(1)).and_hms_opt(0, 0, 0).expect("midnight exists");
        let wait = (tomorrow.and_utc() - now).to_std().unwrap_or(Duration::from_secs(1));
        Exceeded { limit, value, retry_after: wait }
    }
}

impl std::fmt::Display for Exceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "quota exceeded: `{}` allows {} {}; retry after {} s",
            self.limit.name(),
            self.value,
            self.limit.unit(),
            self.retry_after_secs()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_win_over_defaults_and_zero_means_no_limit() {
        let defaults = Quotas { api_requests_per_second: Some(10), endpoints_per_app: Some(100), ..Quotas::default() };
        let own = Quotas { api_requests_per_second: Some(0), messages_per_day: Some(5), ..Quotas::default() };
        let q = own.over(&defaults);
        assert_eq!(q.limit(Limit::ApiRequestsPerSecond), None);
        assert_eq!(q.limit(Limit::MessagesPerDay), Some(5));
        assert_eq!(q.limit(Limit::EndpointsPerApp), Some(100));
        assert_eq!(q.limit(Limit::AppsPerTenant), None);
    }

    #[test]
    fn a_negative_or_huge_value_is_refused_by_name() {
        let q = Quotas { inbound_per_second: Some(-1), ..Quotas::default() };
        assert!(q.check().unwrap_err().contains("quotas.inboundPerSecond"));
        let q = Quotas { apps_per_tenant: Some(MAX_VALUE + 1), ..Quotas::default() };
        assert!(q.check().unwrap_err().contains("quotas.appsPerTenant"));
    }

    #[test]
    fn the_daily_cap_waits_until_the_next_utc_day() {
        let e = Exceeded::until_tomorrow(Limit::MessagesPerDay, 3);
        assert!(e.retry_after_secs() >= 1 && e.retry_after_secs() <= 86_400);
        assert!(e.to_string().contains("messagesPerDay"));
    }
}
