import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { darajaGatewayEnv, startFakeDaraja, type FakeDaraja } from "../fakes/daraja.ts";
import { startWebhookReceiver, type WebhookReceiver } from "../fakes/webhook-receiver.ts";
import { createTestDatabase, type TestDatabase } from "./backend.ts";
import { gatewayProcesses, processEnv, type StartedGatewayProcess } from "./process.ts";

/**
 * What a crash test of an M-Pesa flow needs: its own database, a loopback Daraja (with the certificate the
 * gateway encrypts initiator passwords with), a webhook receiver, and gateway processes started on them whose
 * Daraja callbacks the fake sends to whichever process is listening now.
 */
export async function startDarajaProcesses(name: string, env: Record<string, string>) {
  const database: TestDatabase = await createTestDatabase();
  const fake: FakeDaraja = await startFakeDaraja();
  const receiver: WebhookReceiver = await startWebhookReceiver();
  const certDir = mkdtempSync(join(tmpdir(), `${name}-`));
  const processEnvironment = processEnv(database, {
    ...darajaGatewayEnv(fake),
    MPESA_CERT_PATH: fake.writePublicKey(certDir),
    WEBHOOK_ALLOW_PRIVATE_URLS: "true",
    ...env,
  });
  const processes = gatewayProcesses();
  return {
    database,
    fake,
    receiver,
    processes,
    /** A gateway process on this database; Daraja's callbacks now go to it. */
    async start(): Promise<StartedGatewayProcess> {
      const gateway = await processes.start(processEnvironment);
      fake.switches.callbackOrigin = gateway.url;
      return gateway;
    },
    async close() {
      await processes.killAll();
      await fake.close();
      await receiver.close();
      await database.drop();
      rmSync(certDir, { recursive: true, force: true });
    },
  };
}
