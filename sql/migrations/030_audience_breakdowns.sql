-- 030: funnels broken down by an audience (docs/audiences.md, "Breaking a
-- funnel down"). A person's value is their membership at the run's clock;
-- without new events it changes only where their span in the audience
-- begins or ends (audience_spans), so the next run recomputes those whose
-- span did since the last run's clock, kept here.
ALTER TABLE projection_checkpoint ADD COLUMN computed_at timestamptz;
