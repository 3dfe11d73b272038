-- The states' stored codes, checked by the database, so that reading a row can
-- parse them into their enums (`crates/shared/src/status.rs`) without a case
-- for anything else. Added NOT VALID: only a brief lock here, no scan of the
-- (large) tables; 0006 validates the existing rows without blocking writes.
ALTER TABLE deliveries ADD CONSTRAINT deliveries_status_known CHECK (status IN (0, 1, 2, 3)) NOT VALID;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_trigger_known CHECK (trigger IN (0, 1)) NOT VALID;
ALTER TABLE attempts ADD CONSTRAINT attempts_status_known CHECK (status IN (0, 1, 2, 3)) NOT VALID;
ALTER TABLE attempts ADD CONSTRAINT attempts_trigger_known CHECK (trigger_type IN (0, 1)) NOT VALID;
