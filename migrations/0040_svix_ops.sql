-- hookgate:no-transaction
-- Svix's remaining operations (issue 44, item 5). Only added: a process of the
-- previous release neither reads nor writes these columns, and keeps running.
-- Outside a transaction, each statement its own (all of them may run again
-- after a crash), so that the check below is validated apart from the brief
-- ACCESS EXCLUSIVE lock that adds it. Lock waits are bounded: a table held by
-- a long transaction fails the migration (run `hookgate migrate` again) rather
-- than queueing every request behind it.
SET lock_timeout = '10s';

-- `PATCH …/app/{app}/alert-email`: the addresses an application's alerts go to,
-- comma-separated as Svix takes them. Stored only: Hookgate sends no e-mail (it
-- has no SMTP setting); operational webhooks carry the same events.
ALTER TABLE applications ADD COLUMN IF NOT EXISTS alert_email text;

-- Polling endpoint consumers of Svix's poller v2 (`…/polling-endpoint/{sink}/consumer/{c}`):
-- the position committed is (pos_xid, pos_seq) as for v1 consumers; a poll leases
-- what it hands out, up to (lease_xid, lease_seq), until `lease_until` (by the
-- database's clock): polls within the lease hand out the same messages again,
-- and once it passes uncommitted, the next poll hands them out and leases them anew.
ALTER TABLE sink_consumers ADD COLUMN IF NOT EXISTS lease_xid xid8;
ALTER TABLE sink_consumers ADD COLUMN IF NOT EXISTS lease_seq bigint;
ALTER TABLE sink_consumers ADD COLUMN IF NOT EXISTS lease_until timestamptz;

-- `POST /api/v1/event-type/export/openapi`: a task of the whole tenant (kind 7,
-- sdk.generate), answered at once and recorded finished, its document in `data`.
-- The old check goes as the new one comes (one statement), added NOT VALID (no
-- scan under the lock), then validated in a statement of its own, beside writes.
ALTER TABLE background_tasks
    DROP CONSTRAINT IF EXISTS background_tasks_kind_known,
    ADD CONSTRAINT background_tasks_kind_known CHECK (kind IN (0, 1, 2, 3, 4, 5, 6, 7)) NOT VALID;
ALTER TABLE background_tasks VALIDATE CONSTRAINT background_tasks_kind_known;
RESET lock_timeout;
