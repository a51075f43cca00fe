-- 016: analytics.window_funnel, ClickHouse's windowFunnel as a PostgreSQL
-- aggregate, with Onramp's semantics (docs/funnels.md): the level is the
-- largest k such that distinct events e1..ek fill steps 1..k in time order
-- (t1 <= ... <= tk) with tk - t1 <= window (inclusive), over every start;
-- events of one time may fill consecutive steps in any order, and one event
-- never fills two steps. Each row is one event: its time, and whether it
-- matches each step (step i: the i-th boolean).
--
--   SELECT anonymous_id, analytics.window_funnel(interval '1 hour', "timestamp",
--            event = 'phone_entered', event = 'otp_verified', event = 'profile_created')
--   FROM analytics.events WHERE app = 'yoked' GROUP BY anonymous_id;
--
-- A second implementation of the engine's plain funnel (the tests compare the
-- two on random histories): the state keeps the matching events' times and
-- step masks; the final function sweeps them in time order, keeping per
-- level the latest start of a chain that reached it (a later start leaves
-- more of the window), and fills a group of events of one time by a
-- bipartite matching of steps to events.

-- The state: [window in microseconds, step count, time1, mask1, time2, mask2, ...].
CREATE FUNCTION analytics.window_funnel_add(state bigint[], win interval, ts timestamptz, VARIADIC steps boolean[])
RETURNS bigint[] LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    mask bigint := 0;
    n integer := coalesce(array_length(steps, 1), 0);
BEGIN
    IF n > 63 THEN
        RAISE EXCEPTION 'window_funnel: at most 63 steps (got %)', n USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF win IS NULL OR win < interval '0' THEN
        RAISE EXCEPTION 'window_funnel: the window must be an interval of 0 or more (got %)', win USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF state IS NULL THEN
        state := ARRAY[(extract(epoch FROM win) * 1000000)::bigint, n];
    END IF;
    IF ts IS NULL THEN
        RETURN state;
    END IF;
    FOR i IN 1 .. n LOOP
        IF steps[i] THEN
            mask := mask | (1::bigint << (i - 1));
        END IF;
    END LOOP;
    IF mask = 0 THEN
        RETURN state;  -- fills no step: it cannot change the level
    END IF;
    RETURN state || ARRAY[(extract(epoch FROM ts) * 1000000)::bigint, mask];
END $$;

-- How many consecutive steps, from step `first` (0-based) on, distinct events
-- of one time can fill (masks: bit s set when the event matches step s).
-- Steps are added one at a time, each by an augmenting path (Kuhn), so the
-- steps already filled stay filled.
CREATE FUNCTION analytics.window_funnel_fill(masks bigint[], first integer, step_count integer)
RETURNS integer LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    g integer := coalesce(array_length(masks, 1), 0);
    owner integer[] := array_fill(-1, ARRAY[g]);   -- the step each event fills, -1: none
    visited boolean[];
    stack_step integer[];
    stack_event integer[];
    depth integer;
    e integer;
    st integer;
    found boolean;
    filled integer := 0;
BEGIN
    FOR s IN first .. step_count - 1 LOOP
        visited := array_fill(false, ARRAY[g]);
        found := false;
        depth := 1;
        stack_step := ARRAY[s];
        stack_event := ARRAY[0];
        WHILE depth > 0 LOOP
            st := stack_step[depth];
            e := stack_event[depth] + 1;
            WHILE e <= g AND (visited[e] OR (masks[e] >> st) & 1 = 0) LOOP
                e := e + 1;
            END LOOP;
            IF e > g THEN
                depth := depth - 1;  -- no event left for this step: back one level
                CONTINUE;
            END IF;
            stack_event[depth] := e;
            visited[e] := true;
            IF owner[e] = -1 THEN
                FOR d IN 1 .. depth LOOP
                    owner[stack_event[d]] := stack_step[d];
                END LOOP;
                found := true;
                EXIT;
            END IF;
            depth := depth + 1;       -- the step holding e looks for another event
            stack_step[depth] := owner[e];
            stack_event[depth] := 0;
        END LOOP;
        EXIT WHEN NOT found;
        filled := filled + 1;
    END LOOP;
    RETURN filled;
END $$;

CREATE FUNCTION analytics.window_funnel_level(state bigint[])
RETURNS integer LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    win bigint;
    n integer;
    k integer;
    times bigint[];
    masks bigint[];
    best bigint[];      -- best[l]: the latest start of a chain that filled steps 1..l
    next_best bigint[];
    i integer := 1;
    j integer;
    t bigint;
    s bigint;
    m integer;
BEGIN
    IF state IS NULL THEN
        RETURN 0;
    END IF;
    win := state[1];
    n := state[2]::integer;
    k := (array_length(state, 1) - 2) / 2;
    IF k = 0 OR n = 0 THEN
        RETURN 0;
    END IF;
    SELECT array_agg(state[1 + 2 * x] ORDER BY state[1 + 2 * x], x), array_agg(state[2 + 2 * x] ORDER BY state[1 + 2 * x], x)
    INTO times, masks FROM generate_series(1, k) AS x;
    best := array_fill(NULL::bigint, ARRAY[n]);
    WHILE i <= k LOOP
        t := times[i];
        j := i;
        WHILE j < k AND times[j + 1] = t LOOP
            j := j + 1;
        END LOOP;
        next_best := best;
        FOR l IN 0 .. n - 1 LOOP
            IF l = 0 THEN
                s := t;
            ELSIF best[l] IS NULL OR t - best[l] > win THEN
                CONTINUE;
            ELSE
                s := best[l];
            END IF;
            IF i = j THEN  -- one event: it fills the next step or nothing
                m := CASE WHEN (masks[i] >> l) & 1 = 1 THEN 1 ELSE 0 END;
            ELSE
                m := analytics.window_funnel_fill(masks[i:j], l, n);
            END IF;
            FOR q IN 1 .. m LOOP
                IF next_best[l + q] IS NULL OR s > next_best[l + q] THEN
                    next_best[l + q] := s;
                END IF;
            END LOOP;
        END LOOP;
        best := next_best;
        i := j + 1;
    END LOOP;
    FOR l IN REVERSE n .. 1 LOOP
        IF best[l] IS NOT NULL THEN
            RETURN l;
        END IF;
    END LOOP;
    RETURN 0;
END $$;

CREATE AGGREGATE analytics.window_funnel(interval, timestamptz, VARIADIC boolean[]) (
    SFUNC = analytics.window_funnel_add,
    STYPE = bigint[],
    FINALFUNC = analytics.window_funnel_level
);

GRANT EXECUTE ON FUNCTION analytics.window_funnel_add(bigint[], interval, timestamptz, boolean[]),
    analytics.window_funnel_fill(bigint[], integer, integer), analytics.window_funnel_level(bigint[])
    TO onramp_analyst, onramp_operator;
GRANT EXECUTE ON FUNCTION analytics.window_funnel(interval, timestamptz, boolean[]) TO onramp_analyst, onramp_operator;
