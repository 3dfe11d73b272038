//! States as enums: a delivery's status (Svix's `MessageStatus` numbers, which
//! the API shows), what triggered an attempt, an inbound event's status, and
//! what kind of destination an endpoint row is.
//! Stored as numbers or words, checked by the database, parsed where a row is read.

use std::borrow::Cow;

use serde::{Serialize, Serializer};
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::RefOr;

/// A delivery's (and an attempt's) status, as Svix numbers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeliveryStatus {
    Success,
    /// Due now or at `next_attempt_at`.
    Pending,
    /// Gave up: the schedule ran out, the endpoint is gone, or a manual resend failed.
    Failed,
    /// Claimed by a worker whose lease has not run out.
    Sending,
    /// Its endpoint's transformation said not to send it (`cancel = true`).
    Canceled,
}

impl DeliveryStatus {
    pub const fn code(self) -> i16 {
        match self {
            DeliveryStatus::Success => 0,
            DeliveryStatus::Pending => 1,
            DeliveryStatus::Failed => 2,
            DeliveryStatus::Sending => 3,
            DeliveryStatus::Canceled => 4,
        }
    }

    /// A status the API was given; `None` for a number Svix does not define.
    pub fn from_code(code: i16) -> Option<Self> {
        Some(match code {
            0 => DeliveryStatus::Success,
            1 => DeliveryStatus::Pending,
            2 => DeliveryStatus::Failed,
            3 => DeliveryStatus::Sending,
            4 => DeliveryStatus::Canceled,
            _ => return None,
        })
    }

    /// A stored status; the table's CHECK admits only the five codes.
    pub fn from_db(code: i16) -> Self {
        Self::from_code(code).unwrap_or(DeliveryStatus::Failed)
    }

    /// Svix's `statusText`.
    pub fn text(self) -> &'static str {
        match self {
            DeliveryStatus::Success => "success",
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Failed => "fail",
            DeliveryStatus::Sending => "sending",
            DeliveryStatus::Canceled => "canceled",
        }
    }
}

impl Serialize for DeliveryStatus {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_i16(self.code())
    }
}

/// In the OpenAPI document: Svix's `MessageStatus`, the number it is written as.
impl utoipa::PartialSchema for DeliveryStatus {
    fn schema() -> RefOr<Schema> {
        number_enum("The status: 0 success, 1 pending, 2 fail, 3 sending, 4 canceled.", &[0, 1, 2, 3, 4])
    }
}

impl utoipa::ToSchema for DeliveryStatus {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("MessageStatus")
    }
}

/// What made an attempt: the retry schedule, or a resend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Trigger {
    Scheduled,
    /// A resend: tried once, outside the schedule.
    Manual,
}

impl Trigger {
    pub const fn code(self) -> i16 {
        match self {
            Trigger::Scheduled => 0,
            Trigger::Manual => 1,
        }
    }

    /// A stored trigger; the table's CHECK admits only the two codes.
    pub fn from_db(code: i16) -> Self {
        if code == 1 {
            Trigger::Manual
        } else {
            Trigger::Scheduled
        }
    }
}

impl Serialize for Trigger {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_i16(self.code())
    }
}

/// In the OpenAPI document: Svix's `MessageAttemptTriggerType`, the number it is written as.
impl utoipa::PartialSchema for Trigger {
    fn schema() -> RefOr<Schema> {
        number_enum("What made the attempt: 0 the schedule, 1 a manual resend.", &[0, 1])
    }
}

impl utoipa::ToSchema for Trigger {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("MessageAttemptTriggerType")
    }
}

/// An integer schema that takes only `values`.
fn number_enum(description: &str, values: &[i16]) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::Integer)
        .description(Some(description))
        .enum_values(Some(values.iter().copied()))
        .into()
}

/// An inbound event's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, utoipa::ToSchema)]
#[schema(rename_all = "lowercase")]
pub enum InboundStatus {
    /// Async mode: committed with its message.
    Accepted,
    /// Sync mode: being forwarded under a lease.
    Processing,
    /// Sync mode: forwarded and answered.
    Completed,
}

impl InboundStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            InboundStatus::Accepted => "accepted",
            InboundStatus::Processing => "processing",
            InboundStatus::Completed => "completed",
        }
    }

    /// A stored status; the table's CHECK admits only the three words.
    pub fn from_db(s: &str) -> Self {
        match s {
            "accepted" => InboundStatus::Accepted,
            "completed" => InboundStatus::Completed,
            _ => InboundStatus::Processing,
        }
    }
}

impl Serialize for InboundStatus {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// How an endpoint of a kind gets its messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// One HTTP request per delivery, signed.
    Request,
    /// One delivery at a time, handed to a broker, a database or a cloud service.
    HandOver,
    /// Read in order from the endpoint's log (`sink_log`), sent in batches.
    Batches,
    /// Read in order from the endpoint's log by the customer (`/poller`); never sent.
    Polled,
}

/// The kinds table: each kind of endpoint row, its stored code (`endpoints.kind`,
/// never reused), Svix's destination `type` for it, how it is delivered, and the
/// type (in the egress crate's `destinations/`, one file each) that owns its
/// configuration and behaviour. Adding a kind is a row here and its file: this
/// table makes [`EndpointKind`] here, and the destination modules and their
/// `Config` enum there (each a macro handed to this one); its code is admitted
/// into the schema's `endpoint_kinds` as a contract runs (`store::endpoint_kinds`).
///
/// `$callback` is a macro taking the rows: the HTTP kind first, then the
/// destinations as `Variant = code, "type", Delivery, module::Type;`.
#[macro_export]
macro_rules! endpoint_kind_table {
    ($callback:ident) => {
        $callback! {
            http: Http = 0, Request;
            destinations:
            RabbitMq = 1, "rabbitMq", HandOver, rabbitmq::RabbitMq;
            Postgres = 2, "postgres", HandOver, postgres::Postgres;
            Sqs = 3, "sqs", HandOver, sqs::Sqs;
            Sns = 4, "sns", HandOver, sns::Sns;
            EventBridge = 5, "eventBridge", HandOver, event_bridge::EventBridge;
            AmazonS3 = 6, "amazonS3", HandOver, s3::S3;
            FifoEndpoint = 7, "fifoEndpoint", Batches, fifo::Fifo;
            PollingEndpoint = 8, "pollingEndpoint", Polled, polling::Polling;
        }
    };
}

/// [`EndpointKind`] from the kinds table.
macro_rules! endpoint_kinds {
    (
        http: $http:ident = $http_code:literal, $http_delivery:ident;
        destinations: $($kind:ident = $code:literal, $name:literal, $delivery:ident, $module:ident :: $ty:ident;)*
    ) => {
        /// What an endpoint row delivers to: an HTTP receiver, or a destination of
        /// another kind.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum EndpointKind {
            $http = $http_code,
            $($kind = $code,)*
        }

        impl EndpointKind {
            pub const ALL: &'static [EndpointKind] = &[EndpointKind::$http, $(EndpointKind::$kind),*];

            /// Svix's destination `type`; `None` for a plain HTTP endpoint.
            pub fn type_name(self) -> Option<&'static str> {
                match self {
                    EndpointKind::$http => None,
                    $(EndpointKind::$kind => Some($name),)*
                }
            }

            pub fn delivery(self) -> Delivery {
                match self {
                    EndpointKind::$http => Delivery::$http_delivery,
                    $(EndpointKind::$kind => Delivery::$delivery,)*
                }
            }
        }
    };
}

crate::endpoint_kind_table!(endpoint_kinds);

impl EndpointKind {
    pub const fn code(self) -> i16 {
        self as i16
    }

    /// A stored kind: `endpoints.kind` references `endpoint_kinds`, and a process
    /// refuses to start on a database that admits a kind it does not know
    /// (`startup::check_schema`), so an unknown code is not met; were it, the
    /// fan-out makes it no delivery (it names the kinds it delivers to).
    pub fn from_db(code: i16) -> Self {
        Self::ALL.iter().copied().find(|k| k.code() == code).unwrap_or(EndpointKind::Http)
    }

    /// The highest code of a kind this release knows: codes are never reused, so
    /// a release knows every kind up to its own highest.
    pub fn known_up_to() -> i16 {
        Self::ALL.iter().map(|k| k.code()).max().unwrap_or(0)
    }

    /// The kind a destination `type` names, if Hookgate knows it.
    pub fn from_type_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|k| k.type_name() == Some(name))
    }

    pub fn is_destination(self) -> bool {
        self != EndpointKind::Http
    }

    /// Read in order from a log (`sink_log`) rather than sent one delivery at a
    /// time: FIFO and polling endpoints.
    pub fn is_sink(self) -> bool {
        matches!(self.delivery(), Delivery::Batches | Delivery::Polled)
    }

    /// The codes of the kinds `which` picks, as SQL's `(…)` list for `kind IN …`:
    /// the only way SQL names kinds (a tidy test holds it), so a new kind is
    /// never taken for another by a comparison of numbers.
    pub fn sql_set(which: impl Fn(EndpointKind) -> bool) -> String {
        let codes: Vec<String> = Self::ALL.iter().filter(|k| which(**k)).map(|k| k.code().to_string()).collect();
        format!("({})", codes.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_endpoint_kind_reads_back_from_its_code_and_its_type_name() {
        for &k in EndpointKind::ALL {
            assert_eq!(EndpointKind::from_db(k.code()), k);
            if let Some(name) = k.type_name() {
                assert_eq!(EndpointKind::from_type_name(name), Some(k));
            }
        }
        assert_eq!(EndpointKind::from_type_name("clickhouse"), None);
        assert_eq!(EndpointKind::sql_set(EndpointKind::is_sink), "(7, 8)");
        assert_eq!(EndpointKind::sql_set(|k| k == EndpointKind::Http), "(0)");
    }

    #[test]
    fn states_round_trip_through_their_stored_forms() {
        for s in [
            DeliveryStatus::Success,
            DeliveryStatus::Pending,
            DeliveryStatus::Failed,
            DeliveryStatus::Sending,
            DeliveryStatus::Canceled,
        ] {
            assert_eq!(DeliveryStatus::from_code(s.code()), Some(s));
        }
        assert_eq!(DeliveryStatus::from_code(5), None);
        for t in [Trigger::Scheduled, Trigger::Manual] {
            assert_eq!(Trigger::from_db(t.code()), t);
        }
        for s in [InboundStatus::Accepted, InboundStatus::Processing, InboundStatus::Completed] {
            assert_eq!(InboundStatus::from_db(s.as_str()), s);
        }
        assert_eq!(serde_json::to_string(&DeliveryStatus::Failed).unwrap(), "2");
    }
}
