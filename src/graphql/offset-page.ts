import { queryFromInfo } from "@pothos/plugin-prisma";
import type { GraphQLResolveInfo } from "graphql";
import type { Principal } from "../auth.ts";
import type { Page } from "../paging.ts";
import { builder } from "./builder.ts";
import type { GraphQLContext } from "./context.ts";
import { businessErrors } from "./errors.ts";

/**
 * A page of a list with totals, the shape the REST list envelopes map onto
 * (Relay connections with totalCount serve frontends separately).
 */
export function offsetPageType<T extends object>(name: string, itemType: Parameters<typeof builder.objectRef<T>>[0] | any) {
  return builder.objectRef<Page<T>>(name).implement({
    fields: (t) => ({
      items: t.field({ type: [itemType], resolve: (page) => page.items }),
      total: t.exposeInt("total", { description: "Number of matching records." }),
      page: t.exposeInt("page"),
      limit: t.exposeInt("limit", { description: "Page size used." }),
      pages: t.exposeInt("pages", { description: "Number of pages (0 when nothing matches)." }),
    }),
  });
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
  },
) {
  const filters = list.filters ?? ((args: any) => args as Filters);
  return {
    [`${list.name}Page`]: t.field({
      type: list.page,
      description: list.descriptions.page,
      errors: { types: businessErrors },
      args: {
        ...list.args(),
        page: t.arg.int({ required: false, description: "From 1 (default 1)." }),
        limit: t.arg.int({ required: false, description: "1 to 100 (default 20)." }),
      },
      resolve: (_root, args: any, ctx, info) =>
        list
          .source(ctx)
          .listPage(ctx.principal!, { ...filters(args), page: args.page, limit: args.limit }, queryFromInfo({ context: ctx, info, path: ["items"] }) as object, info) as never,
    }),
    // Pothos types a connection by its literal node type; this helper takes any, so the options are checked at schema build.
    ...(list.connection === false ? {} : { [list.name]: t.prismaConnection({
      type: list.type,
      cursor: "id",
      description: list.descriptions.connection,
      args: list.args(),
      totalCount: (_root: unknown, args: any, ctx: GraphQLContext) => list.source(ctx).count(ctx.principal!, filters(args)),
      resolve: (query: object, _root: unknown, args: any, ctx: GraphQLContext) => list.source(ctx).connectionSlice(ctx.principal!, filters(args), query) as never,
    } as never) }),
  };
}
