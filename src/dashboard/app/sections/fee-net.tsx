import { formatMoney } from "../format.ts";
import { graphql } from "../gql/index.ts";
import type { DetailField } from "../ui.tsx";

/** What a payment cost in provider fees and what it brought the balance: fixed when it completed, null before. */
graphql(`fragment DashboardFeeNet on Transaction { amount currency fee net }`);

/** The Fee and Net rows of a transaction's details; none until it completes. */
export function feeNetFields(t: { currency: string; fee?: number | null; net?: number | null }): DetailField[] {
  if (t.fee == null || t.net == null) return [];
  return [
    ["Fee", <span data-field="fee">{formatMoney(t.fee, t.currency)}</span>],
    ["Net", <span data-field="net">{formatMoney(t.net, t.currency)}</span>],
  ];
}
