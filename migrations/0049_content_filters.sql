-- Content filters: an endpoint (or a destination) takes a message only if its
-- payload passes the endpoint's filter, beside its event types and channels.
-- `filter` is the text as the tenant wrote it (shown back); `filter_path` the
-- SQL/JSON path predicate it compiles to (`shared/src/filter.rs`), which the
-- fan-out evaluates. Both NULL: no filter. The previous release, while it runs
-- beside this one, does not read them: its fan-out takes every subscribed message.
ALTER TABLE endpoints ADD COLUMN IF NOT EXISTS filter text;
ALTER TABLE endpoints ADD COLUMN IF NOT EXISTS filter_path jsonpath;

-- Whether a payload passes a filter's predicate: a payload that is not JSON, or
-- a predicate that is neither true nor false for it (a string compared with a
-- number), does not. Never fails: one message cannot fail the statement that
-- publishes a batch. Strict: an endpoint without a filter never calls it.
CREATE FUNCTION hookgate_filter_passes(payload bytea, predicate jsonpath) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
BEGIN
    RETURN COALESCE(jsonb_path_match(convert_from(payload, 'UTF8')::jsonb, predicate, '{}', true), false);
EXCEPTION WHEN OTHERS THEN
    RETURN false;
END
$$;
