-- 017: analytics.funnel_report(definition jsonb), the per-step report of any
-- funnel in one call, the funnel given as JSON in the configuration's own
-- terms (docs/funnels.md):
--
--   SELECT * FROM analytics.funnel_report('{"app": "yoked", "window": "1h",
--     "steps": [{"event": "phone_entered"}, {"event": "otp_verified"},
--               {"event": "profile_created", "where": {"context.os.name": "iOS"}}]}');
--
-- A second implementation of the engine's ordered funnel, beside
-- analytics.window_funnel (016), whose level it counts: steps by event or
-- screen name, `where` equalities on properties., context. and traits. paths,
-- `any_of` alternatives, the window, step names as the engine names them, and
-- in progress kept apart from dropped off at `as_of`. Persons are
-- analytics.events' person_id (identity as of the last nightly run); every
-- cohort day is counted. What it cannot express (strict or any order, a
-- step's own window, optional steps, exclusions, held properties) is refused
-- naming the field: `onramp funnel` answers those.

-- The masks' form of window_funnel's state function: one event, the steps it
-- matches as bits (step i: bit i - 1), for callers that computed them in SQL.
CREATE FUNCTION analytics.window_funnel_add_mask(state bigint[], win interval, ts timestamptz, mask bigint, step_count integer)
RETURNS bigint[] LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF state IS NULL THEN
        state := ARRAY[(extract(epoch FROM win) * 1000000)::bigint, step_count];
    END IF;
    IF ts IS NULL OR mask IS NULL OR mask = 0 THEN
        RETURN state;
    END IF;
    RETURN state || ARRAY[(extract(epoch FROM ts) * 1000000)::bigint, mask];
END $$;

CREATE AGGREGATE analytics.window_funnel_masks(interval, timestamptz, bigint, integer) (
    SFUNC = analytics.window_funnel_add_mask,
    STYPE = bigint[],
    FINALFUNC = analytics.window_funnel_level
);

-- Whether every `where` equality of a matcher holds for an event. `conditions`
-- is [[root, [path...], value], ...]; values compare as text, as the engine's do.
CREATE FUNCTION analytics.funnel_conditions_hold(conditions jsonb, properties jsonb, context jsonb, traits jsonb)
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT NOT EXISTS (
        SELECT 1 FROM jsonb_array_elements(conditions) AS c
        WHERE (CASE c ->> 0 WHEN 'properties' THEN properties WHEN 'context' THEN context ELSE traits END)
                  #>> ARRAY(SELECT jsonb_array_elements_text(c -> 1))
              IS DISTINCT FROM c ->> 2)
$$;

CREATE FUNCTION analytics.funnel_report(definition jsonb, as_of timestamptz DEFAULT now())
RETURNS TABLE (step_index integer, step_name text, persons bigint, conversion_from_previous double precision,
               conversion_from_start double precision, drop_off bigint, in_progress bigint)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    app_name text;
    win interval := interval '24 hours';
    window_text text;
    window_parts text[];
    step jsonb;
    alternative jsonb;
    alternatives jsonb;
    field text;
    key text;
    path text;
    n integer;
    matchers jsonb := '[]';      -- [{step, kind, name, conditions}]
    names text[] := '{}';        -- every matcher's event or screen name, for the scan
    explicit boolean[] := '{}';
    plain text[] := '{}';
    detailed text[] := '{}';
    labels text[];
    label_parts text[];
    detail_parts text[];
    filters text[];
    conditions jsonb;
BEGIN
    IF definition IS NULL OR jsonb_typeof(definition) <> 'object' THEN
        RAISE EXCEPTION 'funnel_report: the definition must be a JSON object (a funnel as in the YAML configuration)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR key IN SELECT jsonb_object_keys(definition) LOOP
        IF key IN ('exclude', 'hold') OR (key = 'order' AND definition ->> 'order' IS DISTINCT FROM 'ordered') THEN
            RAISE EXCEPTION 'funnel_report: %: not supported in SQL (onramp funnel answers it)', key
                USING ERRCODE = 'feature_not_supported';
        ELSIF key NOT IN ('name', 'app', 'window', 'steps', 'order', 'description', 'breakdowns', 'targets',
                          'diagnostics', 'alerts', 'retention', 'attribution', 'ignore') THEN
            RAISE EXCEPTION 'funnel_report: %: unknown field (expected name, app, window, steps, order, …)', key
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END LOOP;
    app_name := definition ->> 'app';
    IF app_name IS NULL OR app_name = '' OR jsonb_typeof(definition -> 'app') <> 'string' THEN
        RAISE EXCEPTION 'funnel_report: app: missing (expected the app''s name as a string)' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF definition ? 'window' THEN
        window_text := btrim(definition ->> 'window');
        window_parts := regexp_match(window_text, '^([0-9]{1,10})([smhd]?)$');
        -- At most a century, as the configuration allows.
        IF window_parts IS NULL OR window_parts[1]::bigint = 0
           OR window_parts[1]::bigint * (CASE window_parts[2] WHEN 'm' THEN 60 WHEN 'h' THEN 3600 WHEN 'd' THEN 86400 ELSE 1 END)
              > 100::bigint * 366 * 86400 THEN
            RAISE EXCEPTION 'funnel_report: window: cannot parse ''%'' (expected e.g. 24h, 30m, 90s, 2d or whole seconds)', window_text
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        win := window_parts[1]::bigint * CASE window_parts[2] WHEN 'm' THEN interval '1 minute' WHEN 'h' THEN interval '1 hour'
                                                             WHEN 'd' THEN interval '1 day' ELSE interval '1 second' END;
    END IF;
    IF jsonb_typeof(definition -> 'steps') IS DISTINCT FROM 'array' OR jsonb_array_length(definition -> 'steps') = 0 THEN
        RAISE EXCEPTION 'funnel_report: steps: missing (expected a list of at least one step)' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    n := jsonb_array_length(definition -> 'steps');
    IF n > 63 THEN
        RAISE EXCEPTION 'funnel_report: steps: at most 63 (got %)', n USING ERRCODE = 'invalid_parameter_value';
    END IF;

    FOR i IN 1 .. n LOOP
        step := definition -> 'steps' -> (i - 1);
        field := format('steps[%s]', i - 1);
        IF jsonb_typeof(step) IS DISTINCT FROM 'object' THEN
            RAISE EXCEPTION 'funnel_report: %: expected a step such as {"event": "otp_verified"}', field USING ERRCODE = 'invalid_parameter_value';
        END IF;
        FOR key IN SELECT jsonb_object_keys(step) LOOP
            IF key IN ('optional', 'within') THEN
                RAISE EXCEPTION 'funnel_report: %.%: not supported in SQL (onramp funnel answers it)', field, key
                    USING ERRCODE = 'feature_not_supported';
            ELSIF key NOT IN ('name', 'event', 'screen', 'where', 'any_of') THEN
                RAISE EXCEPTION 'funnel_report: %.%: unknown field (expected name, event, screen, where or any_of)', field, key
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
        END LOOP;
        IF step ? 'any_of' THEN
            IF step ? 'event' OR step ? 'screen' OR step ? 'where' THEN
                RAISE EXCEPTION 'funnel_report: %.any_of: cannot be combined with event, screen or where (put them inside each alternative)', field
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF jsonb_typeof(step -> 'any_of') IS DISTINCT FROM 'array' OR jsonb_array_length(step -> 'any_of') = 0 THEN
                RAISE EXCEPTION 'funnel_report: %.any_of: must list at least one matcher', field USING ERRCODE = 'invalid_parameter_value';
            END IF;
            alternatives := step -> 'any_of';
        ELSE
            alternatives := jsonb_build_array(step - 'name');
        END IF;
        label_parts := '{}';
        detail_parts := '{}';
        FOR a IN 0 .. jsonb_array_length(alternatives) - 1 LOOP
            alternative := alternatives -> a;
            IF step ? 'any_of' THEN
                field := format('steps[%s].any_of[%s]', i - 1, a);
            END IF;
            IF jsonb_typeof(alternative) IS DISTINCT FROM 'object'
               OR (alternative ? 'event') = (alternative ? 'screen')
               OR coalesce(alternative ->> 'event', alternative ->> 'screen', '') = ''
               OR jsonb_typeof(coalesce(alternative -> 'event', alternative -> 'screen')) <> 'string'
               OR EXISTS (SELECT 1 FROM jsonb_object_keys(alternative) AS k WHERE k NOT IN ('event', 'screen', 'where')) THEN
                RAISE EXCEPTION 'funnel_report: %: expected an ''event'' or a ''screen'' name (and optionally ''where'')', field
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            conditions := '[]';
            filters := '{}';
            IF alternative ? 'where' THEN
                IF jsonb_typeof(alternative -> 'where') IS DISTINCT FROM 'object' THEN
                    RAISE EXCEPTION 'funnel_report: %.where: expected a mapping of path to value', field USING ERRCODE = 'invalid_parameter_value';
                END IF;
                -- In code-point order, as the engine sorts them for a step's name, whatever the database's collation.
                FOR path IN SELECT k FROM jsonb_object_keys(alternative -> 'where') AS k ORDER BY k COLLATE "C" LOOP
                    IF NOT (path ~ '^(properties|context|traits)\.' AND right(path, 1) <> '.' AND strpos(path, '..') = 0) THEN
                        RAISE EXCEPTION 'funnel_report: %.where: ''%'' is not a path under properties., context. or traits. (such as context.os.name)', field, path
                            USING ERRCODE = 'invalid_parameter_value';
                    END IF;
                    IF jsonb_typeof(alternative -> 'where' -> path) IN ('object', 'array', 'null') THEN
                        RAISE EXCEPTION 'funnel_report: %.where.%: expected a single value to compare with', field, path
                            USING ERRCODE = 'invalid_parameter_value';
                    END IF;
                    conditions := conditions || jsonb_build_array(jsonb_build_array(
                        split_part(path, '.', 1), to_jsonb(string_to_array(substr(path, strpos(path, '.') + 1), '.')),
                        alternative -> 'where' ->> path));
                    filters := filters || (regexp_replace(path, '^.*\.', '') || '=' || (alternative -> 'where' ->> path));
                END LOOP;
            END IF;
            matchers := matchers || jsonb_build_array(jsonb_build_object(
                'step', i - 1, 'kind', CASE WHEN alternative ? 'event' THEN 'track' ELSE 'screen' END,
                'name', coalesce(alternative ->> 'event', alternative ->> 'screen'), 'conditions', conditions));
            names := names || coalesce(alternative ->> 'event', alternative ->> 'screen');
            label_parts := label_parts || coalesce(alternative ->> 'event', alternative ->> 'screen');
            detail_parts := detail_parts || (coalesce(alternative ->> 'event', alternative ->> 'screen')
                || CASE WHEN cardinality(filters) = 0 THEN '' ELSE ' (' || array_to_string(filters, ', ') || ')' END);
        END LOOP;
        IF step ? 'name' AND (jsonb_typeof(step -> 'name') <> 'string' OR step ->> 'name' = '') THEN
            RAISE EXCEPTION 'funnel_report: steps[%].name: expected a non-empty string', i - 1 USING ERRCODE = 'invalid_parameter_value';
        END IF;
        explicit := explicit || (step ? 'name');
        plain := plain || coalesce(step ->> 'name', array_to_string(label_parts, ' | '));
        detailed := detailed || array_to_string(detail_parts, ' | ');
    END LOOP;

    -- Step names as the engine gives them: a generated name shared by two
    -- steps shows their where values, and then its position.
    labels := plain;
    FOR pass IN 0 .. 1 LOOP
        labels := ARRAY(
            SELECT CASE WHEN NOT explicit[x] AND (SELECT count(*) FROM unnest(labels) AS o WHERE o = labels[x]) > 1
                        THEN CASE pass WHEN 0 THEN detailed[x] ELSE labels[x] || ' #' || x END
                        ELSE labels[x] END
            FROM generate_series(1, n) AS x ORDER BY x);
    END LOOP;

    RETURN QUERY
    WITH m AS MATERIALIZED (
        SELECT (x ->> 'step')::integer AS step, x ->> 'kind' AS kind, x ->> 'name' AS name, x -> 'conditions' AS conditions
        FROM jsonb_array_elements(matchers) AS x
    ), hits AS (
        SELECT e.person_id, e."timestamp" AS ts, k.mask
        FROM analytics.events AS e
        CROSS JOIN LATERAL (
            SELECT bit_or(1::bigint << m.step) AS mask FROM m
            WHERE m.kind = e.type AND m.name = e.event
              AND (jsonb_array_length(m.conditions) = 0
                   OR analytics.funnel_conditions_hold(m.conditions, e.properties, e.context, e.traits))
        ) AS k
        WHERE e.app = app_name AND e.event = ANY (names) AND e.type IN ('track', 'screen') AND k.mask IS NOT NULL
    ), levels AS (
        SELECT analytics.window_funnel_masks(win, h.ts, h.mask, n) AS level,
               max(h.ts) FILTER (WHERE h.mask & 1 = 1) AS last_start
        FROM hits AS h GROUP BY h.person_id
    ), reached AS (
        SELECT l.level, l.level < n AND l.last_start + win > as_of AS open FROM levels AS l WHERE l.level >= 1
    ), counts AS (
        SELECT s AS idx,
               count(*) FILTER (WHERE r.level >= s) AS at_step,
               count(*) FILTER (WHERE r.level = s AND s < n AND NOT r.open) AS dropped,
               count(*) FILTER (WHERE r.level = s AND r.open) AS open_here
        FROM generate_series(1, n) AS s LEFT JOIN reached AS r ON true
        GROUP BY s
    )
    SELECT c.idx, labels[c.idx], c.at_step,
           CASE WHEN c.idx = 1 THEN (CASE WHEN c.at_step > 0 THEN 1.0::double precision END)
                ELSE c.at_step::double precision / NULLIF(lag(c.at_step) OVER (ORDER BY c.idx), 0) END,
           c.at_step::double precision / NULLIF(first_value(c.at_step) OVER (ORDER BY c.idx), 0),
           c.dropped, c.open_here
    FROM counts AS c ORDER BY c.idx;
END $$;

GRANT EXECUTE ON FUNCTION analytics.window_funnel_add_mask(bigint[], interval, timestamptz, bigint, integer),
    analytics.window_funnel_masks(interval, timestamptz, bigint, integer),
    analytics.funnel_conditions_hold(jsonb, jsonb, jsonb, jsonb),
    analytics.funnel_report(jsonb, timestamptz)
    TO onramp_analyst, onramp_operator;
