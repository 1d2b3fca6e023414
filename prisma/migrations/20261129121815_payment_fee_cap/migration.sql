-- AlterTable
ALTER TABLE "payment_channels" ADD COLUMN     "fee_cap" BIGINT;

-- AlterTable
ALTER TABLE "transactions" ADD COLUMN     "fee" BIGINT;

ALTER TABLE payment_channels ADD CONSTRAINT payment_channels_fee_cap_valid CHECK (fee_cap IS NULL OR fee_cap >= 0);

-- The one definition of a channel's fee on a payment: round(amount * bps / 10000) half away from zero, plus the fixed
-- fee, never more than the cap (least() ignores a NULL cap). The status change that completes a payment writes it on
-- the transaction (transactions/status.ts) and the ledger posts that value; feePreview answers with it too.
CREATE FUNCTION payment_fee(p_amount BIGINT, p_bps INTEGER, p_fixed BIGINT, p_cap BIGINT) RETURNS BIGINT
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$ SELECT least(round(p_amount * p_bps / 10000.0)::bigint + p_fixed, p_cap) $$;

-- Payments completed before this migration: the fee their ledger entry booked (0 where none was posted).
UPDATE transactions t SET fee = coalesce((
  SELECT e.fee FROM ledger_entries e WHERE e.source_type = 'transaction' AND e.source_id = t.id AND e.type = 'payment'
), 0) WHERE t.status = 'completed';
