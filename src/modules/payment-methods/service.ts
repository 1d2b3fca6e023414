import { createHmac, hkdfSync } from "node:crypto";
import type { Principal } from "../../auth.ts";
import type { PrismaClient } from "../../db/database.ts";
import { GatewayError, NotFoundError } from "../../errors.ts";
import type { Logger } from "../../logger.ts";
import type { SavedCard } from "../../providers/types.ts";
import type { SecretBox } from "../../security/encryption.ts";
import type { CustomerService } from "../customers/service.ts";
import { createPaymentMethodStore, type MethodOwner, type PaymentMethod } from "./store.ts";

/**
 * Saved payment methods: a payer's card (the provider's token, sealed like channel credentials) or M-Pesa phone,
 * saved with the payer's consent when a payment succeeds, listed and detached by the merchant, and charged later
 * without the payer (transactions/saved-charges.ts). The token never leaves this service except to its connector.
 */

/** What is sealed in token_encrypted. */
interface SealedToken {
  token: string;
  signature: string;
}

/** A method ready to charge: the row and its provider token (null for M-Pesa, whose charge is a push to the phone). */
export interface ChargeableMethod {
  method: PaymentMethod;
  token: string | null;
}

export function createPaymentMethodService(deps: { prisma: PrismaClient; secrets: SecretBox; encryptionKey: Buffer; customers: CustomerService; logger: Logger }) {
  const store = createPaymentMethodStore(deps.prisma);
  const fingerprintKey = Buffer.from(hkdfSync("sha256", deps.encryptionKey, Buffer.alloc(0), "payment-gateway payment method fingerprints v1", 32));
  /** Keyed, so the table never holds a card's signature or a phone number in a form that could be matched elsewhere. */
  const tokenIn = (method: PaymentMethod) => (method.tokenEncrypted ? deps.secrets.decryptJson<SealedToken>(method.tokenEncrypted).token : null);
  const fingerprintOf = (kind: string, value: string) => createHmac("sha256", fingerprintKey).update(`${kind}:${value}`).digest("hex");

  /**
   * The customer's method to charge: a 404 when the caller has no such method for this customer, a 409 once it
   * is detached or when its provider does not allow charging it again.
   */
  function chargeableOf(method: PaymentMethod | null, reference: string, customerId: number): ChargeableMethod {
    if (!method || method.customerId !== customerId) throw new NotFoundError(`Payment method ${reference} of customer ${customerId}`);
    if (method.detachedAt) throw new GatewayError("payment_method_detached", `Payment method ${reference} was detached and can no longer be charged`);
    if (!method.reusable) throw new GatewayError("payment_method_not_reusable", `The provider does not allow payment method ${reference} to be charged again`);
    return { method, token: tokenIn(method) };
  }

  return {
    /** Saves the card a payment was made with (same card again: the same method, with the newest token). */
    async saveCard(owner: MethodOwner, card: SavedCard): Promise<PaymentMethod> {
      const method = await store.save(owner, {
        type: "card",
        cardBrand: card.brand,
        cardLast4: card.last4,
        cardExpMonth: card.expMonth,
        cardExpYear: card.expYear,
        cardBank: card.bank,
        reusable: card.reusable,
        tokenEncrypted: deps.secrets.encryptJson({ token: card.token, signature: card.signature } satisfies SealedToken),
        fingerprint: fingerprintOf("card", card.signature),
      });
      deps.logger.info({ paymentMethod: method.reference, customerId: owner.customerId }, "payment method saved");
      return method;
    },

    /** Saves the phone an M-Pesa payment was made from (a later charge pushes a prompt to it). */
    async saveMpesa(owner: MethodOwner, msisdn: string): Promise<PaymentMethod> {
      const method = await store.save(owner, { type: "mpesa", phone: msisdn, reusable: true, tokenEncrypted: null, fingerprint: fingerprintOf("mpesa", msisdn) });
      deps.logger.info({ paymentMethod: method.reference, customerId: owner.customerId }, "payment method saved");
      return method;
    },

    /** The caller's customer's attached methods, newest first; a 404 for a customer the caller does not have. */
    async listForCustomer(principal: Principal, customerId: number): Promise<PaymentMethod[]> {
      await deps.customers.getCustomer(principal, customerId);
      return store.listForCustomer(principal, customerId);
    },

    /** For Customer.paymentMethods, whose customer is already the caller's. */
    listOfCustomer: (principal: Principal, customerId: number) => store.listForCustomer(principal, customerId),

    async detach(principal: Principal, reference: string): Promise<PaymentMethod> {
      const method = await store.detach(principal, reference);
      if (!method) throw new NotFoundError(`Payment method ${reference}`);
      return method;
    },

    /** The customer's method to charge (chargeableOf). */
    async chargeable(principal: Principal, reference: string, customerId: number): Promise<ChargeableMethod> {
      return chargeableOf(await store.findInScope(principal, reference), reference, customerId);
    },

    /** chargeable() for many (a billing batch) in one query: each request's method, or the error that refuses it. */
    async chargeableMany(requests: { principal: Principal; reference: string; customerId: number }[]): Promise<(ChargeableMethod | Error)[]> {
      const found = new Map((await store.findByReferences(requests.map((r) => r.reference))).map((m) => [m.reference, m]));
      return requests.map(({ principal, reference, customerId }) => {
        const method = found.get(reference);
        const inScope = method && method.merchantId === principal.merchantId && method.mode === principal.mode ? method : null;
        try {
          return chargeableOf(inScope, reference, customerId);
        } catch (error) {
          return error as Error;
        }
      });
    },

    async tokenOf(paymentMethodId: number): Promise<string | null> {
      const method = await store.findById(paymentMethodId);
      return method && !method.detachedAt && method.reusable ? tokenIn(method) : null;
    },
  };
}

export type PaymentMethodService = ReturnType<typeof createPaymentMethodService>;
