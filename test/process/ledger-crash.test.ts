import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { FakeDaraja } from "../fakes/daraja.ts";
import type { WebhookReceiver } from "../fakes/webhook-receiver.ts";
import { startDarajaProcesses } from "../support/daraja-processes.ts";
import { apiClient as plainApiClient } from "../support/gateway.ts";
import { runLedgerCheck } from "../support/ledger-check.ts";
import { printedTestKey, type StartedGatewayProcess } from "../support/process.ts";
import { until } from "../support/wait.ts";
import { retrying } from "../support/retry.ts";

/** Requests retried on 503 + Retry-After as a client does: many at once can find the database busy on a loaded machine. */
const apiClient = (url: string, key?: string) => retrying(plainApiClient(url, key));

/**
 * kill -9 of the gateway between a provider's answer and its posting. The posting is written by the same SQL
 * statement as the status change, so the crash leaves each payment (or refund) either changed and posted or
 * neither: Daraja's answers (STK callbacks, then Reversal Results) are delivered all at once and the gateway is
 * killed while it applies them, and `npm run cli -- ledger check` (the process, on the dead gateway's database)
 * is clean. After a restart the answers are learned again (the status query of the reconcile job, or Daraja
 * delivering its callback again) and each payment and refund completes exactly once: the check is clean again,
 * with one entry per step, and one event each.
 */
const PHONE = "254708374149";
const PAYMENTS = 30;
const REFUNDS = 12;
/** Answers acknowledged before the kill: the rest are in flight in the dying process, or never arrive. */
const PAYMENTS_KILL_AFTER = 5;
const REFUNDS_KILL_AFTER = 1;

/** The entry count on the report's first line. */
function entriesIn(output: string): number {
  const match = output.match(/^Ledger check: (\d+) entries,/);
  if (!match) throw new Error(`no report in:\n${output}`);
  return Number(match[1]);
}

describe("the ledger across a gateway crash between a provider's answer and its posting", () => {
  let daraja: Awaited<ReturnType<typeof startDarajaProcesses>>;
  let fake: FakeDaraja;
  let receiver: WebhookReceiver;
  let gateway: StartedGatewayProcess;
  let key: string;
  const payments: { reference: string; checkoutRequestId: string; amount: number; receipt: string }[] = [];

  beforeAll(async () => {
    daraja = await startDarajaProcesses("ledger-crash", {
      // The reconcile job asks about a push this long after it (the first process may ask too: "being processed").
      STK_CALLBACK_OVERDUE_MS: "4000",
      STK_QUERY_BACKOFF_MS: "300",
      // Long enough that the first process has not asked about its reversals before it is killed (the next ask
      // would come twice as late), short enough that the second asks at once.
      REVERSAL_RESULT_OVERDUE_MS: "5000",
      JOB_POLL_INTERVAL_MS: "100",
      // A job the dead process had claimed is taken over after max(JOB_LEASE_MS, WEBHOOK_TIMEOUT_MS + 5 s).
      JOB_LEASE_MS: "1000",
      WEBHOOK_TIMEOUT_MS: "1000",
      RATE_LIMIT_ENABLED: "false",
    });
    ({ fake, receiver } = daraja);
    gateway = await daraja.start();
    key = await printedTestKey(gateway);
  });
  afterAll(() => daraja?.close());

  /** Delivers every answer at once and SIGKILLs the gateway once `killAfter` of them were acknowledged; answers how many were. */
  async function deliverThenKill(send: (() => Promise<{ status: number } | null | undefined>)[], killAfter: number): Promise<number> {
    let acknowledged = 0;
    let killed = false;
    await Promise.all(
      send.map((deliver) =>
        deliver().then(
          (reply) => {
            if (killed || reply?.status !== 200) return;
            if (++acknowledged >= killAfter) {
              killed = true;
              gateway.child.kill("SIGKILL");
            }
          },
          () => undefined, // cut off by the crash
        ),
      ),
    );
    if (!killed) gateway.child.kill("SIGKILL");
    expect(await gateway.exited).toBe("SIGKILL");
    return acknowledged;
  }

  async function expectCleanCheck(): Promise<number> {
    const { code, output } = await runLedgerCheck(daraja.database);
    expect(output).toContain("Clean: the ledger agrees with itself, the API and the business tables.");
    expect(code, output).toBe(0);
    return entriesIn(output);
  }

  /** Distinct event ids per reference among the merchant webhooks received of `type`. */
  function eventsByReference(type: string): Map<string, Set<string>> {
    const byReference = new Map<string, Set<string>>();
    for (const delivery of receiver.received) {
      if (delivery.json?.type !== type) continue;
      const ids = byReference.get(delivery.json.data.reference) ?? new Set<string>();
      ids.add(delivery.headers["webhook-id"]!);
      byReference.set(delivery.json.data.reference, ids);
    }
    return byReference;
  }

  it("STK payments: callbacks applied or not at the kill, never half; after restart each completes once, by status query or redelivery", async () => {
    const api = apiClient(gateway.url, key);
    const channel = await api.post("/api/payment-channels/create", { name: "M-Pesa", provider: "mpesa", config: fake.b2cChannelConfig(), fee_percent_bps: 120, fee_fixed: 2 });
    expect(channel.status, channel.text).toBe(201);
    const hook = await api.post("/v1/webhooks", { url: `${receiver.url}/money`, events: ["transaction.completed", "refund.completed"] });
    expect(hook.status, hook.text).toBe(201);
    const pushes = await Promise.all(
      Array.from({ length: PAYMENTS }, (_, i) => api.post("/api/momo/stk-push", { amount: 100 * (20 + i), phone_number: PHONE, payment_channel_id: channel.body.channel.id })),
    );
    pushes.forEach((push, i) => {
      expect(push.status, push.text).toBe(200);
      payments.push({ reference: push.body.transaction.reference, checkoutRequestId: push.body.transaction.checkout_request_id, amount: 100 * (20 + i), receipt: `LDG${String(i).padStart(7, "0")}` });
    });

    // Daraja answers every push at once (paid); the gateway dies while applying them.
    const acknowledged = await deliverThenKill(payments.map((p) => () => fake.sendStkCallback(p.checkoutRequestId, { receipt: p.receipt })), PAYMENTS_KILL_AFTER);
    // Both or neither: every completed payment has its entry and no entry lacks its completed payment.
    const postedAtCrash = await expectCleanCheck();
    expect(postedAtCrash).toBeGreaterThanOrEqual(acknowledged);
    expect(postedAtCrash).toBeLessThanOrEqual(PAYMENTS);

    // After the restart the answers are learned again: the even ones by the reconcile job's status query (Daraja
    // now answers it), the odd ones by Daraja delivering the same callback again.
    payments.forEach((p, i) => {
      if (i % 2 === 0) fake.queryResults.set(p.checkoutRequestId, { ResultCode: "0", ResultDesc: "The service request is processed successfully." });
    });
    gateway = await daraja.start();
    const api2 = apiClient(gateway.url, key);
    const replies = await Promise.all(payments.filter((_, i) => i % 2 === 1).map((p) => fake.sendStkCallback(p.checkoutRequestId, { receipt: p.receipt })));
    for (const reply of replies) expect(reply.body).toEqual({ ResultCode: 0, ResultDesc: "Accepted" });
    for (const p of payments) {
      const done = await until(() => api2.get(`/api/momo/stk-status/${p.reference}`), (r) => r.body.transaction.status !== "pending", 30_000);
      expect(done.body.transaction.status, p.reference).toBe("completed");
    }
    // Daraja delivers every callback once more: nothing changes.
    await Promise.all(payments.map((p) => fake.sendStkCallback(p.checkoutRequestId, { receipt: p.receipt })));

    expect(await expectCleanCheck()).toBe(PAYMENTS);
    const events = await until(() => eventsByReference("transaction.completed"), (m) => m.size === PAYMENTS, 30_000);
    expect([...events.keys()].sort()).toEqual(payments.map((p) => p.reference).sort());
    for (const [reference, ids] of events) expect(ids.size, reference).toBe(1);
  });

  it("M-Pesa reversals: Results applied or not at the kill (killed at the first acknowledged), never half; after restart each refund completes once", async () => {
    expect(payments).toHaveLength(PAYMENTS);
    const api = apiClient(gateway.url, key);
    // Daraja accepts each Reversal and posts its Result only when told; no status query is answered yet.
    Object.assign(fake.switches, { reversalNoResult: true, statusNoResult: true });
    // The odd payments: their receipts came with their callbacks (a reversal names the receipt).
    const refunded = payments.filter((_, i) => i % 2 === 1).slice(0, REFUNDS);
    const created = await Promise.all(refunded.map((p) => api.post("/v1/refunds", { transaction: p.reference })));
    for (const r of created) expect(r.status, r.text).toBe(201);
    expect(created.map((r) => r.body.data)).toEqual(refunded.map(() => expect.objectContaining({ status: "pending", method: "mpesa_reversal" })));
    const ocids = await until(() => [...fake.reversals.keys()], (k) => k.length === REFUNDS);

    const acknowledged = await deliverThenKill(ocids.map((ocid) => () => fake.sendReversalResult(ocid)), REFUNDS_KILL_AFTER);
    const postedAtCrash = await expectCleanCheck();
    // Each payment, each refund's reservation, and the refunds whose Result was applied.
    expect(postedAtCrash - PAYMENTS - REFUNDS).toBeGreaterThanOrEqual(acknowledged);
    expect(postedAtCrash).toBeLessThanOrEqual(PAYMENTS + 2 * REFUNDS);

    // After the restart Daraja delivers every Result again (its retry of an unacknowledged Result). The status
    // query path after a crash is mpesa-refunds-crash.test.ts's; here its timing (each unanswered ask doubles the
    // wait) made the test depend on how long the dead gateway had lived on a loaded machine.
    fake.switches.statusNoResult = false;
    gateway = await daraja.start();
    const api2 = apiClient(gateway.url, key);
    const redelivered = await Promise.all(ocids.map((ocid) => fake.sendReversalResult(ocid)));
    for (const reply of redelivered) expect(reply?.status).toBe(200);
    for (const r of created) {
      const done = await until(() => api2.get(`/v1/refunds/${r.body.data.reference}`), (x) => x.body.data.status !== "pending", 45_000);
      expect(done.body.data.status, r.body.data.reference).toBe("completed");
    }
    // Daraja delivers every Result once more: nothing changes.
    await Promise.all(ocids.map((ocid) => fake.sendReversalResult(ocid)));

    expect(await expectCleanCheck()).toBe(PAYMENTS + 2 * REFUNDS);
    const events = await until(() => eventsByReference("refund.completed"), (m) => m.size === REFUNDS, 30_000);
    expect([...events.keys()].sort()).toEqual(created.map((r) => r.body.data.reference).sort());
    for (const [reference, ids] of events) expect(ids.size, reference).toBe(1);
    // Each reversal was sent once: learned again, never redone.
    expect(fake.requests.filter((r) => r.path === "/mpesa/reversal/v1/request")).toHaveLength(REFUNDS);
  });
});
