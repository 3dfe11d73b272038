-- The usage tallies a process writes (refusals, duplicates Redis answered) carry
-- an id per batch, recorded here in the batch's statement: a batch whose answer
-- was lost (a stall past the process's bound, after which the statement still
-- committed) and is written again adds nothing the second time. Kept a day.
CREATE TABLE IF NOT EXISTS usage_flushes (
    id  text PRIMARY KEY,
    at  timestamptz NOT NULL DEFAULT now()
);
