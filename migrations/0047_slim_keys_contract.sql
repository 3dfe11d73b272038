-- hookgate:contract
-- `inbound_keys_received`, which 0044 replaced, dropped once no process of the
-- previous release is left; its lock is waited for at most a second, the
-- statement at most two (see 0046).
SET LOCAL lock_timeout = '1s';
SET LOCAL statement_timeout = '2s';
DROP INDEX IF EXISTS inbound_keys_received;
