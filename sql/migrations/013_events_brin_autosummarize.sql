-- The nightly run finds the events written since its last run through the
-- BRIN index on (txid, seq, received_at). A range of pages the index has not
-- summarized yet matches every search, so each run read it whole, and a
-- range is summarized by VACUUM, which autovacuum runs on an insert-only
-- partition only once a fifth of its rows were added since the last: late in
-- a month, the days since then were read again every night, where the run
-- needs only its own. With autosummarize, a range is summarized as soon as
-- the next one starts filling (autovacuum does it within its naptime, a
-- minute by default): a run reads the day's pages and the range still
-- filling. On a 1 M event log, after one day appended in ten transactions,
-- the run's read of the new events took 1,858 pages with it and 3,778
-- without (the day before's still unsummarized).
--
-- A partitioned index takes no storage parameter after it is built, so it
-- is built again; partitions created later take the parameter over.
DROP INDEX events_brin;
CREATE INDEX events_brin ON events USING brin (txid, seq, received_at) WITH (autosummarize = on);
