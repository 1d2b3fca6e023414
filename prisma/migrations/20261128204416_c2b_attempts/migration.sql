-- Payment and attempt everywhere (issue 36): a payment the provider reports on its own (M-Pesa C2B, a paybill or till
-- payment) is an attempt too, origin `c2b`, born succeeded with its payment (the report is the provider's verdict).
ALTER TABLE "transaction_attempts" DROP CONSTRAINT "transaction_attempts_origin_valid";
ALTER TABLE "transaction_attempts" ADD CONSTRAINT "transaction_attempts_origin_valid" CHECK ("origin" IN ('checkout', 'api', 'c2b'));

-- C2B payments recorded before the upgrade get theirs, once (a payment already with an attempt is left alone). Its
-- detail masks the payer's number as the gateway does (2547*****149), and a number the provider masked is not kept.
INSERT INTO "transaction_attempts" ("transaction_id", "method", "origin", "status", "detail", "channel_id", "phone_number", "provider_reference", "created_at", "settled_at")
SELECT t."id", 'mpesa', 'c2b', 'succeeded',
  CASE WHEN t."phone_number" ~ '^\+[0-9]{8,15}$'
    THEN substr(t."phone_number", 2, 4) || repeat('*', length(t."phone_number") - 8) || right(t."phone_number", 3) END,
  t."channel_id",
  CASE WHEN t."phone_number" ~ '^\+[0-9]{8,15}$' THEN t."phone_number" END,
  t."provider_reference", t."created_at", t."created_at"
FROM "transactions" t
WHERE t."payment_method" = 'momo_c2b'
  AND NOT EXISTS (SELECT 1 FROM "transaction_attempts" a WHERE a."transaction_id" = t."id");
