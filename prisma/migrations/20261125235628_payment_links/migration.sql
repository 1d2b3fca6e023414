-- CreateTable
CREATE TABLE "payment_links" (
    "id" SERIAL NOT NULL,
    "merchant_id" INTEGER NOT NULL,
    "mode" "Mode" NOT NULL,
    "slug" TEXT NOT NULL,
    "amount" BIGINT,
    "min_amount" BIGINT NOT NULL DEFAULT 1,
    "currency" TEXT NOT NULL,
    "description" TEXT NOT NULL,
    "reusable" BOOLEAN NOT NULL DEFAULT false,
    "expires_at" TIMESTAMPTZ(3),
    "callback_url" TEXT,
    "payment_channel_id" INTEGER,
    "active" BOOLEAN NOT NULL DEFAULT true,
    "claimed_until" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "payment_links_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "payment_link_payments" (
    "link_id" INTEGER NOT NULL,
    "transaction_id" INTEGER NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "payment_link_payments_pkey" PRIMARY KEY ("link_id","transaction_id")
);

-- CreateIndex
CREATE UNIQUE INDEX "payment_links_slug_key" ON "payment_links"("slug");

-- CreateIndex
CREATE INDEX "payment_links_merchant_id_mode_created_at_id_idx" ON "payment_links"("merchant_id", "mode", "created_at" DESC, "id" DESC);

-- CreateIndex
CREATE UNIQUE INDEX "payment_link_payments_transaction_id_key" ON "payment_link_payments"("transaction_id");

-- AddForeignKey
ALTER TABLE "payment_links" ADD CONSTRAINT "payment_links_merchant_id_fkey" FOREIGN KEY ("merchant_id") REFERENCES "merchants"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "payment_link_payments" ADD CONSTRAINT "payment_link_payments_link_id_fkey" FOREIGN KEY ("link_id") REFERENCES "payment_links"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "payment_link_payments" ADD CONSTRAINT "payment_link_payments_transaction_id_fkey" FOREIGN KEY ("transaction_id") REFERENCES "transactions"("id") ON DELETE CASCADE ON UPDATE CASCADE;
