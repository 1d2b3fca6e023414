-- CreateTable
CREATE TABLE "merchant_brands" (
    "merchant_id" INTEGER NOT NULL,
    "display_name" TEXT,
    "accent_color" TEXT,
    "support_email" TEXT,
    "logo" BYTEA,
    "logo_type" TEXT,
    "logo_hash" TEXT,
    "logo_size" INTEGER,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "merchant_brands_pkey" PRIMARY KEY ("merchant_id")
);

-- AddForeignKey
ALTER TABLE "merchant_brands" ADD CONSTRAINT "merchant_brands_merchant_id_fkey" FOREIGN KEY ("merchant_id") REFERENCES "merchants"("id") ON DELETE CASCADE ON UPDATE CASCADE;
