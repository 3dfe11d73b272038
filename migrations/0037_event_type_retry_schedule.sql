-- An event type's own retry schedule (Svix's `…/event-type/{name}/retry-schedule`):
-- the delays between attempts, in milliseconds, for messages of that type; NULL
-- keeps the operator's HOOKGATE_RETRY_SCHEDULE. Only added: a process of the
-- previous release neither reads nor writes it, and keeps running.
ALTER TABLE event_types ADD COLUMN IF NOT EXISTS retry_schedule_ms bigint[];
