import { scopeOf, type Principal } from "../../auth.ts";
import type { PrismaClient } from "../../db/database.ts";
import type { PaymentMethod } from "../../db/generated/prisma/client.ts";
import { randomReference } from "../../references.ts";
import type { MethodOwner } from "../transactions/context.ts";

/** Every statement on `payment_methods`: a customer's saved cards and M-Pesa phones. */

export type { PaymentMethod };

/** Whose method it is and which channel saved it (the only one that can charge it). */
export type { MethodOwner } from "../transactions/context.ts";

export interface NewPaymentMethod {
  type: "card" | "mpesa";
  cardBrand?: string | null;
  cardLast4?: string | null;
  cardExpMonth?: number | null;
  cardExpYear?: number | null;
  cardBank?: string | null;
  phone?: string | null;
  reusable: boolean;
  tokenEncrypted: string | null;
  fingerprint: string;
}

export const newPaymentMethodId = () => randomReference("pm_");

export function createPaymentMethodStore(prisma: PrismaClient) {
  return {
    /**
     * Saves a method, or refreshes the one already saved for the same card or phone (same channel, customer and
     * fingerprint: the unique key decides, so two payments saving one card at once make one method). A detached one
     * stays detached: the merchant removed it, and a new payment does not bring it back.
     */
    async save(owner: MethodOwner, method: NewPaymentMethod): Promise<PaymentMethod> {
      const key = { channelId: owner.channelId, customerId: owner.customerId, fingerprint: method.fingerprint };
      await prisma.paymentMethod.createMany({ data: [{ ...owner, ...method, reference: newPaymentMethodId() }], skipDuplicates: true });
      const { fingerprint: _same, ...fresh } = method;
      await prisma.paymentMethod.updateMany({ where: { ...key, detachedAt: null }, data: fresh });
      return prisma.paymentMethod.findUniqueOrThrow({ where: { channelId_customerId_fingerprint: key } });
    },

    /** A customer's attached methods, newest first. */
    listForCustomer(principal: Principal, customerId: number): Promise<PaymentMethod[]> {
      return prisma.paymentMethod.findMany({ where: { ...scopeOf(principal), customerId, detachedAt: null }, orderBy: [{ createdAt: "desc" }, { id: "desc" }] });
    },

    /** The caller's method by its id (pm_...), attached or not. */
    findInScope(principal: Principal, reference: string): Promise<PaymentMethod | null> {
      return prisma.paymentMethod.findFirst({ where: { ...scopeOf(principal), reference } });
    },

    findById: (id: number) => prisma.paymentMethod.findUnique({ where: { id } }),

    /** Many methods by reference in one query (a billing batch's), whoever's: the caller holds each to its own scope. */
    findByReferences: (references: string[]) => prisma.paymentMethod.findMany({ where: { reference: { in: [...new Set(references)] } } }),

    /** Detaches it for good (once: a second detach leaves the first time); null when the caller has no such method. */
    async detach(principal: Principal, reference: string): Promise<PaymentMethod | null> {
      await prisma.paymentMethod.updateMany({ where: { ...scopeOf(principal), reference, detachedAt: null }, data: { detachedAt: new Date() } });
      return prisma.paymentMethod.findFirst({ where: { ...scopeOf(principal), reference } });
    },
  };
}

export type PaymentMethodStore = ReturnType<typeof createPaymentMethodStore>;
