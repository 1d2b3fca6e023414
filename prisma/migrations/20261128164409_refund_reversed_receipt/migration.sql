-- A receipt (M-Pesa TransactionID) is sent for reversal at most once (issue 35 item 7): the refund that asked for
-- it keeps it, unique per channel, whatever a later result says. Refunds of other rails leave it null.

-- AlterTable
ALTER TABLE "refunds" ADD COLUMN     "reversed_receipt" TEXT;

-- Existing reversals keep their receipt, the first one per receipt (earlier code could send a receipt twice),
-- except a request Daraja refused at once (nothing was accepted: the gateway's own failure codes).
UPDATE "refunds" AS r SET "reversed_receipt" = first.receipt
FROM (
  SELECT DISTINCT ON (f."channel_id", t."provider_reference") f."id", t."provider_reference" AS receipt
  FROM "refunds" f JOIN "transactions" t ON t."id" = f."transaction_id"
  WHERE f."method" = 'mpesa_reversal' AND t."provider_reference" IS NOT NULL
    AND NOT (f."status" = 'failed' AND f."failure_code" IN ('provider_error', 'validation_failed', 'transaction_not_refundable'))
  ORDER BY f."channel_id", t."provider_reference", f."id"
) AS first
WHERE r."id" = first."id";

-- CreateIndex
CREATE UNIQUE INDEX "refunds_channel_id_reversed_receipt_key" ON "refunds"("channel_id", "reversed_receipt");
