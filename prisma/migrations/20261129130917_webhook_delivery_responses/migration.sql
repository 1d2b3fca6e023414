-- AlterTable
ALTER TABLE "webhook_deliveries" ADD COLUMN     "last_response_body" TEXT,
ADD COLUMN     "last_response_headers" JSONB;
