/*
  Warnings:

  - A unique constraint covering the columns `[channel_id,provider_reference]` on the table `transactions` will be added. If there are existing duplicate values, this will fail.

*/
-- CreateTable
CREATE TABLE "momo_c2b_registrations" (
    "id" SERIAL NOT NULL,
    "channel_id" INTEGER NOT NULL,
    "confirmation_url" TEXT NOT NULL,
    "validation_url" TEXT NOT NULL,
    "response_type" TEXT NOT NULL DEFAULT 'Completed',
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "momo_c2b_registrations_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "momo_stk_reconciliations" (
    "transaction_id" INTEGER NOT NULL,
    "reconcile_at" TIMESTAMPTZ(3) NOT NULL,
    "attempts" INTEGER NOT NULL DEFAULT 0,

    CONSTRAINT "momo_stk_reconciliations_pkey" PRIMARY KEY ("transaction_id")
);

-- CreateIndex
CREATE UNIQUE INDEX "momo_c2b_registrations_channel_id_key" ON "momo_c2b_registrations"("channel_id");

-- CreateIndex
CREATE INDEX "momo_stk_reconciliations_reconcile_at_idx" ON "momo_stk_reconciliations"("reconcile_at");

-- CreateIndex
CREATE UNIQUE INDEX "transactions_channel_id_provider_reference_key" ON "transactions"("channel_id", "provider_reference");

-- AddForeignKey
ALTER TABLE "momo_c2b_registrations" ADD CONSTRAINT "momo_c2b_registrations_channel_id_fkey" FOREIGN KEY ("channel_id") REFERENCES "payment_channels"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "momo_stk_reconciliations" ADD CONSTRAINT "momo_stk_reconciliations_transaction_id_fkey" FOREIGN KEY ("transaction_id") REFERENCES "transactions"("id") ON DELETE CASCADE ON UPDATE CASCADE;
