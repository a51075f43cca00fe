-- 014: the windows a nightly run closes in place. open_until is set while a
-- window is open: for a person in progress, and now for a completer whose
-- chain's window has not closed yet (the drop-off drivers and retention
-- count completers once it has). A run finds the rows whose window closed
-- by `open_until <= now`; the index on in-progress rows cannot serve that,
-- and without this one each run scanned every stored outcome three times.
CREATE INDEX funnel_persons_open_until ON funnel_persons (open_until) WHERE open_until IS NOT NULL;
