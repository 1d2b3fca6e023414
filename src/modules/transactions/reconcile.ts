import type { JobDefinition } from "../../jobs/runner.ts";
import type { CollectionFlow } from "./collections.ts";
import { connectorOf, RECONCILE_JOB, type FlowContext } from "./context.ts";
import type { HostedFlow } from "./hosted.ts";

/**
 * The reconcile job: a pending payment the provider has not told us about is asked about (a hosted
 * payment verified, an STK push queried) until it settles or outlives its window.
 */
export function createReconcileJob(
  ctx: FlowContext,
  flows: { hosted: Pick<HostedFlow, "reconcileHosted">; collections: Pick<CollectionFlow, "reconcileCollection"> },
): JobDefinition<{ transactionId: number }> {
  return {
    kind: RECONCILE_JOB,
    concurrency: 5,
    async run({ transactionId }, job) {
      const transaction = await ctx.store.findWithChannelById(transactionId);
      if (!transaction || transaction.status !== "pending" || !transaction.channel) return;
      const withChannel = { ...transaction, channel: transaction.channel };
      const hosted = connectorOf(ctx.deps.connectors, transaction.channel)?.hosted;
      if (hosted) return flows.hosted.reconcileHosted(withChannel, hosted, job.attempt);
      return flows.collections.reconcileCollection(withChannel, job.attempt);
    },
  };
}
