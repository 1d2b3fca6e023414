-- The paged lists' exact totals without counting a million rows (issue 27): list_counts, kept by triggers on
-- each listed table (so rows written directly with SQL count too), backfilled below; and trigram indexes for
-- the customers' partial-match search. Hand-written additions follow Prisma's generated statements.

-- pg_trgm is a trusted extension (PostgreSQL 13+): the database owner may create it. PGlite loads it at start.
CREATE EXTENSION IF NOT EXISTS pg_trgm;

-- DropIndex
DROP INDEX "customers_merchant_id_mode_created_at_idx";

-- DropIndex
DROP INDEX "payouts_merchant_id_mode_status_created_at_idx";

-- DropIndex
DROP INDEX "refunds_merchant_id_mode_status_created_at_idx";

-- DropIndex
DROP INDEX "transactions_merchant_id_mode_status_created_at_idx";

-- CreateTable
CREATE TABLE "list_counts" (
    "list" TEXT NOT NULL,
    "merchant_id" INTEGER NOT NULL,
    "mode" "Mode" NOT NULL,
    "day" DATE NOT NULL,
    "key" TEXT NOT NULL,
    "channel_id" INTEGER NOT NULL DEFAULT 0,
    "stripe" SMALLINT NOT NULL,
    "n" BIGINT NOT NULL DEFAULT 0,

    CONSTRAINT "list_counts_pkey" PRIMARY KEY ("list","merchant_id","mode","day","key","channel_id","stripe")
);

-- CreateIndex
CREATE INDEX "customers_merchant_id_mode_created_at_id_idx" ON "customers"("merchant_id", "mode", "created_at" DESC, "id" DESC);

-- CreateIndex
CREATE INDEX "customers_first_name_idx" ON "customers" USING GIN ("first_name" gin_trgm_ops);

-- CreateIndex
CREATE INDEX "customers_last_name_idx" ON "customers" USING GIN ("last_name" gin_trgm_ops);

-- CreateIndex
CREATE INDEX "customers_email_idx" ON "customers" USING GIN ("email" gin_trgm_ops);

-- CreateIndex
CREATE INDEX "customers_phone_idx" ON "customers" USING GIN ("phone" gin_trgm_ops);

-- CreateIndex
CREATE INDEX "ledger_entries_merchant_id_mode_type_created_at_id_idx" ON "ledger_entries"("merchant_id", "mode", "type", "created_at" DESC, "id" DESC);

-- CreateIndex
CREATE INDEX "ledger_entries_merchant_id_mode_channel_id_created_at_id_idx" ON "ledger_entries"("merchant_id", "mode", "channel_id", "created_at" DESC, "id" DESC);

-- CreateIndex
CREATE INDEX "payment_links_merchant_id_mode_active_created_at_id_idx" ON "payment_links"("merchant_id", "mode", "active", "created_at" DESC, "id" DESC);

-- CreateIndex
CREATE INDEX "payouts_merchant_id_mode_status_created_at_id_idx" ON "payouts"("merchant_id", "mode", "status", "created_at" DESC, "id" DESC);

-- CreateIndex
CREATE INDEX "refunds_merchant_id_mode_status_created_at_id_idx" ON "refunds"("merchant_id", "mode", "status", "created_at" DESC, "id" DESC);

-- CreateIndex
CREATE INDEX "transactions_merchant_id_mode_status_created_at_id_idx" ON "transactions"("merchant_id", "mode", "status", "created_at" DESC, "id" DESC);

-- CreateIndex
CREATE INDEX "webhook_deliveries_endpoint_id_id_idx" ON "webhook_deliveries"("endpoint_id", "id" DESC);


-- One call per counted change: the row's UTC day and the key's all-time row (day = -infinity), on this
-- backend's stripe. Striped because every payment of a busy merchant would otherwise update the same row and
-- wait for each other's commit; sixteen stripes by backend pid keep a pool's connections mostly apart (a
-- backend runs one transaction at a time), and readers sum at most sixteen rows per key and day.
CREATE FUNCTION list_count_add(p_list TEXT, p_merchant INTEGER, p_mode "Mode", p_key TEXT, p_channel INTEGER, p_created TIMESTAMPTZ, p_delta BIGINT)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO list_counts AS c (list, merchant_id, mode, day, key, channel_id, stripe, n)
  VALUES (p_list, p_merchant, p_mode, (p_created AT TIME ZONE 'UTC')::date, p_key, p_channel, pg_backend_pid() % 16, p_delta),
         (p_list, p_merchant, p_mode, '-infinity', p_key, p_channel, pg_backend_pid() % 16, p_delta)
  ON CONFLICT (list, merchant_id, mode, day, key, channel_id, stripe) DO UPDATE SET n = c.n + EXCLUDED.n;
END $$;

-- TRUNCATE empties a list's counts with it.
CREATE FUNCTION list_counts_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM list_counts WHERE list = TG_TABLE_NAME;
  RETURN NULL;
END $$;


-- transactions: inserts and deletes counted per statement (a bulk INSERT ... SELECT is one grouped upsert), updates that move a row per row.
CREATE FUNCTION list_counts_transactions() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO list_counts AS c (list, merchant_id, mode, day, key, channel_id, stripe, n)
  SELECT 'transactions', r.merchant_id, r.mode, d.day, r.status::text, 0, pg_backend_pid() % 16,
    CASE WHEN TG_OP = 'DELETE' THEN -count(*) ELSE count(*) END
  FROM changed r CROSS JOIN LATERAL (VALUES ((r.created_at AT TIME ZONE 'UTC')::date), ('-infinity'::date)) d(day)
  GROUP BY 2, 3, 4, 5, 6 ORDER BY 2, 3, 4 DESC, 5, 6
  ON CONFLICT (list, merchant_id, mode, day, key, channel_id, stripe) DO UPDATE SET n = c.n + EXCLUDED.n;
  RETURN NULL;
END $$;
CREATE TRIGGER transactions_count_insert AFTER INSERT ON transactions REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION list_counts_transactions();
CREATE TRIGGER transactions_count_delete AFTER DELETE ON transactions REFERENCING OLD TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION list_counts_transactions();
CREATE FUNCTION list_counts_transactions_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM list_count_add('transactions', OLD.merchant_id, OLD.mode, OLD.status::text, 0, OLD.created_at, -1);
  PERFORM list_count_add('transactions', NEW.merchant_id, NEW.mode, NEW.status::text, 0, NEW.created_at, 1);
  RETURN NULL;
END $$;
CREATE TRIGGER transactions_count_update AFTER UPDATE OF status, created_at, merchant_id, mode ON transactions FOR EACH ROW
  WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.created_at IS DISTINCT FROM NEW.created_at OR OLD.merchant_id IS DISTINCT FROM NEW.merchant_id OR OLD.mode IS DISTINCT FROM NEW.mode)
  EXECUTE FUNCTION list_counts_transactions_update();
CREATE TRIGGER transactions_count_truncate AFTER TRUNCATE ON transactions FOR EACH STATEMENT EXECUTE FUNCTION list_counts_truncate();

-- payouts: inserts and deletes counted per statement (a bulk INSERT ... SELECT is one grouped upsert), updates that move a row per row.
CREATE FUNCTION list_counts_payouts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO list_counts AS c (list, merchant_id, mode, day, key, channel_id, stripe, n)
  SELECT 'payouts', r.merchant_id, r.mode, d.day, r.status::text, 0, pg_backend_pid() % 16,
    CASE WHEN TG_OP = 'DELETE' THEN -count(*) ELSE count(*) END
  FROM changed r CROSS JOIN LATERAL (VALUES ((r.created_at AT TIME ZONE 'UTC')::date), ('-infinity'::date)) d(day)
  GROUP BY 2, 3, 4, 5, 6 ORDER BY 2, 3, 4 DESC, 5, 6
  ON CONFLICT (list, merchant_id, mode, day, key, channel_id, stripe) DO UPDATE SET n = c.n + EXCLUDED.n;
  RETURN NULL;
END $$;
CREATE TRIGGER payouts_count_insert AFTER INSERT ON payouts REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION list_counts_payouts();
CREATE TRIGGER payouts_count_delete AFTER DELETE ON payouts REFERENCING OLD TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION list_counts_payouts();
CREATE FUNCTION list_counts_payouts_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM list_count_add('payouts', OLD.merchant_id, OLD.mode, OLD.status::text, 0, OLD.created_at, -1);
  PERFORM list_count_add('payouts', NEW.merchant_id, NEW.mode, NEW.status::text, 0, NEW.created_at, 1);
  RETURN NULL;
END $$;
CREATE TRIGGER payouts_count_update AFTER UPDATE OF status, created_at, merchant_id, mode ON payouts FOR EACH ROW
  WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.created_at IS DISTINCT FROM NEW.created_at OR OLD.merchant_id IS DISTINCT FROM NEW.merchant_id OR OLD.mode IS DISTINCT FROM NEW.mode)
  EXECUTE FUNCTION list_counts_payouts_update();
CREATE TRIGGER payouts_count_truncate AFTER TRUNCATE ON payouts FOR EACH STATEMENT EXECUTE FUNCTION list_counts_truncate();

-- refunds: inserts and deletes counted per statement (a bulk INSERT ... SELECT is one grouped upsert), updates that move a row per row.
CREATE FUNCTION list_counts_refunds() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO list_counts AS c (list, merchant_id, mode, day, key, channel_id, stripe, n)
  SELECT 'refunds', r.merchant_id, r.mode, d.day, r.status::text, 0, pg_backend_pid() % 16,
    CASE WHEN TG_OP = 'DELETE' THEN -count(*) ELSE count(*) END
  FROM changed r CROSS JOIN LATERAL (VALUES ((r.created_at AT TIME ZONE 'UTC')::date), ('-infinity'::date)) d(day)
  GROUP BY 2, 3, 4, 5, 6 ORDER BY 2, 3, 4 DESC, 5, 6
  ON CONFLICT (list, merchant_id, mode, day, key, channel_id, stripe) DO UPDATE SET n = c.n + EXCLUDED.n;
  RETURN NULL;
END $$;
CREATE TRIGGER refunds_count_insert AFTER INSERT ON refunds REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION list_counts_refunds();
CREATE TRIGGER refunds_count_delete AFTER DELETE ON refunds REFERENCING OLD TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION list_counts_refunds();
CREATE FUNCTION list_counts_refunds_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM list_count_add('refunds', OLD.merchant_id, OLD.mode, OLD.status::text, 0, OLD.created_at, -1);
  PERFORM list_count_add('refunds', NEW.merchant_id, NEW.mode, NEW.status::text, 0, NEW.created_at, 1);
  RETURN NULL;
END $$;
CREATE TRIGGER refunds_count_update AFTER UPDATE OF status, created_at, merchant_id, mode ON refunds FOR EACH ROW
  WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.created_at IS DISTINCT FROM NEW.created_at OR OLD.merchant_id IS DISTINCT FROM NEW.merchant_id OR OLD.mode IS DISTINCT FROM NEW.mode)
  EXECUTE FUNCTION list_counts_refunds_update();
CREATE TRIGGER refunds_count_truncate AFTER TRUNCATE ON refunds FOR EACH STATEMENT EXECUTE FUNCTION list_counts_truncate();

-- customers: inserts and deletes counted per statement (a bulk INSERT ... SELECT is one grouped upsert), updates that move a row per row.
CREATE FUNCTION list_counts_customers() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO list_counts AS c (list, merchant_id, mode, day, key, channel_id, stripe, n)
  SELECT 'customers', r.merchant_id, r.mode, d.day, '', 0, pg_backend_pid() % 16,
    CASE WHEN TG_OP = 'DELETE' THEN -count(*) ELSE count(*) END
  FROM changed r CROSS JOIN LATERAL (VALUES ((r.created_at AT TIME ZONE 'UTC')::date), ('-infinity'::date)) d(day)
  GROUP BY 2, 3, 4, 5, 6 ORDER BY 2, 3, 4 DESC, 5, 6
  ON CONFLICT (list, merchant_id, mode, day, key, channel_id, stripe) DO UPDATE SET n = c.n + EXCLUDED.n;
  RETURN NULL;
END $$;
CREATE TRIGGER customers_count_insert AFTER INSERT ON customers REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION list_counts_customers();
CREATE TRIGGER customers_count_delete AFTER DELETE ON customers REFERENCING OLD TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION list_counts_customers();
CREATE FUNCTION list_counts_customers_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM list_count_add('customers', OLD.merchant_id, OLD.mode, '', 0, OLD.created_at, -1);
  PERFORM list_count_add('customers', NEW.merchant_id, NEW.mode, '', 0, NEW.created_at, 1);
  RETURN NULL;
END $$;
CREATE TRIGGER customers_count_update AFTER UPDATE OF created_at, merchant_id, mode ON customers FOR EACH ROW
  WHEN (OLD.created_at IS DISTINCT FROM NEW.created_at OR OLD.merchant_id IS DISTINCT FROM NEW.merchant_id OR OLD.mode IS DISTINCT FROM NEW.mode)
  EXECUTE FUNCTION list_counts_customers_update();
CREATE TRIGGER customers_count_truncate AFTER TRUNCATE ON customers FOR EACH STATEMENT EXECUTE FUNCTION list_counts_truncate();

-- payment_links: inserts and deletes counted per statement (a bulk INSERT ... SELECT is one grouped upsert), updates that move a row per row.
CREATE FUNCTION list_counts_payment_links() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO list_counts AS c (list, merchant_id, mode, day, key, channel_id, stripe, n)
  SELECT 'payment_links', r.merchant_id, r.mode, d.day, r.active::text, 0, pg_backend_pid() % 16,
    CASE WHEN TG_OP = 'DELETE' THEN -count(*) ELSE count(*) END
  FROM changed r CROSS JOIN LATERAL (VALUES ((r.created_at AT TIME ZONE 'UTC')::date), ('-infinity'::date)) d(day)
  GROUP BY 2, 3, 4, 5, 6 ORDER BY 2, 3, 4 DESC, 5, 6
  ON CONFLICT (list, merchant_id, mode, day, key, channel_id, stripe) DO UPDATE SET n = c.n + EXCLUDED.n;
  RETURN NULL;
END $$;
CREATE TRIGGER payment_links_count_insert AFTER INSERT ON payment_links REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION list_counts_payment_links();
CREATE TRIGGER payment_links_count_delete AFTER DELETE ON payment_links REFERENCING OLD TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION list_counts_payment_links();
CREATE FUNCTION list_counts_payment_links_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM list_count_add('payment_links', OLD.merchant_id, OLD.mode, OLD.active::text, 0, OLD.created_at, -1);
  PERFORM list_count_add('payment_links', NEW.merchant_id, NEW.mode, NEW.active::text, 0, NEW.created_at, 1);
  RETURN NULL;
END $$;
CREATE TRIGGER payment_links_count_update AFTER UPDATE OF active, created_at, merchant_id, mode ON payment_links FOR EACH ROW
  WHEN (OLD.active IS DISTINCT FROM NEW.active OR OLD.created_at IS DISTINCT FROM NEW.created_at OR OLD.merchant_id IS DISTINCT FROM NEW.merchant_id OR OLD.mode IS DISTINCT FROM NEW.mode)
  EXECUTE FUNCTION list_counts_payment_links_update();
CREATE TRIGGER payment_links_count_truncate AFTER TRUNCATE ON payment_links FOR EACH STATEMENT EXECUTE FUNCTION list_counts_truncate();

-- ledger_entries: inserts counted per statement (a bulk INSERT ... SELECT is one grouped upsert).
CREATE FUNCTION list_counts_ledger_entries() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO list_counts AS c (list, merchant_id, mode, day, key, channel_id, stripe, n)
  SELECT 'ledger_entries', r.merchant_id, r.mode, d.day, r.type, r.channel_id, pg_backend_pid() % 16,
    CASE WHEN TG_OP = 'DELETE' THEN -count(*) ELSE count(*) END
  FROM changed r CROSS JOIN LATERAL (VALUES ((r.created_at AT TIME ZONE 'UTC')::date), ('-infinity'::date)) d(day)
  GROUP BY 2, 3, 4, 5, 6 ORDER BY 2, 3, 4 DESC, 5, 6
  ON CONFLICT (list, merchant_id, mode, day, key, channel_id, stripe) DO UPDATE SET n = c.n + EXCLUDED.n;
  RETURN NULL;
END $$;
CREATE TRIGGER ledger_entries_count_insert AFTER INSERT ON ledger_entries REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION list_counts_ledger_entries();

-- Backfill, after the triggers: CREATE TRIGGER holds a lock that keeps writers out until this migration
-- commits, so no row is counted twice or missed.
INSERT INTO list_counts (list, merchant_id, mode, day, key, channel_id, stripe, n)
SELECT 'transactions', r.merchant_id, r.mode, d.day, r.status::text, 0, 0, count(*)
FROM transactions r CROSS JOIN LATERAL (VALUES ((r.created_at AT TIME ZONE 'UTC')::date), ('-infinity'::date)) d(day)
GROUP BY 2, 3, 4, 5, 6;
INSERT INTO list_counts (list, merchant_id, mode, day, key, channel_id, stripe, n)
SELECT 'payouts', r.merchant_id, r.mode, d.day, r.status::text, 0, 0, count(*)
FROM payouts r CROSS JOIN LATERAL (VALUES ((r.created_at AT TIME ZONE 'UTC')::date), ('-infinity'::date)) d(day)
GROUP BY 2, 3, 4, 5, 6;
INSERT INTO list_counts (list, merchant_id, mode, day, key, channel_id, stripe, n)
SELECT 'refunds', r.merchant_id, r.mode, d.day, r.status::text, 0, 0, count(*)
FROM refunds r CROSS JOIN LATERAL (VALUES ((r.created_at AT TIME ZONE 'UTC')::date), ('-infinity'::date)) d(day)
GROUP BY 2, 3, 4, 5, 6;
INSERT INTO list_counts (list, merchant_id, mode, day, key, channel_id, stripe, n)
SELECT 'customers', r.merchant_id, r.mode, d.day, '', 0, 0, count(*)
FROM customers r CROSS JOIN LATERAL (VALUES ((r.created_at AT TIME ZONE 'UTC')::date), ('-infinity'::date)) d(day)
GROUP BY 2, 3, 4, 5, 6;
INSERT INTO list_counts (list, merchant_id, mode, day, key, channel_id, stripe, n)
SELECT 'payment_links', r.merchant_id, r.mode, d.day, r.active::text, 0, 0, count(*)
FROM payment_links r CROSS JOIN LATERAL (VALUES ((r.created_at AT TIME ZONE 'UTC')::date), ('-infinity'::date)) d(day)
GROUP BY 2, 3, 4, 5, 6;
INSERT INTO list_counts (list, merchant_id, mode, day, key, channel_id, stripe, n)
SELECT 'ledger_entries', r.merchant_id, r.mode, d.day, r.type, r.channel_id, 0, count(*)
FROM ledger_entries r CROSS JOIN LATERAL (VALUES ((r.created_at AT TIME ZONE 'UTC')::date), ('-infinity'::date)) d(day)
GROUP BY 2, 3, 4, 5, 6;
