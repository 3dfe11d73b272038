-- The W3C `traceparent` of the span that created an inbound event or a message,
-- when OpenTelemetry tracing is on (NULL otherwise): the worker that delivers the
-- message, in any process and at any later time, continues that trace, so one
-- event can be followed from `POST /in` or `POST /api/v1/app/{app}/msg` to each
-- delivery attempt. Nullable without a default: adding them rewrites nothing.
ALTER TABLE inbound_events ADD COLUMN traceparent text;
ALTER TABLE messages ADD COLUMN traceparent text;
