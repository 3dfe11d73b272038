-- hookgate:contract
-- The wide indexes 0044 replaced, dropped once no process of the previous
-- release is left. A wait for the tables' lock is bounded: a contract that
-- times out is tried again at the workers' next look.
SET LOCAL lock_timeout = '5s';
DROP INDEX IF EXISTS deliveries_endpoint;
DROP INDEX IF EXISTS inbound_events_app;
DROP INDEX IF EXISTS inbound_keys_received;
