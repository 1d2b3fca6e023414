import { normalizePhone } from "../../phone.ts";
import { z } from "zod";
import { scopeOf, type Principal } from "../../auth.ts";
import type { PrismaClient } from "../../db/database.ts";
import { Prisma, type Customer } from "../../db/generated/prisma/client.ts";
import { ConflictError, NotFoundError, ValidationError, isUniqueViolation } from "../../errors.ts";
import { listRowCount, pageOfIds, resolvePaging, toPage, type Page } from "../../paging.ts";
import { optionalText } from "../../validation.ts";
import { createTrigramStatistics, indexedPart, SEARCHED_COLUMNS, type SearchedColumn } from "./search.ts";

export type { Customer };

export interface CustomerInput {
  email: string;
  firstName?: string | null;
  lastName?: string | null;
  phone?: string | null;
  /** A JSON object of the merchant's (POST /v1/customers), at most 8 KB serialized. */
  metadata?: unknown;
  /** Test mode: the test clock the customer lives on (resolved from its id by the caller). */
  testClockId?: number | null;
}

const MAX_NAME_LENGTH = 100;
const MAX_METADATA_BYTES = 8 * 1024;

/** A customer's metadata: a JSON object of at most 8 KB serialized; absent or null is none. */
function customerMetadata(value: unknown): Prisma.InputJsonObject | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "object" || Array.isArray(value)) throw new ValidationError("metadata", "must be a JSON object");
  if (Buffer.byteLength(JSON.stringify(value), "utf8") > MAX_METADATA_BYTES) throw new ValidationError("metadata", `must be at most ${MAX_METADATA_BYTES} bytes as JSON (8 KB)`);
  return value as Prisma.InputJsonObject;
}
const MAX_SEARCH_LENGTH = 100;
/** Up to this many customers a search walks them (about 1 µs a row); beyond, it asks the trigram indexes (about 2 ms). */
const SEARCH_WALK_UP_TO = 2000;
const emailSchema = z.email().max(254);

/** Trimmed and lower-cased, so one address is one customer however it is typed. */
export function normalizeEmail(value: string, field = "email"): string {
  const email = value.trim().toLowerCase();
  if (!email) throw new ValidationError(field, "is required");
  if (!emailSchema.safeParse(email).success) throw new ValidationError(field, "must be a valid e-mail address");
  return email;
}

function validateCustomer(principal: Principal, input: CustomerInput) {
  return {
    merchantId: principal.merchantId,
    mode: principal.mode,
    email: normalizeEmail(input.email ?? ""),
    firstName: optionalText(input.firstName, "first_name", MAX_NAME_LENGTH),
    lastName: optionalText(input.lastName, "last_name", MAX_NAME_LENGTH),
    phone: input.phone?.trim() ? normalizePhone(input.phone) : null,
  };
}

/** An ILIKE pattern matching `text` anywhere, its own % and _ taken literally. */
const likeAnywhere = (text: string) => `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

/** `reader`: where the list reads (a replica when there is one). */
export function createCustomerService(prisma: PrismaClient, reader: PrismaClient = prisma) {
  const scope = scopeOf;
  const trigramStatistics = createTrigramStatistics(reader);

  return {
    async createCustomer(principal: Principal, input: CustomerInput): Promise<Customer> {
      const data = validateCustomer(principal, input);
      const metadata = customerMetadata(input.metadata);
      try {
        return await prisma.customer.create({ data: { ...data, ...(metadata ? { metadata } : {}), ...(input.testClockId ? { testClockId: input.testClockId } : {}) } });
      } catch (error) {
        // The unique index decides, so two concurrent creates cannot both succeed.
        if (isUniqueViolation(error)) throw new ConflictError(`A customer with email ${data.email} already exists`, "email");
        throw error;
      }
    },

    /** Newest first; search matches part of a name, e-mail or phone, ignoring case. */
    async listCustomers(
      principal: Principal,
      options: { search?: string | null; page?: number | null; limit?: number | null } = {},
    ): Promise<Page<Customer>> {
      const paging = resolvePaging(options);
      const search = options.search?.trim();
      if (search && search.length > MAX_SEARCH_LENGTH) {
        throw new ValidationError("search", `must be at most ${MAX_SEARCH_LENGTH} characters`);
      }
      // Without a search the total is the rollups' (list_counts); a search's matches are found and counted
      // through the trigram indexes on each column (ILIKE '%term%', the term's % and _ taken literally).
      const pattern = search ? likeAnywhere(search) : null;
      // A merchant with few customers is searched by walking them newest first; the trigram indexes hold every
      // merchant's customers, whose common trigrams (a shared domain) cost more than a short walk.
      const matchesFirst = pattern ? (await listRowCount(reader, "customers", principal.merchantId, principal.mode)) > SEARCH_WALK_UP_TO : true;
      // Through the indexes, each column is asked for the part of the term without the trigrams most rows share (search.ts).
      const common = pattern && matchesFirst ? await trigramStatistics.common() : new Map<SearchedColumn, ReadonlySet<string>>();
      const { total, ids } = await pageOfIds<number>(
        reader,
        {
          table: "customers",
          merchantId: principal.merchantId,
          mode: principal.mode,
          matchesFirst,
          ...(pattern
            ? {
                extra: (param) => {
                  const like = param(pattern);
                  return SEARCHED_COLUMNS.map((column) => {
                    const part = indexedPart(search!, common.get(column) ?? new Set());
                    if (part === search) return `${column} ILIKE ${like}`;
                    // `|| ''` keeps the whole term out of the index condition: it is tested on the rows the part finds.
                    return `(${column} ILIKE ${param(likeAnywhere(part))} AND (${column} || '') ILIKE ${like})`;
                  }).join(" OR ");
                },
              }
            : {}),
        },
        paging,
      );
      const items = ids.length ? await reader.customer.findMany({ where: { id: { in: ids } }, orderBy: [{ createdAt: "desc" }, { id: "desc" }] }) : [];
      return toPage(items, total, paging);
    },

    async getCustomer(principal: Principal, id: number): Promise<Customer> {
      const customer = await prisma.customer.findFirst({ where: { id, ...scope(principal) } });
      if (!customer) throw new NotFoundError(`Customer ${id}`);
      return customer;
    },

    /** getCustomer() for many (a billing batch) in one query: each request's customer, or its 404. */
    async getCustomers(requests: { principal: Principal; id: number }[]): Promise<(Customer | NotFoundError)[]> {
      const found = new Map((await prisma.customer.findMany({ where: { id: { in: [...new Set(requests.map((r) => r.id))] } } })).map((c) => [c.id, c]));
      return requests.map(({ principal, id }) => {
        const customer = found.get(id);
        return customer && customer.merchantId === principal.merchantId && customer.mode === principal.mode ? customer : new NotFoundError(`Customer ${id}`);
      });
    },

    /**
     * The customer with this e-mail, created if new; an existing customer is returned unchanged.
     * INSERT ... ON CONFLICT DO NOTHING (createMany skipDuplicates) rather than catching the unique
     * violation: inside a caller's PostgreSQL transaction a failed INSERT would abort the transaction.
     */
    async findOrCreateCustomer(
      principal: Principal,
      input: { email: string; firstName?: string | null; lastName?: string | null; phone?: string | null },
      db: Prisma.TransactionClient = prisma,
    ): Promise<Customer> {
      const data = validateCustomer(principal, input);
      const where = { merchantId_mode_email: { merchantId: data.merchantId, mode: data.mode, email: data.email } };
      const existing = await db.customer.findUnique({ where });
      if (existing) return existing;
      await db.customer.createMany({ data: [data], skipDuplicates: true });
      return db.customer.findUniqueOrThrow({ where });
    },
  };
}

export type CustomerService = ReturnType<typeof createCustomerService>;
