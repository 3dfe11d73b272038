-- Svix's `v1.message.broadcast`: a task of the whole tenant (kind 6,
-- message.broadcast) that publishes one message to every application, a bounded
-- batch of applications per step, its cursor the last application id done. The
-- message to publish is kept in `filter`. Like a purge it names no endpoint ('').
ALTER TABLE background_tasks DROP CONSTRAINT IF EXISTS background_tasks_kind_known;
ALTER TABLE background_tasks ADD CONSTRAINT background_tasks_kind_known CHECK (kind IN (0, 1, 2, 3, 4, 5, 6));
