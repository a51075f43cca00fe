/*
 * onramp_funnel: analytics.window_funnel and the aggregates funnel_report is
 * built on, in C. The semantics are the PL/pgSQL fallback's
 * (sql/migrations/016_window_funnel.sql, 028_funnel_report_persons.sql) and
 * docs/funnels.md's: the level is the largest k such that distinct events
 * e1..ek fill steps 1..k in time order with tk - t1 <= window (inclusive),
 * over every start; events of one time may fill consecutive steps in any
 * order, and one event never fills two steps.
 *
 * Why it is fast where the fallback is not: the state is a growable array of
 * (time, step mask) pairs, appended to in place (the fallback copies its
 * array on every row), and the final function sorts once and sweeps once.
 *
 * The state is a bytea, not `internal`: only a superuser may make an
 * aggregate of an internal state, and `onramp migrate` runs as the schema's
 * owner. PostgreSQL keeps it in the aggregate's memory context, freed with
 * the group; the transition function appends in place while there is room
 * and otherwise returns a larger copy made in the per-row context, which
 * PostgreSQL copies into the aggregate's context, freeing the old one
 * (doubling, so each event is copied a constant number of times on
 * average). The functions refuse to run outside an aggregate and check
 * every state they are handed: they are executable by all, as on Citus the
 * coordinator calls them as the querying role. The sweep checks for interrupts, so
 * a cancel or statement_timeout stops a long one.
 *
 * The state is a multiset of events, so two partial states combine by
 * concatenation: parallel aggregation and Citus's partial aggregation on the
 * workers are exact.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

PG_MODULE_MAGIC;

#define MAX_STEPS 63

/* Microseconds between PostgreSQL's epoch (2000-01-01) and Unix's. */
#define UNIX_EPOCH_OFFSET_USECS \
	((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY)

typedef struct FunnelHit
{
	int64		time;			/* microseconds since 1970, as extract(epoch) */
	uint64		mask;			/* bit s: the event matches step s + 1 */
} FunnelHit;

typedef struct FunnelState
{
	int32		vl_len_;		/* varlena header: the whole buffer, room included */
	uint32		count_steps;	/* events held << 6 | step count (at most 63) */
	int64		window;			/* microseconds */
	FunnelHit	hits[FLEXIBLE_ARRAY_MEMBER];
} FunnelState;

/*
 * A group's state is its 16-byte header and 16 bytes an event, sized to fill
 * the allocator's power-of-two chunks (3 events in 64 bytes, 7 in 128, 15 in
 * 256, ...): by hash, the groups held at once are what fills work_mem.
 */
#define STATE_HEADER offsetof(FunnelState, hits)
#define STATE_CAPACITY(state) ((int32) ((VARSIZE(state) - STATE_HEADER) / sizeof(FunnelHit)))
#define INITIAL_CAPACITY 3
#define MAX_CAPACITY ((int32) Min((MaxAllocSize - STATE_HEADER) / sizeof(FunnelHit), PG_UINT32_MAX >> 6))

static inline int32
state_count(const FunnelState *state)
{
	return (int32) (state->count_steps >> 6);
}

static inline int
state_steps(const FunnelState *state)
{
	return (int) (state->count_steps & 63);
}

static inline void
set_count(FunnelState *state, int32 count)
{
	state->count_steps = ((uint32) count << 6) | (state->count_steps & 63);
}

/* What the sweep found: the level, and the chain it was first reached along. */
typedef struct FunnelChain
{
	int			level;
	int64		start;			/* the chain's first step's time */
	int64		at;				/* when the level was first reached */
} FunnelChain;

static void
check_steps(int steps)
{
	if (steps > MAX_STEPS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("window_funnel: at most 63 steps (got %d)", steps)));
	if (steps < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("window_funnel: the step count must be 0 or more (got %d)", steps)));
}

/*
 * The window in microseconds as the fallback computes it,
 * extract(epoch FROM win) * 1000000 (a year of 365.25 days, a month of 30),
 * after its check that win is not NULL and not below interval '0' (which
 * compares as PostgreSQL orders intervals, a month of 30 days).
 */
static int64
window_usecs(FunctionCallInfo fcinfo, int argno)
{
	Interval   *win;
	int64		years;
	int128		span;
	int128		epoch;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("window_funnel: the window must be an interval of 0 or more (got <NULL>)")));
	win = PG_GETARG_INTERVAL_P(argno);
	span = (int128) win->time + (int128) win->day * USECS_PER_DAY
		+ (int128) win->month * DAYS_PER_MONTH * USECS_PER_DAY;
	if (span < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("window_funnel: the window must be an interval of 0 or more (got %s)",
						DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(win))))));
	years = win->month / MONTHS_PER_YEAR;
	epoch = (int128) years * 31557600 * USECS_PER_SEC
		+ (int128) (win->month % MONTHS_PER_YEAR) * DAYS_PER_MONTH * USECS_PER_DAY
		+ (int128) win->day * USECS_PER_DAY + win->time;
	if (epoch > PG_INT64_MAX)
		return PG_INT64_MAX;
	if (epoch < 0)
		return 0;
	return (int64) epoch;
}

static void
require_aggregate(FunctionCallInfo fcinfo)
{
	if (!AggCheckCallContext(fcinfo, NULL))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("window_funnel: its support functions run only inside its aggregates")));
}

/* A state handed in: whole, and describing no more events than it holds. */
static FunnelState *
checked_state(Datum datum)
{
	FunnelState *state = (FunnelState *) PG_DETOAST_DATUM(datum);

	if (VARSIZE(state) < STATE_HEADER || state_count(state) > STATE_CAPACITY(state)
		|| state_steps(state) > MAX_STEPS || state->window < 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("window_funnel: not a state of its aggregates")));
	return state;
}

/* A new state with room for `capacity` events, in the current (per-row) context. */
static FunnelState *
new_state(int64 window, int steps, int32 capacity)
{
	FunnelState *state = palloc(STATE_HEADER + sizeof(FunnelHit) * capacity);

	SET_VARSIZE(state, STATE_HEADER + sizeof(FunnelHit) * capacity);
	state->count_steps = (uint32) steps;
	state->window = window;
	return state;
}

/*
 * Room for `more` events: the state itself when it has it, else a copy at
 * least twice as large (PostgreSQL moves it into the aggregate's context).
 */
static FunnelState *
with_room(FunnelState *state, int32 more)
{
	FunnelState *larger;
	int64		wanted = (int64) state_count(state) + more;
	int64		capacity = STATE_CAPACITY(state);

	if (wanted <= capacity)
		return state;
	if (wanted > MAX_CAPACITY)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("window_funnel: more than %d matching events in one group", MAX_CAPACITY)));
	while (capacity < wanted)
		capacity = Min(Max(capacity * 2 + 1, INITIAL_CAPACITY), MAX_CAPACITY);
	larger = new_state(state->window, state_steps(state), (int32) capacity);
	set_count(larger, state_count(state));
	memcpy(larger->hits, state->hits, sizeof(FunnelHit) * state_count(state));
	return larger;
}

static int64
unix_usecs(TimestampTz ts)
{
	if (TIMESTAMP_NOT_FINITE(ts))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("window_funnel: an event's time must be finite (got %s)",
						TIMESTAMP_IS_NOBEGIN(ts) ? "-infinity" : "infinity")));
	return ts + UNIX_EPOCH_OFFSET_USECS;
}

/*
 * window_funnel(interval, timestamptz, VARIADIC boolean[]): one event, and
 * whether it matches each step. A NULL step counts as not matching; a NULL
 * time adds nothing. The window and the step count are the first row's.
 */
PG_FUNCTION_INFO_V1(onramp_window_funnel_add);
Datum
onramp_window_funnel_add(PG_FUNCTION_ARGS)
{
	FunnelState *state;
	ArrayType  *steps = PG_ARGISNULL(3) ? NULL : PG_GETARG_ARRAYTYPE_P(3);
	int			n = 0;
	int64		window;
	uint64		mask = 0;

	require_aggregate(fcinfo);
	state = PG_ARGISNULL(0) ? NULL : checked_state(PG_GETARG_DATUM(0));

	if (steps != NULL && ARR_NDIM(steps) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("window_funnel: the steps must be booleans, one per step (got a %d-dimensional array)",
						ARR_NDIM(steps))));
	if (steps != NULL && ARR_NDIM(steps) == 1)
		n = ARR_DIMS(steps)[0];
	check_steps(n);
	window = window_usecs(fcinfo, 1);
	if (state == NULL)
		state = new_state(window, n, INITIAL_CAPACITY);
	if (PG_ARGISNULL(2))
		PG_RETURN_POINTER(state);
	if (n > 0)
	{
		const bool *values = (const bool *) ARR_DATA_PTR(steps);
		const bits8 *nulls = ARR_NULLBITMAP(steps);
		int			i;
		int			v = 0;

		/* Elements are stored without their NULLs: v walks the stored ones. */
		for (i = 0; i < n; i++)
		{
			if (nulls != NULL && (nulls[i / 8] & (1 << (i % 8))) == 0)
				continue;
			if (values[v++])
				mask |= UINT64CONST(1) << i;
		}
	}
	if (mask != 0)				/* fills no step: it cannot change the level */
	{
		int64		time = unix_usecs(PG_GETARG_TIMESTAMPTZ(2));

		state = with_room(state, 1);
		state->hits[state_count(state)].time = time;
		state->hits[state_count(state)].mask = mask;
		set_count(state, state_count(state) + 1);
	}
	PG_RETURN_POINTER(state);
}

/*
 * The masks' form, for callers that computed the steps in SQL
 * (funnel_report): window_funnel_masks(interval, timestamptz, mask bigint,
 * step_count integer).
 */
PG_FUNCTION_INFO_V1(onramp_window_funnel_add_mask);
Datum
onramp_window_funnel_add_mask(PG_FUNCTION_ARGS)
{
	FunnelState *state;
	int64		mask;

	require_aggregate(fcinfo);
	state = PG_ARGISNULL(0) ? NULL : checked_state(PG_GETARG_DATUM(0));
	if (state == NULL)
	{
		int			n = PG_ARGISNULL(4) ? 0 : PG_GETARG_INT32(4);

		check_steps(n);
		state = new_state(window_usecs(fcinfo, 1), n, INITIAL_CAPACITY);
	}
	if (PG_ARGISNULL(2) || PG_ARGISNULL(3))
		PG_RETURN_POINTER(state);
	mask = PG_GETARG_INT64(3);
	if (mask != 0)
	{
		int64		time = unix_usecs(PG_GETARG_TIMESTAMPTZ(2));

		state = with_room(state, 1);
		state->hits[state_count(state)].time = time;
		state->hits[state_count(state)].mask = (uint64) mask;
		set_count(state, state_count(state) + 1);
	}
	PG_RETURN_POINTER(state);
}

static int
compare_hits(const void *a, const void *b)
{
	int64		x = ((const FunnelHit *) a)->time;
	int64		y = ((const FunnelHit *) b)->time;

	return (x > y) - (x < y);
}

/*
 * Kuhn's augmenting path from step `step`: whether it can be given an event
 * of the group, moving steps already given one to another of theirs.
 * owner[e]: the step event e fills, -1 for none; visited[e] == stamp: tried
 * on this path already. At most 63 steps deep.
 */
static bool
augment(const FunnelHit *group, int size, int step, int *owner, uint32 *visited, uint32 stamp)
{
	int			e;

	for (e = 0; e < size; e++)
	{
		if (visited[e] == stamp || ((group[e].mask >> step) & 1) == 0)
			continue;
		visited[e] = stamp;
		if (owner[e] < 0 || augment(group, size, owner[e], owner, visited, stamp))
		{
			owner[e] = step;
			return true;
		}
	}
	return false;
}

/*
 * How many consecutive steps, from step `first` (0-based) on, distinct
 * events of one time can fill. Steps are added one at a time, each by an
 * augmenting path, so the steps already filled stay filled.
 */
static int
fill(const FunnelHit *group, int size, int first, int steps, int *owner, uint32 *visited, uint32 *stamp)
{
	int			filled = 0;
	int			s;

	for (s = 0; s < size; s++)
		owner[s] = -1;
	for (s = first; s < steps; s++)
	{
		CHECK_FOR_INTERRUPTS();
		if (++*stamp == 0)
		{
			memset(visited, 0, sizeof(uint32) * size);
			*stamp = 1;
		}
		if (!augment(group, size, s, owner, visited, *stamp))
			break;
		filled++;
	}
	return filled;
}

/*
 * The sweep: events in time order, a group of one time at once, keeping per
 * level the latest start of a chain that reached it (a later start leaves
 * more of the window), and when each level was first reached.
 */
static FunnelChain
sweep(FunnelState *state)
{
	FunnelChain result = {0, 0, 0};
	int			n = state_steps(state);
	int32		count = state_count(state);
	int64		window = state->window;
	int64		best[MAX_STEPS + 1];
	int64		next[MAX_STEPS + 1];
	int64		first_time[MAX_STEPS + 1];
	int64		first_start[MAX_STEPS + 1];
	bool		has[MAX_STEPS + 1];
	bool		next_has[MAX_STEPS + 1];
	bool		reached[MAX_STEPS + 1];
	int		   *owner = NULL;
	uint32	   *visited = NULL;
	uint32		stamp = 0;
	int			largest_group = 0;
	int			i = 0;
	int			l;

	if (count == 0 || n == 0)
		return result;
	qsort(state->hits, count, sizeof(FunnelHit), compare_hits);
	memset(has, 0, sizeof(has));
	memset(reached, 0, sizeof(reached));
	while (i < count)
	{
		int64		t = state->hits[i].time;
		int			j = i + 1;
		uint64		any = state->hits[i].mask;

		if ((i & 1023) == 0)
			CHECK_FOR_INTERRUPTS();
		while (j < count && state->hits[j].time == t)
			any |= state->hits[j++].mask;
		if (j - i > 1 && j - i > largest_group)
		{
			if (owner != NULL)
			{
				pfree(owner);
				pfree(visited);
			}
			largest_group = j - i;
			owner = palloc(sizeof(int) * largest_group);
			visited = palloc0(sizeof(uint32) * largest_group);
			stamp = 0;
		}
		memcpy(next, best, sizeof(best));
		memcpy(next_has, has, sizeof(has));
		for (l = 0; l < n; l++)
		{
			int64		s;
			int			m;
			int			q;

			if (((any >> l) & 1) == 0)
				continue;		/* no event of this time fills step l + 1 */
			if (l == 0)
				s = t;
			else if (!has[l] || t - best[l] > window)
				continue;
			else
				s = best[l];
			m = (j - i == 1) ? 1 : fill(&state->hits[i], j - i, l, n, owner, visited, &stamp);
			for (q = 1; q <= m; q++)
			{
				if (!next_has[l + q] || s > next[l + q])
				{
					next[l + q] = s;
					next_has[l + q] = true;
				}
			}
		}
		for (l = 1; l <= n; l++)
		{
			if (!reached[l] && next_has[l])
			{
				reached[l] = true;
				first_time[l] = t;
				first_start[l] = next[l];
			}
		}
		memcpy(best, next, sizeof(best));
		memcpy(has, next_has, sizeof(has));
		i = j;
	}
	for (l = n; l >= 1; l--)
	{
		if (has[l])
		{
			result.level = l;
			result.start = first_start[l];
			result.at = first_time[l];
			break;
		}
	}
	if (owner != NULL)
	{
		pfree(owner);
		pfree(visited);
	}
	return result;
}

/*
 * The level. Sorting the state in place is no change to it: it is a
 * multiset of events, and a later transition or final function sees the
 * same one.
 */
PG_FUNCTION_INFO_V1(onramp_window_funnel_level);
Datum
onramp_window_funnel_level(PG_FUNCTION_ARGS)
{
	require_aggregate(fcinfo);
	if (PG_ARGISNULL(0))
		PG_RETURN_INT32(0);
	PG_RETURN_INT32(sweep(checked_state(PG_GETARG_DATUM(0))).level);
}

/*
 * The chain the level was reached along, as window_funnel_chain returns it:
 * [level, chain start, time the level was first reached] in microseconds
 * since 1970, the last two NULL at level 0.
 */
PG_FUNCTION_INFO_V1(onramp_window_funnel_chain);
Datum
onramp_window_funnel_chain(PG_FUNCTION_ARGS)
{
	FunnelChain chain = {0, 0, 0};
	Datum		values[3];
	bool		nulls[3] = {false, false, false};
	int			dims[1] = {3};
	int			lbs[1] = {1};

	require_aggregate(fcinfo);
	if (!PG_ARGISNULL(0))
		chain = sweep(checked_state(PG_GETARG_DATUM(0)));
	values[0] = Int64GetDatum((int64) chain.level);
	values[1] = Int64GetDatum(chain.start);
	values[2] = Int64GetDatum(chain.at);
	if (chain.level == 0)
		nulls[1] = nulls[2] = true;
	PG_RETURN_ARRAYTYPE_P(construct_md_array(values, nulls, 1, dims, lbs, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

/*
 * Two partial states are one: their events together. The first is the
 * combining state (appended to in place while it has room); the second is
 * read only, and may be a copy from a parallel worker or a Citus worker.
 */
PG_FUNCTION_INFO_V1(onramp_window_funnel_combine);
Datum
onramp_window_funnel_combine(PG_FUNCTION_ARGS)
{
	FunnelState *a;
	FunnelState *b;

	require_aggregate(fcinfo);
	if (PG_ARGISNULL(1))
	{
		if (PG_ARGISNULL(0))
			PG_RETURN_NULL();
		PG_RETURN_DATUM(PG_GETARG_DATUM(0));
	}
	b = checked_state(PG_GETARG_DATUM(1));
	a = PG_ARGISNULL(0) ? new_state(b->window, state_steps(b), Max(state_count(b), INITIAL_CAPACITY)) : checked_state(PG_GETARG_DATUM(0));
	a = with_room(a, state_count(b));
	memcpy(&a->hits[state_count(a)], b->hits, sizeof(FunnelHit) * state_count(b));
	set_count(a, state_count(a) + state_count(b));
	PG_RETURN_POINTER(a);
}
