-- relay_claim_jobs: the queue's claim on PostgreSQL (installed by the jobs migrations).
--
-- 1. Serialize claimers with a transaction-level advisory lock, so the
--    per-account running counts are exact across all workers: every
--    statement after the lock sees every earlier claim.
-- 2. Walk the priority lanes in order (lower runs first). The next lane is
--    found by a loose index scan (the smallest priority above the last), and
--    each lane is a bounded range of the partial claim index (priority = p
--    AND run_at <= now): jobs due later (a run waiting two days) and finished
--    jobs are never read, however many there are. Stop when the batch is full.
-- 3. In a lane: skip accounts already running max_concurrent_jobs jobs, take
--    the oldest due jobs FOR UPDATE SKIP LOCKED, cap each account at its free
--    slots, mark them running under a lease, count the attempt, return them.
--    A job past its deadline (expires_at) is never started: the expiry sweep dead-letters it.
--
-- The lease starts after the lock was taken (clock_timestamp), so waiting
-- behind another claimer never shortens it. A function, not a statement sent
-- each time, so its plans are cached per connection: the claim is on the
-- pickup-latency path of every job.
CREATE OR REPLACE FUNCTION relay_claim_jobs(p_worker text, p_queues text[], p_limit integer, p_lease float8)
RETURNS TABLE (id uuid, handler varchar, payload text, attempt_number integer, max_attempts integer,
               account_id bigint, queue varchar, priority integer, run_at timestamptz)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz;
    v_lane integer;
    v_left integer := p_limit;
    v_taken integer;
BEGIN
    PERFORM pg_advisory_xact_lock(491327873401);  -- 0x72656C6179, "relay" in ASCII
    v_now := clock_timestamp();
    v_lane := (SELECT min(l.priority) FROM jobs_job l WHERE l.status IN ('pending', 'retrying'));

    WHILE v_lane IS NOT NULL AND v_left > 0 LOOP
        RETURN QUERY
        WITH running AS (
            SELECT r.account_id, count(*) AS n
            FROM jobs_job r
            WHERE r.status = 'running' AND r.account_id IS NOT NULL
            GROUP BY r.account_id
        ),
        room AS (
            SELECT running.account_id, a.max_concurrent_jobs - running.n AS free
            FROM running JOIN accounts_account a ON a.id = running.account_id
        ),
        candidates AS (
            SELECT j.id, j.account_id, j.run_at
            FROM jobs_job j
            WHERE j.status IN ('pending', 'retrying')
              AND j.priority = v_lane
              AND j.run_at <= v_now
              AND (j.expires_at IS NULL OR j.expires_at > v_now)  -- past its deadline: the sweep's, never run
              AND (p_queues IS NULL OR j.queue = ANY (p_queues))
              AND NOT EXISTS (SELECT 1 FROM room WHERE room.account_id = j.account_id AND room.free <= 0)
            ORDER BY j.run_at, j.id
            LIMIT v_left
            FOR UPDATE OF j SKIP LOCKED
        ),
        chosen AS (
            SELECT c.id
            FROM (SELECT c.*, row_number() OVER (PARTITION BY c.account_id ORDER BY c.run_at, c.id) AS nth
                  FROM candidates c) c
            LEFT JOIN accounts_account a ON a.id = c.account_id
            LEFT JOIN room ON room.account_id = c.account_id
            WHERE c.account_id IS NULL OR c.nth <= coalesce(room.free, a.max_concurrent_jobs)
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
        v_lane := (SELECT min(l.priority) FROM jobs_job l
                   WHERE l.status IN ('pending', 'retrying') AND l.priority > v_lane);
    END LOOP;
END
$$;
