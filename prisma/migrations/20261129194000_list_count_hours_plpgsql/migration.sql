-- Written by hand (Prisma does not manage functions or triggers).

-- Issue 42: the hour helpers were SQL-language functions whose bodies hold subqueries, so PostgreSQL cannot inline
-- them and parses and plans each body again in every statement that calls it: every insert and status change of a
-- transaction, payout, refund, customer, link or ledger entry, through the list_counts triggers (about a third of a
-- card payment's database time, auto_explain). The same results from plpgsql, whose statements are planned once per
-- session and whose array arithmetic runs without the executor.

-- A day's hours array from (hour, count) pairs: 24 counts, zero where none.
CREATE OR REPLACE FUNCTION list_count_hours(p_hours INTEGER[], p_counts BIGINT[]) RETURNS BIGINT[] LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  r BIGINT[] := array_fill(0::bigint, ARRAY[24]);
BEGIN
  FOR i IN 1 .. coalesce(array_length(p_hours, 1), 0) LOOP
    IF p_hours[i] BETWEEN 0 AND 23 THEN
      r[p_hours[i] + 1] := r[p_hours[i] + 1] + coalesce(p_counts[i], 0);
    END IF;
  END LOOP;
  RETURN r;
END $$;

-- Two hours arrays added element by element (a null one counts as zeros; null and null stay null).
CREATE OR REPLACE FUNCTION list_count_hours_add(p_a BIGINT[], p_b BIGINT[]) RETURNS BIGINT[] LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  r BIGINT[] := '{}';
BEGIN
  IF p_a IS NULL AND p_b IS NULL THEN
    RETURN NULL;
  END IF;
  FOR i IN 1 .. greatest(coalesce(array_length(p_a, 1), 0), coalesce(array_length(p_b, 1), 0)) LOOP
    r[i] := coalesce(p_a[i], 0) + coalesce(p_b[i], 0);
  END LOOP;
  RETURN r;
END $$;
