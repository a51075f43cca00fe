-- 006: when a person's open window closes. An outcome changes with the clock
-- alone in one way: in_progress turns false when the last window closes. With
-- this the nightly run closes those windows in place instead of reading the
-- person's events again; a row in progress without it (written before this
-- migration) is recomputed as before.
ALTER TABLE funnel_persons ADD COLUMN open_until timestamptz;  -- the latest step-1 event + window; NULL unless in progress
