import type { JobDefinition } from "../../jobs/runner.ts";
import { connectorOf, RECONCILE_JOB, type FlowContext } from "./context.ts";
import type { HostedFlow } from "./hosted.ts";
import type { Outcomes } from "./outcomes.ts";

/**
 * The reconcile job: a pending payment the provider has not told us about is asked about (a hosted payment
 * verified, its push's attempt queried) until it settles or outlives its window. A push's lifetime counts from
 * the payment's creation: the payment is what the merchant waits on.
 */
export function createReconcileJob(ctx: FlowContext, flows: { hosted: Pick<HostedFlow, "reconcileHosted">; outcomes: Pick<Outcomes, "askAboutPush"> }): JobDefinition<{ transactionId: number }> {
  return {
    kind: RECONCILE_JOB,
    concurrency: 5,
    async run({ transactionId }, job) {
      const transaction = await ctx.store.findWithChannelById(transactionId);
      if (!transaction || transaction.status !== "pending" || !transaction.channel) return;
      const hosted = connectorOf(ctx.deps.connectors, transaction.channel)?.hosted;
      if (hosted) return flows.hosted.reconcileHosted({ ...transaction, channel: transaction.channel }, hosted, job.attempt);
      const attempt = await ctx.attempts.findLatestPending(transaction.id);
      if (!attempt) return;
      return flows.outcomes.askAboutPush(attempt, transaction.merchantId, transaction.createdAt, job.attempt);
    },
  };
}
