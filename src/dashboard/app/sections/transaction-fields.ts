import { graphql } from "../gql/index.ts";
import type { DashboardTransactionFragment } from "../gql/graphql.ts";

/** The transaction fields every list, detail and live event selects (`...DashboardTransaction`), and their type. */
graphql(`
  fragment DashboardTransaction on Transaction { reference status amount currency paymentMethod email createdAt channel { name provider } customer { email } }
`);

export type Transaction = DashboardTransactionFragment;
export type { TransactionStatus as Status } from "../gql/graphql.ts";
