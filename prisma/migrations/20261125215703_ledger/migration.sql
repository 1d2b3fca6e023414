-- AlterTable
ALTER TABLE "payment_channels" ADD COLUMN     "fee_fixed" BIGINT NOT NULL DEFAULT 0,
ADD COLUMN     "fee_percent_bps" INTEGER NOT NULL DEFAULT 0;

-- CreateTable
CREATE TABLE "ledger_accounts" (
    "id" SERIAL NOT NULL,
    "merchant_id" INTEGER NOT NULL,
    "mode" "Mode" NOT NULL,
    "channel_id" INTEGER NOT NULL,
    "currency" TEXT NOT NULL,
    "kind" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "ledger_accounts_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "ledger_entries" (
    "id" BIGSERIAL NOT NULL,
    "merchant_id" INTEGER NOT NULL,
    "mode" "Mode" NOT NULL,
    "channel_id" INTEGER NOT NULL,
    "currency" TEXT NOT NULL,
    "type" TEXT NOT NULL,
    "source_type" TEXT NOT NULL,
    "source_id" INTEGER,
    "source_reference" TEXT NOT NULL,
    "amount" BIGINT NOT NULL,
    "fee" BIGINT NOT NULL DEFAULT 0,
    "note" TEXT,
    "created_by" INTEGER,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "ledger_entries_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "ledger_postings" (
    "entry_id" BIGINT NOT NULL,
    "account_id" INTEGER NOT NULL,
    "amount" BIGINT NOT NULL,

    CONSTRAINT "ledger_postings_pkey" PRIMARY KEY ("account_id","entry_id")
);

-- CreateTable
CREATE TABLE "reconciliations" (
    "id" SERIAL NOT NULL,
    "merchant_id" INTEGER NOT NULL,
    "mode" "Mode" NOT NULL,
    "channel_id" INTEGER NOT NULL,
    "date" TEXT NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'running',
    "summary" JSONB NOT NULL DEFAULT '{}',
    "error" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "completed_at" TIMESTAMPTZ(3),

    CONSTRAINT "reconciliations_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "reconciliation_items" (
    "id" SERIAL NOT NULL,
    "reconciliation_id" INTEGER NOT NULL,
    "kind" TEXT NOT NULL,
    "reference" TEXT,
    "provider_reference" TEXT,
    "gateway_status" TEXT,
    "provider_status" TEXT,
    "gateway_amount" BIGINT,
    "provider_amount" BIGINT,
    "currency" TEXT,
    "resolution" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "reconciliation_items_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "ledger_accounts_merchant_id_mode_channel_id_currency_kind_key" ON "ledger_accounts"("merchant_id", "mode", "channel_id", "currency", "kind");

-- CreateIndex
CREATE INDEX "ledger_entries_merchant_id_mode_created_at_id_idx" ON "ledger_entries"("merchant_id", "mode", "created_at" DESC, "id" DESC);

-- CreateIndex
CREATE UNIQUE INDEX "ledger_entries_source_type_source_id_type_key" ON "ledger_entries"("source_type", "source_id", "type");

-- CreateIndex
CREATE INDEX "reconciliations_merchant_id_mode_created_at_id_idx" ON "reconciliations"("merchant_id", "mode", "created_at" DESC, "id" DESC);

-- CreateIndex
CREATE INDEX "reconciliations_channel_id_date_idx" ON "reconciliations"("channel_id", "date");

-- CreateIndex
CREATE INDEX "reconciliation_items_reconciliation_id_idx" ON "reconciliation_items"("reconciliation_id");

-- AddForeignKey
ALTER TABLE "ledger_accounts" ADD CONSTRAINT "ledger_accounts_merchant_id_fkey" FOREIGN KEY ("merchant_id") REFERENCES "merchants"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "ledger_accounts" ADD CONSTRAINT "ledger_accounts_channel_id_fkey" FOREIGN KEY ("channel_id") REFERENCES "payment_channels"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "reconciliations" ADD CONSTRAINT "reconciliations_merchant_id_fkey" FOREIGN KEY ("merchant_id") REFERENCES "merchants"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "reconciliations" ADD CONSTRAINT "reconciliations_channel_id_fkey" FOREIGN KEY ("channel_id") REFERENCES "payment_channels"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "reconciliation_items" ADD CONSTRAINT "reconciliation_items_reconciliation_id_fkey" FOREIGN KEY ("reconciliation_id") REFERENCES "reconciliations"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- ---------------------------------------------------------------------------------------------------------
-- Written by hand (Prisma does not manage functions or triggers; the schema diff ignores them).

-- A ledger account's id, made on first use: postings name accounts by merchant, mode, channel, currency and
-- kind. Concurrent first uses agree (ON CONFLICT waits for the other insert; the SELECT after it sees it).
CREATE FUNCTION ledger_account(p_merchant INTEGER, p_mode "Mode", p_channel INTEGER, p_currency TEXT, p_kind TEXT)
RETURNS INTEGER LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  found_id INTEGER;
BEGIN
  SELECT id INTO found_id FROM ledger_accounts
    WHERE merchant_id = p_merchant AND mode = p_mode AND channel_id = p_channel AND currency = p_currency AND kind = p_kind;
  IF found_id IS NULL THEN
    INSERT INTO ledger_accounts (merchant_id, mode, channel_id, currency, kind)
      VALUES (p_merchant, p_mode, p_channel, p_currency, p_kind)
      ON CONFLICT (merchant_id, mode, channel_id, currency, kind) DO NOTHING
      RETURNING id INTO found_id;
    IF found_id IS NULL THEN
      SELECT id INTO found_id FROM ledger_accounts
        WHERE merchant_id = p_merchant AND mode = p_mode AND channel_id = p_channel AND currency = p_currency AND kind = p_kind;
    END IF;
  END IF;
  RETURN found_id;
END $$;

-- The ledger is append-only: corrections are new entries (adjustments), never edits.
CREATE FUNCTION ledger_refuse_change() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'the ledger is append-only: % on % refused', TG_OP, TG_TABLE_NAME USING ERRCODE = '55000';
END $$;

CREATE TRIGGER ledger_entries_append_only BEFORE UPDATE OR DELETE ON ledger_entries
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
CREATE TRIGGER ledger_entries_no_truncate BEFORE TRUNCATE ON ledger_entries
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
CREATE TRIGGER ledger_postings_append_only BEFORE UPDATE OR DELETE ON ledger_postings
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
CREATE TRIGGER ledger_postings_no_truncate BEFORE TRUNCATE ON ledger_postings
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
CREATE TRIGGER ledger_accounts_append_only BEFORE UPDATE OR DELETE ON ledger_accounts
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
CREATE TRIGGER ledger_accounts_no_truncate BEFORE TRUNCATE ON ledger_accounts
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();

ALTER TABLE ledger_postings ADD CONSTRAINT ledger_postings_amount_nonzero CHECK (amount <> 0);
ALTER TABLE payment_channels ADD CONSTRAINT payment_channels_fee_schedule_valid CHECK (fee_percent_bps BETWEEN 0 AND 10000 AND fee_fixed >= 0);

-- The history before the ledger, posted as it would have been (no fee schedule existed: fees 0).
INSERT INTO ledger_entries (merchant_id, mode, channel_id, currency, type, source_type, source_id, source_reference, amount, fee, created_at)
SELECT merchant_id, mode, channel_id, currency, 'payment', 'transaction', id, reference, amount, 0, coalesce(completed_at, updated_at)
  FROM transactions WHERE status = 'completed' AND channel_id IS NOT NULL;
INSERT INTO ledger_entries (merchant_id, mode, channel_id, currency, type, source_type, source_id, source_reference, amount, fee, created_at)
SELECT merchant_id, mode, channel_id, currency, 'refund_reservation', 'refund', id, reference, 0, 0, created_at FROM refunds
UNION ALL
SELECT merchant_id, mode, channel_id, currency, 'refund', 'refund', id, reference, -amount, 0, coalesce(completed_at, updated_at) FROM refunds WHERE status = 'completed'
UNION ALL
SELECT merchant_id, mode, channel_id, currency, 'refund_failure', 'refund', id, reference, 0, 0, updated_at FROM refunds WHERE status = 'failed'
UNION ALL
SELECT merchant_id, mode, channel_id, currency, 'payout_reservation', 'payout', id, reference, 0, 0, created_at FROM payouts
UNION ALL
SELECT merchant_id, mode, channel_id, currency, 'payout', 'payout', id, reference, -amount, 0, coalesce(completed_at, updated_at) FROM payouts WHERE status = 'completed'
UNION ALL
SELECT merchant_id, mode, channel_id, currency, 'payout_failure', 'payout', id, reference, 0, 0, updated_at FROM payouts WHERE status = 'failed';

INSERT INTO ledger_postings (entry_id, account_id, amount)
SELECT e.id, ledger_account(e.merchant_id, e.mode, e.channel_id, e.currency, leg.kind), leg.amount
FROM ledger_entries e
LEFT JOIN transactions t ON e.source_type = 'transaction' AND t.id = e.source_id
LEFT JOIN refunds r ON e.source_type = 'refund' AND r.id = e.source_id
LEFT JOIN payouts p ON e.source_type = 'payout' AND p.id = e.source_id
CROSS JOIN LATERAL (VALUES
  ('payment', 'payers', -t.amount), ('payment', 'available', t.amount),
  ('refund_reservation', 'available', -r.amount), ('refund_reservation', 'pending_out', r.amount),
  ('refund', 'pending_out', -r.amount), ('refund', 'refunds', r.amount),
  ('refund_failure', 'pending_out', -r.amount), ('refund_failure', 'available', r.amount),
  ('payout_reservation', 'available', -p.amount), ('payout_reservation', 'pending_out', p.amount),
  ('payout', 'pending_out', -p.amount), ('payout', 'payees', p.amount),
  ('payout_failure', 'pending_out', -p.amount), ('payout_failure', 'available', p.amount)
) AS leg(type, kind, amount)
WHERE leg.type = e.type AND leg.amount <> 0
ORDER BY e.id;
