-- Content filters: an endpoint (or a destination) takes a message only if its
-- payload passes the endpoint's filter, beside its event types and channels.
-- `filter` is the text as the tenant wrote it (shown back); `filter_path` the
-- SQL/JSON path predicate it compiles to (`shared/src/filter.rs`), which the
-- fan-out evaluates. Both NULL: no filter. The previous release, while it runs
-- beside this one, does not read them: its fan-out takes every subscribed message.
-- A long transaction on endpoints makes this wait at most 10 s (and the
-- migration fail, to be run again) rather than hold every fan-out behind it.
SET LOCAL lock_timeout = '10s';
ALTER TABLE endpoints ADD COLUMN IF NOT EXISTS filter text;
ALTER TABLE endpoints ADD COLUMN IF NOT EXISTS filter_path jsonpath;

-- Whether a payload passes a filter's predicate: a payload that is not JSON, or
-- a predicate that is neither true nor false for it (a string compared with a
-- number), does not. Never fails: one message cannot fail the statement that
-- publishes a batch. Strict: an endpoint without a filter never calls it. A
-- payload over 64 KiB passes no filter: what one message costs each filtered
-- endpoint stays bounded (its arrays' items times the filter's comparisons).
CREATE FUNCTION hookgate_filter_passes(payload bytea, predicate jsonpath) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE STRICT AS $$
BEGIN
    IF octet_length(payload) > 65536 THEN
        RETURN false;
    END IF;
    RETURN COALESCE(jsonb_path_match(convert_from(payload, 'UTF8')::jsonb, predicate, '{}', true), false);
EXCEPTION WHEN OTHERS THEN
    RETURN false;
END
$$;
