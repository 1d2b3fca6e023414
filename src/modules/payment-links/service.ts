import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { z } from "zod";
import type { Principal } from "../../auth.ts";
import type { PrismaClient } from "../../db/database.ts";
import type { PaymentLink } from "../../db/generated/prisma/client.ts";
import { GatewayError, NotFoundError, ValidationError } from "../../errors.ts";
import { recordRecoveryPoint, recoveredObject } from "../../idempotency/scope.ts";
import { amountSchema, formatMoney, parseAmount, parseCurrency } from "../../money.ts";
import { normalizeMsisdn } from "../../phone.ts";
import { resolvePaging, toPage, type Page } from "../../paging.ts";
import { paymentsOfLink } from "../transactions/store.ts";
import type { Connectors } from "../../providers/index.ts";
import type { ChannelService } from "../channels/service.ts";
import { optionalTextSchema, parseInput, refuse } from "../../validation.ts";
import { callbackUrlSchema, type TransactionService } from "../transactions/service.ts";
import * as store from "./store.ts";
import type { LinkFilters, LinkQuery } from "./store.ts";

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
export const SLUG_LENGTH = 24;
export const MAX_DESCRIPTION = 500;

/** 24 characters of [0-9A-Za-z] (~143 bits): the link's public path, URL-safe and unguessable. Bytes >= 248 are skipped so every character is equally likely. */
export function newSlug(): string {
  let out = "";
  while (out.length < SLUG_LENGTH) for (const byte of randomBytes(32)) if (byte < 248 && out.length < SLUG_LENGTH) out += BASE62[byte % 62];
  return out;
}

export interface PaymentLinkInput {
  amount?: unknown;
  minAmount?: unknown;
  currency?: string | null;
  description?: string | null;
  reusable?: boolean | null;
  expiresAt?: string | null;
  callbackUrl?: string | null;
  paymentChannelId?: number | null;
}

export interface PaymentLinkServiceDeps {
  prisma: PrismaClient;
  channels: ChannelService;
  connectors: Connectors;
  transactions: Pick<TransactionService, "initialize" | "payerMethods" | "payWithMpesa">;
  publicBaseUrl: string;
  /** Signs the token that recognises a single-use link's payer (a key derived from it; never the key itself). */
  payerKey: Buffer;
  /** How long the payer's cookie lasts: as long as their checkout payment can stay pending (CHECKOUT_EXPIRY_MS). */
  payerCookieMs: number;
}

const PAYER_COOKIE = "gw_link_payer";

/**
 * Why the public page cannot take a payment (the page says which); null when it can. `being_paid`: a single-use
 * link whose payment another payer started is still pending (usable again if it fails or expires).
 */
export type LinkUnavailable = "not_found" | "inactive" | "expired" | "paid" | "busy" | "being_paid";

/** How a link's payer can pay: the checkout's choice, decided on the link's first page. */
export type LinkMethod = "card" | "mpesa";
export interface LinkMethods {
  card: boolean;
  mpesa: boolean;
}

/** The public page's view of a link: `ownPending` is the pending payment this payer started (their token matched). */
export interface LinkPageView {
  link: PaymentLink;
  merchantName: string;
  unavailable: LinkUnavailable | null;
  ownPending: string | null;
  /** What the page offers; card alone when the link's channel cannot be resolved now (paying then says why). */
  methods: LinkMethods;
}

/** What a payer submits on a link's first page. */
export interface LinkPayInput {
  email: unknown;
  amount?: unknown;
  /** Absent: M-Pesa when a phone was given (and it is offered), else chosen on the checkout, the e-mail required (the form before M-Pesa was on it). */
  method?: unknown;
  /** The M-Pesa phone: the push goes out at once, so the payer's next page is "check your phone". */
  phone?: unknown;
  /** The page's language, kept on the push's attempt for the payer's receipt. */
  language?: string;
}

/** An open amount M-Pesa cannot collect (cents): the payer's form says so. */
export const MPESA_WHOLE_AMOUNT = "M-Pesa takes whole amounts only (no cents): round it, or pay by card";

/**
 * The method of a link's payment: the one the payer picked among those offered. A form without one (as posted before
 * M-Pesa was on the page) is M-Pesa when it gives a phone and M-Pesa is offered, else null: the payer chooses on the
 * checkout, and gives an e-mail as before.
 */
function chooseMethod(offered: LinkMethods, input: LinkPayInput): LinkMethod | null {
  if (input.method === undefined || input.method === null || input.method === "") {
    return offered.mpesa && typeof input.phone === "string" && input.phone.trim() !== "" ? "mpesa" : null;
  }
  if (input.method !== "card" && input.method !== "mpesa") throw new ValidationError("method", "must be card or mpesa");
  if (!offered[input.method]) throw new ValidationError("method", input.method === "mpesa" ? "M-Pesa is not offered for this payment" : "cards are not offered for this payment");
  return input.method;
}

/** How long a single-use link's claim lasts at most (a crashed instance's claim lapses by itself). */
const CLAIM_MS = 30_000;

/** ISO 8601 with a time and a zone: a bare date would be read in the server's zone. */
const EXPIRY_FORMAT = "must be an ISO 8601 date and time with a zone, e.g. 2030-01-31T09:15:00Z";
const ISO_WITH_ZONE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/;

/** A link's input, in the order its fields are reported when several are wrong; the currency is the channel's to check. */
const linkInput = z
  .object({
    // Absent is an open amount: the payer chooses it, at least min_amount.
    amount: amountSchema.nullish().transform((amount) => amount ?? null),
    minAmount: amountSchema.nullish(),
    description: optionalTextSchema(MAX_DESCRIPTION).pipe(z.string("is required")),
    reusable: z.boolean("must be true or false").nullish().transform((reusable) => reusable ?? false),
    expiresAt: z
      .string(EXPIRY_FORMAT)
      .nullish()
      .transform((value, ctx) => {
        if (!value) return null;
        if (!ISO_WITH_ZONE.test(value)) return refuse(ctx, EXPIRY_FORMAT);
        const at = new Date(value);
        if (Number.isNaN(at.getTime())) return refuse(ctx, "is not a valid date");
        if (at.getTime() <= Date.now()) return refuse(ctx, "must be in the future");
        return at;
      }),
    callbackUrl: callbackUrlSchema,
    paymentChannelId: z
      .custom<number>((id) => Number.isSafeInteger(id) && (id as number) >= 1, "must be a positive integer")
      .nullish()
      .transform((id) => id ?? null),
    currency: z.string().nullish(),
  })
  .refine((link) => link.amount === null || link.minAmount == null, {
    path: ["minAmount"],
    message: "is only for an open amount: give amount or min_amount, not both",
    when: (payload) => !payload.issues.some((issue) => issue.path?.[0] === "amount"),
  });

/**
 * Payment links: a merchant's standing request for money, paid through /pay/<slug>. Each payer's payment is an
 * ordinary checkout transaction made by the transactions service's initialize (so channel rules, events and
 * webhooks are those of any payment), tied to its link in payment_link_payments.
 */
export function createPaymentLinkService(deps: PaymentLinkServiceDeps) {
  const { prisma, channels, connectors, transactions } = deps;
  const urlOf = (link: Pick<PaymentLink, "slug">) => `${deps.publicBaseUrl}/pay/${link.slug}`;

  /**
   * A single-use link's payer is recognised by a token handed to them (a cookie) when their payment was made: an
   * HMAC of that payment's reference, so nothing is stored and it is worth nothing for any other payment. Later
   * visitors, who lack it, never learn the reference (their page says "being paid").
   */
  const tokenKey = createHmac("sha256", deps.payerKey).update("payment-link-payer-token").digest();
  const payerTokenOf = (reference: string) => createHmac("sha256", tokenKey).update(reference, "utf8").digest("base64url");
  const isPayerOf = (reference: string, token: string | undefined) => {
    if (!token) return false;
    const expected = Buffer.from(payerTokenOf(reference));
    const presented = Buffer.from(token);
    return presented.length === expected.length && timingSafeEqual(presented, expected);
  };

  /** The principal a link's payments are made for: its merchant in its mode, acting as the merchant's own server would. */
  const principalOf = (link: PaymentLink): Principal => ({ merchantId: link.merchantId, mode: link.mode, role: "owner", userId: null, keyId: null, keyPrefix: null });

  function unavailable(link: PaymentLink, now = new Date()): Exclude<LinkUnavailable, "paid" | "not_found"> | null {
    if (!link.active) return "inactive";
    if (link.expiresAt && link.expiresAt.getTime() <= now.getTime()) return "expired";
    return null;
  }

  return {
    urlOf,

    /** The payer's token from a request's Cookie header, if it carries one. */
    payerTokenFrom(cookieHeader: string | undefined): string | undefined {
      for (const part of (cookieHeader ?? "").split(";")) {
        const [name, value] = part.trim().split("=", 2);
        if (name === PAYER_COOKIE && value && /^[A-Za-z0-9_-]{1,100}$/.test(value)) return value;
      }
      return undefined;
    },

    /** The Set-Cookie value handing a single-use link's payer their token: this link's path only, never to scripts. */
    payerCookie(slug: string, token: string): string {
      const secure = deps.publicBaseUrl.startsWith("https:") ? "; Secure" : "";
      return `${PAYER_COOKIE}=${token}; Path=/pay/${slug}; Max-Age=${Math.ceil(deps.payerCookieMs / 1000)}; HttpOnly; SameSite=Lax${secure}`;
    },

    async createLink(principal: Principal, input: PaymentLinkInput): Promise<PaymentLink> {
      const recovered = await recoveredObject(principal, "payment_link", (id) => store.findScoped(prisma, principal, id));
      if (recovered) return recovered;
      const { amount, minAmount, description, reusable, expiresAt, callbackUrl, paymentChannelId, ...wanted } = parseInput(linkInput, input);
      // The channel and currency as initialize resolves them, so a link never promises what its payments cannot take.
      const { channel, defaultCurrency } = await channels.resolvePaymentChannelAndCurrency(principal, paymentChannelId);
      const connector = connectors.for(channel);
      if (!connector) throw new GatewayError("forbidden", `Payment channel ${channel.id} (${channel.provider}) cannot take payments`);
      const currency = parseCurrency(wanted.currency || defaultCurrency, connector.currencies, channel.provider);
      connector.hosted?.checkPayment({ amount: amount ?? minAmount ?? 1n, currency });
      const data = {
        merchantId: principal.merchantId,
        mode: principal.mode,
        slug: newSlug(),
        amount,
        minAmount: minAmount ?? 1n,
        currency,
        description,
        reusable,
        expiresAt,
        callbackUrl,
        paymentChannelId,
      };
      return prisma.$transaction(async (tx) => {
        const link = await store.create(tx, data);
        await recordRecoveryPoint(tx, principal, "payment_link", link.id);
        return link;
      });
    },

    /** By id, scoped to the caller's merchant and mode; anything that is not a positive integer is simply not found. */
    async getLink(principal: Principal, id: string | number, query: LinkQuery = {}): Promise<PaymentLink> {
      const key = String(id).trim();
      const link = /^\d{1,9}$/.test(key) ? await store.findScoped(prisma, principal, Number(key), query) : null;
      if (!link) throw new NotFoundError("Payment link");
      return link;
    },

    /** A link's transactions, newest first: `link` is one the caller already holds (scoped when it was loaded). */
    linkPayments(link: Pick<PaymentLink, "id">, limit: number | null | undefined, query: Parameters<typeof paymentsOfLink>[3] = {}) {
      const take = limit ?? 20;
      if (!Number.isInteger(take) || take < 1 || take > 100) throw new ValidationError("limit", "must be between 1 and 100");
      return paymentsOfLink(prisma, link.id, take, query);
    },

    async deactivateLink(principal: Principal, id: string | number): Promise<PaymentLink> {
      const key = String(id).trim();
      const link = /^\d{1,9}$/.test(key) ? await store.deactivate(prisma, principal, Number(key)) : null;
      if (!link) throw new NotFoundError("Payment link");
      return link;
    },

    async listPage(principal: Principal, input: LinkFilters & { page?: number | null; limit?: number | null }, query: LinkQuery = {}): Promise<Page<PaymentLink>> {
      const paging = resolvePaging(input);
      const { items, total } = await store.listPage(prisma, principal, input, paging, query);
      return toPage(items, total, paging);
    },
    connectionSlice: (principal: Principal, filters: LinkFilters, query: object) => store.connectionSlice(prisma, principal, filters, query),
    count: (principal: Principal, filters: LinkFilters) => store.count(prisma, principal, filters),
    paymentCounts: (linkIds: number[]) => store.paymentCounts(prisma, linkIds),

    /**
     * What the public page shows for a slug: the link and its merchant's name, or why it cannot be paid. A single-use
     * link with a pending payment is "being paid", but for the payer who started it (`payerToken`, their cookie).
     */
    async pageView(slug: string, payerToken?: string): Promise<LinkPageView | null> {
      if (!/^[0-9A-Za-z]{1,64}$/.test(slug)) return null;
      const found = await store.findBySlug(prisma, slug);
      if (!found) return null;
      const { merchant, ...link } = found;
      let reason: LinkUnavailable | null = unavailable(link);
      let ownPending: string | null = null;
      if (!reason && !link.reusable) {
        const { completed, pending } = await store.settlingPayments(prisma, link.id);
        if (completed) reason = "paid";
        else if (pending && isPayerOf(pending.reference, payerToken)) ownPending = pending.reference;
        else if (pending) reason = "being_paid";
      }
      const methods = reason || ownPending ? { card: false, mpesa: false } : await this.methodsOf(link);
      return { link, merchantName: merchant.name, unavailable: reason, ownPending, methods };
    },

    /**
     * Card and/or M-Pesa, as the checkout would offer them for this link's payment (an open amount at its minimum,
     * the amount itself being checked when paying). Card alone when the channel cannot be resolved now: paying
     * then says why, as before.
     */
    async methodsOf(link: PaymentLink, amount?: bigint): Promise<LinkMethods> {
      try {
        return await transactions.payerMethods(principalOf(link), { paymentChannelId: link.paymentChannelId, currency: link.currency, amount: amount ?? link.amount ?? link.minAmount });
      } catch {
        return { card: true, mpesa: false };
      }
    },

    /**
     * One payer's payment through a link: checked, then made by initialize for the link's merchant and mode,
     * then tied to the link. A single-use link already paid refuses; while one of its payments is still
     * pending, the payer who started it (`payerToken`) is sent back to it and anyone else is told the link is
     * being paid (so it is never paid twice, and nobody else can spend or block that payer's attempts); while
     * another payer's is being made (the link's claim) this one is asked to try again ("busy"). A new single-use
     * payment answers the token that recognises its payer from then on.
     */
    async pay(slug: string, input: LinkPayInput, payerToken?: string): Promise<{ reference: string; payerToken?: string; method?: LinkMethod | null } | { unavailable: LinkUnavailable }> {
      const view = await this.pageView(slug, payerToken);
      if (!view) return { unavailable: "not_found" };
      if (view.ownPending) return { reference: view.ownPending };
      if (view.unavailable) return { unavailable: view.unavailable };
      const { link } = view;
      let amount: bigint;
      if (link.amount !== null) amount = link.amount;
      else {
        amount = parseAmount(input.amount);
        if (amount < link.minAmount) throw new ValidationError("amount", `must be at least ${formatMoney(link.minAmount, link.currency)}`);
      }
      const method = chooseMethod(view.methods, input);
      if (input.email !== undefined && input.email !== null && typeof input.email !== "string") throw new ValidationError("email", "must be a valid e-mail address");
      // Checked by initialize; blank is none. Paystack and the card form need it; an M-Pesa payer may leave it out
      // (then no customer record and no e-mailed receipt).
      const email = typeof input.email === "string" && input.email.trim() !== "" ? input.email : null;
      if (method !== "mpesa" && email === null) throw new ValidationError("email", "is required for card payments");
      let phone: string | null = null;
      if (method === "mpesa") {
        phone = normalizeMsisdn(typeof input.phone === "string" ? input.phone : null, "phone");
        // This amount (an open link's): M-Pesa takes whole shillings only, say so before any payment is made.
        if (link.amount === null && !(await this.methodsOf(link, amount)).mpesa) throw new ValidationError("amount", MPESA_WHOLE_AMOUNT);
      }
      const create = async () => {
        const transaction = await transactions.initialize(
          principalOf(link),
          {
            amount,
            email,
            phone,
            currency: link.currency,
            description: link.description,
            callbackUrl: link.callbackUrl,
            paymentChannelId: link.paymentChannelId,
            metadata: { payment_link: link.slug },
          },
          { emailOptional: method === "mpesa" },
        );
        await store.recordPayment(prisma, link.id, transaction.id);
        return { reference: transaction.reference, method };
      };
      /**
       * The M-Pesa payer's push, sent now: their next page is the checkout's "check your phone". A push refused
       * before it was sent (a limit, a prompt still open on that phone) leaves the payment pending: the checkout
       * shows its M-Pesa form, where the payer tries again and is told why.
       */
      const push = async <T extends { reference: string }>(made: T): Promise<T> => {
        if (method !== "mpesa") return made;
        await transactions.payWithMpesa(made.reference, phone, { language: input.language }).catch((error: unknown) => {
          if (!(error instanceof GatewayError)) throw error;
        });
        return made;
      };
      if (link.reusable) return push(await create());
      // One payer at a time makes a single-use link's payment: the check and the creation under one claim.
      const existing = async () => {
        const { completed, pending } = await store.settlingPayments(prisma, link.id);
        if (completed) return { unavailable: "paid" } as const;
        if (!pending) return null;
        return isPayerOf(pending.reference, payerToken) ? { reference: pending.reference } : ({ unavailable: "being_paid" } as const);
      };
      if (!(await store.claim(prisma, link.id, CLAIM_MS))) return (await existing()) ?? { unavailable: "busy" };
      // The push after the claim is released: the payment exists, and the provider's answer may take a while.
      let made: Awaited<ReturnType<typeof create>>;
      try {
        const found = await existing();
        if (found) return found;
        made = await create();
      } finally {
        await store.release(prisma, link.id);
      }
      return push({ ...made, payerToken: payerTokenOf(made.reference) });
    },
  };
}

export type PaymentLinkService = ReturnType<typeof createPaymentLinkService>;
