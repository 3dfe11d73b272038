-- Fencing for Idempotency-Key claims: the claim writes a fresh token, and only
-- its holder may store the response or release the key. A slow request whose key
-- was taken over cannot overwrite or release its successor's.
ALTER TABLE idempotency_keys ADD COLUMN claim_token bigint;
