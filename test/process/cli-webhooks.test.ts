import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Webhook } from "standardwebhooks";
import { WebSocketServer } from "ws";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWebhookReceiver, type WebhookReceiver } from "../fakes/webhook-receiver.ts";
import { apiClient, startTestGateway, type TestGateway, type TestMerchant } from "../support/gateway.ts";
import { runCli, runEntry, type RunningProcess } from "../support/process.ts";
import { until } from "../support/wait.ts";
import { DEFAULT_TRIGGER_TIMEOUT_MS, triggerableEvents } from "../../src/cli/webhooks.ts";

/**
 * `cli webhooks listen` and `cli trigger` as processes against a running gateway, as a developer runs them:
 * the forwarded webhook must verify with the standardwebhooks package under the secret the listener printed.
 */

// An unreachable database: the commands talk to the gateway, so any attempt to open one would fail loudly.
const NO_DATABASE = { DATABASE_URL: "postgresql://nobody@127.0.0.1:1/none" };
const READY = /Ready! Your webhook signing secret is (whsec_[A-Za-z0-9+/]+={0,2}) \(forwarding to (\S+)\)/;

describe("cli webhooks listen and trigger", () => {
  let gw: TestGateway;
  let merchant: TestMerchant;
  let receiver: WebhookReceiver;
  const children: RunningProcess[] = [];

  beforeAll(async () => {
    // Sandbox refunds settle 300 ms after they are made, found by a job runner polling every 100 ms.
    // Three checkout attempts (the default): transaction.failed must decline until they are spent.
    gw = await startTestGateway({ env: { WEBHOOK_ALLOW_PRIVATE_URLS: "true", SANDBOX_REFUND_DELAY_MS: "300", JOB_POLL_INTERVAL_MS: "100", CHECKOUT_MAX_ATTEMPTS: "3" } });
    merchant = await gw.createMerchant("CLI");
    const channel = await apiClient(gw.url, merchant.testKey).post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} });
    expect(channel.status, channel.text).toBe(201);
    receiver = await startWebhookReceiver();
  });

  afterAll(async () => {
    for (const child of children) if (child.child.exitCode === null && child.child.signalCode === null) child.child.kill("SIGKILL");
    await receiver?.close();
    await gw?.close();
  });

  it("forwards a triggered event, signed with the printed secret, and exits 0 on SIGTERM", async () => {
    const forwardTo = `${receiver.url}/hooks`;
    const listener = runEntry("src/cli/main.ts", ["webhooks", "listen", "--forward-to", forwardTo, "--key", merchant.testKey, "--url", gw.url], NO_DATABASE);
    children.push(listener);
    const [, secret, shownUrl] = await listener.waitFor(READY);
    expect(shownUrl).toBe(forwardTo);

    // No --url: the gateway's PORT says where it is (the URL is then http://localhost:PORT).
    const trigger = await runCli(["webhooks", "trigger", "transaction.completed", "--key", merchant.testKey], { ...NO_DATABASE, PORT: new URL(gw.url).port });
    expect(trigger.code, trigger.output).toBe(0);
    const printed = JSON.parse(trigger.output.trim());
    expect(printed).toEqual({ event: "transaction.completed", reference: expect.any(String) });

    const [delivery] = await receiver.waitFor(1);
    expect(delivery!.path).toBe("/hooks");
    expect(delivery!.json).toMatchObject({ type: "transaction.completed", data: { reference: printed.reference, status: "completed" } });
    expect(new Webhook(secret!).verify(delivery!.body, delivery!.headers)).toEqual(delivery!.json);

    const id = delivery!.headers["webhook-id"]!;
    await listener.waitFor(new RegExp(`^\\S+Z transaction\\.completed ${id} -> 200$`, "m"));

    // Payout events are triggered and forwarded too; PUBLIC_BASE_URL, when set, is where the gateway is.
    for (const [index, type] of ["payout.failed", "payout.completed"].entries()) {
      const payout = await runCli(["webhooks", "trigger", type, "--key", merchant.testKey], { ...NO_DATABASE, PUBLIC_BASE_URL: gw.url, PORT: "1" });
      expect(payout.code, payout.output).toBe(0);
      const { reference } = JSON.parse(payout.output.trim());
      expect(reference).toMatch(/^po_/);
      const payoutDelivery = (await receiver.waitFor(2 + index))[1 + index]!;
      expect(payoutDelivery.json).toMatchObject({ type, data: { reference, status: type.split(".")[1] } });
      expect(new Webhook(secret!).verify(payoutDelivery.body, payoutDelivery.headers)).toEqual(payoutDelivery.json);
    }

    // Refund events: a card payment refunded in full (its transaction.completed is forwarded too); the refund of
    // the refund-failing test card fails.
    for (const type of ["refund.completed", "refund.failed"]) {
      const refund = await runCli(["webhooks", "trigger", type, "--key", merchant.testKey, "--url", gw.url], NO_DATABASE);
      expect(refund.code, refund.output).toBe(0);
      const printed = JSON.parse(refund.output.trim());
      expect(printed).toEqual({ event: type, reference: expect.stringMatching(/^re_/) });
      const refundDelivery = await until(
        () => receiver.received.find((d) => d.json?.data?.reference === printed.reference),
        (found) => found !== undefined,
        15_000,
      );
      expect(refundDelivery!.json).toMatchObject({ type, data: { reference: printed.reference, status: type.split(".")[1], amount: 10_000, method: "sandbox" } });
      expect(new Webhook(secret!).verify(refundDelivery!.body, refundDelivery!.headers)).toEqual(refundDelivery!.json);
      // The refunded payment's transaction.completed was forwarded too.
      await until(
        () => receiver.received.some((d) => d.json?.type === "transaction.completed" && d.json.data.reference === refundDelivery!.json.data.transaction_reference),
        (found) => found,
      );
      await listener.waitFor(new RegExp(`^\\S+Z ${type.replace(".", "\\.")} ${refundDelivery!.headers["webhook-id"]} -> 200$`, "m"));
    }

    // A dispute: the payment of the disputing test card, then the sandbox's dispute of it, forwarded as dispute.created.
    const disputed = await runCli(["webhooks", "trigger", "dispute.created", "--key", merchant.testKey, "--url", gw.url], NO_DATABASE);
    expect(disputed.code, disputed.output).toBe(0);
    const paid = JSON.parse(disputed.output.trim());
    expect(paid).toEqual({ event: "dispute.created", reference: expect.stringMatching(/^txn-/) });
    const disputeDelivery = await until(
      () => receiver.received.find((d) => d.json?.type === "dispute.created" && d.json.data.transaction_reference === paid.reference),
      (found) => found !== undefined,
      15_000,
    );
    expect(disputeDelivery!.json.data).toMatchObject({ id: expect.stringMatching(/^dp_/), status: "needs_response", amount: 10_000 });
    expect(new Webhook(secret!).verify(disputeDelivery!.body, disputeDelivery!.headers)).toEqual(disputeDelivery!.json);
    await listener.waitFor(new RegExp(`^\\S+Z dispute\\.created ${disputeDelivery!.headers["webhook-id"]} -> 200$`, "m"));

    listener.child.kill("SIGTERM");
    expect(await listener.exited).toBe(0);
  });

  it("transaction.failed declines until the checkout's attempts are spent: the printed payment ends failed; transaction.pending waits for its event", async () => {
    const failed = await runCli(["webhooks", "trigger", "transaction.failed", "--key", merchant.testKey, "--url", gw.url], NO_DATABASE);
    expect(failed.code, failed.output).toBe(0);
    const printed = JSON.parse(failed.output.trim());
    expect(printed).toEqual({ event: "transaction.failed", reference: expect.stringMatching(/^txn-/) });
    const verify = await apiClient(gw.url, merchant.testKey).get(`/api/transactions/verify/${printed.reference}`);
    expect(verify.body.status).toBe("failed");
    // Every attempt the checkout allows (CHECKOUT_MAX_ATTEMPTS, 3 here) was a declined card.
    const query = "query CliFailedAttempts($reference: String!) { transaction(reference: $reference) { ... on Transaction { status attempts { status code } } } }";
    const attempts = await apiClient(gw.url, merchant.testKey).post("/graphql", { query, variables: { reference: printed.reference } });
    expect(attempts.body.data.transaction.status).toBe("failed");
    expect(attempts.body.data.transaction.attempts.map((a: { status: string }) => a.status)).toEqual(["failed", "failed", "failed"]);

    const pending = await runCli(["webhooks", "trigger", "transaction.pending", "--key", merchant.testKey, "--url", gw.url], NO_DATABASE);
    expect(pending.code, pending.output).toBe(0);
    expect(JSON.parse(pending.output.trim())).toEqual({ event: "transaction.pending", reference: expect.stringMatching(/^txn-/) });
  });

  it("every trigger exits 1 when its event did not happen in time (a gateway whose events never reach the CLI)", async () => {
    // The gateway's REST calls pass through, so the payments are really made; its WebSocket answers each
    // subscription as listening and then stays silent, as a gateway would whose events never come.
    // Without --timeout a trigger waits 30 s (issue 41); here 3 s, so the eight triggers take half a minute, not four.
    expect(DEFAULT_TRIGGER_TIMEOUT_MS).toBe(30_000);
    expect(triggerableEvents).toEqual(["transaction.completed", "transaction.failed", "transaction.pending", "payout.completed", "payout.failed", "refund.completed", "refund.failed", "dispute.created"]);
    const silent = await startSilentProxy(gw.url);
    try {
      for (const type of triggerableEvents) {
        const run = await runCli(["webhooks", "trigger", type, "--key", merchant.testKey, "--url", silent.url, "--timeout", "3"], NO_DATABASE);
        expect(run.code, `${type}: ${run.output}`).toBe(1);
        expect(run.output, type).toMatch(new RegExp(`^cli failed: ${type.replace(".", "\\.")} did not happen within 3 s( \\(made \\S+\\))?$`, "m"));
      }
    } finally {
      await silent.close();
    }
    const bad = await runCli(["webhooks", "trigger", "transaction.completed", "--key", merchant.testKey, "--url", gw.url, "--timeout", "soon"], NO_DATABASE);
    expect(bad.code).toBe(2);
    expect(bad.output).toMatch(/--timeout must be a number of seconds/);
  });

  it("trigger refuses an unknown event type with exit 2, naming the supported ones", async () => {
    const { code, output } = await runCli(["trigger", "charge.succeeded", "--key", merchant.testKey, "--url", gw.url], NO_DATABASE);
    expect(code).toBe(2);
    expect(output).toMatch(/Cannot trigger "charge.succeeded"; supported events: transaction.completed, transaction.failed, transaction.pending, payout.completed, payout.failed, refund.completed, refund.failed, dispute.created/);
  });

  it("trigger's default URL follows PORT: a gateway that is not there is named in the error", async () => {
    const { code, output } = await runCli(["webhooks", "trigger", "transaction.completed", "--key", merchant.testKey], { ...NO_DATABASE, PORT: "1" });
    expect(code).toBe(1);
    expect(output).toMatch(/^cli failed: cannot reach the gateway at http:\/\/localhost:1: /);
  });

  it("both commands refuse a live key", async () => {
    const listen = await runCli(["webhooks", "listen", "--forward-to", receiver.url, "--key", merchant.liveKey, "--url", gw.url], NO_DATABASE);
    expect(listen.code).toBe(2);
    expect(listen.output).toMatch(/test mode only/);
    const trigger = await runCli(["trigger", "transaction.failed", "--key", merchant.liveKey, "--url", gw.url], NO_DATABASE);
    expect(trigger.code).toBe(2);
    expect(trigger.output).toMatch(/test mode only/);
  });
});

/** An HTTP pass-through to the gateway whose /graphql WebSocket acknowledges every subscription and sends no event. */
async function startSilentProxy(target: string): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(req.headers)) if (typeof value === "string" && name !== "host" && name !== "content-length") headers[name] = value;
    const body = chunks.length ? Buffer.concat(chunks) : undefined;
    const answer = await fetch(`${target}${req.url}`, { method: req.method, headers, ...(body ? { body } : {}) });
    res.writeHead(answer.status, { "content-type": answer.headers.get("content-type") ?? "application/json" });
    res.end(Buffer.from(await answer.arrayBuffer()));
  });
  const sockets = new WebSocketServer({ server, path: "/graphql" });
  sockets.on("connection", (socket) => {
    socket.on("message", (data) => {
      const message = JSON.parse(data.toString());
      if (message.type === "connection_init") socket.send(JSON.stringify({ type: "connection_ack" }));
      else if (message.type === "ping") socket.send(JSON.stringify({ type: "pong" }));
      else if (message.type === "subscribe") socket.send(JSON.stringify({ id: message.id, type: "next", payload: { extensions: { ready: true } } }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: async () => {
      for (const client of sockets.clients) client.terminate();
      await new Promise<void>((resolve) => sockets.close(() => resolve()));
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
