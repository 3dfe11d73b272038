//! What a process serves: the role `hookgate serve --role` names.

/// What a process serves. Every role serves health and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Role {
    /// Everything in one process.
    All,
    /// The admin API and the tenant API.
    Api,
    /// The provider-facing `/in/{source_id}`.
    Ingress,
    /// Delivery workers and background maintenance.
    Worker,
}

impl Role {
    pub fn serves_api(self) -> bool {
        matches!(self, Role::All | Role::Api)
    }

    pub fn serves_ingress(self) -> bool {
        matches!(self, Role::All | Role::Ingress)
    }

    pub(crate) fn runs_background(self) -> bool {
        matches!(self, Role::All | Role::Worker)
    }
}
