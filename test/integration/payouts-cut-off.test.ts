import { createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startFakeDaraja, type FakeDaraja } from "../fakes/daraja.ts";
import { apiClient, startTestGateway, type TestGateway } from "../support/gateway.ts";

/**
 * Daraja takes a B2C request and its reply is cut off mid-body: the outcome is unknown, so the payout
 * must stay pending (and settle from Daraja's result), never be failed while the customer is paid.
 */
let fake: FakeDaraja;
let proxy: Server;
let gw: TestGateway;

beforeAll(async () => {
  fake = await startFakeDaraja();
  fake.switches.b2cNoResult = true;
  // In front of the fake: B2C requests reach it, then their reply is cut after 10 bytes.
  proxy = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const upstream = httpRequest(`${fake.url}${req.url}`, { method: req.method, headers: req.headers }, (answer) => {
        const body: Buffer[] = [];
        answer.on("data", (c: Buffer) => body.push(c));
        answer.on("end", () => {
          const text = Buffer.concat(body);
          if (req.url?.startsWith("/mpesa/b2c/")) {
            res.writeHead(200, { "content-type": "application/json", "content-length": String(text.length) });
            res.write(text.subarray(0, 10));
            setTimeout(() => res.socket?.destroy(), 20);
          } else {
            res.writeHead(answer.statusCode ?? 500, answer.headers);
            res.end(text);
          }
        });
      });
      upstream.end(Buffer.concat(chunks));
    });
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  gw = await startTestGateway({
    env: {
      MPESA_BASE_URL: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`,
      MPESA_CERT_PATH: fake.writePublicKey(mkdtempSync(join(tmpdir(), "daraja-cert-"))),
      PUBLIC_BASE_URL: "https://pay.gateway.test",
      JOBS_ENABLED: "false",
      RATE_LIMIT_ENABLED: "false",
    },
  });
  fake.switches.callbackOrigin = gw.url;
});

afterAll(async () => {
  await gw?.close();
  await fake?.close();
  proxy?.close();
});

it("a reply cut off after Daraja accepted leaves the payout pending, and Daraja's result settles it", async () => {
  const api = apiClient(gw.url, (await gw.createMerchant()).testKey);
  const channel = await api.post("/api/payment-channels/create", { name: "B2C", provider: "mpesa", config: fake.b2cChannelConfig() });
  expect(channel.status, channel.text).toBe(201);
  const res = await api.post("/v1/payouts", { amount: 150000, phone_number: "254708374149", payment_channel_id: channel.body.channel.id });
  expect(res.status, res.text).toBe(201);
  expect(res.body.data).toMatchObject({ status: "pending", failure_code: null });
  expect([...fake.payouts.keys()]).toHaveLength(1);
  await fake.sendB2cResult([...fake.payouts.keys()][0]!);
  const settled = await api.get(`/v1/payouts/${res.body.data.id}`);
  expect(settled.body.data).toMatchObject({ status: "completed", provider_reference: expect.any(String) });
});
