import type { PrismaClient } from "../../db/database.ts";

export function createCustomerService(prisma: PrismaClient) {
  void prisma;
  return {};
}

export type CustomerService = ReturnType<typeof createCustomerService>;
