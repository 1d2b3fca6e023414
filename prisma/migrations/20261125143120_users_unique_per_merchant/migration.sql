-- Users become unique per merchant (merchant_id, email): the gateway-wide index let one merchant squat an
-- address and told it the address was taken elsewhere. Sign-in looks users up by e-mail (users_email_idx).
-- DropIndex
DROP INDEX "users_email_key";

-- DropIndex
DROP INDEX "users_merchant_id_idx";

-- CreateIndex
CREATE INDEX "users_email_idx" ON "users"("email");

-- CreateIndex
CREATE UNIQUE INDEX "users_merchant_id_email_key" ON "users"("merchant_id", "email");
