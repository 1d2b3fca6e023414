-- AlterTable
ALTER TABLE "merchant_brands" ADD COLUMN     "receipts_enabled" BOOLEAN NOT NULL DEFAULT true,
ADD COLUMN     "reply_to" TEXT,
ADD COLUMN     "website" TEXT;

-- AlterTable
ALTER TABLE "merchants" ADD COLUMN     "language" TEXT NOT NULL DEFAULT 'en',
ADD COLUMN     "timezone" TEXT NOT NULL DEFAULT 'UTC';

-- AlterTable
ALTER TABLE "transaction_attempts" ADD COLUMN     "card_brand" TEXT,
ADD COLUMN     "language" TEXT;

-- AlterTable
ALTER TABLE "users" ADD COLUMN     "mail_opt_outs" TEXT[] DEFAULT ARRAY[]::TEXT[];

-- CreateTable
CREATE TABLE "mail_messages" (
    "id" SERIAL NOT NULL,
    "merchant_id" INTEGER NOT NULL,
    "mode" "Mode" NOT NULL,
    "kind" TEXT NOT NULL,
    "key" TEXT NOT NULL,
    "event_id" BIGINT,
    "transaction_id" INTEGER,
    "user_id" INTEGER,
    "facts" JSONB,
    "status" TEXT NOT NULL DEFAULT 'queued',
    "to_address" TEXT,
    "language" TEXT,
    "subject" TEXT,
    "text_body" TEXT,
    "html_body" TEXT,
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "last_error" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "sent_at" TIMESTAMPTZ(3),

    CONSTRAINT "mail_messages_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "receipts" (
    "token" TEXT NOT NULL,
    "transaction_id" INTEGER NOT NULL,
    "merchant_id" INTEGER NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "receipts_pkey" PRIMARY KEY ("token")
);

-- CreateIndex
CREATE UNIQUE INDEX "mail_messages_key_key" ON "mail_messages"("key");

-- CreateIndex
CREATE INDEX "mail_messages_merchant_id_mode_created_at_id_idx" ON "mail_messages"("merchant_id", "mode", "created_at" DESC, "id" DESC);

-- CreateIndex
CREATE INDEX "mail_messages_transaction_id_idx" ON "mail_messages"("transaction_id");

-- CreateIndex
CREATE UNIQUE INDEX "receipts_transaction_id_key" ON "receipts"("transaction_id");

-- AddForeignKey
ALTER TABLE "mail_messages" ADD CONSTRAINT "mail_messages_merchant_id_fkey" FOREIGN KEY ("merchant_id") REFERENCES "merchants"("id") ON DELETE CASCADE ON UPDATE CASCADE;
