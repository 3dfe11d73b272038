//! The one end-to-end test binary (one link step, one harness): each module is an
//! area of Hookgate, driven over HTTP against a real Postgres, Redis and sinks on
//! 127.0.0.1; `tidy` checks the repository's architectural rules.

mod admin;
mod archive;
mod at_rest;
mod chaos;
mod delivery;
mod delivery_faults;
mod destination_links;
mod egress_proxy;
mod engine;
mod fairness;
mod fanout;
mod fencing;
mod health;
mod hostile;
mod idempotency;
mod ingest_cron;
mod ingress;
mod ingress_race;
mod keyed_keys;
mod limits;
mod modes;
mod otel;
mod own_servers;
mod partitions;
mod paths;
mod pg_tls;
mod poison;
mod portal;
mod processes;
mod quotas;
mod redis_sentinel;
mod redis_tls;
mod retention;
mod schema;
mod sources;
mod stall;
mod svix_sdk;
mod tasks;
mod tenant_keys;
mod text;
mod tidy;
mod upgrade;
mod window;
