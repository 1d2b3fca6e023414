import { afterAll, beforeAll } from "vitest";
import { apiClient, startTestGateway, type TestGateway } from "./gateway.ts";
import { expectCleanLedger } from "./ledger-check.ts";

/** A gateway with a merchant on a sandbox channel and a second merchant (for tenant checks); the ledger checked clean at the end. */
export interface SandboxMerchants {
  gw: TestGateway;
  api: ReturnType<typeof apiClient>;
  otherApi: ReturnType<typeof apiClient>;
  merchantId: number;
  /** The merchant's test key (for WebSocket clients). */
  testKey: string;
}

export function withSandboxMerchants(env: Record<string, string> = {}): SandboxMerchants {
  const bench = {} as SandboxMerchants;
  beforeAll(async () => {
    bench.gw = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false", SANDBOX_STK_DELAY_MS: "100", ...env } });
    const merchant = await bench.gw.createMerchant();
    bench.merchantId = merchant.id;
    bench.testKey = merchant.testKey;
    bench.api = apiClient(bench.gw.url, merchant.testKey);
    bench.otherApi = apiClient(bench.gw.url, (await bench.gw.createMerchant()).testKey);
    await bench.api.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} });
  });
  afterAll(() => bench.gw?.close());
  afterAll(() => expectCleanLedger(bench.gw));
  return bench;
}
