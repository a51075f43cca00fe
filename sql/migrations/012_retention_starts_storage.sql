-- The start times of a changed cohort day are written whole by every nightly
-- run that changes the day. Compressing them saved nothing (sorted
-- microsecond timestamps: 2.4 MB either way for the last eleven days of a
-- 10 M event history) and was most of the write's cost: those rows, in
-- COPY's binary form, took 143-146 ms compressed and 20-24 ms not.
-- Applies to rows written from now on.
ALTER TABLE funnel_retention_starts ALTER COLUMN start_us SET STORAGE EXTERNAL;
