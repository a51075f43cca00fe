-- 007: one index fewer on funnel_persons. The nightly run finds a person's
-- rows by (app, person_id); a primary key that starts there serves those
-- lookups and still keeps one row per funnel and person (a funnel belongs to
-- one app), so the separate (app, person_id) index goes. A rebuild builds one
-- B-tree less (~2 s of 80 at 10 M events) and each outcome row written by the
-- nightly run updates two B-trees instead of three.
ALTER TABLE funnel_persons DROP CONSTRAINT funnel_persons_pkey;
ALTER TABLE funnel_persons ADD CONSTRAINT funnel_persons_pkey PRIMARY KEY (app, person_id, funnel);
DROP INDEX funnel_persons_person;
