/** The transaction fields every list, detail and live event selects, and their type. */
export const TRANSACTION_FIELDS = "reference status amount currency paymentMethod email createdAt channel { name provider } customer { email }";

export type Status = "pending" | "completed" | "failed";

export interface Transaction {
  reference: string;
  status: Status;
  amount: number;
  currency: string;
  paymentMethod: string | null;
  email: string | null;
  createdAt: string;
  channel: { name: string; provider: string } | null;
  customer: { email: string } | null;
}
