-- AlterTable
ALTER TABLE "customers" ADD COLUMN     "metadata" JSONB;

-- AlterTable
ALTER TABLE "transactions" ADD COLUMN     "payment_method_id" INTEGER,
ADD COLUMN     "save_payment_method" BOOLEAN NOT NULL DEFAULT false;

-- CreateTable
CREATE TABLE "payment_methods" (
    "id" SERIAL NOT NULL,
    "merchant_id" INTEGER NOT NULL,
    "mode" "Mode" NOT NULL,
    "reference" TEXT NOT NULL,
    "customer_id" INTEGER NOT NULL,
    "channel_id" INTEGER NOT NULL,
    "type" TEXT NOT NULL,
    "card_brand" TEXT,
    "card_last4" TEXT,
    "card_exp_month" INTEGER,
    "card_exp_year" INTEGER,
    "card_bank" TEXT,
    "phone" TEXT,
    "reusable" BOOLEAN NOT NULL,
    "token_encrypted" TEXT,
    "fingerprint" TEXT NOT NULL,
    "detached_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "payment_methods_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "payment_methods_reference_key" ON "payment_methods"("reference");

-- CreateIndex
CREATE INDEX "payment_methods_customer_id_created_at_idx" ON "payment_methods"("customer_id", "created_at");

-- CreateIndex
CREATE UNIQUE INDEX "payment_methods_channel_id_customer_id_fingerprint_key" ON "payment_methods"("channel_id", "customer_id", "fingerprint");

-- AddForeignKey
ALTER TABLE "transactions" ADD CONSTRAINT "transactions_payment_method_id_fkey" FOREIGN KEY ("payment_method_id") REFERENCES "payment_methods"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "payment_methods" ADD CONSTRAINT "payment_methods_merchant_id_fkey" FOREIGN KEY ("merchant_id") REFERENCES "merchants"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "payment_methods" ADD CONSTRAINT "payment_methods_customer_id_fkey" FOREIGN KEY ("customer_id") REFERENCES "customers"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "payment_methods" ADD CONSTRAINT "payment_methods_channel_id_fkey" FOREIGN KEY ("channel_id") REFERENCES "payment_channels"("id") ON DELETE RESTRICT ON UPDATE CASCADE;
