import type { RestRoute } from "../../rest/route-table.ts";

export const channelRoutes: RestRoute[] = [];
