import { randomBytes } from "node:crypto";
import type { Principal } from "../../auth.ts";
import type { PrismaClient } from "../../db/database.ts";
import type { PaymentLink } from "../../db/generated/prisma/client.ts";
import { GatewayError, NotFoundError, ValidationError } from "../../errors.ts";
import { recordRecoveryPoint, recoveredObject } from "../../idempotency/scope.ts";
import { parseAmount, parseCurrency } from "../../money.ts";
import { resolvePaging, toPage, type Page } from "../../paging.ts";
import type { Connectors } from "../../providers/index.ts";
import type { ChannelService } from "../channels/service.ts";
import { parseCallbackUrl, type TransactionService } from "../transactions/service.ts";
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
  transactions: Pick<TransactionService, "initialize">;
  publicBaseUrl: string;
}

/** Why the public page cannot take a payment (the page says which); null when it can. */
export type LinkUnavailable = "not_found" | "inactive" | "expired" | "paid" | "busy";

/** How long a single-use link's claim lasts at most (a crashed instance's claim lapses by itself). */
const CLAIM_MS = 30_000;

function parseExpiry(value: string | null | undefined, now: Date): Date | null {
  if (value === undefined || value === null || value === "") return null;
  // ISO 8601 with a time and a zone: a bare date would be read in the server's zone.
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/.test(value)) {
    throw new ValidationError("expires_at", "must be an ISO 8601 date and time with a zone, e.g. 2030-01-31T09:15:00Z");
  }
  const at = new Date(value);
  if (Number.isNaN(at.getTime())) throw new ValidationError("expires_at", "is not a valid date");
  if (at.getTime() <= now.getTime()) throw new ValidationError("expires_at", "must be in the future");
  return at;
}

/**
 * Payment links: a merchant's standing request for money, paid through /pay/<slug>. Each payer's payment is an
 * ordinary checkout transaction made by the transactions service's initialize (so channel rules, events and
 * webhooks are those of any payment), tied to its link in payment_link_payments.
 */
export function createPaymentLinkService(deps: PaymentLinkServiceDeps) {
  const { prisma, channels, connectors, transactions } = deps;
  const urlOf = (link: Pick<PaymentLink, "slug">) => `${deps.publicBaseUrl}/pay/${link.slug}`;

  /** The principal a link's payments are made for: its merchant in its mode, acting as the merchant's own server would. */
  const principalOf = (link: PaymentLink): Principal => ({ merchantId: link.merchantId, mode: link.mode, role: "owner", userId: null, keyId: null, keyPrefix: null });

  function unavailable(link: PaymentLink, now = new Date()): Exclude<LinkUnavailable, "paid" | "not_found"> | null {
    if (!link.active) return "inactive";
    if (link.expiresAt && link.expiresAt.getTime() <= now.getTime()) return "expired";
    return null;
  }

  return {
    urlOf,

    async createLink(principal: Principal, input: PaymentLinkInput): Promise<PaymentLink> {
      const recovered = await recoveredObject(principal, "payment_link", (id) => store.findScoped(prisma, principal, id));
      if (recovered) return recovered;
      const open = input.amount === undefined || input.amount === null;
      const amount = open ? null : parseAmount(input.amount);
      if (!open && input.minAmount != null) throw new ValidationError("min_amount", "is only for an open amount: give amount or min_amount, not both");
      const minAmount = open && input.minAmount != null ? parseAmount(input.minAmount, "min_amount") : 1n;
      const description = input.description?.trim();
      if (!description) throw new ValidationError("description", "is required");
      if (description.length > MAX_DESCRIPTION) throw new ValidationError("description", `must be at most ${MAX_DESCRIPTION} characters`);
      if (input.reusable != null && typeof input.reusable !== "boolean") throw new ValidationError("reusable", "must be true or false");
      const expiresAt = parseExpiry(input.expiresAt, new Date());
      const callbackUrl = parseCallbackUrl(input.callbackUrl);
      if (input.paymentChannelId != null && (!Number.isSafeInteger(input.paymentChannelId) || input.paymentChannelId < 1)) {
        throw new ValidationError("payment_channel_id", "must be a positive integer");
      }
      // The channel and currency as initialize resolves them, so a link never promises what its payments cannot take.
      const { channel, defaultCurrency } = await channels.resolvePaymentChannelAndCurrency(principal, input.paymentChannelId);
      const connector = connectors.for(channel);
      if (!connector) throw new GatewayError("forbidden", `Payment channel ${channel.id} (${channel.provider}) cannot take payments`);
      const currency = parseCurrency(input.currency || defaultCurrency, connector.currencies, channel.provider);
      connector.hosted?.checkPayment({ amount: amount ?? minAmount, currency });
      const data = {
        merchantId: principal.merchantId,
        mode: principal.mode,
        slug: newSlug(),
        amount,
        minAmount,
        currency,
        description,
        reusable: input.reusable ?? false,
        expiresAt,
        callbackUrl,
        paymentChannelId: input.paymentChannelId ?? null,
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

    /** What the public page shows for a slug: the link and its merchant's name, or why it cannot be paid. */
    async pageView(slug: string): Promise<{ link: PaymentLink; merchantName: string; unavailable: LinkUnavailable | null } | null> {
      if (!/^[0-9A-Za-z]{1,64}$/.test(slug)) return null;
      const found = await store.findBySlug(prisma, slug);
      if (!found) return null;
      const { merchant, ...link } = found;
      let reason: LinkUnavailable | null = unavailable(link);
      if (!reason && !link.reusable && (await store.settlingPayments(prisma, link.id)).completed) reason = "paid";
      return { link, merchantName: merchant.name, unavailable: reason };
    },

    /**
     * One payer's payment through a link: checked, then made by initialize for the link's merchant and mode,
     * then tied to the link. A single-use link already paid refuses; while one of its payments is still
     * pending, the payer is sent to that one rather than given a second (so it cannot be paid twice), and
     * while another payer's is being made (the link's claim) this one is asked to try again ("busy").
     */
    async pay(slug: string, input: { email: unknown; amount?: unknown }): Promise<{ reference: string } | { unavailable: LinkUnavailable }> {
      const view = await this.pageView(slug);
      if (!view) return { unavailable: "not_found" };
      if (view.unavailable) return { unavailable: view.unavailable };
      const { link } = view;
      const email = input.email;
      if (typeof email !== "string" || email.trim() === "") throw new ValidationError("email", "is required");
      let amount: bigint;
      if (link.amount !== null) amount = link.amount;
      else {
        amount = parseAmount(input.amount);
        if (amount < link.minAmount) throw new ValidationError("amount", `must be at least ${link.minAmount} (minor units)`);
      }
      const create = async () => {
        const transaction = await transactions.initialize(principalOf(link), {
          amount,
          email,
          currency: link.currency,
          description: link.description,
          callbackUrl: link.callbackUrl,
          paymentChannelId: link.paymentChannelId,
          metadata: { payment_link: link.slug },
        });
        await store.recordPayment(prisma, link.id, transaction.id);
        return { reference: transaction.reference };
      };
      if (link.reusable) return create();
      // One payer at a time makes a single-use link's payment: the check and the creation under one claim.
      const existing = async () => {
        const { completed, pending } = await store.settlingPayments(prisma, link.id);
        return completed ? ({ unavailable: "paid" } as const) : pending ? { reference: pending.reference } : null;
      };
      if (!(await store.claim(prisma, link.id, CLAIM_MS))) return (await existing()) ?? { unavailable: "busy" };
      try {
        return (await existing()) ?? (await create());
      } finally {
        await store.release(prisma, link.id);
      }
    },
  };
}

export type PaymentLinkService = ReturnType<typeof createPaymentLinkService>;
