import { queryFromInfo } from "@pothos/plugin-prisma";
import type { GraphQLResolveInfo } from "graphql";
import type { Principal } from "../auth.ts";
import type { Page } from "../paging.ts";
import { parseTimeZone, merchantTimeZone } from "../filters.ts";
import { builder } from "./builder.ts";
import type { GraphQLContext } from "./context.ts";
import { businessErrors } from "./errors.ts";

/**
 * A page of a list with totals, the shape the REST list envelopes map onto
 * (Relay connections with totalCount serve frontends separately).
 */
export function offsetPageType<T extends object>(name: string, itemType: Parameters<typeof builder.objectRef<T>>[0] | any, options: { days?: boolean } = {}) {
  return builder.objectRef<Page<T> & { timezone?: string }>(name).implement({
    fields: (t) => ({
      ...(options.days
        ? { timezone: t.string({ description: "The IANA time zone whose days dateFrom and dateTo named: the merchant's, unless timeZone asked for another.", resolve: (page) => page.timezone ?? "UTC" }) }
        : {}),
      items: t.field({ type: [itemType], resolve: (page) => page.items }),
      total: t.exposeInt("total", { description: "Number of matching records." }),
      page: t.exposeInt("page"),
      limit: t.exposeInt("limit", { description: "Page size used." }),
      pages: t.exposeInt("pages", { description: "Number of pages (0 when nothing matches)." }),
    }),
  });
}

/** The merchant's time zone, read once per request (a connection's rows and its totalCount both need it). */
const contextZones = new WeakMap<GraphQLContext, Promise<string>>();
export function merchantZoneOf(ctx: GraphQLContext): Promise<string> {
  let zone = contextZones.get(ctx);
  if (!zone) {
    zone = merchantTimeZone(ctx.prisma, ctx.principal!.merchantId);
    contextZones.set(ctx, zone);
  }
  return zone;
}

/** Filters with dates, in the zone their days are: the timeZone asked for (checked), else the merchant's. */
async function inZone<Filters>(ctx: GraphQLContext, filters: Filters & { timeZone?: string | null }): Promise<Filters & { timeZone: string }> {
  return { ...filters, timeZone: filters.timeZone ? parseTimeZone(filters.timeZone) : await merchantZoneOf(ctx) };
}

type QueryFieldBuilder = Parameters<Parameters<typeof builder.queryFields>[0]>[0];
type PageArgs = { page?: number | null; limit?: number | null };

/** What a list's service offers both shapes: a page with totals, a connection's rows, and their count. */
export interface PagedListSource<Filters> {
  listPage(principal: Principal, input: Filters & PageArgs, query: object, info: GraphQLResolveInfo): Promise<Page<unknown>>;
  connectionSlice(principal: Principal, filters: Filters, query: object): Promise<unknown[]>;
  count(principal: Principal, filters: Filters): Promise<number>;
}

/**
 * One money object's list, both ways over one source and the same filters, newest first: `<name>Page`
 * (page and limit, with totals: the REST list's shape) and `<name>` (a Relay connection with totalCount).
 * Spread into builder.queryFields.
 */
export function pagedListFields<Args extends Record<string, any>, Filters>(
  t: QueryFieldBuilder,
  list: {
    name: string;
    /** The Prisma-backed node type of the connection (its name or ref) and the page type (offsetPageType). */
    type: any;
    page: ReturnType<typeof offsetPageType<any>>;
    descriptions: { page: string; connection: string };
    /** The filters' arguments; called once per field, as Pothos wants its own argument refs on each. */
    args: () => Args;
    source: (ctx: GraphQLContext) => PagedListSource<Filters>;
    /** The arguments as the source's filters; the arguments themselves unless said. */
    filters?: (args: any) => Filters;
    /** false: the paged field only, no Relay connection. */
    connection?: boolean;
    /**
     * The filters name days (dateFrom, dateTo): a `timeZone` argument is added, the filters get the zone (the
     * merchant's unless asked), and the page says it (its type made with offsetPageType's `days`).
     */
    days?: boolean;
  },
) {
  const given = list.filters ?? ((args: any) => args as Filters);
  const days = list.days === true;
  const filters = (args: any, ctx: GraphQLContext): Filters | Promise<Filters> => (days ? inZone(ctx, given(args) as Filters & { timeZone?: string | null }) : given(args));
  const args = (): Args => (days ? { ...list.args(), timeZone: timeZoneArg(t) } : list.args()) as Args;
  return {
    [`${list.name}Page`]: t.field({
      type: list.page,
      description: list.descriptions.page,
      errors: { types: businessErrors },
      args: {
        ...args(),
        page: t.arg.int({ required: false, description: "From 1 (default 1)." }),
        limit: t.arg.int({ required: false, description: "1 to 100 (default 20)." }),
      },
      resolve: async (_root, args: any, ctx, info) => {
        const f = await filters(args, ctx);
        const page = await list.source(ctx).listPage(ctx.principal!, { ...f, page: args.page, limit: args.limit }, queryFromInfo({ context: ctx, info, path: ["items"] }) as object, info);
        return (days ? { ...page, timezone: (f as { timeZone: string }).timeZone } : page) as never;
      },
    }),
    // Pothos types a connection by its literal node type; this helper takes any, so the options are checked at schema build.
    ...(list.connection === false ? {} : { [list.name]: t.prismaConnection({
      type: list.type,
      cursor: "id",
      description: list.descriptions.connection,
      args: args(),
      totalCount: async (_root: unknown, args: any, ctx: GraphQLContext) => list.source(ctx).count(ctx.principal!, await filters(args, ctx)),
      resolve: async (query: object, _root: unknown, args: any, ctx: GraphQLContext) => list.source(ctx).connectionSlice(ctx.principal!, await filters(args, ctx), query) as never,
    } as never) }),
  };
}

/** The argument of every list whose filters name days. */
export function timeZoneArg(t: QueryFieldBuilder) {
  return t.arg.string({
    required: false,
    description: "The IANA time zone whose days dateFrom and dateTo are (from that zone's midnight); default: the merchant's (Brand settings). The /api routes send UTC.",
  });
}
