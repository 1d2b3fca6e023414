import { merchantRoutes } from "../modules/merchants/routes.ts";
import type { RestRoute } from "./route-table.ts";

/** Every REST row, from every feature. */
export const restRoutes: RestRoute[] = [...merchantRoutes];
