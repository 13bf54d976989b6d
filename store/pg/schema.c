/*
 * schema.c - the PostgreSQL backend's schema: numbered steps, applied in
 * order on open by the first process that finds them missing, under a
 * transaction-scoped advisory lock so that concurrent first opens apply
 * each step once, or by agent-snap migrate (pg_migrate()), which shows
 * them first.  The versions applied are rows of agentkit_schema_version.
 * A later agentkit appends steps to steps[]; it never edits one.  See
 * pg.h for the layout.
 */
#include "pg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../libcore/base/json.h"
#include "../../libcore/base/util.h"

/* Step 1: the tables, their indexes and the chain functions. */
static const char step1[] =
	"CREATE TABLE agentkit_nodes ("
	" hash bytea PRIMARY KEY,"
	" prev bytea REFERENCES agentkit_nodes (hash),"
	" depth integer NOT NULL,"
	" body text NOT NULL);"
	"CREATE INDEX agentkit_nodes_prev ON agentkit_nodes (prev);"
	"CREATE TABLE agentkit_snapshots ("
	" snapshot_id text COLLATE \"C\" PRIMARY KEY,"
	" session_id text COLLATE \"C\" NOT NULL,"
	" created_ns bigint NOT NULL,"
	" status text COLLATE \"C\","
	" meta text NOT NULL,"
	" state_pos integer);"
	"CREATE INDEX agentkit_snapshots_latest"
	" ON agentkit_snapshots (session_id, created_ns, snapshot_id);"
	"CREATE TABLE agentkit_states ("
	" snapshot_id text COLLATE \"C\" PRIMARY KEY"
	"  REFERENCES agentkit_snapshots (snapshot_id) ON DELETE CASCADE,"
	" body text NOT NULL,"
	" msg_pos integer,"
	" tail bytea REFERENCES agentkit_nodes (hash),"
	" count integer NOT NULL DEFAULT 0);"
	"CREATE INDEX agentkit_states_tail ON agentkit_states (tail);"
	/* the node walk steps back from t; NULL when a node is missing */
	"CREATE FUNCTION agentkit_ancestor(t bytea, walk integer) RETURNS bytea"
	" LANGUAGE plpgsql STABLE AS $$ BEGIN"
	"  WHILE walk > 0 AND t IS NOT NULL LOOP"
	"   SELECT prev INTO t FROM agentkit_nodes WHERE hash = t;"
	"   IF NOT FOUND THEN RETURN NULL; END IF;"
	"   walk := walk - 1;"
	"  END LOOP;"
	"  IF NOT EXISTS (SELECT 1 FROM agentkit_nodes WHERE hash = t) THEN RETURN NULL; END IF;"
	"  RETURN t; END $$;"
	/* the chain hash of msgs (a JSON array) from the empty history */
	"CREATE FUNCTION agentkit_hash(msgs json) RETURNS bytea"
	" LANGUAGE plpgsql IMMUTABLE AS $$ DECLARE h bytea := decode(repeat('00', 32), 'hex');"
	"  b text; BEGIN"
	"  FOR b IN SELECT x::text FROM json_array_elements(msgs) WITH ORDINALITY AS a (x, i)"
	"   ORDER BY i LOOP h := sha256(h || convert_to(b, 'UTF8')); END LOOP;"
	"  RETURN h; END $$;"
	/* append msgs to the chain walk nodes back from t (NULL: the empty
	 * history); the new tail, or NULL when t's chain is gone */
	"CREATE FUNCTION agentkit_chain(t bytea, walk integer, msgs json) RETURNS bytea"
	" LANGUAGE plpgsql AS $$ DECLARE d integer := 0; h bytea; b text;"
	"  zero bytea := decode(repeat('00', 32), 'hex'); BEGIN"
	"  IF t IS NOT NULL THEN"
	"   t := agentkit_ancestor(t, walk);"
	"   IF t IS NULL THEN RETURN NULL; END IF;"
	"   SELECT depth INTO d FROM agentkit_nodes WHERE hash = t;"
	"  END IF;"
	"  FOR b IN SELECT x::text FROM json_array_elements(msgs) WITH ORDINALITY AS a (x, i)"
	"   ORDER BY i LOOP"
	"   h := sha256(coalesce(t, zero) || convert_to(b, 'UTF8'));"
	"   INSERT INTO agentkit_nodes (hash, prev, depth, body) VALUES (h, t, d + 1, b)"
	"    ON CONFLICT (hash) DO NOTHING;"
	"   t := h; d := d + 1;"
	"  END LOOP;"
	"  RETURN t; END $$;"
	/* collect the nodes of the chain ending at t that nothing references
	 * any more, newest first; the row lock waits for writers that are
	 * linking to a node (their foreign key check holds KEY SHARE; from
	 * step 2 on, agentkit_chain()'s own lock does), and a
	 * writer that comes later finds the node gone and retries */
	"CREATE FUNCTION agentkit_release(t bytea) RETURNS void"
	" LANGUAGE plpgsql AS $$ DECLARE p bytea; BEGIN"
	"  WHILE t IS NOT NULL LOOP"
	"   SELECT prev INTO p FROM agentkit_nodes WHERE hash = t FOR UPDATE;"
	"   IF NOT FOUND OR EXISTS (SELECT 1 FROM agentkit_nodes WHERE prev = t)"
	"    OR EXISTS (SELECT 1 FROM agentkit_states WHERE tail = t) THEN RETURN; END IF;"
	"   DELETE FROM agentkit_nodes WHERE hash = t;"
	"   t := p;"
	"  END LOOP; END $$;"
	/* the messages of the chain ending at t as one array in walk order,
	 * and each one's depth in the same order (a sort of the bodies by
	 * depth would spill to disk for long histories; the reader places
	 * them) */
	"CREATE FUNCTION agentkit_messages(t bytea, OUT msgs text, OUT depths text)"
	" LANGUAGE sql STABLE AS $$"
	" WITH RECURSIVE c (hash, prev, depth, body) AS ("
	"  SELECT hash, prev, depth, body FROM agentkit_nodes WHERE hash = t"
	"  UNION ALL SELECT n.hash, n.prev, n.depth, n.body"
	"  FROM agentkit_nodes n JOIN c ON n.hash = c.prev)"
	" SELECT '[' || coalesce(string_agg(body, ','), '') || ']',"
	"  coalesce(string_agg(depth::text, ','), '') FROM c $$;"
	/* write one row: its message chain (NULL: the base's chain is gone,
	 * nothing written), the row, its state unless kept, the old chain
	 * released; the new tail (hex, "" for none) */
	"CREATE FUNCTION agentkit_put(p_id text, p_sid text, p_created bigint, p_status text,"
	"  p_meta text, p_state_pos integer, p_keep boolean, p_has_state boolean, p_body text,"
	"  p_msg_pos integer, p_base bytea, p_walk integer, p_msgs json, p_count integer,"
	"  p_notify boolean) RETURNS text"
	" LANGUAGE plpgsql AS $$ DECLARE t bytea; old bytea; BEGIN"
	"  IF p_msgs IS NOT NULL THEN"
	"   t := agentkit_chain(p_base, p_walk, p_msgs);"
	"   IF t IS NULL AND p_base IS NOT NULL THEN RETURN NULL; END IF;"
	"  END IF;"
	"  INSERT INTO agentkit_snapshots (snapshot_id, session_id, created_ns, status, meta,"
	"   state_pos) VALUES (p_id, p_sid, p_created, p_status, p_meta, p_state_pos)"
	"   ON CONFLICT (snapshot_id) DO UPDATE SET session_id = EXCLUDED.session_id,"
	"   created_ns = EXCLUDED.created_ns, status = EXCLUDED.status, meta = EXCLUDED.meta,"
	"   state_pos = EXCLUDED.state_pos;"
	"  IF NOT p_keep THEN"
	"   SELECT tail INTO old FROM agentkit_states WHERE snapshot_id = p_id;"
	"   IF p_has_state THEN"
	"    INSERT INTO agentkit_states (snapshot_id, body, msg_pos, tail, count)"
	"     VALUES (p_id, p_body, p_msg_pos, t, coalesce(p_count, 0))"
	"     ON CONFLICT (snapshot_id) DO UPDATE SET body = EXCLUDED.body,"
	"     msg_pos = EXCLUDED.msg_pos, tail = EXCLUDED.tail, count = EXCLUDED.count;"
	"   ELSE"
	"    DELETE FROM agentkit_states WHERE snapshot_id = p_id;"
	"   END IF;"
	"   IF old IS NOT NULL AND old IS DISTINCT FROM t THEN PERFORM agentkit_release(old);"
	"   END IF;"
	"  END IF;"
	"  IF p_notify THEN PERFORM pg_notify('" PG_CHANNEL "', p_id); END IF;"
	"  RETURN coalesce(encode(t, 'hex'), ''); END $$;"
	/* delete rows and collect what only they referenced */
	"CREATE FUNCTION agentkit_drop(ids text[]) RETURNS void"
	" LANGUAGE plpgsql AS $$ DECLARE t bytea; tails bytea[]; BEGIN"
	"  SELECT array_agg(tail) INTO tails FROM agentkit_states"
	"   WHERE snapshot_id = ANY (ids) AND tail IS NOT NULL;"
	"  DELETE FROM agentkit_snapshots WHERE snapshot_id = ANY (ids);"
	"  FOREACH t IN ARRAY coalesce(tails, '{}') LOOP PERFORM agentkit_release(t); END LOOP;"
	"  PERFORM pg_notify('" PG_CHANNEL "', i) FROM unnest(ids) AS i;"
	"  END $$;";

/*
 * Step 2: no foreign keys.  Their checks cost a turn four row locks (a
 * trigger and a locking read each, and WAL: 5.2-6.0 KB of WAL per 3.2 KB
 * turn with them, 5.0-5.1 KB without, in bench/pg.sh's growth mode), and
 * a writer needs only one of those locks: on the node
 * its new messages hang from, which agentkit_release() must not collect
 * before the writer commits.  agentkit_chain() now takes that lock itself
 * (FOR KEY SHARE, as the check did) on the base node and on a stored node
 * the new chain reuses where it goes on or ends, and raises the check's
 * SQLSTATE (23503: the save is tried again) when such a node was
 * collected meanwhile (its locking read of the base node also checks that
 * the node exists: a turn, whose base is its tail, walks no ancestors);
 * agentkit_drop() deletes the states the cascade deleted.  Nodes a writer inserted itself cannot be collected by anyone
 * before it commits.
 */
static const char step2[] =
	"ALTER TABLE agentkit_nodes DROP CONSTRAINT IF EXISTS agentkit_nodes_prev_fkey;"
	"ALTER TABLE agentkit_states DROP CONSTRAINT IF EXISTS agentkit_states_tail_fkey;"
	"ALTER TABLE agentkit_states DROP CONSTRAINT IF EXISTS agentkit_states_snapshot_id_fkey;"
	"CREATE OR REPLACE FUNCTION agentkit_hold(t bytea) RETURNS void"
	" LANGUAGE plpgsql AS $$ BEGIN"
	"  PERFORM 1 FROM agentkit_nodes WHERE hash = t FOR KEY SHARE;"
	"  IF NOT FOUND THEN RAISE foreign_key_violation USING"
	"   MESSAGE = 'a message node was collected meanwhile'; END IF;"
	"  END $$;"
	"CREATE OR REPLACE FUNCTION agentkit_chain(t bytea, walk integer, msgs json) RETURNS bytea"
	" LANGUAGE plpgsql AS $$ DECLARE d integer := 0; h bytea; b text; held bytea;"
	"  zero bytea := decode(repeat('00', 32), 'hex'); BEGIN"
	"  IF t IS NOT NULL THEN"
	"   IF walk > 0 THEN"
	"    t := agentkit_ancestor(t, walk);"
	"    IF t IS NULL THEN RETURN NULL; END IF;"
	"   END IF;"
	"   SELECT depth INTO d FROM agentkit_nodes WHERE hash = t FOR KEY SHARE;"
	"   IF NOT FOUND THEN RETURN NULL; END IF;"
	"   held := t;"
	"  END IF;"
	"  FOR b IN SELECT x::text FROM json_array_elements(msgs) WITH ORDINALITY AS a (x, i)"
	"   ORDER BY i LOOP"
	"   h := sha256(coalesce(t, zero) || convert_to(b, 'UTF8'));"
	"   INSERT INTO agentkit_nodes (hash, prev, depth, body) VALUES (h, t, d + 1, b)"
	"    ON CONFLICT (hash) DO NOTHING;"
	"   IF FOUND THEN"
	"    IF t IS NOT NULL AND t IS DISTINCT FROM held THEN PERFORM agentkit_hold(t); END IF;"
	"    held := h;"
	"   END IF;"
	"   t := h; d := d + 1;"
	"  END LOOP;"
	"  IF t IS NOT NULL AND t IS DISTINCT FROM held THEN PERFORM agentkit_hold(t); END IF;"
	"  RETURN t; END $$;"
	"CREATE OR REPLACE FUNCTION agentkit_drop(ids text[]) RETURNS void"
	" LANGUAGE plpgsql AS $$ DECLARE t bytea; tails bytea[]; BEGIN"
	"  SELECT array_agg(tail) INTO tails FROM agentkit_states"
	"   WHERE snapshot_id = ANY (ids) AND tail IS NOT NULL;"
	"  DELETE FROM agentkit_states WHERE snapshot_id = ANY (ids);"
	"  DELETE FROM agentkit_snapshots WHERE snapshot_id = ANY (ids);"
	"  FOREACH t IN ARRAY coalesce(tails, '{}') LOOP PERFORM agentkit_release(t); END LOOP;"
	"  PERFORM pg_notify('" PG_CHANNEL "', i) FROM unnest(ids) AS i;"
	"  END $$;";

/*
 * Step 3: detached workers' log lines (store_log_append()), so any host
 * reads them and a deletion takes them with its rows.  line_id orders a
 * row's lines (one worker appends them, each committed before the next);
 * an identity needs no grant beyond INSERT on the table.
 *
 * And a deletion never waits for a node a writer holds: agentkit_release()
 * skips a locked node (a writer's base, held FOR KEY SHARE until it
 * commits), leaving it and its ancestors, which the writer is about to
 * use.  Waiting there deadlocked with the writer, which was itself
 * waiting on a node the deletion had taken, and each deadlock cost its
 * victim deadlock_timeout (1 s) before a try again.
 */
static const char step3[] =
	"CREATE TABLE agentkit_worker_log ("
	" snapshot_id text COLLATE \"C\" NOT NULL,"
	" line_id bigint GENERATED ALWAYS AS IDENTITY,"
	" at_ns bigint NOT NULL,"
	" body text NOT NULL,"
	" PRIMARY KEY (snapshot_id, line_id));"
	"CREATE OR REPLACE FUNCTION agentkit_release(t bytea) RETURNS void"
	" LANGUAGE plpgsql AS $$ DECLARE p bytea; BEGIN"
	"  WHILE t IS NOT NULL LOOP"
	"   SELECT prev INTO p FROM agentkit_nodes WHERE hash = t FOR UPDATE SKIP LOCKED;"
	"   IF NOT FOUND OR EXISTS (SELECT 1 FROM agentkit_nodes WHERE prev = t)"
	"    OR EXISTS (SELECT 1 FROM agentkit_states WHERE tail = t) THEN RETURN; END IF;"
	"   DELETE FROM agentkit_nodes WHERE hash = t;"
	"   t := p;"
	"  END LOOP; END $$;";

/*
 * Step 4: the queue index (store.h "Queued runs"), one row per pending or
 * aborting queued run, kept by a trigger from the row's metadata: the
 * "ready" and "lease" times every save computes (store_queue_project()),
 * the agent and its concurrency limit.  A claim picks from it with FOR
 * UPDATE SKIP LOCKED (pg_claim()); deleting a snapshot deletes its entry
 * (the trigger again: no foreign key, as step 2 has it).  The trigger
 * parses the metadata only when it names a queue.
 */
static const char step4[] =
	"CREATE TABLE agentkit_queue ("
	" snapshot_id text COLLATE \"C\" PRIMARY KEY,"
	" queue text COLLATE \"C\" NOT NULL,"
	" agent text COLLATE \"C\" NOT NULL,"
	" concurrency integer NOT NULL,"
	" ready_ns bigint NOT NULL,"
	" lease_ns bigint NOT NULL);"
	"CREATE INDEX agentkit_queue_ready ON agentkit_queue (queue, ready_ns, snapshot_id);"
	"CREATE INDEX agentkit_queue_agent ON agentkit_queue (agent, lease_ns);"
	"CREATE FUNCTION agentkit_queue_sync() RETURNS trigger"
	" LANGUAGE plpgsql AS $$ DECLARE q json; BEGIN"
	"  IF TG_OP = 'DELETE' THEN"
	"   IF position('\"queue\"' IN OLD.meta) > 0 THEN"
	"    DELETE FROM agentkit_queue WHERE snapshot_id = OLD.snapshot_id;"
	"   END IF;"
	"   RETURN NULL;"
	"  END IF;"
	"  IF NEW.status IN ('pending', 'aborting') AND position('\"queue\"' IN NEW.meta) > 0 THEN"
	"   q := NEW.meta::json -> 'agentkit' -> 'queue';"
	"  END IF;"
	"  IF q IS NULL OR json_typeof(q) <> 'object' OR q ->> 'name' IS NULL THEN"
	"   IF TG_OP = 'UPDATE' AND position('\"queue\"' IN OLD.meta) > 0 THEN"
	"    DELETE FROM agentkit_queue WHERE snapshot_id = NEW.snapshot_id;"
	"   END IF;"
	"   RETURN NULL;"
	"  END IF;"
	"  INSERT INTO agentkit_queue VALUES (NEW.snapshot_id, q ->> 'name',"
	"   coalesce(q ->> 'agent', ''), coalesce((q ->> 'concurrency')::integer, 0),"
	"   coalesce((q ->> 'ready')::bigint, 0), coalesce((q ->> 'lease')::bigint, 0))"
	"  ON CONFLICT (snapshot_id) DO UPDATE SET queue = EXCLUDED.queue,"
	"   agent = EXCLUDED.agent, concurrency = EXCLUDED.concurrency,"
	"   ready_ns = EXCLUDED.ready_ns, lease_ns = EXCLUDED.lease_ns;"
	"  RETURN NULL;"
	" END $$;"
	"CREATE TRIGGER agentkit_queue_sync AFTER INSERT OR UPDATE OR DELETE ON agentkit_snapshots"
	" FOR EACH ROW EXECUTE FUNCTION agentkit_queue_sync();";

/*
 * Step 5: the sessions newest first (store_sessions_recent()): one row per
 * session with the time of its latest row (st_updated_ns(): updatedAt as
 * store_shape() shows it, in ns; no valid time: the least bigint), that
 * row's ID and the session's row count, kept by a trigger in the
 * transaction of every row write and delete, and built here from the rows
 * the store already has (the table lock first: no writer commits between
 * the build and the trigger; an older agentkit's writes go through the
 * trigger too).  The trigger first locks (or makes) the session's entry,
 * then reads the session's latest row: a writer of the same session waits
 * at that lock, and its next statement sees the first one's commit.
 */
static const char step5[] =
	"LOCK TABLE agentkit_snapshots IN SHARE ROW EXCLUSIVE MODE;"
	"CREATE TABLE agentkit_recent ("
	" session_id text COLLATE \"C\" PRIMARY KEY,"
	" updated_ns bigint NOT NULL,"
	" latest_id text COLLATE \"C\" NOT NULL,"
	" row_count bigint NOT NULL);"
	"CREATE INDEX agentkit_recent_order ON agentkit_recent (updated_ns DESC, session_id);"
	/* an RFC 3339 time in ns as st_time_ns() reads it (strptime()'s
	 * ranges, then timegm()'s arithmetic: days from the civil date) */
	"CREATE FUNCTION agentkit_time_ns(t text) RETURNS bigint"
	" LANGUAGE plpgsql IMMUTABLE AS $$ DECLARE y integer; mo integer; d integer;"
	"  hh integer; mi integer; ss integer; era integer; yoe integer; doy integer;"
	"  off bigint := 0; days bigint; BEGIN"
	"  IF t IS NULL OR t !~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}"
	"(\\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})$' THEN RETURN -9223372036854775807 - 1; END IF;"
	"  y := substr(t, 1, 4)::integer; mo := substr(t, 6, 2)::integer;"
	"  d := substr(t, 9, 2)::integer; hh := substr(t, 12, 2)::integer;"
	"  mi := substr(t, 15, 2)::integer; ss := substr(t, 18, 2)::integer;"
	"  IF mo < 1 OR mo > 12 OR d < 1 OR d > 31 OR hh > 23 OR mi > 59 OR ss > 61"
	"   THEN RETURN -9223372036854775807 - 1; END IF;"
	"  IF y < 1678 THEN RETURN -9223372036854775807 - 1; END IF;"
	"  IF y > 2261 THEN RETURN 9223372036854775807; END IF;"
	"  IF t ~ '[+-][0-9]{2}:[0-9]{2}$' THEN"
	"   off := (substr(t, length(t) - 4, 2)::bigint * 3600 + right(t, 2)::bigint * 60)"
	"    * CASE WHEN substr(t, length(t) - 5, 1) = '-' THEN -1 ELSE 1 END;"
	"  END IF;"
	"  IF mo <= 2 THEN y := y - 1; END IF;"
	"  era := y / 400; yoe := y - era * 400;"
	"  doy := (153 * (mo + CASE WHEN mo > 2 THEN -3 ELSE 9 END) + 2) / 5 + d - 1;"
	"  days := era * 146097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719468;"
	"  RETURN ((days * 86400 + hh * 3600 + mi * 60 + ss) - off) * 1000000000"
	"   + coalesce(rpad(substring(t FROM '\\.([0-9]{1,9})'), 9, '0')::bigint, 0); END $$;"
	/* a row's listing time from its metadata, as st_updated_ns() */
	"CREATE FUNCTION agentkit_updated_ns(meta text) RETURNS bigint"
	" LANGUAGE plpgsql IMMUTABLE AS $$ DECLARE u json; c json; BEGIN"
	"  SELECT x.\"updatedAt\", x.\"createdAt\" INTO u, c"
	"   FROM json_to_record(meta::json) AS x (\"updatedAt\" json, \"createdAt\" json);"
	"  IF c IS NOT NULL AND (u IS NULL OR json_typeof(u) = 'null'"
	"   OR (json_typeof(u) = 'string' AND (u #>> '{}' = '' OR (u #>> '{}'"
	"   LIKE '0001-01-01T00:00:00%' AND agentkit_time_ns(u #>> '{}')"
	"   = -9223372036854775807 - 1)))) THEN u := c; END IF;"
	"  IF u IS NULL OR json_typeof(u) <> 'string' THEN RETURN -9223372036854775807 - 1; END IF;"
	"  RETURN agentkit_time_ns(u #>> '{}'); END $$;"
	/* the entry of session p_sid after row p_id (NULL: a deletion) was
	 * written, p_delta the change of its row count; an entry that stays
	 * as it was is not written again */
	"CREATE FUNCTION agentkit_recent_fix(p_sid text, p_id text, p_delta bigint) RETURNS void"
	" LANGUAGE plpgsql AS $$ DECLARE l record; r record; u bigint; n integer; BEGIN"
	"  SELECT latest_id, updated_ns INTO r FROM agentkit_recent WHERE session_id = p_sid"
	"   FOR UPDATE;"
	"  IF NOT FOUND AND p_delta > 0 THEN"   /* a new session: its entry whole */
	"   SELECT snapshot_id, meta INTO l FROM agentkit_snapshots WHERE session_id = p_sid"
	"    ORDER BY created_ns DESC, snapshot_id DESC LIMIT 1;"
	"   INSERT INTO agentkit_recent VALUES (p_sid, agentkit_updated_ns(l.meta),"
	"    l.snapshot_id, p_delta) ON CONFLICT (session_id) DO NOTHING;"
	"   GET DIAGNOSTICS n = ROW_COUNT;"
	"   IF n > 0 THEN RETURN; END IF;"
	"  END IF;"
	"  IF NOT FOUND THEN"
	"   INSERT INTO agentkit_recent VALUES (p_sid, -9223372036854775807 - 1, '', 0)"
	"    ON CONFLICT (session_id) DO NOTHING;"
	"   SELECT latest_id, updated_ns INTO r FROM agentkit_recent WHERE session_id = p_sid"
	"    FOR UPDATE;"
	"  END IF;"
	"  SELECT snapshot_id, meta INTO l FROM agentkit_snapshots WHERE session_id = p_sid"
	"   ORDER BY created_ns DESC, snapshot_id DESC LIMIT 1;"
	"  IF NOT FOUND THEN DELETE FROM agentkit_recent WHERE session_id = p_sid; RETURN; END IF;"
	"  IF l.snapshot_id = r.latest_id AND l.snapshot_id IS DISTINCT FROM p_id THEN"
	"   u := r.updated_ns;"
	"  ELSE"
	"   u := agentkit_updated_ns(l.meta);"
	"  END IF;"
	"  IF u = r.updated_ns AND l.snapshot_id = r.latest_id AND p_delta = 0 THEN RETURN; END IF;"
	"  UPDATE agentkit_recent SET updated_ns = u, latest_id = l.snapshot_id,"
	"   row_count = row_count + p_delta WHERE session_id = p_sid;"
	" END $$;"
	"CREATE FUNCTION agentkit_recent_sync() RETURNS trigger"
	" LANGUAGE plpgsql AS $$ BEGIN"
	"  IF TG_OP = 'INSERT' THEN PERFORM agentkit_recent_fix(NEW.session_id, NEW.snapshot_id, 1);"
	"  ELSIF TG_OP = 'DELETE' THEN PERFORM agentkit_recent_fix(OLD.session_id, NULL, -1);"
	"  ELSIF OLD.session_id IS DISTINCT FROM NEW.session_id THEN"
	"   PERFORM agentkit_recent_fix(OLD.session_id, NULL, -1);"
	"   PERFORM agentkit_recent_fix(NEW.session_id, NEW.snapshot_id, 1);"
	"  ELSE PERFORM agentkit_recent_fix(NEW.session_id, NEW.snapshot_id, 0); END IF;"
	"  RETURN NULL; END $$;"
	"INSERT INTO agentkit_recent SELECT DISTINCT ON (session_id) session_id,"
	" agentkit_updated_ns(meta), snapshot_id, count(*) OVER (PARTITION BY session_id)"
	" FROM agentkit_snapshots ORDER BY session_id, created_ns DESC, snapshot_id DESC;"
	"CREATE TRIGGER agentkit_recent_sync AFTER INSERT OR UPDATE OR DELETE ON agentkit_snapshots"
	" FOR EACH ROW EXECUTE FUNCTION agentkit_recent_sync();";

/*
 * Step 6: each session's listing entry (st_entry_make(): the line
 * agent-snap sessions prints, with its times and offsets) kept in
 * agentkit_recent, so a listing reads that one table.  The writer makes
 * the entry, in C, from the row it writes, and the 17-argument
 * agentkit_put() hands it (hex) and the row's listing time (the entry's
 * own, st_updated_ns()) to the trigger in settings local to the
 * transaction: agentkit.entry_id names the row, agentkit.entry and
 * agentkit.entry_ns are its entry and time.  agentkit_recent_fix() (step
 * 5's, replaced) stores the entry when that row is the session's latest,
 * and takes its time from the setting rather than parsing the row's
 * metadata (agentkit_updated_ns() was a fifth of a turn's server time).
 * Any other change of the latest row (an older agentkit's write through
 * the 15-argument agentkit_put(), a deletion that makes an older row the
 * latest) leaves the entry NULL, and the listing makes that session's
 * line from its row, as before.  The entries of the sessions already
 * there are made in C after the SQL, in the step's transaction
 * (fill_entries()).
 */
static const char step6[] =
	"ALTER TABLE agentkit_recent ADD COLUMN entry bytea;"
	/* row p_id's listing time and entry: those its writer handed over,
	 * or its time from its metadata and no entry (an IF, not a CASE: a
	 * plan with the metadata as a constant would parse it either way) */
	"CREATE FUNCTION agentkit_listed(p_id text, p_meta text, OUT ns bigint, OUT entry bytea)"
	" LANGUAGE plpgsql STABLE AS $$ BEGIN"
	"  IF current_setting('agentkit.entry_id', true) = p_id THEN"
	"   ns := current_setting('agentkit.entry_ns')::bigint;"
	"   entry := decode(current_setting('agentkit.entry'), 'hex');"
	"  ELSE"
	"   ns := agentkit_updated_ns(p_meta);"
	"  END IF; END $$;"
	"CREATE OR REPLACE FUNCTION agentkit_recent_fix(p_sid text, p_id text, p_delta bigint)"
	" RETURNS void"
	" LANGUAGE plpgsql AS $$ DECLARE l record; r record; n integer; x record; BEGIN"
	"  SELECT latest_id, updated_ns INTO r FROM agentkit_recent WHERE session_id = p_sid"
	"   FOR UPDATE;"
	"  IF NOT FOUND AND p_delta > 0 THEN"
	"   SELECT snapshot_id, meta INTO l FROM agentkit_snapshots WHERE session_id = p_sid"
	"    ORDER BY created_ns DESC, snapshot_id DESC LIMIT 1;"
	"   x := agentkit_listed(l.snapshot_id, l.meta);"
	"   INSERT INTO agentkit_recent VALUES (p_sid, x.ns, l.snapshot_id, p_delta, x.entry)"
	"    ON CONFLICT (session_id) DO NOTHING;"
	"   GET DIAGNOSTICS n = ROW_COUNT;"
	"   IF n > 0 THEN RETURN; END IF;"
	"  END IF;"
	"  IF NOT FOUND THEN"
	"   INSERT INTO agentkit_recent VALUES (p_sid, -9223372036854775807 - 1, '', 0)"
	"    ON CONFLICT (session_id) DO NOTHING;"
	"   SELECT latest_id, updated_ns INTO r FROM agentkit_recent WHERE session_id = p_sid"
	"    FOR UPDATE;"
	"  END IF;"
	"  SELECT snapshot_id, meta INTO l FROM agentkit_snapshots WHERE session_id = p_sid"
	"   ORDER BY created_ns DESC, snapshot_id DESC LIMIT 1;"
	"  IF NOT FOUND THEN DELETE FROM agentkit_recent WHERE session_id = p_sid; RETURN; END IF;"
	/* the latest row as it was: its time and entry stay */
	"  IF l.snapshot_id = r.latest_id AND l.snapshot_id IS DISTINCT FROM p_id THEN"
	"   IF p_delta <> 0 THEN"
	"    UPDATE agentkit_recent SET row_count = row_count + p_delta WHERE session_id = p_sid;"
	"   END IF;"
	"   RETURN;"
	"  END IF;"
	"  x := agentkit_listed(l.snapshot_id, l.meta);"
	"  UPDATE agentkit_recent SET updated_ns = x.ns, latest_id = l.snapshot_id,"
	"   row_count = row_count + p_delta, entry = x.entry WHERE session_id = p_sid;"
	" END $$;"
	/* agentkit_put() with the row's listing entry (hex) and time */
	"CREATE FUNCTION agentkit_put(p_id text, p_sid text, p_created bigint, p_status text,"
	"  p_meta text, p_state_pos integer, p_keep boolean, p_has_state boolean, p_body text,"
	"  p_msg_pos integer, p_base bytea, p_walk integer, p_msgs json, p_count integer,"
	"  p_notify boolean, p_entry text, p_listed bigint) RETURNS text"
	" LANGUAGE plpgsql AS $$ DECLARE t text; BEGIN"
	"  PERFORM set_config('agentkit.entry_id', p_id, true),"
	"   set_config('agentkit.entry', p_entry, true),"
	"   set_config('agentkit.entry_ns', p_listed::text, true);"
	"  t := agentkit_put(p_id, p_sid, p_created, p_status, p_meta, p_state_pos, p_keep,"
	"   p_has_state, p_body, p_msg_pos, p_base, p_walk, p_msgs, p_count, p_notify);"
	"  PERFORM set_config('agentkit.entry_id', '', true);"
	"  RETURN t; END $$;";

/*
 * Step 7: the queue's trigger (step 4) fires only for a row that names a
 * queue, by a WHEN on each event that asks what agentkit_queue_sync()
 * itself asks first: calling a PL/pgSQL function for every other row cost
 * a turn about 30 µs of the server's time, for nothing.
 */
static const char step7[] =
	"DROP TRIGGER agentkit_queue_sync ON agentkit_snapshots;"
	"CREATE TRIGGER agentkit_queue_insert AFTER INSERT ON agentkit_snapshots FOR EACH ROW"
	" WHEN (NEW.status IN ('pending', 'aborting') AND position('\"queue\"' IN NEW.meta) > 0)"
	" EXECUTE FUNCTION agentkit_queue_sync();"
	"CREATE TRIGGER agentkit_queue_update AFTER UPDATE ON agentkit_snapshots FOR EACH ROW"
	" WHEN (position('\"queue\"' IN NEW.meta) > 0 OR position('\"queue\"' IN OLD.meta) > 0)"
	" EXECUTE FUNCTION agentkit_queue_sync();"
	"CREATE TRIGGER agentkit_queue_delete AFTER DELETE ON agentkit_snapshots FOR EACH ROW"
	" WHEN (position('\"queue\"' IN OLD.meta) > 0)"
	" EXECUTE FUNCTION agentkit_queue_sync();";

/*
 * Step 8: a turn's new row written by plain SQL (ops.c write_new()), no
 * PL/pgSQL on its way.  A new server process loads PL/pgSQL and compiles
 * every function on its first call: the functions and the trigger a new
 * row went through cost a one-shot agent-run about 5 ms of its 15 ms.
 * agentkit_recent gains latest_ns, the created_ns of latest_id, so a
 * writer that inserts a row folds it into its session's entry with an
 * INSERT ... ON CONFLICT DO UPDATE that compares (created_ns, snapshot_id)
 * with the entry as it stands once locked (a concurrent writer's commit
 * included); the trigger on inserts then skips the row that writer names
 * in agentkit.recent_id (a setting local to the transaction, set by the
 * row's own INSERT before the row exists).  Updates, deletions and every
 * other insert go through the trigger as before, whose
 * agentkit_recent_fix() (step 6's, replaced) keeps latest_ns too.  The
 * table lock first, as in step 5: no writer commits between the fill and
 * the new function.
 */
static const char step8[] =
	"LOCK TABLE agentkit_snapshots IN SHARE ROW EXCLUSIVE MODE;"
	"ALTER TABLE agentkit_recent ADD COLUMN latest_ns bigint NOT NULL"
	" DEFAULT (-9223372036854775807 - 1);"
	"UPDATE agentkit_recent r SET latest_ns = s.created_ns FROM agentkit_snapshots s"
	" WHERE s.snapshot_id = r.latest_id;"
	"CREATE OR REPLACE FUNCTION agentkit_recent_fix(p_sid text, p_id text, p_delta bigint)"
	" RETURNS void"
	" LANGUAGE plpgsql AS $$ DECLARE l record; r record; n integer; x record; BEGIN"
	"  SELECT latest_id, updated_ns INTO r FROM agentkit_recent WHERE session_id = p_sid"
	"   FOR UPDATE;"
	"  IF NOT FOUND AND p_delta > 0 THEN"
	"   SELECT snapshot_id, created_ns, meta INTO l FROM agentkit_snapshots"
	"    WHERE session_id = p_sid ORDER BY created_ns DESC, snapshot_id DESC LIMIT 1;"
	"   x := agentkit_listed(l.snapshot_id, l.meta);"
	"   INSERT INTO agentkit_recent (session_id, updated_ns, latest_id, row_count, entry,"
	"    latest_ns) VALUES (p_sid, x.ns, l.snapshot_id, p_delta, x.entry, l.created_ns)"
	"    ON CONFLICT (session_id) DO NOTHING;"
	"   GET DIAGNOSTICS n = ROW_COUNT;"
	"   IF n > 0 THEN RETURN; END IF;"
	"  END IF;"
	"  IF NOT FOUND THEN"
	"   INSERT INTO agentkit_recent (session_id, updated_ns, latest_id, row_count)"
	"    VALUES (p_sid, -9223372036854775807 - 1, '', 0) ON CONFLICT (session_id) DO NOTHING;"
	"   SELECT latest_id, updated_ns INTO r FROM agentkit_recent WHERE session_id = p_sid"
	"    FOR UPDATE;"
	"  END IF;"
	"  SELECT snapshot_id, created_ns, meta INTO l FROM agentkit_snapshots"
	"   WHERE session_id = p_sid ORDER BY created_ns DESC, snapshot_id DESC LIMIT 1;"
	"  IF NOT FOUND THEN DELETE FROM agentkit_recent WHERE session_id = p_sid; RETURN; END IF;"
	"  IF l.snapshot_id = r.latest_id AND l.snapshot_id IS DISTINCT FROM p_id THEN"
	"   IF p_delta <> 0 THEN"
	"    UPDATE agentkit_recent SET row_count = row_count + p_delta WHERE session_id = p_sid;"
	"   END IF;"
	"   RETURN;"
	"  END IF;"
	"  x := agentkit_listed(l.snapshot_id, l.meta);"
	"  UPDATE agentkit_recent SET updated_ns = x.ns, latest_id = l.snapshot_id,"
	"   latest_ns = l.created_ns, row_count = row_count + p_delta, entry = x.entry"
	"   WHERE session_id = p_sid;"
	" END $$;"
	"DROP TRIGGER agentkit_recent_sync ON agentkit_snapshots;"
	"CREATE TRIGGER agentkit_recent_insert AFTER INSERT ON agentkit_snapshots FOR EACH ROW"
	" WHEN (current_setting('agentkit.recent_id', true) IS DISTINCT FROM NEW.snapshot_id)"
	" EXECUTE FUNCTION agentkit_recent_sync();"
	"CREATE TRIGGER agentkit_recent_change AFTER UPDATE OR DELETE ON agentkit_snapshots"
	" FOR EACH ROW EXECUTE FUNCTION agentkit_recent_sync();";

/*
 * Step 9: a row's state in the row's own tuple.  agentkit_states goes: its
 * columns (the state without its messages, where "messages" sat, the tail
 * and count of the message chain) are agentkit_snapshots' body, msg_pos,
 * tail and count (body NULL: no state), and the index on tails, which
 * agentkit_release() asks, is agentkit_snapshots_tail.  A turn so writes
 * one tuple and two index entries fewer, and a server process opens one
 * table fewer.  The rows' states are copied with the table's triggers
 * off (the copy changes no row's listing or queue entry; the column
 * change has locked the table until the step commits).
 *
 * And no trigger runs on an insert into agentkit_snapshots: a new row's
 * statement (ops.c put_row) keeps its session's agentkit_recent entry
 * itself, without the setting step 8's trigger read, and indexes the row
 * in agentkit_queue when it names a queue (pending or aborting, "queue"
 * in its metadata: what step 7's WHEN asked) through agentkit_queue_put(),
 * agentkit_queue_sync()'s projection as a function of plain SQL; and
 * agentkit_put() does both for a row it inserts (agentkit_recent_fix()
 * for the entry, as the trigger did).  The two triggers' WHEN clauses,
 * compiled by every statement that inserts a row, cost a turn 20-40 us of
 * the server's CPU.  Updates and deletions keep theirs.
 *
 * agentkit_release(), agentkit_drop() and agentkit_put() read and write
 * the new columns; agentkit_put() inserts a row it did not find, where it
 * upserted, so every write of a new ID inserts and the primary key
 * serializes them (ops.c write_row()).  A process of an older agentkit
 * that had the store open fails its next statement on agentkit_states (it
 * does not exist): it writes nothing wrong, and is refused the store once
 * restarted ("newer than this agentkit").
 */
static const char step9[] =
	"ALTER TABLE agentkit_snapshots ADD COLUMN body text, ADD COLUMN msg_pos integer,"
	" ADD COLUMN tail bytea, ADD COLUMN count integer NOT NULL DEFAULT 0;"
	"ALTER TABLE agentkit_snapshots DISABLE TRIGGER USER;"
	"UPDATE agentkit_snapshots s SET body = t.body, msg_pos = t.msg_pos, tail = t.tail,"
	" count = t.count FROM agentkit_states t WHERE t.snapshot_id = s.snapshot_id;"
	"ALTER TABLE agentkit_snapshots ENABLE TRIGGER USER;"
	"DROP TABLE agentkit_states;"
	"CREATE INDEX agentkit_snapshots_tail ON agentkit_snapshots (tail);"
	"DROP TRIGGER agentkit_recent_insert ON agentkit_snapshots;"
	"DROP TRIGGER agentkit_queue_insert ON agentkit_snapshots;"
	"CREATE FUNCTION agentkit_queue_put(p_id text, p_meta text) RETURNS void"
	" LANGUAGE sql AS $$"
	" INSERT INTO agentkit_queue SELECT p_id, q ->> 'name', coalesce(q ->> 'agent', ''),"
	"  coalesce((q ->> 'concurrency')::integer, 0), coalesce((q ->> 'ready')::bigint, 0),"
	"  coalesce((q ->> 'lease')::bigint, 0)"
	"  FROM (SELECT p_meta::json -> 'agentkit' -> 'queue' AS q) x"
	"  WHERE json_typeof(q) = 'object' AND q ->> 'name' IS NOT NULL"
	"  ON CONFLICT (snapshot_id) DO UPDATE SET queue = EXCLUDED.queue,"
	"  agent = EXCLUDED.agent, concurrency = EXCLUDED.concurrency,"
	"  ready_ns = EXCLUDED.ready_ns, lease_ns = EXCLUDED.lease_ns $$;"
	"CREATE OR REPLACE FUNCTION agentkit_release(t bytea) RETURNS void"
	" LANGUAGE plpgsql AS $$ DECLARE p bytea; BEGIN"
	"  WHILE t IS NOT NULL LOOP"
	"   SELECT prev INTO p FROM agentkit_nodes WHERE hash = t FOR UPDATE SKIP LOCKED;"
	"   IF NOT FOUND OR EXISTS (SELECT 1 FROM agentkit_nodes WHERE prev = t)"
	"    OR EXISTS (SELECT 1 FROM agentkit_snapshots WHERE tail = t) THEN RETURN; END IF;"
	"   DELETE FROM agentkit_nodes WHERE hash = t;"
	"   t := p;"
	"  END LOOP; END $$;"
	"CREATE OR REPLACE FUNCTION agentkit_drop(ids text[]) RETURNS void"
	" LANGUAGE plpgsql AS $$ DECLARE t bytea; tails bytea[]; BEGIN"
	"  SELECT array_agg(tail) INTO tails FROM agentkit_snapshots"
	"   WHERE snapshot_id = ANY (ids) AND tail IS NOT NULL;"
	"  DELETE FROM agentkit_snapshots WHERE snapshot_id = ANY (ids);"
	"  FOREACH t IN ARRAY coalesce(tails, '{}') LOOP PERFORM agentkit_release(t); END LOOP;"
	"  PERFORM pg_notify('" PG_CHANNEL "', i) FROM unnest(ids) AS i;"
	"  END $$;"
	"CREATE OR REPLACE FUNCTION agentkit_put(p_id text, p_sid text, p_created bigint,"
	"  p_status text, p_meta text, p_state_pos integer, p_keep boolean, p_has_state boolean,"
	"  p_body text, p_msg_pos integer, p_base bytea, p_walk integer, p_msgs json,"
	"  p_count integer, p_notify boolean) RETURNS text"
	" LANGUAGE plpgsql AS $$ DECLARE t bytea; old bytea; BEGIN"
	"  IF p_msgs IS NOT NULL THEN"
	"   t := agentkit_chain(p_base, p_walk, p_msgs);"
	"   IF t IS NULL AND p_base IS NOT NULL THEN RETURN NULL; END IF;"
	"  END IF;"
	"  IF NOT p_has_state THEN p_body := NULL; p_msg_pos := NULL; p_count := 0; END IF;"
	"  SELECT tail INTO old FROM agentkit_snapshots WHERE snapshot_id = p_id;"
	"  IF NOT FOUND THEN"
	"   INSERT INTO agentkit_snapshots (snapshot_id, session_id, created_ns, status, meta,"
	"    state_pos, body, msg_pos, tail, count) VALUES (p_id, p_sid, p_created, p_status,"
	"    p_meta, p_state_pos, p_body, p_msg_pos, t, coalesce(p_count, 0));"
	"   PERFORM agentkit_recent_fix(p_sid, p_id, 1);"
	"   IF p_status IN ('pending', 'aborting') AND position('\"queue\"' IN p_meta) > 0 THEN"
	"    PERFORM agentkit_queue_put(p_id, p_meta);"
	"   END IF;"
	"  ELSIF p_keep THEN"
	"   UPDATE agentkit_snapshots SET session_id = p_sid, created_ns = p_created,"
	"    status = p_status, meta = p_meta, state_pos = p_state_pos WHERE snapshot_id = p_id;"
	"  ELSE"
	"   UPDATE agentkit_snapshots SET session_id = p_sid, created_ns = p_created,"
	"    status = p_status, meta = p_meta, state_pos = p_state_pos, body = p_body,"
	"    msg_pos = p_msg_pos, tail = t, count = coalesce(p_count, 0)"
	"    WHERE snapshot_id = p_id;"
	"   IF old IS NOT NULL AND old IS DISTINCT FROM t THEN PERFORM agentkit_release(old);"
	"   END IF;"
	"  END IF;"
	"  IF p_notify THEN PERFORM pg_notify('" PG_CHANNEL "', p_id); END IF;"
	"  RETURN coalesce(encode(t, 'hex'), ''); END $$;";

static const char *const steps[] = { step1, step2, step3, step4, step5, step6, step7, step8,
                                     step9 };

/*
 * After step 6's SQL, in its transaction: the entries of the sessions
 * the store already has, made from their latest rows, 256 sessions a
 * statement.  Each batch's agentkit_recent rows are locked as they are
 * read, so a writer of one of those sessions waits at its trigger until
 * the step commits and then replaces the entry (its row was not the one
 * read, or it was read as committed before it).  A session whose latest
 * row has no metadata to read is left without one (listed from its row).
 */
static enum core_status fill_entries(struct pg_store *s, struct core_err *e)
{
	static const char pick[] =
		"SELECT r.session_id, s.meta FROM agentkit_recent r"
		" JOIN agentkit_snapshots s ON s.snapshot_id = r.latest_id"
		" WHERE r.session_id > $1 ORDER BY r.session_id LIMIT 256 FOR UPDATE OF r";
	static const char put[] =
		"UPDATE agentkit_recent r SET entry = decode(v.value, 'hex')"
		" FROM json_each_text($1::json) v WHERE r.session_id = v.key";
	const char *what = "make the sessions' listing entries";
	char after[STORE_ID_MAX + 1] = "";
	enum core_status st = CORE_OK;
	int n;
	do {
		const char *p[1] = { after };
		struct core_buf hex = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
		struct core_buf text = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
		json_t *batch = json_object();
		PGresult *r;
		if (!batch)
			return core_fail(e, CORE_ENOMEM, "%s: out of memory", what);
		if ((st = pg_exec(s, pick, 1, p, &r, what, e)) != CORE_OK) {
			json_decref(batch);
			return st;
		}
		n = PQntuples(r);
		for (int i = 0; i < n && st == CORE_OK; i++) {
			json_t *latest = NULL;
			char listed[24];
			hex.len = 0;
			if (pg_row_join(PQgetvalue(r, i, 1), NULL, NULL, NULL, NULL, NULL, NULL, &latest,
			                NULL) != CORE_OK)
				continue;
			if (pg_entry_hex(PQgetvalue(r, i, 0), latest, &hex, listed) != CORE_OK ||
			    json_object_set_new(batch, PQgetvalue(r, i, 0), json_string(hex.p)))
				st = core_fail(e, CORE_ENOMEM, "%s: out of memory", what);
			json_decref(latest);
		}
		if (n)
			snprintf(after, sizeof after, "%s", PQgetvalue(r, n - 1, 0));
		PQclear(r);
		if (st == CORE_OK && json_object_size(batch) &&
		    (st = jv_dump(batch, &text)) != CORE_OK)
			st = core_fail(e, st, "%s: out of memory", what);
		if (st == CORE_OK && json_object_size(batch)) {
			p[0] = text.p;
			if ((st = pg_exec(s, put, 1, p, &r, what, e)) == CORE_OK)
				PQclear(r);
		}
		json_decref(batch);
		core_buf_release(&hex);
		core_buf_release(&text);
	} while (st == CORE_OK && n == PG_BATCH);
	return st;
}
#define NSTEPS (sizeof steps / sizeof steps[0])

/*
 * The steps this agentkit knows: all of steps[], or only the first N with
 * AGENTKIT_TEST_PG_SCHEMA_STEPS=N, which the tests use to make a store of
 * an older version (and a newer one than "this agentkit" knows).  It is
 * for tests only; a user never needs it.
 */
static size_t known_steps(void)
{
	const char *x = getenv("AGENTKIT_TEST_PG_SCHEMA_STEPS");
	char *end;
	unsigned long n;
	if (!x || !*x)
		return NSTEPS;
	n = strtoul(x, &end, 10);
	return *end || n > NSTEPS ? NSTEPS : (size_t)n;
}

/* A timestamptz in binary: µs since 2000-01-01, as µs since the epoch. */
static int64_t unix_us(const char *v)
{
	return (int64_t)get_be64((const unsigned char *)v) + 946684800000000LL;
}

/* Why a writer could not write to the store (NULL: it can). */
static const char *cannot_write(int standby, int read_only, int may_write)
{
	if (standby)
		return "the server is a standby (in recovery): connect to the primary";
	if (read_only)
		return "its transactions are read-only (default_transaction_read_only)";
	if (!may_write)
		return "the role may not write agentkit_snapshots (grant it INSERT, UPDATE "
		       "and DELETE on agentkit's tables)";
	return NULL;
}

/*
 * The store's schema version (-1: no agentkit tables), and in the same
 * round trip whether this connection can write (*why: why not, or NULL)
 * and the server's clock (the store's, pg_clock()).  The process's first
 * statement, so it asks the server's catalog as little as it can: binary
 * results (no casts), and no functions for what the server reported at
 * connect (0.8 ms against 1.1 ms in a new server process).
 */
static enum core_status schema_version(struct pg_store *s, long *v, const char **why,
                                       struct core_err *e)
{
#define ASK "SELECT max(version), has_table_privilege('agentkit_snapshots'," \
	" 'INSERT, UPDATE, DELETE'), clock_timestamp()"
	static const char ask[] = ASK " FROM agentkit_schema_version";
	static const char ask_all[] = ASK ", pg_is_in_recovery(),"
		" current_setting('transaction_read_only') = 'on' FROM agentkit_schema_version";
#undef ASK
	/* standby and read-only as the server reported them at connect
	 * (PostgreSQL 14 on), else asked in the query (its booleans, binary,
	 * are a byte each) */
	const char *hot = s->conn ? PQparameterStatus(s->conn, "in_hot_standby") : NULL;
	const char *ro = s->conn ? PQparameterStatus(s->conn, "default_transaction_read_only")
	                         : NULL;
	int reported = hot && ro, standby = hot && !strcmp(hot, "on"),
	    read_only = ro && !strcmp(ro, "on");
	PGresult *r = NULL;
	int64_t t0 = core_now_ns(), t1;
	enum core_status st = pg_exec_binary(s, reported ? ask : ask_all, 0, NULL, &r,
	                                     "read the store's schema version", e);
	t1 = core_now_ns();
	*why = NULL;
	if (st == CORE_OK) {
		*v = PQgetisnull(r, 0, 0) ? 0 : (long)get_be32((const unsigned char *)
		                                             PQgetvalue(r, 0, 0));
		if (!reported) {
			standby = *PQgetvalue(r, 0, 3) != 0;
			read_only = *PQgetvalue(r, 0, 4) != 0;
		}
		*why = cannot_write(standby, read_only, *PQgetvalue(r, 0, 1) != 0);
		pg_clock(s, unix_us(PQgetvalue(r, 0, 2)), t0, t1);
	} else if (!strcmp(s->last_state, "42P01")) {
		/* no tables yet: the clock on its own (once per new store) */
		PQclear(r);
		r = NULL;
		*v = -1;
		t0 = core_now_ns();
		st = pg_exec_binary(s, "SELECT clock_timestamp()", 0, NULL, &r,
		                    "read the server's clock", e);
		t1 = core_now_ns();
		if (st == CORE_OK)
			pg_clock(s, unix_us(PQgetvalue(r, 0, 0)), t0, t1);
	}
	PQclear(r);
	return st;
}

static enum core_status too_new(struct pg_store *s, long v, struct core_err *e)
{
	return core_fail(e, CORE_EPRECONDITION, "the store at '%s' has schema version %ld, "
	                 "newer than this agentkit's %zu: upgrade agentkit", s->where, v,
	                 known_steps());
}

/* Skip a quoted part of sql at p ('...', "...", $tag$...$tag$): where it
 * ends, or p itself when none starts there. */
static const char *skip_quoted(const char *p)
{
	const char *q, *end;
	size_t n;
	if (*p == '\'' || *p == '"') {
		for (q = p + 1; *q && *q != *p; q++)
			;
		return *q ? q + 1 : q;
	}
	if (*p != '$')
		return p;
	/* a dollar quote's tag is a name, maybe empty: "$$", "$body$" */
	for (q = p + 1; *q == '_' || (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z'); q++)
		;
	if (*q != '$')
		return p;
	n = (size_t)(q - p) + 1;
	for (end = q + 1; *end && strncmp(end, p, n); end++)
		;
	return *end ? end + n : end;
}

/*
 * What one step does, for agent-snap migrate: each of its statements by
 * its leading words up to the object it names ("CREATE TABLE
 * agentkit_nodes", "CREATE FUNCTION agentkit_chain"), read from the SQL
 * itself, so a new step is described without a word more.  The schema's
 * SQL writes keywords in capitals and names in lower case.
 */
static enum core_status describe(size_t i, json_t *list, struct core_err *e)
{
	const char *p = steps[i], *q;
	json_t *what = json_array(), *step;
	while (what && *p) {
		struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
		int named = 0;
		while (*p == ' ' || *p == ';' || *p == '\n')
			p++;
		/* the leading words: capitals, then one name */
		while (*p && *p != ';' && !named) {
			size_t n = strcspn(p, " (;\n");
			named = n && (*p < 'A' || *p > 'Z' || p[1] < 'A' || p[1] > 'Z');
			if (n && (core_buf_add(&b, " ", b.len ? 1 : 0) != CORE_OK ||
			          core_buf_add(&b, p, n) != CORE_OK))
				break;
			p += n;
			while (*p == ' ' || *p == '\n')
				p++;
			if (*p == '(')
				break;
		}
		/* then the rest of the statement, quoted parts whole */
		while (*p && *p != ';')
			p = (q = skip_quoted(p)) != p ? q : p + 1;
		if (b.len && json_array_append_new(what, json_stringn(b.p, b.len))) {
			core_buf_release(&b);
			break;
		}
		core_buf_release(&b);
	}
	step = what ? json_pack("{s:I,s:o}", "version", (json_int_t)(i + 1), "statements", what)
	            : NULL;
	if (!step || json_array_append_new(list, step))
		return core_fail(e, CORE_ENOMEM, "migrate: out of memory");
	return CORE_OK;
}

/*
 * Apply the steps the store lacks up to the known ones, all in one
 * transaction under the advisory lock (the version is read again under
 * it: a concurrent open may have applied them).  applied (optional)
 * receives a description of each step applied here; *now (optional) the
 * version after.
 */
static enum core_status apply(struct pg_store *s, json_t *applied, long *now,
                              struct core_err *e)
{
	static const char lock[] =
		"SELECT pg_advisory_xact_lock(hashtextextended('agentkit schema ' ||"
		" coalesce(current_schema(), ''), 0))";
	static const char table[] =
		"CREATE TABLE IF NOT EXISTS agentkit_schema_version ("
		" version integer PRIMARY KEY,"
		" applied_at timestamptz NOT NULL DEFAULT now())";
	const char *what = "create the store's schema";
	size_t known = known_steps();
	PGresult *r = NULL;
	enum core_status st;
	long v;
	size_t i;
	if ((st = pg_cmd(s, "BEGIN", what, e)) != CORE_OK)
		return st;
	if ((st = pg_exec(s, lock, 0, NULL, &r, what, e)) != CORE_OK)
		goto fail;
	PQclear(r);
	if ((st = pg_exec(s, table, 0, NULL, &r, what, e)) != CORE_OK)
		goto fail;
	PQclear(r);
	if ((st = pg_exec(s, "SELECT coalesce(max(version), 0) FROM agentkit_schema_version",
	                  0, NULL, &r, what, e)) != CORE_OK)
		goto fail;
	v = strtol(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	if (v > (long)known) {
		st = too_new(s, v, e);
		goto fail;
	}
	for (i = (size_t)v; i < known; i++) {
		char num[24];
		const char *p[1] = { num };
		if ((st = pg_script(s, steps[i], what, e)) != CORE_OK ||
		    (i + 1 == PG_STEP_ENTRIES && (st = fill_entries(s, e)) != CORE_OK))
			goto fail;
		snprintf(num, sizeof num, "%zu", i + 1);
		if ((st = pg_exec(s, "INSERT INTO agentkit_schema_version (version) VALUES ($1)",
		                  1, p, &r, what, e)) != CORE_OK)
			goto fail;
		PQclear(r);
		if (applied && (st = describe(i, applied, e)) != CORE_OK)
			goto fail;
	}
	if ((st = pg_cmd(s, "COMMIT", what, e)) != CORE_OK)
		return st;
	s->steps = (long)known;
	if (now)
		*now = v > (long)known ? v : (long)known;
	return CORE_OK;
fail:
	pg_rollback(s);
	if (applied)
		json_array_clear(applied);
	return st;
}

enum core_status pg_schema(struct pg_store *s, unsigned flags, struct core_err *e)
{
	enum core_status st;
	const char *why;
	long v;
	if ((st = schema_version(s, &v, &why, e)) != CORE_OK)
		return st;
	/* a writer learns it cannot write now, before it runs a turn, not at
	 * its commit */
	if (why && !(flags & (STORE_OPEN_READONLY | STORE_OPEN_AS_IS))) {
		core_fail(e, CORE_ESYS, "the store at '%s' cannot be written: %s", s->where, why);
		if (e)
			e->sys = EROFS;
		return CORE_ESYS;
	}
	s->steps = (long)known_steps();
	if (v == s->steps)
		return CORE_OK;
	if (v > s->steps)
		return too_new(s, v, e);
	/* agent-snap migrate shows and applies the steps itself; to it a
	 * database without agentkit's tables is a store at version 0 */
	if (flags & STORE_OPEN_AS_IS) {
		s->steps = v;
		return CORE_OK;
	}
	if (v < 0 && (flags & STORE_OPEN_EXISTING))
		return core_fail(e, CORE_ENOTFOUND, "no store at %s (set --store or AGENTKIT_STORE)",
		                 s->where);
	return apply(s, NULL, NULL, e);
}

enum core_status pg_migrate(struct store *h, unsigned flags, struct store_migration *m,
                            struct core_err *e)
{
	struct pg_store *s = pg_store(h);
	enum core_status st;
	const char *why;
	long v;
	size_t i;
	m->latest = (long)known_steps();
	if (!(m->steps = json_array()))
		return core_fail(e, CORE_ENOMEM, "migrate: out of memory");
	if ((st = schema_version(s, &v, &why, e)) != CORE_OK)
		return st;
	if (v > m->latest)
		return too_new(s, v, e);
	m->version = v < 0 ? 0 : v;
	if (!(flags & STORE_MIGRATE_DRY_RUN))
		return m->version == m->latest ? CORE_OK : apply(s, m->steps, &m->version, e);
	for (i = (size_t)m->version; i < (size_t)m->latest; i++)
		if ((st = describe(i, m->steps, e)) != CORE_OK)
			return st;
	return CORE_OK;
}
