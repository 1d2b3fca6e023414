-- AlterTable
ALTER TABLE "transaction_attempts" ADD COLUMN     "send_claim" TEXT;
