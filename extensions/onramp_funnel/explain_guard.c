/*
 * The guard on instrumented plans (docs/access.md, "Counts"): a login that
 * does not read every app may not run a plan with its counts switched on,
 * so `EXPLAIN ANALYZE` is refused to it.
 *
 * Why: the views apply the grants as a security barrier, which keeps the
 * query's own leaky conditions away from hidden rows but lets PostgreSQL
 * fetch those rows through an index on the query's own leakproof conditions
 * (`app = 'theirs' AND anonymous_id = 'd41'`) before the barrier discards
 * them. EXPLAIN ANALYZE reports them ("Rows Removed by Filter", buffers,
 * timing): the exact count of an id's rows in an app the login does not
 * hold. No privilege controls EXPLAIN, so the check is here, in the
 * executor, where every path to an instrumented plan passes (EXPLAIN
 * ANALYZE in SQL, in a function, of a prepared statement; on Citus, on the
 * coordinator, before a shard is asked).
 *
 * It decides by the session's login alone, before a row is read: refused
 * or not, the answer says nothing of the data. The library must be loaded
 * when a session starts (`onramp migrate` sets session_preload_libraries on
 * the database when it may, docs/operations.md); loaded later, a session's
 * first statements would go unguarded.
 */
#include "postgres.h"

#include "access/parallel.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/value.h"
#include "parser/parse_func.h"
#include "utils/builtins.h"

void		_PG_init(void);

static ExecutorStart_hook_type previous_executor_start = NULL;

/*
 * Whether this is a Citus worker, where the coordinator's shard queries run
 * (the coordinator checked the login before sending them, and a worker
 * knows roles by other OIDs than the grants hold).
 */
static bool
on_citus_worker(void)
{
	Oid			is_coordinator = LookupFuncName(list_make2(makeString("pg_catalog"), makeString("citus_is_coordinator")),
												0, NULL, true);

	return OidIsValid(is_coordinator) && !DatumGetBool(OidFunctionCall0(is_coordinator));
}

/*
 * Whether the session's login does not read every app: the owner, a
 * superuser and an every-app grant read everything. Asked through
 * public.onramp_reads_every_app(login), which the views' check calls too,
 * so the two never disagree; with the login named, as the question may be
 * answered by another backend (migration 033). In a database migrated
 * before that, through the views' own onramp_reads_every_app(). Not by
 * whether the login itself may read `analytics`: a login that does not
 * inherit its roles' privileges reads it after SET ROLE. Where neither
 * function is (no Onramp here, or one from before grants, which reads
 * every app to everyone), nothing is hidden, so nothing is refused.
 */
static bool
subject_to_grants(void)
{
	Oid			argument[1] = {NAMEOID};
	List	   *name = list_make2(makeString("public"), makeString("onramp_reads_every_app"));
	Oid			by_login;
	Oid			by_session;
	Datum		login;

	if (!OidIsValid(get_namespace_oid("analytics", true)) || on_citus_worker())
		return false;
	by_login = LookupFuncName(name, 1, argument, true);
	if (OidIsValid(by_login))
	{
		login = DirectFunctionCall1(namein, CStringGetDatum(GetUserNameFromId(GetSessionUserId(), false)));
		return !DatumGetBool(OidFunctionCall1(by_login, login));
	}
	by_session = LookupFuncName(name, 0, NULL, true);
	return OidIsValid(by_session) && !DatumGetBool(OidFunctionCall0(by_session));
}

/*
 * Set while the check runs: its own query starts an executor too, which an
 * instrumenting hook beside this one (auto_explain) may instrument.
 */
static bool checking = false;

/*
 * Refuses `queryDesc` when its plan is instrumented and the login does not
 * read every app. A parallel worker runs what its leader was allowed to
 * start; the leader asked.
 */
static void
refuse_instrumented(QueryDesc *queryDesc)
{
	bool		subject = false;

	if (queryDesc->instrument_options == 0 || IsParallelWorker() || checking)
		return;
	checking = true;
	PG_TRY();
	{
		subject = subject_to_grants();
	}
	PG_FINALLY();
	{
		checking = false;
	}
	PG_END_TRY();
	if (subject)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("EXPLAIN ANALYZE is not available to a login that does not read every app"),
				 errdetail("Its counts would include rows of apps the login is not granted."),
				 errhint("Use EXPLAIN without ANALYZE, or ask a login that reads every app to run it.")));
}

/*
 * Asked before the hooks this one wraps, and again after them only when
 * they switched the counts on: a hook loaded before this one (auto_explain,
 * with log_analyze) instruments the plan inside the call, and no row is
 * read until the executor runs.
 */
static void
guard_executor_start(QueryDesc *queryDesc, int eflags)
{
	bool		instrumented = queryDesc->instrument_options != 0;

	refuse_instrumented(queryDesc);
	if (previous_executor_start)
		previous_executor_start(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
	if (!instrumented)
		refuse_instrumented(queryDesc);
}

void
_PG_init(void)
{
	previous_executor_start = ExecutorStart_hook;
	ExecutorStart_hook = guard_executor_start;
}
