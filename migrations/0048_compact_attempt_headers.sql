-- hookgate:contract
-- An attempt's recorded request headers are stored compactly from here on:
-- the headers every delivery carries (the message id three times, the
-- timestamp and signature twice each, the content type) as a bit each with
-- the timestamp and signature kept once, the rest as sent (see
-- `store/attempt_headers.rs`). The previous release reads only the full form,
-- so the new one is written once this contract has run, that is once no
-- process of that release is connected. Nothing in the schema changes: this
-- migration is the mark the writers look for.
SELECT 1;
