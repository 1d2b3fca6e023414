import { randomBytes } from "node:crypto";
import type { Principal } from "../../auth.ts";
import type { PrismaClient } from "../../db/database.ts";
import type { Prisma, Transaction, TransactionStatus } from "../../db/generated/prisma/client.ts";
import { GatewayError, NotFoundError, ValidationError } from "../../errors.ts";
import { parseAmount, parseCurrency } from "../../money.ts";
import { pageWindow, resolvePaging, toPage, type Page } from "../../paging.ts";
import type { Connectors } from "../../providers/index.ts";
import { luhnValid } from "../../providers/sandbox/cards.ts";
import type { CardDetails, CardOutcome } from "../../providers/types.ts";
import type { ChannelService } from "../channels/service.ts";
import { normalizeEmail, normalizePhone, type CustomerService } from "../customers/service.ts";
import type { EventPublisher } from "../events/publisher.ts";
import { toPublishedEvent, transitionTransaction, type TransitionRequest } from "./state-machine.ts";
import { optionalText } from "../../validation.ts";

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/** Random base62 text from the CSPRNG (rejection sampling keeps it uniform). */
function randomToken(length: number): string {
  let out = "";
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248 && out.length < length) out += BASE62[byte % 62];
    }
  }
  return out;
}

/** URL-safe and unguessable (~119 bits): the reference alone opens the hosted checkout page. */
export const newReference = () => `txn_${randomToken(20)}`;
const newAccessCode = () => randomToken(16);

export interface InitializeInput {
  amount: unknown;
  email?: string | null;
  paymentChannelId?: number | null;
  description?: string | null;
  currency?: string | null;
  firstName?: string | null;
  lastName?: string | null;
  phone?: string | null;
}

export interface TransactionFilters {
  status?: string | null;
  dateFrom?: string | null;
  dateTo?: string | null;
}

const statuses: readonly TransactionStatus[] = ["pending", "completed", "failed"];

/** A calendar date YYYY-MM-DD (UTC) that exists: 2024-02-30 and 2024-13-45 are rejected. */
function parseDay(value: string, field: string): Date {
  const match = /^(\d{4})-(\d{2})-(\d{2})$/.exec(value);
  const date = match ? new Date(Date.UTC(Number(match[1]), Number(match[2]) - 1, Number(match[3]))) : null;
  if (!date || date.toISOString().slice(0, 10) !== value) throw new ValidationError(field, "must be a date in YYYY-MM-DD format");
  return date;
}

const DAY_MS = 24 * 60 * 60 * 1000;

export function parseStatus(value: string, field = "status"): TransactionStatus {
  if (!statuses.includes(value as TransactionStatus)) throw new ValidationError(field, `must be one of ${statuses.join(", ")}`);
  return value as TransactionStatus;
}

/** Status and inclusive UTC date range as a Prisma filter, scoped to the caller's merchant and mode. */
export function transactionWhere(principal: Principal, filters: TransactionFilters): Prisma.TransactionWhereInput {
  const where: Prisma.TransactionWhereInput = { merchantId: principal.merchantId, mode: principal.mode };
  if (filters.status) where.status = parseStatus(filters.status);
  const from = filters.dateFrom ? parseDay(filters.dateFrom, "date_from") : undefined;
  const to = filters.dateTo ? parseDay(filters.dateTo, "date_to") : undefined;
  if (from && to && from > to) throw new ValidationError("date_from", "must not be after date_to");
  if (from || to) {
    where.createdAt = { ...(from ? { gte: from } : {}), ...(to ? { lt: new Date(to.getTime() + DAY_MS) } : {}) };
  }
  return where;
}

/** Newest first; id breaks ties between rows created in the same millisecond. */
export const newestFirst: Prisma.TransactionOrderByWithRelationInput[] = [{ createdAt: "desc" }, { id: "desc" }];

function validateCard(card: CardDetails): CardDetails {
  const number = card.number.replace(/[\s-]/g, "");
  if (!/^\d{12,19}$/.test(number) || !luhnValid(number)) throw new ValidationError("card_number", "is not a valid card number");
  if (!Number.isInteger(card.expMonth) || card.expMonth < 1 || card.expMonth > 12) {
    throw new ValidationError("expiry_month", "must be a month from 1 to 12");
  }
  const now = new Date();
  const expYear = card.expYear < 100 ? 2000 + card.expYear : card.expYear;
  if (!Number.isInteger(expYear) || expYear * 12 + card.expMonth < now.getUTCFullYear() * 12 + now.getUTCMonth() + 1) {
    throw new ValidationError("expiry_year", "the card has expired");
  }
  if (!/^\d{3,4}$/.test(card.cvc)) throw new ValidationError("cvc", "must be 3 or 4 digits");
  return { number, expMonth: card.expMonth, expYear, cvc: card.cvc };
}

export interface TransactionServiceDeps {
  prisma: PrismaClient;
  channels: ChannelService;
  customers: CustomerService;
  connectors: Connectors;
  publisher: EventPublisher;
  publicBaseUrl: string;
}

export function createTransactionService(deps: TransactionServiceDeps) {
  const { prisma, channels, customers, connectors, publisher } = deps;

  const checkoutUrl = (reference: string) => `${deps.publicBaseUrl}/payment/checkout/${reference}`;

  return {
    checkoutUrl,

    /** validate -> resolve channel and currency -> find or create the customer and insert, in one DB transaction. */
    async initialize(principal: Principal, input: InitializeInput) {
      const amount = parseAmount(input.amount);
      if (!input.email) throw new ValidationError("email", "is required");
      const email = normalizeEmail(input.email);
      const phone = input.phone ? normalizePhone(input.phone) : null;
      const firstName = optionalText(input.firstName, "first_name", 100);
      const lastName = optionalText(input.lastName, "last_name", 100);
      const description = optionalText(input.description, "description", 500);
      const channel = await channels.resolvePaymentChannel(principal, input.paymentChannelId);
      const connector = connectors[channel.provider as keyof Connectors];
      let currencyInput = input.currency;
      if (!currencyInput) {
        const merchant = await prisma.merchant.findUniqueOrThrow({ where: { id: principal.merchantId }, select: { defaultCurrency: true } });
        currencyInput = merchant.defaultCurrency;
      }
      const currency = parseCurrency(currencyInput, connector.currencies, channel.provider);

      return prisma.$transaction(async (tx) => {
        const customer = await customers.findOrCreateCustomer(principal, { email, firstName, lastName, phone }, tx);
        return tx.transaction.create({
          data: {
            merchantId: principal.merchantId,
            mode: principal.mode,
            reference: newReference(),
            accessCode: newAccessCode(),
            amount,
            currency,
            description,
            email,
            phoneNumber: phone,
            channelId: channel.id,
            customerId: customer.id,
          },
        });
      });
    },

    /** `query` carries the relations a GraphQL selection needs, so one read serves it. */
    async getByReference(
      principal: Principal,
      reference: string,
      query: { include?: Prisma.TransactionInclude; select?: Prisma.TransactionSelect } = {},
    ): Promise<Transaction> {
      const transaction = (await prisma.transaction.findFirst({
        ...query,
        where: { reference, merchantId: principal.merchantId, mode: principal.mode },
      })) as Transaction | null;
      if (!transaction) throw new NotFoundError("Transaction");
      return transaction;
    },

    /** One page with totals; `query` carries the relations a GraphQL selection needs (no N+1). */
    async listPage(
      principal: Principal,
      input: TransactionFilters & { page?: number | null; limit?: number | null },
      query: { include?: Prisma.TransactionInclude; select?: Prisma.TransactionSelect } = {},
    ): Promise<Page<Transaction>> {
      const where = transactionWhere(principal, input);
      const paging = resolvePaging(input);
      const [items, total] = await Promise.all([
        prisma.transaction.findMany({ ...query, where, orderBy: newestFirst, ...pageWindow(paging) }),
        prisma.transaction.count({ where }),
      ]);
      return toPage(items as Transaction[], total, paging);
    },

    /**
     * A payer's card payment from the hosted checkout (sandbox channels): the connector decides, the
     * state machine records it. A declined card fails the transaction, as Paystack does.
     */
    async payWithCard(reference: string, cardInput: CardDetails): Promise<{ transaction: Transaction; outcome: CardOutcome | null }> {
      const transaction = await prisma.transaction.findUnique({ where: { reference }, include: { channel: true } });
      if (!transaction) throw new NotFoundError("Transaction");
      if (transaction.status !== "pending") {
        throw new GatewayError("conflict", `Transaction is already ${transaction.status}`);
      }
      const card = validateCard(cardInput);
      const channel = transaction.channel;
      const connector = channel ? connectors[channel.provider as keyof Connectors] : undefined;
      if (!channel || !connector?.chargeCard) {
        throw new GatewayError("forbidden", "This transaction's payment channel does not take card payments here");
      }
      if (!channel.isActive) throw new GatewayError("channel_inactive", `Payment channel ${channel.id} is inactive`);
      const outcome = await connector.chargeCard({
        reference,
        amount: transaction.amount,
        currency: transaction.currency,
        card,
        config: channels.readChannelConfig(channel),
      });
      const result = await this.transition(
        outcome.outcome === "succeeded"
          ? { transactionId: transaction.id, to: "completed", changes: { paymentMethod: "card", providerReference: outcome.providerReference } }
          : { transactionId: transaction.id, to: "failed", changes: { paymentMethod: "card", failureCode: outcome.code, failureReason: outcome.reason } },
      );
      // A concurrent payment settled it first: report what is recorded, not this attempt.
      return { transaction: result.transaction, outcome: result.applied ? outcome : null };
    },

    /** What the payer's checkout page shows; null when the reference is unknown. */
    async checkoutView(reference: string) {
      const t = await prisma.transaction.findUnique({
        where: { reference },
        select: {
          reference: true, amount: true, currency: true, status: true, description: true,
          merchant: { select: { name: true } }, channel: { select: { provider: true } },
        },
      });
      if (!t) return null;
      return {
        reference: t.reference,
        amount: t.amount,
        currency: t.currency,
        status: t.status,
        description: t.description,
        merchantName: t.merchant.name,
        acceptsCards: t.channel !== null && connectors[t.channel.provider as keyof Connectors]?.chargeCard !== undefined,
      };
    },

    /** The latest status-change event of a transaction, as subscribers receive it. */
    async lastEvent(transactionId: number) {
      const event = await prisma.event.findFirst({ where: { transactionId }, orderBy: { id: "desc" } });
      return event ? toPublishedEvent(event) : null;
    },

    transition(request: TransitionRequest) {
      return transitionTransaction(prisma, publisher, request);
    },
  };
}

export type TransactionService = ReturnType<typeof createTransactionService>;
