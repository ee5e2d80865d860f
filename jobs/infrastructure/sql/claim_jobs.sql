-- relay_claim_jobs: the queue's claim on PostgreSQL (installed by the jobs migrations), lane by lane.
--
-- 1. Serialize claimers with a transaction-level advisory lock, so the per-account running counts are
--    exact across all workers: every statement after the lock sees every earlier claim.
-- 2. Pick the lanes that can run (jobs_lane, sql/lanes.sql): due (next_due_at <= now), in the worker's
--    queues, of an account below its max_concurrent_jobs (the queue's copy, jobs_account_limit, so the
--    accounts' table may live in another database; an account with no row: 10, the default); lowest priority first, then the lane served
--    longest ago (round robin between accounts). An account at its limit costs one lane row, however
--    many jobs it has waiting. At most as many lanes as jobs wanted; FOR NO KEY UPDATE SKIP LOCKED.
-- 3. From each lane, LATERAL: its oldest due jobs, at most the account's free slots, in one bounded range
--    of the claim index (job_lane_claim), FOR UPDATE SKIP LOCKED. Jobs past their deadline (expires_at)
--    are never started: the expiry sweep dead-letters them.
-- 4. Take the batch by priority, then each lane's first job before any lane's second (fair inside one
--    claim), capping each account at its free slots; mark them running under a lease, count the
--    attempt, stamp the lanes served.
-- 5. A lane that gave nothing: raise its next_due_at to its next job's due time (year 9999 if none),
--    only under FOR UPDATE SKIP LOCKED (no writer in flight on it) and from a later snapshot.
-- Steps 2-5 repeat (three rounds at most) while the batch is not full and unseen lanes may remain.
--
-- The lease starts after the lock was taken (clock_timestamp), so waiting behind another claimer never
-- shortens it. A function, so its plans are cached per connection: the claim is on the pickup path.
CREATE OR REPLACE FUNCTION relay_claim_jobs(p_worker text, p_queues text[], p_limit integer, p_lease float8)
RETURNS TABLE (id uuid, handler varchar, payload text, attempt_number integer, max_attempts integer,
               account_id bigint, queue varchar, priority integer, run_at timestamptz)
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan  -- plans made once per connection: re-planning cost more than running
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz;
    v_left integer := p_limit;
    v_taken integer;
    v_round integer := 0;
    v_lanes bigint[];
    v_free integer[];
    v_seen bigint[] := '{}';
    v_idle bigint[];
    v_wanted integer;
BEGIN
    PERFORM pg_advisory_xact_lock(491327873401);  -- 0x72656C6179, "relay" in ASCII
    v_now := clock_timestamp();

    LOOP
        v_round := v_round + 1;
        v_wanted := v_left;
        WITH running AS (  -- the partial index job_running: as many rows as jobs running
            -- No "account_id IS NOT NULL" here, nor below (it would be pushed down to this scan): it would let
            -- this generic plan, made once per connection, read job_account_newest, every account job ever
            -- kept. Running jobs of no account make a row of account NULL, which matches no lane (account 0).
            SELECT r.account_id, count(*) AS n FROM jobs_job r
            WHERE r.status = 'running'
            GROUP BY r.account_id
        ),
        room AS (  -- the queue's own copy of the limits (jobs_account_limit); no row: the default, 10
            SELECT running.account_id, coalesce(a.max_concurrent_jobs, 10) - running.n AS free
            FROM running LEFT JOIN jobs_account_limit a ON a.account_id = running.account_id
        ),
        picked AS (
            SELECT l.id, l.account_id, l.priority, l.served_at
            FROM jobs_lane l
            LEFT JOIN room ON room.account_id = l.account_id
            WHERE l.next_due_at <= v_now
              AND (p_queues IS NULL OR l.queue = ANY (p_queues))
              AND l.id <> ALL (v_seen)
              AND (room.free IS NULL OR room.free > 0)
            ORDER BY l.priority, l.served_at, l.id
            LIMIT v_left
            FOR NO KEY UPDATE OF l SKIP LOCKED
        )
        SELECT coalesce(array_agg(p.id ORDER BY p.priority, p.served_at, p.id), '{}'),
               coalesce(array_agg(CASE WHEN p.account_id = 0 THEN v_left
                                       ELSE least(v_left, coalesce(room.free, a.max_concurrent_jobs, 10)) END
                                  ORDER BY p.priority, p.served_at, p.id), '{}')
        INTO v_lanes, v_free
        FROM picked p
        LEFT JOIN room ON room.account_id = p.account_id
        LEFT JOIN jobs_account_limit a ON a.account_id = p.account_id;
        EXIT WHEN cardinality(v_lanes) = 0;
        v_seen := v_seen || v_lanes;

        RETURN QUERY
        WITH ready AS (
            SELECT r.lane, r.free, r.turn, l.account_id, l.queue, l.priority
            FROM unnest(v_lanes, v_free) WITH ORDINALITY AS r(lane, free, turn)
            JOIN jobs_lane l ON l.id = r.lane
        ),
        candidates AS (
            SELECT c.id, ready.lane, ready.account_id, ready.free, ready.priority, ready.turn, c.run_at,
                   row_number() OVER (PARTITION BY ready.lane ORDER BY c.run_at, c.id) AS nth
            FROM ready
            CROSS JOIN LATERAL (
                SELECT j.id, j.run_at FROM jobs_job j
                WHERE coalesce(j.account_id, 0) = ready.account_id
                  AND j.queue = ready.queue
                  AND j.priority = ready.priority
                  AND j.status IN ('pending', 'retrying')
                  AND j.run_at <= v_now
                  AND (j.expires_at IS NULL OR j.expires_at > v_now)  -- past its deadline: the sweep's, never run
                ORDER BY j.run_at, j.id
                LIMIT ready.free
                FOR UPDATE OF j SKIP LOCKED
            ) c
        ),
        chosen AS (
            SELECT c.id, c.lane
            FROM (SELECT c.*, row_number() OVER (PARTITION BY c.account_id
                                                 ORDER BY c.priority, c.nth, c.turn) AS nth_in_account
                  FROM candidates c) c
            WHERE c.account_id = 0 OR c.nth_in_account <= c.free
            ORDER BY c.priority, c.nth, c.turn
            LIMIT v_left
        ),
        served AS (
            UPDATE jobs_lane l SET served_at = v_now
            WHERE l.id IN (SELECT chosen.lane FROM chosen)
        )
        UPDATE jobs_job j
        SET status = 'running', attempt_number = j.attempt_number + 1, started_at = v_now,
            lease_expires_at = v_now + make_interval(secs => p_lease), worker_id = p_worker
        FROM chosen
        WHERE j.id = chosen.id
        RETURNING j.id, j.handler, j.payload::text, j.attempt_number::integer, j.max_attempts::integer,
                  j.account_id, j.queue, j.priority, j.run_at;

        GET DIAGNOSTICS v_taken = ROW_COUNT;
        v_left := v_left - v_taken;

        -- Lanes that gave nothing: no writer in flight on them (SKIP LOCKED refuses a writer's key share),
        -- then, from a new snapshot, their next due time.
        SELECT coalesce(array_agg(i.id), '{}') INTO v_idle
        FROM (SELECT l.id FROM jobs_lane l
              WHERE l.id = ANY (v_lanes) AND l.served_at <> v_now
              FOR UPDATE OF l SKIP LOCKED) i;
        IF cardinality(v_idle) > 0 THEN
            UPDATE jobs_lane l
            SET next_due_at = coalesce(
                (SELECT min(j.run_at) FROM jobs_job j
                 WHERE coalesce(j.account_id, 0) = l.account_id AND j.queue = l.queue
                   AND j.priority = l.priority AND j.status IN ('pending', 'retrying')),
                '9999-12-31 00:00:00+00')  -- no job: due never (finite, so Django can read it)
            WHERE l.id = ANY (v_idle);
        END IF;

        -- Fewer lanes than jobs wanted: every lane that could run was seen; another round would find none.
        EXIT WHEN v_left <= 0 OR v_round >= 3 OR cardinality(v_lanes) < v_wanted;
    END LOOP;
END
$$;
