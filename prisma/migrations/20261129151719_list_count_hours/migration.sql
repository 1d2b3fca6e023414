-- AlterTable
ALTER TABLE "list_counts" ADD COLUMN     "hours" BIGINT[];

-- ---------------------------------------------------------------------------------------------------------
-- Written by hand (Prisma does not manage functions or triggers).

-- Issue 42: a deep page found the UTC day its first row falls in from the per-day counts, then walked the list's
-- index through that day up to the row: at a million rows over 90 days, up to ~11,000 index entries, each a heap
-- visit until VACUUM sets the visibility map (right after a bulk load, an import). Each day's row now also keeps its
-- count per UTC hour (hours[1] is 00:00-01:00), so a deep page enters the index at the hour and walks at most that
-- hour's rows. Kept by the same triggers, in the same statements, as n.

-- A day's hours array from (hour, count) pairs: 24 counts, zero where none.
CREATE FUNCTION list_count_hours(p_hours INTEGER[], p_counts BIGINT[]) RETURNS BIGINT[] LANGUAGE sql IMMUTABLE AS $$
  SELECT array_agg(coalesce((SELECT sum(c) FROM unnest(p_hours, p_counts) AS u(h, c) WHERE h = g), 0) ORDER BY g) FROM generate_series(0, 23) g
$$;

-- Two hours arrays added element by element (a null one counts as zeros; null and null stay null).
CREATE FUNCTION list_count_hours_add(p_a BIGINT[], p_b BIGINT[]) RETURNS BIGINT[] LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN p_a IS NULL AND p_b IS NULL THEN NULL
    ELSE (SELECT array_agg(coalesce(a, 0) + coalesce(b, 0) ORDER BY i) FROM unnest(p_a, p_b) WITH ORDINALITY AS u(a, b, i)) END
$$;

CREATE OR REPLACE FUNCTION list_count_add(p_list TEXT, p_merchant INTEGER, p_mode "Mode", p_key TEXT, p_channel INTEGER, p_created TIMESTAMPTZ, p_delta BIGINT)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO list_counts AS c (list, merchant_id, mode, day, key, channel_id, stripe, n, hours)
  VALUES (p_list, p_merchant, p_mode, (p_created AT TIME ZONE 'UTC')::date, p_key, p_channel, pg_backend_pid() % 16, p_delta,
          list_count_hours(ARRAY[extract(hour FROM p_created AT TIME ZONE 'UTC')::int], ARRAY[p_delta])),
         (p_list, p_merchant, p_mode, '-infinity', p_key, p_channel, pg_backend_pid() % 16, p_delta, NULL)
  ON CONFLICT (list, merchant_id, mode, day, key, channel_id, stripe) DO UPDATE SET n = c.n + EXCLUDED.n, hours = list_count_hours_add(c.hours, EXCLUDED.hours);
END $$;

CREATE OR REPLACE FUNCTION list_counts_transactions() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  WITH by_hour AS (
    SELECT r.merchant_id, r.mode, r.status::text AS key, 0 AS channel_id, (r.created_at AT TIME ZONE 'UTC')::date AS day,
      extract(hour FROM r.created_at AT TIME ZONE 'UTC')::int AS hour, CASE WHEN TG_OP = 'DELETE' THEN -count(*) ELSE count(*) END AS n
    FROM changed r GROUP BY 1, 2, 3, 4, 5, 6
  ), by_day AS (
    SELECT merchant_id, mode, key, channel_id, day, sum(n) AS n, list_count_hours(array_agg(hour), array_agg(n)) AS hours FROM by_hour GROUP BY 1, 2, 3, 4, 5
    UNION ALL SELECT merchant_id, mode, key, channel_id, '-infinity', sum(n), NULL FROM by_hour GROUP BY 1, 2, 3, 4
  )
  INSERT INTO list_counts AS c (list, merchant_id, mode, day, key, channel_id, stripe, n, hours)
  SELECT 'transactions', merchant_id, mode, day, key, channel_id, pg_backend_pid() % 16, n, hours FROM by_day
  ORDER BY merchant_id, mode, day DESC, key, channel_id
  ON CONFLICT (list, merchant_id, mode, day, key, channel_id, stripe) DO UPDATE SET n = c.n + EXCLUDED.n, hours = list_count_hours_add(c.hours, EXCLUDED.hours);
  RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION list_counts_payouts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  WITH by_hour AS (
    SELECT r.merchant_id, r.mode, r.status::text AS key, 0 AS channel_id, (r.created_at AT TIME ZONE 'UTC')::date AS day,
      extract(hour FROM r.created_at AT TIME ZONE 'UTC')::int AS hour, CASE WHEN TG_OP = 'DELETE' THEN -count(*) ELSE count(*) END AS n
    FROM changed r GROUP BY 1, 2, 3, 4, 5, 6
  ), by_day AS (
    SELECT merchant_id, mode, key, channel_id, day, sum(n) AS n, list_count_hours(array_agg(hour), array_agg(n)) AS hours FROM by_hour GROUP BY 1, 2, 3, 4, 5
    UNION ALL SELECT merchant_id, mode, key, channel_id, '-infinity', sum(n), NULL FROM by_hour GROUP BY 1, 2, 3, 4
  )
  INSERT INTO list_counts AS c (list, merchant_id, mode, day, key, channel_id, stripe, n, hours)
  SELECT 'payouts', merchant_id, mode, day, key, channel_id, pg_backend_pid() % 16, n, hours FROM by_day
  ORDER BY merchant_id, mode, day DESC, key, channel_id
  ON CONFLICT (list, merchant_id, mode, day, key, channel_id, stripe) DO UPDATE SET n = c.n + EXCLUDED.n, hours = list_count_hours_add(c.hours, EXCLUDED.hours);
  RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION list_counts_refunds() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  WITH by_hour AS (
    SELECT r.merchant_id, r.mode, r.status::text AS key, 0 AS channel_id, (r.created_at AT TIME ZONE 'UTC')::date AS day,
      extract(hour FROM r.created_at AT TIME ZONE 'UTC')::int AS hour, CASE WHEN TG_OP = 'DELETE' THEN -count(*) ELSE count(*) END AS n
    FROM changed r GROUP BY 1, 2, 3, 4, 5, 6
  ), by_day AS (
    SELECT merchant_id, mode, key, channel_id, day, sum(n) AS n, list_count_hours(array_agg(hour), array_agg(n)) AS hours FROM by_hour GROUP BY 1, 2, 3, 4, 5
    UNION ALL SELECT merchant_id, mode, key, channel_id, '-infinity', sum(n), NULL FROM by_hour GROUP BY 1, 2, 3, 4
  )
  INSERT INTO list_counts AS c (list, merchant_id, mode, day, key, channel_id, stripe, n, hours)
  SELECT 'refunds', merchant_id, mode, day, key, channel_id, pg_backend_pid() % 16, n, hours FROM by_day
  ORDER BY merchant_id, mode, day DESC, key, channel_id
  ON CONFLICT (list, merchant_id, mode, day, key, channel_id, stripe) DO UPDATE SET n = c.n + EXCLUDED.n, hours = list_count_hours_add(c.hours, EXCLUDED.hours);
  RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION list_counts_customers() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  WITH by_hour AS (
    SELECT r.merchant_id, r.mode, '' AS key, 0 AS channel_id, (r.created_at AT TIME ZONE 'UTC')::date AS day,
      extract(hour FROM r.created_at AT TIME ZONE 'UTC')::int AS hour, CASE WHEN TG_OP = 'DELETE' THEN -count(*) ELSE count(*) END AS n
    FROM changed r GROUP BY 1, 2, 3, 4, 5, 6
  ), by_day AS (
    SELECT merchant_id, mode, key, channel_id, day, sum(n) AS n, list_count_hours(array_agg(hour), array_agg(n)) AS hours FROM by_hour GROUP BY 1, 2, 3, 4, 5
    UNION ALL SELECT merchant_id, mode, key, channel_id, '-infinity', sum(n), NULL FROM by_hour GROUP BY 1, 2, 3, 4
  )
  INSERT INTO list_counts AS c (list, merchant_id, mode, day, key, channel_id, stripe, n, hours)
  SELECT 'customers', merchant_id, mode, day, key, channel_id, pg_backend_pid() % 16, n, hours FROM by_day
  ORDER BY merchant_id, mode, day DESC, key, channel_id
  ON CONFLICT (list, merchant_id, mode, day, key, channel_id, stripe) DO UPDATE SET n = c.n + EXCLUDED.n, hours = list_count_hours_add(c.hours, EXCLUDED.hours);
  RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION list_counts_payment_links() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  WITH by_hour AS (
    SELECT r.merchant_id, r.mode, r.active::text AS key, 0 AS channel_id, (r.created_at AT TIME ZONE 'UTC')::date AS day,
      extract(hour FROM r.created_at AT TIME ZONE 'UTC')::int AS hour, CASE WHEN TG_OP = 'DELETE' THEN -count(*) ELSE count(*) END AS n
    FROM changed r GROUP BY 1, 2, 3, 4, 5, 6
  ), by_day AS (
    SELECT merchant_id, mode, key, channel_id, day, sum(n) AS n, list_count_hours(array_agg(hour), array_agg(n)) AS hours FROM by_hour GROUP BY 1, 2, 3, 4, 5
    UNION ALL SELECT merchant_id, mode, key, channel_id, '-infinity', sum(n), NULL FROM by_hour GROUP BY 1, 2, 3, 4
  )
  INSERT INTO list_counts AS c (list, merchant_id, mode, day, key, channel_id, stripe, n, hours)
  SELECT 'payment_links', merchant_id, mode, day, key, channel_id, pg_backend_pid() % 16, n, hours FROM by_day
  ORDER BY merchant_id, mode, day DESC, key, channel_id
  ON CONFLICT (list, merchant_id, mode, day, key, channel_id, stripe) DO UPDATE SET n = c.n + EXCLUDED.n, hours = list_count_hours_add(c.hours, EXCLUDED.hours);
  RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION list_counts_ledger_entries() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  WITH by_hour AS (
    SELECT r.merchant_id, r.mode, r.type AS key, r.channel_id AS channel_id, (r.created_at AT TIME ZONE 'UTC')::date AS day,
      extract(hour FROM r.created_at AT TIME ZONE 'UTC')::int AS hour, CASE WHEN TG_OP = 'DELETE' THEN -count(*) ELSE count(*) END AS n
    FROM changed r GROUP BY 1, 2, 3, 4, 5, 6
  ), by_day AS (
    SELECT merchant_id, mode, key, channel_id, day, sum(n) AS n, list_count_hours(array_agg(hour), array_agg(n)) AS hours FROM by_hour GROUP BY 1, 2, 3, 4, 5
    UNION ALL SELECT merchant_id, mode, key, channel_id, '-infinity', sum(n), NULL FROM by_hour GROUP BY 1, 2, 3, 4
  )
  INSERT INTO list_counts AS c (list, merchant_id, mode, day, key, channel_id, stripe, n, hours)
  SELECT 'ledger_entries', merchant_id, mode, day, key, channel_id, pg_backend_pid() % 16, n, hours FROM by_day
  ORDER BY merchant_id, mode, day DESC, key, channel_id
  ON CONFLICT (list, merchant_id, mode, day, key, channel_id, stripe) DO UPDATE SET n = c.n + EXCLUDED.n, hours = list_count_hours_add(c.hours, EXCLUDED.hours);
  RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION list_counts_disputes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  WITH by_hour AS (
    SELECT r.merchant_id, r.mode, r.status AS key, 0 AS channel_id, (r.created_at AT TIME ZONE 'UTC')::date AS day,
      extract(hour FROM r.created_at AT TIME ZONE 'UTC')::int AS hour, CASE WHEN TG_OP = 'DELETE' THEN -count(*) ELSE count(*) END AS n
    FROM changed r GROUP BY 1, 2, 3, 4, 5, 6
  ), by_day AS (
    SELECT merchant_id, mode, key, channel_id, day, sum(n) AS n, list_count_hours(array_agg(hour), array_agg(n)) AS hours FROM by_hour GROUP BY 1, 2, 3, 4, 5
    UNION ALL SELECT merchant_id, mode, key, channel_id, '-infinity', sum(n), NULL FROM by_hour GROUP BY 1, 2, 3, 4
  )
  INSERT INTO list_counts AS c (list, merchant_id, mode, day, key, channel_id, stripe, n, hours)
  SELECT 'disputes', merchant_id, mode, day, key, channel_id, pg_backend_pid() % 16, n, hours FROM by_day
  ORDER BY merchant_id, mode, day DESC, key, channel_id
  ON CONFLICT (list, merchant_id, mode, day, key, channel_id, stripe) DO UPDATE SET n = c.n + EXCLUDED.n, hours = list_count_hours_add(c.hours, EXCLUDED.hours);
  RETURN NULL;
END $$;
-- The days counted so far, by hour, on stripe 0 of each day and key (n unchanged: +0); the other stripes' hours
-- start null (zeros), so each day's hours sum to its n as the stripes' n do. A writer whose trigger ran the former
-- function body while this migration waited leaves a day's hours short of its n: readers then use the day alone
-- (paging.ts checks the sum), never a wrong hour.
UPDATE list_counts SET hours = NULL;
INSERT INTO list_counts AS c (list, merchant_id, mode, day, key, channel_id, stripe, n, hours)
SELECT 'transactions', merchant_id, mode, day, key, channel_id, 0, 0, list_count_hours(array_agg(hour), array_agg(n)) FROM (
  SELECT r.merchant_id, r.mode, r.status::text AS key, 0 AS channel_id, (r.created_at AT TIME ZONE 'UTC')::date AS day,
    extract(hour FROM r.created_at AT TIME ZONE 'UTC')::int AS hour, count(*) AS n
  FROM transactions r GROUP BY 1, 2, 3, 4, 5, 6) by_hour GROUP BY 2, 3, 4, 5, 6
ON CONFLICT (list, merchant_id, mode, day, key, channel_id, stripe) DO UPDATE SET hours = EXCLUDED.hours;
INSERT INTO list_counts AS c (list, merchant_id, mode, day, key, channel_id, stripe, n, hours)
SELECT 'payouts', merchant_id, mode, day, key, channel_id, 0, 0, list_count_hours(array_agg(hour), array_agg(n)) FROM (
  SELECT r.merchant_id, r.mode, r.status::text AS key, 0 AS channel_id, (r.created_at AT TIME ZONE 'UTC')::date AS day,
    extract(hour FROM r.created_at AT TIME ZONE 'UTC')::int AS hour, count(*) AS n
  FROM payouts r GROUP BY 1, 2, 3, 4, 5, 6) by_hour GROUP BY 2, 3, 4, 5, 6
ON CONFLICT (list, merchant_id, mode, day, key, channel_id, stripe) DO UPDATE SET hours = EXCLUDED.hours;
INSERT INTO list_counts AS c (list, merchant_id, mode, day, key, channel_id, stripe, n, hours)
SELECT 'refunds', merchant_id, mode, day, key, channel_id, 0, 0, list_count_hours(array_agg(hour), array_agg(n)) FROM (
  SELECT r.merchant_id, r.mode, r.status::text AS key, 0 AS channel_id, (r.created_at AT TIME ZONE 'UTC')::date AS day,
    extract(hour FROM r.created_at AT TIME ZONE 'UTC')::int AS hour, count(*) AS n
  FROM refunds r GROUP BY 1, 2, 3, 4, 5, 6) by_hour GROUP BY 2, 3, 4, 5, 6
ON CONFLICT (list, merchant_id, mode, day, key, channel_id, stripe) DO UPDATE SET hours = EXCLUDED.hours;
INSERT INTO list_counts AS c (list, merchant_id, mode, day, key, channel_id, stripe, n, hours)
SELECT 'customers', merchant_id, mode, day, key, channel_id, 0, 0, list_count_hours(array_agg(hour), array_agg(n)) FROM (
  SELECT r.merchant_id, r.mode, '' AS key, 0 AS channel_id, (r.created_at AT TIME ZONE 'UTC')::date AS day,
    extract(hour FROM r.created_at AT TIME ZONE 'UTC')::int AS hour, count(*) AS n
  FROM customers r GROUP BY 1, 2, 3, 4, 5, 6) by_hour GROUP BY 2, 3, 4, 5, 6
ON CONFLICT (list, merchant_id, mode, day, key, channel_id, stripe) DO UPDATE SET hours = EXCLUDED.hours;
INSERT INTO list_counts AS c (list, merchant_id, mode, day, key, channel_id, stripe, n, hours)
SELECT 'payment_links', merchant_id, mode, day, key, channel_id, 0, 0, list_count_hours(array_agg(hour), array_agg(n)) FROM (
  SELECT r.merchant_id, r.mode, r.active::text AS key, 0 AS channel_id, (r.created_at AT TIME ZONE 'UTC')::date AS day,
    extract(hour FROM r.created_at AT TIME ZONE 'UTC')::int AS hour, count(*) AS n
  FROM payment_links r GROUP BY 1, 2, 3, 4, 5, 6) by_hour GROUP BY 2, 3, 4, 5, 6
ON CONFLICT (list, merchant_id, mode, day, key, channel_id, stripe) DO UPDATE SET hours = EXCLUDED.hours;
INSERT INTO list_counts AS c (list, merchant_id, mode, day, key, channel_id, stripe, n, hours)
SELECT 'ledger_entries', merchant_id, mode, day, key, channel_id, 0, 0, list_count_hours(array_agg(hour), array_agg(n)) FROM (
  SELECT r.merchant_id, r.mode, r.type AS key, r.channel_id AS channel_id, (r.created_at AT TIME ZONE 'UTC')::date AS day,
    extract(hour FROM r.created_at AT TIME ZONE 'UTC')::int AS hour, count(*) AS n
  FROM ledger_entries r GROUP BY 1, 2, 3, 4, 5, 6) by_hour GROUP BY 2, 3, 4, 5, 6
ON CONFLICT (list, merchant_id, mode, day, key, channel_id, stripe) DO UPDATE SET hours = EXCLUDED.hours;
INSERT INTO list_counts AS c (list, merchant_id, mode, day, key, channel_id, stripe, n, hours)
SELECT 'disputes', merchant_id, mode, day, key, channel_id, 0, 0, list_count_hours(array_agg(hour), array_agg(n)) FROM (
  SELECT r.merchant_id, r.mode, r.status AS key, 0 AS channel_id, (r.created_at AT TIME ZONE 'UTC')::date AS day,
    extract(hour FROM r.created_at AT TIME ZONE 'UTC')::int AS hour, count(*) AS n
  FROM disputes r GROUP BY 1, 2, 3, 4, 5, 6) by_hour GROUP BY 2, 3, 4, 5, 6
ON CONFLICT (list, merchant_id, mode, day, key, channel_id, stripe) DO UPDATE SET hours = EXCLUDED.hours;

-- disputes_closed: the closed disputes (closed_at set) counted by closed_at's UTC day and hour, keyed by status. The
-- disputes list shows open ones first, then the closed newest closed_at first; a deep page skips the open ones by
-- their count (the disputes rollup's total less this one's) and finds its closing day and hour here.
CREATE FUNCTION list_counts_disputes_closed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  WITH by_hour AS (
    SELECT r.merchant_id, r.mode, r.status AS key, 0 AS channel_id, (r.closed_at AT TIME ZONE 'UTC')::date AS day,
      extract(hour FROM r.closed_at AT TIME ZONE 'UTC')::int AS hour, CASE WHEN TG_OP = 'DELETE' THEN -count(*) ELSE count(*) END AS n
    FROM changed r WHERE r.closed_at IS NOT NULL GROUP BY 1, 2, 3, 4, 5, 6
  ), by_day AS (
    SELECT merchant_id, mode, key, channel_id, day, sum(n) AS n, list_count_hours(array_agg(hour), array_agg(n)) AS hours FROM by_hour GROUP BY 1, 2, 3, 4, 5
    UNION ALL SELECT merchant_id, mode, key, channel_id, '-infinity', sum(n), NULL FROM by_hour GROUP BY 1, 2, 3, 4
  )
  INSERT INTO list_counts AS c (list, merchant_id, mode, day, key, channel_id, stripe, n, hours)
  SELECT 'disputes_closed', merchant_id, mode, day, key, channel_id, pg_backend_pid() % 16, n, hours FROM by_day
  ORDER BY merchant_id, mode, day DESC, key, channel_id
  ON CONFLICT (list, merchant_id, mode, day, key, channel_id, stripe) DO UPDATE SET n = c.n + EXCLUDED.n, hours = list_count_hours_add(c.hours, EXCLUDED.hours);
  RETURN NULL;
END $$;
CREATE TRIGGER disputes_closed_count_insert AFTER INSERT ON disputes REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION list_counts_disputes_closed();
CREATE TRIGGER disputes_closed_count_delete AFTER DELETE ON disputes REFERENCING OLD TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION list_counts_disputes_closed();
CREATE FUNCTION list_counts_disputes_closed_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.closed_at IS NOT NULL THEN
    PERFORM list_count_add('disputes_closed', OLD.merchant_id, OLD.mode, OLD.status, 0, OLD.closed_at, -1);
  END IF;
  IF NEW.closed_at IS NOT NULL THEN
    PERFORM list_count_add('disputes_closed', NEW.merchant_id, NEW.mode, NEW.status, 0, NEW.closed_at, 1);
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER disputes_closed_count_update AFTER UPDATE OF status, closed_at, merchant_id, mode ON disputes FOR EACH ROW
  WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.closed_at IS DISTINCT FROM NEW.closed_at OR OLD.merchant_id IS DISTINCT FROM NEW.merchant_id OR OLD.mode IS DISTINCT FROM NEW.mode)
  EXECUTE FUNCTION list_counts_disputes_closed_update();
CREATE FUNCTION list_counts_disputes_closed_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM list_counts WHERE list = 'disputes_closed';
  RETURN NULL;
END $$;
CREATE TRIGGER disputes_closed_count_truncate AFTER TRUNCATE ON disputes FOR EACH STATEMENT EXECUTE FUNCTION list_counts_disputes_closed_truncate();

INSERT INTO list_counts (list, merchant_id, mode, day, key, channel_id, stripe, n, hours)
SELECT 'disputes_closed', merchant_id, mode, day, key, 0, 0, sum(n), list_count_hours(array_agg(hour), array_agg(n)) FROM (
  SELECT merchant_id, mode, status AS key, (closed_at AT TIME ZONE 'UTC')::date AS day, extract(hour FROM closed_at AT TIME ZONE 'UTC')::int AS hour, count(*) AS n
  FROM disputes WHERE closed_at IS NOT NULL GROUP BY 1, 2, 3, 4, 5) by_hour GROUP BY 2, 3, 4, 5
UNION ALL
SELECT 'disputes_closed', merchant_id, mode, '-infinity', status, 0, 0, count(*), NULL FROM disputes WHERE closed_at IS NOT NULL GROUP BY 2, 3, 5;
