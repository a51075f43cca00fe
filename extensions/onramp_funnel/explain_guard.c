/*
 * The guard on instrumented plans (docs/access.md, "Counts"): a login that
 * reads `analytics` but not every app may not run a plan with its counts
 * switched on, so `EXPLAIN ANALYZE` is refused to it.
 *
 * Why: the views apply the grants as a security barrier, which keeps the
 * query's own leaky conditions away from hidden rows but lets PostgreSQL
 * fetch those rows through an index on the query's own leakproof conditions
 * (`app = 'theirs' AND anonymous_id = 'd41'`) before the barrier discards
 * them. EXPLAIN ANALYZE reports them ("Rows Removed by Filter", buffers,
 * timing): the exact count of an id's rows in an app the login does not
 * hold. No privilege controls EXPLAIN, so the check is here, in the
 * executor, where every path to an instrumented plan passes (EXPLAIN
 * ANALYZE in SQL, in a function, in a prepared statement; Citus's
 * per-shard EXPLAIN ANALYZE).
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
#include "utils/acl.h"
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
 * Whether the session's login reads `analytics` but not every app: the
 * owner, a superuser and an every-app grant read everything, and the roles
 * that do not read `analytics` (the server's, erasure's) are no concern of
 * the grants. Asked through public.onramp_reads_every_app(login), which the
 * views' check calls too, so the two never disagree; with the login named,
 * as the question may be answered by another backend (migration 033).
 * Where it is not (a database without Onramp), the login is not subject.
 */
static bool
subject_to_grants(void)
{
	Oid			analytics = get_namespace_oid("analytics", true);
	Oid			argument[1] = {NAMEOID};
	Oid			reads_every_app;
	Datum		login;

	if (!OidIsValid(analytics))
		return false;
	if (pg_namespace_aclcheck(analytics, GetSessionUserId(), ACL_USAGE) != ACLCHECK_OK || on_citus_worker())
		return false;
	reads_every_app = LookupFuncName(list_make2(makeString("public"), makeString("onramp_reads_every_app")),
									 1, argument, true);
	if (!OidIsValid(reads_every_app))
		return false;
	login = DirectFunctionCall1(namein, CStringGetDatum(GetUserNameFromId(GetSessionUserId(), false)));
	return !DatumGetBool(OidFunctionCall1(reads_every_app, login));
}

static void
guard_executor_start(QueryDesc *queryDesc, int eflags)
{
	/*
	 * A parallel worker runs what its leader was allowed to start; the
	 * leader asked.
	 */
	if (queryDesc->instrument_options != 0 && !IsParallelWorker() && subject_to_grants())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("EXPLAIN ANALYZE is not available to a login that does not read every app"),
				 errdetail("Its counts would include rows of apps the login is not granted."),
				 errhint("Use EXPLAIN without ANALYZE, or ask a login that reads every app to run it.")));
	if (previous_executor_start)
		previous_executor_start(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
}

void
_PG_init(void)
{
	previous_executor_start = ExecutorStart_hook;
	ExecutorStart_hook = guard_executor_start;
}
