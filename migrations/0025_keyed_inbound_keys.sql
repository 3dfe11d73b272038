-- hookgate:switch
-- Inbound dedupe keys are stored keyed from here on: an HMAC, under a key derived
-- per tenant from the master key, over the plain digest earlier releases stored,
-- so a reader of the stored keys (Redis, Postgres, the events API) cannot
-- confirm a guessed provider event id. Keys stored before stay as they are and
-- are pruned with their window; for the longest window (90 days) after this
-- switch, an admission also looks for its key's plain form, so an event admitted
-- before the switch is still a duplicate after it.
--
-- A switch: the previous release writes plain keys, and one of its processes
-- admitting a copy of an event while this release admits another would admit it
-- twice. `hookgate migrate` stops before it on a database in use until told
-- `--switch`, once every process of the previous release is stopped (seconds:
-- catalog work and one row). A new installation starts keyed, with nothing to
-- look for.
--
-- Each key row says which form it is in, and the column has no default: an
-- insert that does not name it (a process of the previous release left running,
-- or deployed again to roll back) fails instead of storing a plain key beside
-- keyed ones. The previous release therefore cannot admit inbound events on this
-- schema (its providers are answered 500 and retry); its other work is unchanged.
SET LOCAL lock_timeout = '10s';
ALTER TABLE inbound_keys ADD COLUMN keyed boolean NOT NULL DEFAULT false;
ALTER TABLE inbound_keys ALTER COLUMN keyed DROP DEFAULT;

CREATE TABLE inbound_key_form (
    one       boolean PRIMARY KEY DEFAULT true CHECK (one),
    -- Since when keys are stored keyed; NULL when none was ever stored plain.
    keyed_at  timestamptz
);
INSERT INTO inbound_key_form (keyed_at)
SELECT CASE WHEN EXISTS (SELECT 1 FROM inbound_keys) THEN now() END;
