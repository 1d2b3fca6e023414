import type { Page } from "../paging.ts";
import { builder } from "./builder.ts";

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
