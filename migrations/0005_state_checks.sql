-- The states' stored codes, checked by the database, so that reading a row can
-- parse them into their enums (`crates/shared/src/status.rs`) without a case
-- for anything else.
ALTER TABLE deliveries ADD CONSTRAINT deliveries_status_known CHECK (status IN (0, 1, 2, 3));
ALTER TABLE deliveries ADD CONSTRAINT deliveries_trigger_known CHECK (trigger IN (0, 1));
ALTER TABLE attempts ADD CONSTRAINT attempts_status_known CHECK (status IN (0, 1, 2, 3));
ALTER TABLE attempts ADD CONSTRAINT attempts_trigger_known CHECK (trigger_type IN (0, 1));
