-- role: onramp_operator
-- Operators only (the analyst role cannot read the quarantine): which clients
-- send messages that fail validation, and why? One sample payload per reason.
SELECT app,
       reason_code,
       count(*)              AS messages,
       min(received_at)      AS first_seen,
       max(received_at)      AS last_seen,
       (array_agg(left(raw, 200) ORDER BY id))[1] AS sample
FROM public.quarantine
GROUP BY app, reason_code
ORDER BY messages DESC, app, reason_code;
