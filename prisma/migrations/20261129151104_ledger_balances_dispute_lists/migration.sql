-- CreateTable
CREATE TABLE "ledger_account_balances" (
    "account_id" INTEGER NOT NULL,
    "stripe" SMALLINT NOT NULL,
    "balance" BIGINT NOT NULL DEFAULT 0,

    CONSTRAINT "ledger_account_balances_pkey" PRIMARY KEY ("account_id","stripe")
);

-- CreateIndex
CREATE INDEX "disputes_merchant_id_mode_closed_at_due_by_created_at_id_idx" ON "disputes"("merchant_id", "mode", "closed_at" DESC, "due_by", "created_at" DESC, "id" DESC);

-- CreateIndex
CREATE INDEX "disputes_merchant_id_mode_status_closed_at_due_by_created_a_idx" ON "disputes"("merchant_id", "mode", "status", "closed_at" DESC, "due_by", "created_at" DESC, "id" DESC);

-- AddForeignKey
ALTER TABLE "ledger_account_balances" ADD CONSTRAINT "ledger_account_balances_account_id_fkey" FOREIGN KEY ("account_id") REFERENCES "ledger_accounts"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- ---------------------------------------------------------------------------------------------------------
-- Written by hand (Prisma does not manage functions or triggers).

-- Issue 42: /v1/balance summed every posting of the merchant's accounts, so its cost grew with the ledger. Each
-- account's balance is kept here instead, by a statement trigger on ledger_postings (one grouped upsert per
-- statement, however many postings it wrote, so postings written directly with SQL count too). Striped by backend
-- pid as list_counts are: concurrent payments of one merchant post to the same accounts, and one row per account
-- would make each wait for the other's commit. Postings are append-only (UPDATE and TRUNCATE are refused); the
-- one DELETE allowed (the demo merchant's removal) is subtracted the same way.
CREATE FUNCTION ledger_account_balances_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO ledger_account_balances AS b (account_id, stripe, balance)
  SELECT p.account_id, pg_backend_pid() % 16, CASE WHEN TG_OP = 'DELETE' THEN -sum(p.amount) ELSE sum(p.amount) END
  FROM changed p GROUP BY p.account_id ORDER BY p.account_id
  ON CONFLICT (account_id, stripe) DO UPDATE SET balance = b.balance + EXCLUDED.balance;
  RETURN NULL;
END $$;
CREATE TRIGGER ledger_postings_balance_insert AFTER INSERT ON ledger_postings REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_account_balances_add();
CREATE TRIGGER ledger_postings_balance_delete AFTER DELETE ON ledger_postings REFERENCING OLD TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_account_balances_add();

-- Backfill, after the triggers: CREATE TRIGGER holds a lock that keeps writers out until this migration commits,
-- so no posting is counted twice or missed.
INSERT INTO ledger_account_balances (account_id, stripe, balance)
SELECT account_id, 0, sum(amount) FROM ledger_postings GROUP BY account_id;

-- disputes: the list's exact totals from list_counts (as the other lists', the list_rollups migration), keyed by
-- status; inserts and deletes counted per statement, updates that move a row per row.
CREATE FUNCTION list_counts_disputes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO list_counts AS c (list, merchant_id, mode, day, key, channel_id, stripe, n)
  SELECT 'disputes', r.merchant_id, r.mode, d.day, r.status, 0, pg_backend_pid() % 16,
    CASE WHEN TG_OP = 'DELETE' THEN -count(*) ELSE count(*) END
  FROM changed r CROSS JOIN LATERAL (VALUES ((r.created_at AT TIME ZONE 'UTC')::date), ('-infinity'::date)) d(day)
  GROUP BY 2, 3, 4, 5, 6 ORDER BY 2, 3, 4 DESC, 5, 6
  ON CONFLICT (list, merchant_id, mode, day, key, channel_id, stripe) DO UPDATE SET n = c.n + EXCLUDED.n;
  RETURN NULL;
END $$;
CREATE TRIGGER disputes_count_insert AFTER INSERT ON disputes REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION list_counts_disputes();
CREATE TRIGGER disputes_count_delete AFTER DELETE ON disputes REFERENCING OLD TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION list_counts_disputes();
CREATE FUNCTION list_counts_disputes_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM list_count_add('disputes', OLD.merchant_id, OLD.mode, OLD.status, 0, OLD.created_at, -1);
  PERFORM list_count_add('disputes', NEW.merchant_id, NEW.mode, NEW.status, 0, NEW.created_at, 1);
  RETURN NULL;
END $$;
CREATE TRIGGER disputes_count_update AFTER UPDATE OF status, created_at, merchant_id, mode ON disputes FOR EACH ROW
  WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.created_at IS DISTINCT FROM NEW.created_at OR OLD.merchant_id IS DISTINCT FROM NEW.merchant_id OR OLD.mode IS DISTINCT FROM NEW.mode)
  EXECUTE FUNCTION list_counts_disputes_update();
CREATE TRIGGER disputes_count_truncate AFTER TRUNCATE ON disputes FOR EACH STATEMENT EXECUTE FUNCTION list_counts_truncate();

INSERT INTO list_counts (list, merchant_id, mode, day, key, channel_id, stripe, n)
SELECT 'disputes', r.merchant_id, r.mode, d.day, r.status, 0, 0, count(*)
FROM disputes r CROSS JOIN LATERAL (VALUES ((r.created_at AT TIME ZONE 'UTC')::date), ('-infinity'::date)) d(day)
GROUP BY 2, 3, 4, 5, 6;
