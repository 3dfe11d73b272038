-- Svix's remaining operations (issue 44, item 5). Only added: a process of the
-- previous release neither reads nor writes these columns, and keeps running.
--
-- `PATCH …/app/{app}/alert-email`: the addresses an application's alerts go to,
-- comma-separated as Svix takes them. Stored only: Hookgate sends no e-mail (it
-- has no SMTP setting); operational webhooks carry the same events.
ALTER TABLE applications ADD COLUMN IF NOT EXISTS alert_email text;

-- Polling endpoint consumers of Svix's poller v2 (`…/polling-endpoint/{sink}/consumer/{c}`):
-- the position committed is (pos_xid, pos_seq) as for v1 consumers; a poll leases
-- what it hands out, up to (lease_xid, lease_seq), until `lease_until`: polls
-- within the lease go on after it, and once it passes uncommitted, the same
-- messages are handed out again.
ALTER TABLE sink_consumers ADD COLUMN IF NOT EXISTS lease_xid xid8;
ALTER TABLE sink_consumers ADD COLUMN IF NOT EXISTS lease_seq bigint;
ALTER TABLE sink_consumers ADD COLUMN IF NOT EXISTS lease_until timestamptz;

-- `POST /api/v1/event-type/export/openapi`: a task of the whole tenant (kind 7,
-- sdk.generate), answered at once and recorded finished, its document in `data`.
ALTER TABLE background_tasks DROP CONSTRAINT IF EXISTS background_tasks_kind_known;
ALTER TABLE background_tasks ADD CONSTRAINT background_tasks_kind_known CHECK (kind IN (0, 1, 2, 3, 4, 5, 6, 7));
