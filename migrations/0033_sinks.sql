-- Sinks: destinations that are not pushed one message at a time by the delivery
-- worker, but read in order from a log: `fifoEndpoint` (kind 7: an HTTP receiver
-- given batches in strict order) and `pollingEndpoint` (kind 8: the customer
-- pulls). The fan-out writes their messages here instead of `deliveries`.
--
-- Order is (xid, seq): the inserting transaction's id, then the row's number. A
-- reader only reads rows whose transaction is older than every transaction still
-- running (`xid < pg_snapshot_xmin(pg_current_snapshot())`), so a row that commits
-- late can never land behind a position already read: nothing is skipped.
CREATE TABLE IF NOT EXISTS sink_log (
    tenant_id    text NOT NULL,
    app_id       text NOT NULL,
    endpoint_id  text NOT NULL,
    -- A keyed FIFO endpoint's order key (its messages are in order per key); '' otherwise.
    key          text NOT NULL DEFAULT '',
    xid          xid8 NOT NULL DEFAULT pg_current_xact_id(),
    seq          bigint GENERATED ALWAYS AS IDENTITY,
    msg_id       text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT sink_log_pkey PRIMARY KEY (tenant_id, app_id, endpoint_id, key, xid, seq),
    CONSTRAINT sink_log_endpoint_fkey FOREIGN KEY (tenant_id, app_id, endpoint_id)
        REFERENCES endpoints (tenant_id, app_id, id) ON DELETE CASCADE
);
-- Pruning past the message retention walks this.
CREATE INDEX IF NOT EXISTS sink_log_created ON sink_log (created_at);

-- A polling endpoint's named consumers and where each has read to.
CREATE TABLE IF NOT EXISTS sink_consumers (
    tenant_id    text NOT NULL,
    app_id       text NOT NULL,
    endpoint_id  text NOT NULL,
    consumer     text NOT NULL,
    pos_xid      xid8 NOT NULL,
    pos_seq      bigint NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT sink_consumers_pkey PRIMARY KEY (tenant_id, app_id, endpoint_id, consumer),
    CONSTRAINT sink_consumers_endpoint_fkey FOREIGN KEY (tenant_id, app_id, endpoint_id)
        REFERENCES endpoints (tenant_id, app_id, id) ON DELETE CASCADE
);

-- A keyed FIFO endpoint's key: a path into the payload (`customer.id` is
-- {customer,id}); NULL for every other endpoint.
ALTER TABLE endpoints ADD COLUMN IF NOT EXISTS fifo_key text[];

-- The key of one message: the text at `path` in its JSON payload, or '' when the
-- payload is not JSON or has nothing there (such messages share one order). It
-- never fails: one message's payload cannot fail the statement that publishes a batch.
CREATE OR REPLACE FUNCTION hookgate_fifo_key(payload bytea, path text[]) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    RETURN left(COALESCE(convert_from(payload, 'UTF8')::jsonb #>> path, ''), 256);
EXCEPTION WHEN OTHERS THEN
    RETURN '';
END
$$;

-- A FIFO endpoint's progress (one row per key; '' when it is not keyed): delivered up to (pos_xid, pos_seq); the batch in
-- flight ends at (batch_xid, batch_seq) (kept, so a retry resends the same batch);
-- its failed tries, when it is due, and the runner holding it (fenced by token).
CREATE TABLE IF NOT EXISTS fifo_state (
    tenant_id    text NOT NULL,
    app_id       text NOT NULL,
    endpoint_id  text NOT NULL,
    key          text NOT NULL DEFAULT '',
    pos_xid      xid8 NOT NULL DEFAULT '0',
    pos_seq      bigint NOT NULL DEFAULT 0,
    batch_xid    xid8,
    batch_seq    bigint,
    tries        integer NOT NULL DEFAULT 0,
    next_at      timestamptz NOT NULL DEFAULT now(),
    lease_until  timestamptz,
    lease_token  bigint,
    CONSTRAINT fifo_state_pkey PRIMARY KEY (tenant_id, app_id, endpoint_id, key),
    CONSTRAINT fifo_state_endpoint_fkey FOREIGN KEY (tenant_id, app_id, endpoint_id)
        REFERENCES endpoints (tenant_id, app_id, id) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS fifo_state_next ON fifo_state (next_at);
