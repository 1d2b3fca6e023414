/** One ledger posting as the tests read it: its entry's columns and the posting's account kind and signed amount. */
export interface PostingRow {
  id: string;
  type: string;
  amount: string;
  fee: string;
  kind: string;
  leg: string;
}

/** Postings (ordered by entry) grouped into entries: type, amount, fee and legs by account kind. */
export function groupEntries(rows: PostingRow[]): { type: string; amount: number; fee: number; legs: Record<string, number> }[] {
  const entries = new Map<string, { type: string; amount: number; fee: number; legs: Record<string, number> }>();
  for (const r of rows) {
    const e = entries.get(r.id) ?? { type: r.type, amount: Number(r.amount), fee: Number(r.fee), legs: {} };
    e.legs[r.kind] = Number(r.leg);
    entries.set(r.id, e);
  }
  return [...entries.values()];
}
