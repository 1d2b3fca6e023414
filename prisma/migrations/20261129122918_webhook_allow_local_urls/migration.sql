-- AlterTable
ALTER TABLE "webhook_endpoints" ADD COLUMN     "allow_local_urls" BOOLEAN NOT NULL DEFAULT false;
