-- hookgate:contract
-- The endpoint kinds the schema admits are rows of `endpoint_kinds`, not a
-- range written into a CHECK, so a release with a new kind needs no migration
-- of its own. A kind is admitted as a contract runs: on a new installation at
-- once; on one in use by the workers, once no process that does not know it
-- (each announces the kinds it knows) is connected, since such a process would
-- take a row of it for an HTTP endpoint (`store/endpoint_kinds.rs`). Rows are
-- only added, never removed. A contract itself because it adds constraints
-- (the previous release writes nothing they refuse); until it has run,
-- `endpoints.kind` keeps the CHECK of 0032.
CREATE TABLE IF NOT EXISTS endpoint_kinds (
    code smallint PRIMARY KEY,
    -- Svix's destination `type`, or `http`: for a reader of the schema.
    name text NOT NULL
);
INSERT INTO endpoint_kinds (code, name) VALUES
    (0, 'http'), (1, 'rabbitMq'), (2, 'postgres'), (3, 'sqs'), (4, 'sns'), (5, 'eventBridge'), (6, 'amazonS3'),
    (7, 'fifoEndpoint'), (8, 'pollingEndpoint')
ON CONFLICT (code) DO NOTHING;
-- On Citus, with `endpoints` already distributed, the table it references must
-- be a reference table (copied to every node) before the foreign key is made.
DO $$
BEGIN
    IF to_regclass('pg_dist_partition') IS NOT NULL THEN
        IF EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'endpoints'::regclass)
            AND NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'endpoint_kinds'::regclass) THEN
            EXECUTE 'SELECT create_reference_table(''endpoint_kinds'')';
        END IF;
    END IF;
END $$;
ALTER TABLE endpoints DROP CONSTRAINT IF EXISTS endpoints_kind_is_a_kind;
ALTER TABLE endpoints ADD CONSTRAINT endpoints_kind_is_a_kind
    FOREIGN KEY (kind) REFERENCES endpoint_kinds (code) NOT VALID;
ALTER TABLE endpoints VALIDATE CONSTRAINT endpoints_kind_is_a_kind;
-- What the old CHECK said besides the range: a destination, and only one, has
-- its configuration.
ALTER TABLE endpoints DROP CONSTRAINT IF EXISTS endpoints_destination_with_its_kind;
ALTER TABLE endpoints ADD CONSTRAINT endpoints_destination_with_its_kind
    CHECK ((kind = 0) = (destination IS NULL)) NOT VALID;
ALTER TABLE endpoints VALIDATE CONSTRAINT endpoints_destination_with_its_kind;
ALTER TABLE endpoints DROP CONSTRAINT IF EXISTS endpoints_kind_known;
