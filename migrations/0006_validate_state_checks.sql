-- Validates 0005's checks on the rows written before them. VALIDATE takes a
-- SHARE UPDATE EXCLUSIVE lock: reads and writes go on while it scans.
ALTER TABLE deliveries VALIDATE CONSTRAINT deliveries_status_known;
ALTER TABLE deliveries VALIDATE CONSTRAINT deliveries_trigger_known;
ALTER TABLE attempts VALIDATE CONSTRAINT attempts_status_known;
ALTER TABLE attempts VALIDATE CONSTRAINT attempts_trigger_known;
