# `scripts/citus check`: the same traffic posted to one PostgreSQL and to the
# Citus cluster gives the same tables. Sourced by scripts/citus, which has
# started nothing yet and defines start, create_citus_database and port_of.
#
# Both servers and every client run at one frozen wall clock (faketime, with
# the monotonic clock left real so timeouts still work), so the simulator's
# journeys, the servers' clock corrections and the nightly runs' "now" are the
# same on both sides. The traffic: simulated devices of the five funnels
# (offline devices deliver days late, some batches are sent twice), and
# persons who sign in on two devices, whose histories span shards. Then, on
# both, the first night; more traffic, late events among it; an incremental
# night; and a rebuild. After each, every table the nightly job writes is
# compared (scripts/lib/projection_md5.sql) and must be equal, and the
# cluster's rebuild must equal its incremental night. Then every analytics
# view, sql/examples query and Grafana panel's SQL runs on the coordinator
# as the analysts' roles, and four logins (some apps, none, every app) read
# exactly their apps' rows there (a Swift test: the tests must be built).
# Last, on both, an erasure, and the log's lifecycle (docs/lifecycle.md):
# its month archived, a night, the month restored, a night, an app exported.

# own_cluster NAME: the cluster started (if it was not) and a fresh database
# NAME on it ($cluster_db), a folder for the run ($work); on exit, the servers
# this run started are stopped, the database dropped, and nodes this run
# started stopped (a folder it made, removed).
own_cluster() {
  cluster_name=$1 fresh="" running="" servers=()
  [ -f "$dir/coordinator/PG_VERSION" ] || fresh=1
  as_pg "$PG_BIN/pg_ctl" -D "$dir/coordinator" status >/dev/null 2>&1 && running=1
  start >/dev/null
  drop_citus_database "$cluster_name"
  cluster_db=$(create_citus_database "$cluster_name")
  work=$(mktemp -d "${TMPDIR:-/tmp}/onramp-citus-$cluster_name.XXXXXX")
  # shellcheck disable=SC2329  # called by the trap
  cleanup() {
    [ -n "${ONRAMP_CITUS_KEEP:-}" ] && { echo "kept: $work, $cluster_db" >&2; return; }
    local server
    for server in "${servers[@]}"; do kill -- "-$server" 2>/dev/null || true; done
    as_pg "$PG_BIN/pg_ctl" -D "$work/data" -m immediate -w stop >/dev/null 2>&1 || true
    drop_citus_database "$cluster_name"
    rm -rf "$work"
    if [ -z "$running" ]; then stop 2>/dev/null; fi
    if [ -n "$fresh" ]; then rm -rf "$dir"; fi
  }
  trap cleanup EXIT
}

# serve_on SIDE DB [WRAPPER…]: write keys for the five funnels' apps
# ($work/keys-SIDE) and `onramp serve` against DB on a free port
# ($work/port-SIDE), logged in as the server's own role, `onramp_writer`, as
# docs/operations.md has it run, run through the command WRAPPER when given, in a process
# group of its own (the wrapper's child is stopped with it); returns once it
# answers.
serve_on() {
  local side=$1 db=$2 port server app
  shift 2
  : >"$work/keys-$side"
  for app in yoked ops umuve forma; do
    echo "$app=$("$ONRAMP" keys create --app "$app" --database-url "$db" 2>/dev/null)" >>"$work/keys-$side"
  done
  port=$(free_port)
  setsid "$@" env LOG_LEVEL=warning "$ONRAMP" serve --port "$port" --metrics-listen off --database-url "${db/onramp@/onramp_writer@}" --rate-limit 1000000 \
    >>"$work/serve-$side.log" 2>&1 &
  server=$!
  servers+=("$server")
  echo "$port" >"$work/port-$side"
  for _ in $(seq 300); do
    curl -fs "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && return 0
    kill -0 "$server" 2>/dev/null || { tail -20 "$work/serve-$side.log" >&2; return 1; }
    sleep 0.1
  done
  echo "the $side server did not come up" >&2
  return 1
}

# side_db SIDE: the database URL of one side, "cluster" or "single" (the
# caller's $cluster_db and $single_db).
side_db() {
  if [ "$1" = cluster ]; then echo "$cluster_db"; else echo "$single_db"; fi
}

# spanning_persons: "N of M": of the identified persons in the cluster's
# links, those whose devices hash to more than one shard of the log.
spanning_persons() {
  psql -qAt "$cluster_db" -c "
    SELECT count(*) FILTER (WHERE shards > 1) || ' of ' || count(*)
    FROM (SELECT l.app, l.person_id, count(DISTINCT get_shard_id_for_distribution_column('events', l.anonymous_id)) AS shards
          FROM identity_links l GROUP BY 1, 2) p"
}

check() {
  ONRAMP=${ONRAMP:-$(swift build --show-bin-path)/onramp}
  [ -x "$ONRAMP" ] || { echo "no onramp binary at $ONRAMP (swift build first)" >&2; exit 1; }
  ensure_packages faketime curl jq
  own_cluster onramp_check
  start_cluster
  psql -q "$ADMIN" -c "CREATE DATABASE single"
  single_db="postgresql://onramp@127.0.0.1:$PGPORT/single"

  "$ONRAMP" migrate --database-url "$cluster_db" >"$work/migrate-cluster.log" 2>&1 || { cat "$work/migrate-cluster.log" >&2; return 1; }
  grep -q "distributed" "$work/migrate-cluster.log" || { echo "migrate did not distribute the schema on the cluster" >&2; return 1; }
  "$ONRAMP" migrate --database-url "$single_db" >"$work/migrate-single.log" 2>&1 || { cat "$work/migrate-single.log" >&2; return 1; }

  # One clock for everything: now, frozen, then a night and two hours later.
  local now night later
  now=$(date -u +%s)
  night=$(date -u -d "@$((now + 600))" '+%Y-%m-%d %H:%M:%S')
  later=$(date -u -d "@$((now + 2 * 3600))" '+%Y-%m-%d %H:%M:%S')
  now=$(date -u -d "@$now" '+%Y-%m-%d %H:%M:%S')
  # at WHEN COMMAND…: COMMAND at the frozen clock WHEN (a command, not a
  # function, so that serve_on can start the servers through it).
  # Through the faketime wrapper, which keeps a named semaphore and shared
  # memory per process id in /dev/shm and leaves them there: a later wrapper
  # given the same id then fails ("sem_open: File exists"). Those of ids no
  # longer running, and of the id it is about to take, are removed first.
  # (Preloading libfaketime without the wrapper loses Swift programs'
  # arguments.)
  cat >"$work/at" <<'SH'
#!/bin/sh
# at WHEN COMMAND…: COMMAND with the wall clock frozen at WHEN, the monotonic clock real.
for f in /dev/shm/faketime_shm_* /dev/shm/sem.faketime_sem_*; do
  [ -e "$f" ] || continue
  pid=${f##*_}
  if [ "$pid" = "$$" ] || ! kill -0 "$pid" 2>/dev/null; then rm -f "$f"; fi
done
when=$1
shift
FAKETIME_DONT_FAKE_MONOTONIC=1 exec faketime -f "$when" "$@"
SH
  chmod +x "$work/at"
  # Every command runs the five funnels with audiences beside them
  # (docs/audiences.md): persons stalled at a step, completers, companies
  # that dropped, an app's recent users; and a funnel broken down by one.
  cat Sources/Funnels/Resources/default-funnels.yaml - >"$work/onramp.yaml" <<'YAML'
  - name: yoked_otp_by_audience
    app: yoked
    window: 1h
    breakdowns: [audience:yoked_stalled_at_phone, context.os.name]
    steps:
      - event: phone_entered
      - event: otp_verified

audiences:
  - {name: yoked_stalled_at_phone, funnel: yoked_onboarding, stalled: {step: 2, for: 1h}}
  - {name: yoked_completed, funnel: yoked_onboarding, outcome: completed}
  - {name: ops_companies_dropped, funnel: ops_companies, outcome: dropped, step: 1}
  - {name: umuve_signed_in_lately, app: umuve, did: {event: apple_sign_in_completed, within: 2d}}
YAML
  export ONRAMP_CONFIG="$work/onramp.yaml"
  local at=("$work/at")
  at() { "${at[@]}" "$@"; }
  serve_on cluster "$cluster_db" "${at[@]}" "$now" || return 1
  serve_on single "$single_db" "${at[@]}" "$now" || return 1

  # traffic SEED DEVICES DAYS: the simulator's devices, then the two-device persons, to both servers.
  traffic() {
    local side
    for side in cluster single; do
      at "$now" "$ONRAMP" simulate --server "http://127.0.0.1:$(cat "$work/port-$side")" --keys-file "$work/keys-$side" \
        --seed "$1" --devices "$2" --days "$3" >>"$work/simulate-$side.log" 2>&1 || { tail -5 "$work/simulate-$side.log" >&2; return 1; }
      two_device_persons "$1" "$side" || return 1
    done
  }
  # two_device_persons SEED SIDE: 40 yoked persons who start on one device and
  # finish on another, signing in on both; with seed 2, the first device's
  # last steps arrive now, a day late.
  two_device_persons() {
    local key body
    key=$(grep '^yoked=' "$work/keys-$2" | cut -d= -f2-)
    body=$(python3 - "$1" "$now" <<'PY'
import json, sys, datetime
seed, now = int(sys.argv[1]), datetime.datetime.strptime(sys.argv[2], "%Y-%m-%d %H:%M:%S")
steps = ["onboarding_started", "phone_entered", "otp_verified", "age_verified", "profile_created", "location_allowed",
         "questionnaire_started", "questionnaire_completed", "profiling_completed", "verification_consent_given",
         "verification_completed", "onboarding_completed"]
batch = []
def message(kind, device, user, at, n, **fields):
    m = {"type": kind, "anonymousId": device, "messageId": f"two-device-{seed}-{device}-{n}",
         "timestamp": at.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
         "context": {"os": {"name": "iOS"}, "app": {"version": "2.2.0"}}}
    if user: m["userId"] = user
    m.update(fields)
    batch.append(m)
for p in range(40):
    user, phone, tablet = f"two-device-user-{p}", f"two-device-phone-{p}", f"two-device-tablet-{p}"
    start = now - datetime.timedelta(days=3, minutes=7 * p)
    if seed == 1:
        for n, step in enumerate(steps[:3]):
            message("track", phone, None, start + datetime.timedelta(minutes=n), n, event=step)
        message("identify", phone, user, start + datetime.timedelta(minutes=3), 3)
        # The second device: signs in, then goes on from where the first stopped.
        message("identify", tablet, user, start + datetime.timedelta(hours=2), 0)
        for n, step in enumerate(steps[3:8 + p % 5]):
            message("track", tablet, user, start + datetime.timedelta(hours=2, minutes=n + 1), n + 1, event=step)
    else:
        # Late: the first device's steps after the first ones, delivered a day later.
        for n, step in enumerate(steps[8 + p % 5:]):
            message("track", phone, user, start + datetime.timedelta(hours=3, minutes=n), 10 + n, event=step)
print(json.dumps({"batch": batch}))
PY
)
    at "$now" curl -fsS -o /dev/null -u "$key:" -H 'Content-Type: application/json' --data-binary "$body" \
      "http://127.0.0.1:$(cat "$work/port-$2")/v1/batch" || { echo "the two-device batch was refused by the $2 server" >&2; return 1; }
  }

  # same WHAT: every projection table equal on both sides; the privacy key is
  # each database's own secret, so the tables of ids hashed with it are
  # compared by their rows' count.
  same() {
    local side db
    for side in cluster single; do
      db=$(side_db "$side")
      { psql -qAt "$db" -f scripts/lib/projection_md5.sql | grep -vE '^(privacy_key|privacy_requests|erased_messages|suppressed_ids)\|'
        psql -qAt "$db" -c "SELECT 'hashed ids: ' || (SELECT count(*) FROM privacy_requests) || ' requests, '
          || (SELECT count(*) FROM erased_messages) || ' messages, ' || (SELECT count(*) FROM suppressed_ids) || ' suppressed'"
      } >"$work/$side.md5"
    done
    if diff "$work/single.md5" "$work/cluster.md5" >"$work/diff"; then
      echo "citus check: $1: $(($(wc -l <"$work/cluster.md5") - 1)) tables and the privacy tables' counts equal on one PostgreSQL and on the cluster" >&2
    else
      echo "citus check: $1: tables differ (one PostgreSQL <, the cluster >):" >&2
      cat "$work/diff" >&2
      return 1
    fi
  }
  night() {
    local side
    for side in cluster single; do
      db=$(side_db "$side")
      at "$1" "$ONRAMP" "$2" --database-url "$db" --quiet --format json >"$work/$2-$side.json" 2>"$work/$2-$side.log" ||
        { cat "$work/$2-$side.log" >&2; return 1; }
    done
  }

  traffic 1 300 7 || return 1
  night "$night" report || return 1
  same "after the first night" || return 1
  traffic 2 100 3 || return 1
  night "$later" report || return 1
  same "after more traffic (late events among it) and an incremental night" || return 1
  local members
  members=$(psql -qAt "$cluster_db" -c "SELECT string_agg(audience || ' ' || n, ', ' ORDER BY audience)
    FROM (SELECT audience, count(*) AS n FROM audience_members GROUP BY 1) m")
  echo "citus check: audiences' members on both: $members" >&2
  cp "$work/cluster.md5" "$work/cluster-incremental.md5"
  night "$later" rebuild || return 1
  same "after a rebuild on both" || return 1
  diff -q "$work/cluster-incremental.md5" "$work/cluster.md5" >/dev/null ||
    { echo "citus check: the cluster's rebuild differs from its incremental night" >&2; return 1; }

  # The funnel in SQL (docs/architecture.md, "The funnel in SQL"): the native
  # aggregate on both sides, the same levels from analytics.window_funnel
  # grouped by person and the same analytics.funnel_report, and the time each took.
  local side db implementation levels report query
  levels="SELECT level || ' ' || count(*) FROM (SELECT person_id, analytics.window_funnel(interval '1 day', \"timestamp\",
      event = 'onboarding_started', event = 'phone_entered', event = 'otp_verified', event = 'age_verified', event = 'profile_created')
      AS level FROM analytics.events WHERE app = 'yoked' AND type = 'track' GROUP BY person_id) AS s GROUP BY level ORDER BY level;"
  report="SELECT step_index || ' ' || persons || ' ' || drop_off || ' ' || in_progress FROM analytics.funnel_report('{\"app\": \"yoked\",
      \"window\": \"1d\", \"steps\": [{\"event\": \"onboarding_started\"}, {\"event\": \"phone_entered\"}, {\"event\": \"otp_verified\"}]}',
      '$later'::timestamptz) ORDER BY step_index;"
  for side in cluster single; do
    db=$(side_db "$side")
    implementation=$(psql -qAt "$db" -c "SELECT p.proname FROM pg_aggregate g JOIN pg_proc p ON p.oid = g.aggtransfn
      WHERE g.aggfnoid = 'analytics.window_funnel(interval, timestamptz, boolean[])'::regprocedure")
    [ "$implementation" = window_funnel_native_add ] ||
      { echo "citus check: analytics.window_funnel on the $side side runs on $implementation, not the extension onramp_funnel" >&2; return 1; }
    for query in levels report; do
      { echo '\timing on'; echo "${!query}"; } | psql -qAt -v ON_ERROR_STOP=1 "$db" >"$work/sql-$query-$side.txt" 2>&1 ||
        { cat "$work/sql-$query-$side.txt" >&2; echo "citus check: the funnel in SQL failed on the $side side" >&2; return 1; }
    done
  done
  for query in levels report; do
    if ! diff <(grep -v '^Time' "$work/sql-$query-single.txt") <(grep -v '^Time' "$work/sql-$query-cluster.txt") >"$work/diff"; then
      echo "citus check: the funnel in SQL ($query) differs (one PostgreSQL <, the cluster >):" >&2
      cat "$work/diff" >&2
      return 1
    fi
  done
  # Where the aggregate runs there: the plan's Citus parts.
  psql -qAt "$cluster_db" -c "EXPLAIN (VERBOSE, COSTS OFF) ${levels%;}" >"$work/sql-levels-plan.txt" 2>&1 || true
  echo "citus check: window_funnel by person_id on the cluster runs as" \
    "$(grep -aoE 'worker_partial_agg|coord_combine_agg|Custom Scan \(Citus [A-Za-z ]+\)|Task Count: [0-9]+' "$work/sql-levels-plan.txt" | sort -u | paste -sd, -)" >&2
  echo "citus check: the funnel in SQL, native on both, equal: window_funnel's levels (level persons)" \
    "$(grep -v '^Time' "$work/sql-levels-cluster.txt" | paste -sd, -), funnel_report (step persons dropped in progress)" \
    "$(grep -v '^Time' "$work/sql-report-cluster.txt" | paste -sd, -); times one PostgreSQL" \
    "$(cat "$work"/sql-{levels,report}-single.txt | grep -aoE '^Time: [0-9.]+' | cut -d' ' -f2 | paste -sd/ -) ms, the cluster" \
    "$(cat "$work"/sql-{levels,report}-cluster.txt | grep -aoE '^Time: [0-9.]+' | cut -d' ' -f2 | paste -sd/ -) ms" >&2

  # What the analysts run, on the coordinator as their roles: every view,
  # example and Grafana panel (Tests/AnalyticsTests/AnalystSQLOnDatabaseTests).
  ONRAMP_ANALYST_CHECK_URL=$cluster_db swift test --skip-build --filter AnalystSQLOnDatabaseTests >"$work/analyst.log" 2>&1 ||
    { grep -aE "✘|↳|^  |error" "$work/analyst.log" | head -40 >&2
      echo "citus check: the analysts' SQL failed on the cluster (the tests must be built: swift build --build-tests)" >&2; return 1; }
  echo "citus check: on the cluster, $(grep -aoE '[0-9]+ views, [0-9]+ examples, [0-9]+ panel queries' "$work/analyst.log") ran as the analysts' roles" >&2
  echo "citus check: per-app access on the cluster (docs/access.md): $(grep -aoE 'access matrix: .*' "$work/analyst.log" | head -1)" >&2

  # An erasure on both (docs/privacy.md): two persons who signed in on two
  # devices, kept out afterwards; the tables equal after its run.
  local side erased
  for side in cluster single; do
    db=$(side_db "$side")
    at "$later" "$ONRAMP" privacy erase --database-url "$db" --app yoked --user-id two-device-user-0 \
      --user-id two-device-user-1 --suppress --requested-by check --json >"$work/erase-$side.json" 2>"$work/erase-$side.log" ||
      { cat "$work/erase-$side.log" >&2; echo "citus check: the erasure failed on the $side" >&2; return 1; }
  done
  erased=$(jq -r '.removed.events' "$work/erase-cluster.json")
  [ "$erased" -gt 0 ] && [ "$erased" = "$(jq -r '.removed.events' "$work/erase-single.json")" ] ||
    { echo "citus check: the erasure removed $erased events on the cluster, $(jq -r '.removed.events' "$work/erase-single.json") on one PostgreSQL" >&2; return 1; }
  same "after erasing two persons ($erased events) on both" || return 1
  # Their messages sent again are answered and kept out, on the cluster as
  # on one PostgreSQL.
  two_device_persons 1 cluster && two_device_persons 1 single || return 1
  local left
  left=$(psql -qAt "$cluster_db" -c "SELECT count(*) FROM events WHERE app = 'yoked' AND (user_id IN ('two-device-user-0', 'two-device-user-1')
    OR anonymous_id IN ('two-device-phone-0', 'two-device-tablet-0', 'two-device-phone-1', 'two-device-tablet-1'))")
  [ "$left" = 0 ] || { echo "citus check: $left messages of the erased persons stored again on the cluster" >&2; return 1; }
  same "after their messages were sent again" || return 1

  # The lifecycle on both (docs/lifecycle.md): a hundred days on, with 40
  # days kept, the month the traffic was received in is archived and its
  # partition dropped; a night at that clock (its days frozen); the month
  # restored. The archives hold the same messages per app and day, the
  # tables are equal after the night, and the log is whole again.
  local ahead month before
  ahead=$(date -u -d "@$(($(date -u -d "$now" +%s) + 100 * 86400))" '+%Y-%m-%d %H:%M:%S')
  month=$(date -u -d "$now" +%Y-%m)
  before=$(psql -qAt "$cluster_db" -c "SELECT count(*) FROM events")
  for side in cluster single; do
    db=$(side_db "$side")
    mkdir -m 700 "$work/archive-$side"
    { cat "$work/onramp.yaml"; printf 'archive:\n  keep_events: 40 days\n  directory: %s\n' "$work/archive-$side"; } >"$work/archive-$side.yaml"
    at "$ahead" "$ONRAMP" archive run --database-url "$db" --config "$work/archive-$side.yaml" >"$work/archive-$side.log" 2>&1 ||
      { cat "$work/archive-$side.log" >&2; echo "citus check: the archive run failed on the $side" >&2; return 1; }
    jq -r '.files[] | "\(.app) \(.day) \(.messages)"' "$work/archive-$side/$month/manifest.json" | sort >"$work/archived-$side"
  done
  [ -s "$work/archived-cluster" ] && diff "$work/archived-single" "$work/archived-cluster" >&2 ||
    { echo "citus check: the archives of $month differ (one PostgreSQL <, the cluster >)" >&2; return 1; }
  [ "$(psql -qAt "$cluster_db" -c "SELECT count(*) FROM events WHERE received_at >= '$month-01'::date")" = 0 ] ||
    { echo "citus check: $month is still in the cluster's log after its archive" >&2; return 1; }
  night "$ahead" report || return 1
  same "after archiving $month ($(awk '{n += $3} END {print n}' "$work/archived-cluster") messages) and a night" || return 1
  for side in cluster single; do
    db=$(side_db "$side")
    at "$ahead" "$ONRAMP" archive restore --month "$month" --database-url "$db" --config "$work/archive-$side.yaml" >"$work/restore-$side.log" 2>&1 ||
      { cat "$work/restore-$side.log" >&2; echo "citus check: the restore failed on the $side" >&2; return 1; }
  done
  [ "$(psql -qAt "$cluster_db" -c "SELECT count(*) FROM events")" = "$before" ] ||
    { echo "citus check: the cluster's log holds $(psql -qAt "$cluster_db" -c "SELECT count(*) FROM events") events after the restore, $before before the archive" >&2; return 1; }
  echo "citus check: $month archived and restored on both: $(tail -1 "$work/restore-cluster.log")" >&2
  night "$ahead" report || return 1
  same "after the restore and a night" || return 1
  # An app's messages exported from both (through analytics.events): the
  # same messages, each with its person (the servers give message ids of their own).
  for side in cluster single; do
    "$ONRAMP" export --app yoked --database-url "$(side_db "$side")" --quiet |
      jq -r '[.anonymous_id, .user_id, .type, .event, .timestamp, .person_id] | @tsv' | sort >"$work/export-$side" ||
      { echo "citus check: the export failed on the $side" >&2; return 1; }
  done
  [ -s "$work/export-cluster" ] && diff -q "$work/export-single" "$work/export-cluster" >/dev/null ||
    { echo "citus check: yoked's exports differ: $(wc -l <"$work/export-single") messages on one PostgreSQL, $(wc -l <"$work/export-cluster") on the cluster" >&2; return 1; }
  echo "citus check: yoked exported from both: $(wc -l <"$work/export-cluster") messages, the same" >&2

  local events spanning
  events=$(psql -qAt "$cluster_db" -c "SELECT count(*) FROM events")
  [ "$events" = "$(psql -qAt "$single_db" -c "SELECT count(*) FROM events")" ] ||
    { echo "citus check: the two logs hold different numbers of events" >&2; return 1; }
  spanning=$(spanning_persons)
  echo "citus check: events' shards by node (rows, from the coordinator):" >&2
  psql -q "$cluster_db" -c "
    SELECT s.nodename || ':' || s.nodeport AS node, count(*) AS shards, sum(r.result::bigint) AS events
    FROM pg_dist_partition p
    CROSS JOIN LATERAL run_command_on_shards(p.logicalrelid, 'SELECT count(*) FROM %s') r
    JOIN citus_shards s ON s.shardid = r.shardid
    WHERE p.logicalrelid::text LIKE 'events\\_%' ESCAPE '\\'
    GROUP BY 1 ORDER BY 1" >&2
  echo "citus check: passed; $events events; identified persons whose devices span shards: $spanning" >&2
}
