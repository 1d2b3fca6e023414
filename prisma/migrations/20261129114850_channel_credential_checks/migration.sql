-- CreateTable
CREATE TABLE "channel_credential_checks" (
    "channel_id" INTEGER NOT NULL,
    "ok" BOOLEAN NOT NULL,
    "message" TEXT NOT NULL,
    "checked_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "channel_credential_checks_pkey" PRIMARY KEY ("channel_id")
);

-- AddForeignKey
ALTER TABLE "channel_credential_checks" ADD CONSTRAINT "channel_credential_checks_channel_id_fkey" FOREIGN KEY ("channel_id") REFERENCES "payment_channels"("id") ON DELETE CASCADE ON UPDATE CASCADE;
