-- One line per table the nightly job writes: its name and an md5 of its rows
-- in a fixed order, leaving out the columns that hold a run's clock or its
-- transaction ids (checked_at, computed_at, updated_at, built_at,
-- horizon_txid); not the owner's access grants. Two databases copied from one template and run by two
-- builds of `onramp report` (or `rebuild`) at one clock (faketime) print the
-- same lines when the builds write the same tables:
--
--   psql -qAt "$DB_A" -f scripts/lib/projection_md5.sql > a.txt
--   psql -qAt "$DB_B" -f scripts/lib/projection_md5.sql > b.txt && diff a.txt b.txt
--
-- audience_spans hold each unit's intervals from the clock of the run that
-- evaluated it (docs/audiences.md): they are compared as seen from the last
-- run's clock, what is over by then left out and what began earlier begun then.
-- The archive's records are compared by what was archived or restored, not
-- by where, when, or the manifest's hash (which covers its own time).
SELECT c.relname, (xpath('/row/m/text()', query_to_xml(format(
  'SELECT md5(string_agg(j, %L ORDER BY j)) AS m FROM (SELECT (to_jsonb(t) - ARRAY[''checked_at'',''computed_at'',''updated_at'',''horizon_txid'',''built_at''])::text AS j FROM %s t) s',
  E'\n', CASE c.relname
    WHEN 'audience_spans' THEN '(SELECT s.app, s.person_id, s.audience, greatest(s.enters_at, k.computed_at) AS enters_at, s.leaves_at
      FROM audience_spans s, projection_checkpoint k WHERE s.leaves_at IS NULL OR s.leaves_at > k.computed_at)'
    WHEN 'archived_months' THEN '(SELECT month, messages FROM archived_months)'
    WHEN 'archive_changes' THEN '(SELECT month, app, change, messages FROM archive_changes)'
    ELSE quote_ident(c.relname) END), false, true, '')))[1]::text
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND c.relname NOT LIKE 'events_%'
  AND c.relname NOT IN ('events', 'event_ids', 'quarantine', 'write_keys', 'onramp_schema_migrations', 'app_grants')
ORDER BY 1;
