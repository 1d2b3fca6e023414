-- AlterTable
ALTER TABLE "transaction_attempts" ADD COLUMN     "unsent" BOOLEAN NOT NULL DEFAULT false;
