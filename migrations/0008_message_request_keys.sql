-- The Idempotency-Key of the API request that created a message, unique per
-- application: a request retried after its outcome was lost (a crash, a timeout
-- after the commit) finds its message instead of creating a second one.
ALTER TABLE messages ADD COLUMN request_key text;
CREATE UNIQUE INDEX messages_request_key ON messages (tenant_id, app_id, request_key) WHERE request_key IS NOT NULL;
