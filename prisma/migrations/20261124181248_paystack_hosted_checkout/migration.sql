-- AlterTable
ALTER TABLE "transactions" ADD COLUMN     "provider_access_code" TEXT,
ADD COLUMN     "provider_checkout_url" TEXT;
