import type { PaymentChannel, Transaction, TransactionAttempt } from "../../db/generated/prisma/client.ts";
import { askUntilSettled } from "../../jobs/ask-until-settled.ts";
import type { JobDefinition } from "../../jobs/runner.ts";
import type { HostedCheckoutConnector } from "../../providers/types.ts";
import { connectorOf, RECONCILE_JOB, type FlowContext } from "./context.ts";
import type { HostedFlow } from "./hosted.ts";
import type { Outcomes, PushTarget } from "./outcomes.ts";

/**
 * The payments' "ask until settled" jobs (jobs/ask-until-settled.ts): a pending payment the provider has not told
 * us about is asked about until an answer or its expiry settles it. The reconcile job asks about a payment (a
 * hosted payment verified, its push's attempt queried); the attempt query job about one push from the page.
 */

export const ATTEMPT_QUERY_JOB = "transaction.attempt_query";
const MAX_VERIFY_WAIT_MS = 60 * 60_000;

/** A pending payment with its channel and, unless hosted, its push still waiting for a verdict and what to ask it through. */
type Payment = Transaction & { channel: PaymentChannel; push?: { attempt: TransactionAttempt; target: PushTarget } };
type Asked = { hosted: HostedCheckoutConnector } | { push: PushTarget; attempt: TransactionAttempt };

export function createReconcileJobs(ctx: FlowContext, flows: { hosted: Pick<HostedFlow, "askHosted" | "abandonIfOutlived" | "abandonAt">; outcomes: Outcomes }) {
  const { deps, store, attempts } = ctx;
  const { outcomes, hosted } = flows;

  const reconcileJob: JobDefinition<{ transactionId: number }> = askUntilSettled<{ transactionId: number }, Payment, Asked>({
    kind: RECONCILE_JOB,
    logger: deps.logger,
    async find({ transactionId }) {
      const t = await store.findWithChannelById(transactionId);
      if (!t || t.status !== "pending" || !t.channel) return null;
      const payment = { ...t, channel: t.channel };
      if (connectorOf(deps.connectors, t.channel)?.hosted) return payment;
      const attempt = await attempts.findLatestPending(t.id);
      const target = attempt ? await outcomes.pushTargetOf(attempt) : undefined;
      return attempt && target ? { ...payment, push: { attempt, target } } : payment;
    },
    via(t) {
      const connector = connectorOf(deps.connectors, t.channel);
      if (connector?.hosted) return { hosted: connector.hosted };
      return t.push ? { push: t.push.target, attempt: t.push.attempt } : undefined;
    },
    ask: (t, asked) => ("hosted" in asked ? hosted.askHosted(t, asked.hosted) : outcomes.queryPush(asked.attempt, asked.push, t.merchantId)),
    // A push's lifetime counts from the payment's creation: the payment is what the merchant waits on.
    expireIfOutlived: (t, asked) => ("hosted" in asked ? hosted.abandonIfOutlived(t) : outcomes.expirePushIfOutlived(asked.attempt, asked.push, t.createdAt)),
    firstWaitMs: () => deps.hosted.verifyAfterMs,
    nextWaitMs(t, asked, attempt) {
      if ("push" in asked) return outcomes.nextQueryWaitMs(attempt);
      const wait = Math.min(deps.hosted.verifyAfterMs * 2 ** attempt, MAX_VERIFY_WAIT_MS);
      return Math.max(0, Math.min(wait, hosted.abandonAt(t) - Date.now()));
    },
  });

  type PagePush = { reference: string; status: string; attempt: TransactionAttempt; merchantId: number; push: PushTarget | undefined };
  const attemptQueryJob: JobDefinition<{ attemptId: number }> = askUntilSettled<{ attemptId: number }, PagePush, PushTarget>({
    kind: ATTEMPT_QUERY_JOB,
    logger: deps.logger,
    async find({ attemptId }) {
      const attempt = await attempts.findById(attemptId);
      const t = attempt?.status === "pending" ? await store.findById(attempt.transactionId) : null;
      if (!attempt || !t) return null;
      return { reference: t.reference, status: attempt.status, attempt, merchantId: t.merchantId, push: await outcomes.pushTargetOf(attempt) };
    },
    via: (p) => p.push,
    ask: (p, push) => outcomes.queryPush(p.attempt, push, p.merchantId),
    expireIfOutlived: (p, push) => outcomes.expirePushIfOutlived(p.attempt, push, p.attempt.createdAt),
    firstWaitMs: () => deps.collection.queryBackoffMs,
    nextWaitMs: (_p, _push, attempt) => outcomes.nextQueryWaitMs(attempt),
  });

  return { reconcileJob, attemptQueryJob };
}
