-- hookgate:contract
-- `inbound_keys_received`, which 0044 replaced, dropped once no process of the
-- previous release is left; its lock waited for at most a second (see 0046).
SET LOCAL lock_timeout = '1s';
DROP INDEX IF EXISTS inbound_keys_received;
