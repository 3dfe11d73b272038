-- Fencing: a claim writes a fresh token with its lease, and every later write of
-- that claimant names the token, so a stale owner (its lease ran out, another
-- took over) changes nothing. NULL on rows that nobody has claimed.
ALTER TABLE deliveries ADD COLUMN lease_token bigint;
ALTER TABLE inbound_events ADD COLUMN lease_token bigint;
