-- AlterTable
ALTER TABLE "transactions" ADD COLUMN     "callback_url" TEXT;
