-- Give up rather than queue every request behind a long-running lock holder
-- (a pg_dump, say): a failed migration is retried, a blocked table is an outage.
SET LOCAL lock_timeout = '10s';

-- Retention for everything, per tenant with the operator's defaults
-- (HOOKGATE_RETENTION_INBOUND_DAYS, HOOKGATE_RETENTION_MESSAGE_DAYS); NULL follows
-- the default. See docs/retention.md for what each horizon removes.
ALTER TABLE tenants
    ADD COLUMN inbound_days integer CHECK (inbound_days BETWEEN 1 AND 90),
    ADD COLUMN message_days integer CHECK (message_days BETWEEN 1 AND 3650);

-- A source's own retention (its dedupe window) overrides its tenant's; NULL
-- follows the tenant. Existing sources keep the days they have (a window is
-- never shortened by an upgrade); `retention: null` makes one follow its tenant.
ALTER TABLE sources ALTER COLUMN retention_days DROP NOT NULL, ALTER COLUMN retention_days DROP DEFAULT;

-- A payload can be gone (expired under `payloadRetentionPeriod`, or expunged)
-- while its message, deliveries and attempts stay.
ALTER TABLE messages ALTER COLUMN payload DROP NOT NULL, ADD COLUMN payload_expires_at timestamptz;
ALTER TABLE inbound_events ALTER COLUMN payload DROP NOT NULL;
