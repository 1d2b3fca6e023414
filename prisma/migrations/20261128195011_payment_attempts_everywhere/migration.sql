-- Payment and attempt everywhere (issue 36): every provider call that may move a payer's money is a row of
-- transaction_attempts, API STK pushes included. An attempt says where the payer was asked from (origin: the
-- hosted checkout page, or the API).
ALTER TABLE "transaction_attempts" ADD COLUMN "origin" TEXT NOT NULL DEFAULT 'checkout';

-- API pushes still pending at upgrade get their attempt, so their callbacks (matched on the attempt) and their
-- status queries still land. One with no provider request id (a crash before the push was accepted) is expired by its query.
INSERT INTO "transaction_attempts" ("transaction_id", "method", "origin", "status", "detail", "channel_id", "phone_number", "checkout_request_id", "created_at")
SELECT t."id", 'mpesa', 'api', 'pending', NULL, t."channel_id", t."phone_number", t."checkout_request_id", t."created_at"
FROM "transactions" t
WHERE t."status" = 'pending' AND t."payment_method" = 'momo_stk'
  AND NOT EXISTS (SELECT 1 FROM "transaction_attempts" a WHERE a."transaction_id" = t."id");

ALTER TABLE "transaction_attempts" ADD CONSTRAINT "transaction_attempts_origin_valid" CHECK ("origin" IN ('checkout', 'api'));
