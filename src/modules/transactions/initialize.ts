import { z } from "zod";
import type { Principal } from "../../auth.ts";
import type { Prisma } from "../../db/generated/prisma/client.ts";
import { GatewayError } from "../../errors.ts";
import { amountSchema, parseCurrency } from "../../money.ts";
import { phoneSchema } from "../../phone.ts";
import { optionalTextSchema, parseInput, refuse, unsafeTextAt } from "../../validation.ts";
import { ValidationError } from "../../errors.ts";
import { connectorOf, newAccessCode, newReference, RECONCILE_JOB, type FlowContext } from "./context.ts";
import type { HostedFlow } from "./hosted.ts";
import { afterCreate, insertPendingTransaction } from "./status.ts";

/** Initialize: a payment the payer completes on a checkout page (the gateway's own, or a hosted provider's). */

export interface InitializeInput {
  amount: unknown;
  /** The payer's e-mail; or `customer`, whose e-mail it then is. */
  email?: string | null;
  /** One of the merchant's customers (its id), instead of `email`. */
  customer?: number | null;
  /** Save the payer's card or phone for later charges when the payment succeeds (the payer may still untick it). */
  savePaymentMethod?: boolean | null;
  paymentChannelId?: number | null;
  description?: string | null;
  currency?: string | null;
  firstName?: string | null;
  lastName?: string | null;
  phone?: string | null;
  /** The merchant's page to send the payer back to after paying (Paystack's field). */
  callbackUrl?: string | null;
  /** The merchant's own reference, kept as the client reference (the gateway's reference stays the key). */
  reference?: string | null;
  /** A JSON object of the merchant's, stored and echoed as sent. */
  metadata?: unknown;
}

export const MAX_METADATA_BYTES = 8 * 1024;
const MAX_METADATA_DEPTH = 10;
/** Levels of nesting below the metadata object itself; deeper is a 400 naming `metadata`. */
function metadataDepth(value: unknown): number {
  if (value === null || typeof value !== "object") return 0;
  let deepest = 0;
  for (const item of Object.values(value)) deepest = Math.max(deepest, metadataDepth(item));
  return 1 + deepest;
}

/**
 * initialize's `metadata`: a JSON object (not an array or a scalar) of at most 8 KB serialized (UTF-8), kept as the
 * object to store; null or absent is no metadata.
 */
export const metadataSchema = z.unknown().optional().transform((value, ctx): Record<string, unknown> | null => {
  if (value === undefined || value === null) return null;
  if (typeof value !== "object" || Array.isArray(value)) return refuse(ctx, "must be a JSON object");
  if (Buffer.byteLength(JSON.stringify(value), "utf8") > MAX_METADATA_BYTES) {
    return refuse(ctx, `must be at most ${MAX_METADATA_BYTES} bytes as JSON (${MAX_METADATA_BYTES / 1024} KB)`);
  }
  if (metadataDepth(value) > MAX_METADATA_DEPTH) return refuse(ctx, `must be nested at most ${MAX_METADATA_DEPTH} levels deep`);
  // Text jsonb cannot store (NUL, lone surrogates): the one text check, which REST and GraphQL inputs have already passed.
  const unsafe = unsafeTextAt(value, "metadata");
  if (unsafe) return refuse(ctx, unsafe.problem, unsafe.field);
  return value as Record<string, unknown>;
});

/** An http(s) URL the payer's browser is sent to; no credentials in it, at most 2,048 characters. */
export const callbackUrlSchema = optionalTextSchema(2048).transform((text, ctx) => {
  if (!text) return null;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return refuse(ctx, "must be an absolute http(s) URL");
  }
  if ((url.protocol !== "https:" && url.protocol !== "http:") || url.username || url.password) {
    return refuse(ctx, "must be an absolute http(s) URL without credentials");
  }
  return url.href;
});

/** A payer's e-mail (customers' normalizeEmail rule): trimmed, lower-cased. */
const emailSchema = z
  .string({ error: "is required" })
  .trim()
  .toLowerCase()
  .min(1, "is required")
  .pipe(z.email("must be a valid e-mail address").max(254, "must be a valid e-mail address"));

/** initialize's input, in the order its fields are reported when several are wrong; the currency is the channel's to check. */
const initializeInput = z.object({
  amount: amountSchema,
  email: emailSchema,
  savePaymentMethod: z.boolean().nullish().transform((save) => save === true),
  // Empty is no phone.
  phone: z.string().nullish().transform((phone) => phone || null).pipe(phoneSchema.nullable()),
  firstName: optionalTextSchema(100),
  lastName: optionalTextSchema(100),
  description: optionalTextSchema(500),
  callbackUrl: callbackUrlSchema,
  // Kept as STK push keeps its reference: the merchant's own, not unique; the gateway's reference stays the key.
  reference: optionalTextSchema(100),
  metadata: metadataSchema,
  paymentChannelId: z.number().int().nullish(),
  currency: z.string().nullish(),
});

/**
 * A payment link's M-Pesa payer may leave the e-mail out (the gateway's own page only; /api and /v1 keep
 * requiring it): no e-mail, no customer record, no e-mailed receipt.
 */
const initializeWithoutEmailInput = initializeInput.extend({
  email: z.string().nullish().transform((email) => email?.trim() || null).pipe(emailSchema.nullable()),
});

/** Options the gateway's own callers may set; never reachable from a request body. */
export interface InitializeOptions {
  /** The payer's e-mail may be absent (a payment link paid by M-Pesa); a hosted provider (Paystack) still needs one. */
  emailOptional?: boolean;
}

/** Where the payer goes after paying: the merchant's callback_url with ?trxref=<ref>&reference=<ref>, as Paystack sends them. */
export function payerReturnUrl(callbackUrl: string, reference: string): string {
  const url = new URL(callbackUrl);
  url.searchParams.set("trxref", reference);
  url.searchParams.set("reference", reference);
  return url.href;
}

export function createInitialize(ctx: FlowContext, hostedFlow: Pick<HostedFlow, "openHostedPayment">) {
  const { deps, store } = ctx;
  const { channels, customers, connectors } = deps;

  /**
   * A card/checkout payment: validate -> resolve channel and currency -> customer -> row. The row is one
   * INSERT (no interactive transaction holding a pooled connection, nor list_counts' row locks across round
   * trips), with an Idempotency-Key's recovery point in the same statement. A hosted provider's payment or one
   * that saves its method finds or creates the payer's customer first: it stands on its own if the insert fails.
   */
  /** `customer` names the payer: its e-mail (and its names and phone, unless given) are the payment's. */
  async function payerOf(principal: Principal, input: InitializeInput): Promise<Partial<InitializeInput>> {
    if (input.customer === undefined || input.customer === null) return {};
    const customer = await customers.getCustomer(principal, input.customer);
    if (input.email && input.email.trim().toLowerCase() !== customer.email) throw new ValidationError("email", "must be the customer's e-mail when customer is given (or left out)");
    return {
      email: customer.email,
      firstName: input.firstName ?? customer.firstName,
      lastName: input.lastName ?? customer.lastName,
      phone: input.phone ?? (customer.phone ? customer.phone : null),
    };
  }

  return async function initialize(principal: Principal, input: InitializeInput, options: InitializeOptions = {}) {
    const recovered = await ctx.recoveredTransaction(principal);
    if (recovered) return recovered;
    const named = await payerOf(principal, input);
    const schema = options.emailOptional ? initializeWithoutEmailInput : initializeInput;
    const { amount, email, phone, firstName, lastName, description, callbackUrl, reference: clientReference, metadata, savePaymentMethod, ...wanted } = parseInput(schema, { ...input, ...named });
    const { channel, defaultCurrency } = await channels.resolvePaymentChannelAndCurrency(principal, wanted.paymentChannelId);
    const connector = connectorOf(connectors, channel);
    if (!connector) throw new GatewayError("forbidden", `Payment channel ${channel.id} (${channel.provider}) cannot take payments`);
    const currency = parseCurrency(wanted.currency || defaultCurrency!, connector.currencies, channel.provider);
    const hosted = connector.hosted;
    hosted?.checkPayment({ amount, currency });
    if (hosted && email === null) throw new ValidationError("email", "is required: card payments need the payer's e-mail");

    const fields = { reference: newReference(), accessCode: newAccessCode(), amount, currency, description, email, phone, firstName, lastName, channelId: channel.id, callbackUrl, clientReference, metadata };
    if (!hosted && !savePaymentMethod) {
      // The common case, in one statement: the payer's customer (found or created), the row and, under an
      // Idempotency-Key, its recovery point.
      const transaction = await store.insertCheckout(principal, fields);
      afterCreate(ctx.stateMachine, { transaction, event: null, jobsQueued: 0 });
      return transaction;
    }
    // Customers are keyed on their e-mail: a payer who gave none is no customer.
    const customer = email === null ? null : await customers.findOrCreateCustomer(principal, { email, firstName, lastName, phone });
    const row: Prisma.TransactionUncheckedCreateInput = {
      merchantId: principal.merchantId,
      mode: principal.mode,
      reference: fields.reference,
      accessCode: fields.accessCode,
      amount,
      currency,
      description,
      email,
      phoneNumber: phone,
      channelId: channel.id,
      customerId: customer?.id ?? null,
      callbackUrl,
      clientReference,
      savePaymentMethod,
      ...(metadata === null ? {} : { metadata: metadata as Prisma.InputJsonObject }),
    };
    if (hosted) {
      // Row and its verification job first, then the provider: whatever happens at Paystack is found again.
      const verifyAt = new Date(Date.now() + deps.hosted.verifyAfterMs);
      const created = await deps.prisma.$transaction((tx) =>
        insertPendingTransaction(tx, row, { announce: false, keyedBy: principal, jobs: (t) => [{ kind: RECONCILE_JOB, payload: { transactionId: t.id }, runAt: verifyAt }] }),
      );
      afterCreate(ctx.stateMachine, created);
      return hostedFlow.openHostedPayment(created.transaction, channel, hosted);
    }
    // Under an Idempotency-Key the row and its recovery point commit together (src/idempotency).
    const created = await deps.prisma.$transaction((tx) => insertPendingTransaction(tx, row, { announce: false, keyedBy: principal }));
    afterCreate(ctx.stateMachine, created);
    return created.transaction;
  };
}
