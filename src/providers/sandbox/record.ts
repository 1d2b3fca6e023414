import type { ProviderPaymentRecord, ReconciliationConnector } from "../types.ts";

/**
 * What the sandbox approved (card charges, STK payments, C2B payments), by the provider reference it gave
 * each: the "provider's record" a sandbox channel is reconciled against. It lives in the process's memory,
 * like the simulators' other state, so a payment made before a restart (or in another process) is not in it.
 * The sandbox has no merchant accounts to list, so it answers for the references it is asked about.
 */
export function createSandboxRecord() {
  const approved = new Map<string, ProviderPaymentRecord>();
  const MAX_KEPT = 100_000;

  const reconciliation: ReconciliationConnector = {
    listsAll: false,
    async payments({ providerReferences }) {
      return providerReferences.flatMap((ref) => {
        const record = approved.get(ref);
        return record ? [record] : [];
      });
    },
  };

  return {
    /** Keeps one approved payment (the oldest are forgotten past MAX_KEPT, so a long-running demo stays small). */
    approve(record: Omit<ProviderPaymentRecord, "status" | "createdAt" | "paidAt"> & { providerReference: string }) {
      if (approved.size >= MAX_KEPT) approved.delete(approved.keys().next().value!);
      const now = new Date();
      approved.set(record.providerReference, { ...record, status: "completed", createdAt: now, paidAt: now });
    },
    reconciliation,
  };
}

export type SandboxRecord = ReturnType<typeof createSandboxRecord>;
