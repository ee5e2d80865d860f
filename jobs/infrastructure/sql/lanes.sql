-- Claim lanes (jobs_lane) kept in step with jobs_job, in the writer's own transaction (PostgreSQL only).
--
-- A lane is one account's waiting jobs in one queue at one priority. Its next_due_at is a lower bound:
-- no committed due job of the lane became due before it, unless next_due_at is already past. The claim
-- (claim_jobs.sql) reads lanes to find who can run and raises next_due_at when it finds a lane empty.
--
-- Locks, so that a raise never hides a job (docs/decisions/fair-claims.md):
-- * a writer that makes a job due takes FOR KEY SHARE on its lane and keeps it to its commit: writers
--   never wait for each other, nor for a claim serving the lane (FOR NO KEY UPDATE is compatible);
-- * a writer lowers next_due_at only when the lane was idle (due later than the job, and not yet due);
-- * the claim raises next_due_at only under FOR UPDATE taken with SKIP LOCKED, which a writer's key
--   share refuses, and reads the jobs in a later statement: every writer either committed before the
--   raise's snapshot (its job is seen) or waits for the claim to commit and then sees the raised value.

CREATE OR REPLACE FUNCTION relay_lane_due(p_account bigint, p_queue varchar, p_priority integer,
                                          p_run_at timestamptz)
RETURNS void LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_next timestamptz;
BEGIN
    SELECT l.next_due_at INTO v_next FROM jobs_lane l
    WHERE l.account_id = p_account AND l.queue = p_queue AND l.priority = p_priority
    FOR KEY SHARE;
    IF NOT FOUND THEN
        INSERT INTO jobs_lane (account_id, queue, priority, next_due_at, served_at)
        VALUES (p_account, p_queue, p_priority, p_run_at, '1970-01-01 00:00:00+00')
        ON CONFLICT (account_id, queue, priority) DO NOTHING;
        IF FOUND THEN
            RETURN;  -- a lane of our own: no claim sees it before we commit
        END IF;
        SELECT l.next_due_at INTO v_next FROM jobs_lane l
        WHERE l.account_id = p_account AND l.queue = p_queue AND l.priority = p_priority
        FOR KEY SHARE;
    END IF;
    IF v_next > p_run_at AND v_next > clock_timestamp() THEN
        UPDATE jobs_lane l SET next_due_at = p_run_at
        WHERE l.account_id = p_account AND l.queue = p_queue AND l.priority = p_priority
          AND l.next_due_at > p_run_at;
    END IF;
END
$$;

-- Inserts: once per statement, once per lane (a bulk enqueue of 20,000 jobs for one account touches one lane).
CREATE OR REPLACE FUNCTION relay_lanes_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM relay_lane_due(n.account, n.queue, n.priority, n.run_at)
    FROM (SELECT coalesce(j.account_id, 0) AS account, j.queue, j.priority, min(j.run_at) AS run_at
          FROM relay_new_jobs j WHERE j.status IN ('pending', 'retrying')
          GROUP BY 1, 2, 3 ORDER BY 1, 2, 3) n;  -- one lock order for every statement
    RETURN NULL;
END
$$;

-- Updates that make a job due (a retry, a release, a rescued lease, an operator's retry) or move it earlier.
-- The claim and every completion fail the WHEN clause, so they never call the function.
CREATE OR REPLACE FUNCTION relay_lanes_after_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM relay_lane_due(coalesce(NEW.account_id, 0), NEW.queue, NEW.priority, NEW.run_at);
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS relay_lanes_insert ON jobs_job;
CREATE TRIGGER relay_lanes_insert AFTER INSERT ON jobs_job
    REFERENCING NEW TABLE AS relay_new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION relay_lanes_after_insert();

DROP TRIGGER IF EXISTS relay_lanes_update ON jobs_job;
CREATE TRIGGER relay_lanes_update AFTER UPDATE OF status, run_at, queue, priority, account_id ON jobs_job
    FOR EACH ROW
    WHEN (NEW.status IN ('pending', 'retrying')
          AND (OLD.status NOT IN ('pending', 'retrying') OR NEW.run_at < OLD.run_at
               OR NEW.queue <> OLD.queue OR NEW.priority <> OLD.priority
               OR NEW.account_id IS DISTINCT FROM OLD.account_id))
    EXECUTE FUNCTION relay_lanes_after_update();
