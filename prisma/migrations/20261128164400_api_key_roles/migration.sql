-- AlterTable
ALTER TABLE "api_keys" ADD COLUMN     "created_by" INTEGER,
ADD COLUMN     "role" "UserRole" NOT NULL DEFAULT 'owner';
