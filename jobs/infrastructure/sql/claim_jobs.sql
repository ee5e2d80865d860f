-- relay_claim_jobs: the queue's claim on PostgreSQL (installed by migration jobs 0002).
--
-- 1. Serialize claimers with a transaction-level advisory lock, so the
--    per-account running counts below are exact across all workers (the
--    claim statement takes its snapshot after the lock, seeing every
--    earlier claim).
-- 2. Skip accounts already running max_concurrent_jobs jobs; of the rest,
--    take due jobs in priority order (lower first), then oldest due first,
--    FOR UPDATE SKIP LOCKED, and cap each account at its free slots.
--    Each priority is a lane scanned on its own range of the claim index
--    (priority = p AND run_at <= now), found by a loose index scan over the
--    distinct priorities: jobs due later (a run waiting two days) are never
--    read, however many there are.
-- 3. Mark them running under a lease, count the attempt, return them.
--
-- A function (not a statement sent each time) so its plan is cached per
-- connection: the claim is on the pickup-latency path of every job.
CREATE OR REPLACE FUNCTION relay_claim_jobs(p_worker text, p_queues text[], p_limit integer, p_lease float8)
RETURNS TABLE (id uuid, handler varchar, payload text, attempt_number integer, max_attempts integer,
               account_id bigint, queue varchar, priority integer, run_at timestamptz)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
BEGIN
    PERFORM pg_advisory_xact_lock(491327873401);  -- "relay" in ASCII; the same key as store.CLAIM_LOCK_KEY

    RETURN QUERY
    WITH RECURSIVE lanes(p) AS (
        SELECT min(l.priority) FROM jobs_job l WHERE l.status IN ('pending', 'retrying')
        UNION ALL
        SELECT (SELECT min(l.priority) FROM jobs_job l
                WHERE l.status IN ('pending', 'retrying') AND l.priority > lanes.p)
        FROM lanes WHERE lanes.p IS NOT NULL
    ),
    running AS (
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
        SELECT j.id, j.account_id, j.priority, j.run_at
        FROM lanes
        CROSS JOIN LATERAL (
            SELECT j.id, j.account_id, j.priority, j.run_at
            FROM jobs_job j
            WHERE j.status IN ('pending', 'retrying')
              AND j.priority = lanes.p
              AND j.run_at <= statement_timestamp()
              AND (p_queues IS NULL OR j.queue = ANY (p_queues))
              AND NOT EXISTS (SELECT 1 FROM room WHERE room.account_id = j.account_id AND room.free <= 0)
            ORDER BY j.run_at, j.id
            LIMIT p_limit
            FOR UPDATE OF j SKIP LOCKED
        ) j
        WHERE lanes.p IS NOT NULL
        ORDER BY j.priority, j.run_at, j.id
        LIMIT p_limit
    ),
    chosen AS (
        SELECT c.id
        FROM (SELECT c.*, row_number() OVER (PARTITION BY c.account_id
                                             ORDER BY c.priority, c.run_at, c.id) AS nth
              FROM candidates c) c
        LEFT JOIN accounts_account a ON a.id = c.account_id
        LEFT JOIN room ON room.account_id = c.account_id
        WHERE c.account_id IS NULL OR c.nth <= coalesce(room.free, a.max_concurrent_jobs)
    )
    UPDATE jobs_job j
    SET status = 'running', attempt_number = j.attempt_number + 1, started_at = statement_timestamp(),
        lease_expires_at = statement_timestamp() + make_interval(secs => p_lease), worker_id = p_worker
    FROM chosen
    WHERE j.id = chosen.id
    RETURNING j.id, j.handler, j.payload::text, j.attempt_number::integer, j.max_attempts::integer,
              j.account_id, j.queue, j.priority, j.run_at;
END
$$;
