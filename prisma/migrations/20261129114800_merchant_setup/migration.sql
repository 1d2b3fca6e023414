-- AlterTable
ALTER TABLE "merchants" ADD COLUMN     "country" TEXT,
ADD COLUMN     "is_demo" BOOLEAN NOT NULL DEFAULT false;

-- The demo merchant of databases started before this column: a development start created it, as the first
-- merchant, on an empty database.
UPDATE "merchants" SET "is_demo" = true
 WHERE "email" = 'demo@example.com' AND "name" = 'Demo Merchant' AND "id" = (SELECT min("id") FROM "merchants");

-- The ledger stays append-only, with one exception: `cli demo remove` deletes the demo merchant's test-mode
-- ledger with everything else it owns. It names the merchant in a setting local to its transaction.
CREATE OR REPLACE FUNCTION ledger_refuse_change() RETURNS TRIGGER LANGUAGE plpgsql AS $$
DECLARE
  removing TEXT := nullif(current_setting('gateway.removing_demo_merchant', true), '');
BEGIN
  IF TG_OP = 'DELETE' AND removing IS NOT NULL THEN
    IF TG_TABLE_NAME = 'ledger_postings' THEN
      IF EXISTS (SELECT 1 FROM ledger_accounts a JOIN merchants m ON m.id = a.merchant_id
                  WHERE a.id = OLD.account_id AND a.merchant_id = removing::INTEGER AND a.mode = 'test' AND m.is_demo) THEN
        RETURN OLD;
      END IF;
    ELSIF OLD.merchant_id = removing::INTEGER AND OLD.mode = 'test'
          AND EXISTS (SELECT 1 FROM merchants WHERE id = OLD.merchant_id AND is_demo) THEN
      RETURN OLD;
    END IF;
  END IF;
  RAISE EXCEPTION 'the ledger is append-only: % on % refused', TG_OP, TG_TABLE_NAME USING ERRCODE = '55000';
END $$;
