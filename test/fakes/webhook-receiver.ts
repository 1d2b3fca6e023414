import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { EVENTUALLY_MS } from "../support/timing.ts";

/**
 * A loopback merchant endpoint for webhook tests: records every delivery and answers what the test
 * says (a status code, or "hang" to exercise delivery timeouts). Default answer: 200.
 */
export interface ReceivedWebhook {
  headers: Record<string, string>;
  body: string;
  /** The parsed body, or undefined when it is not JSON. */
  json: any;
  receivedAt: number;
  path: string;
}

export type WebhookResponder = (req: ReceivedWebhook, index: number) => number | "hang" | Promise<number | "hang">;

export async function startWebhookReceiver(options: { respond?: WebhookResponder } = {}) {
  let respond: WebhookResponder = options.respond ?? (() => 200);
  const received: ReceivedWebhook[] = [];
  const waiters = new Set<() => void>();

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", async () => {
      const body = Buffer.concat(chunks).toString("utf8");
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(req.headers)) {
        if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(", ") : value;
      }
      let json: any;
      try {
        json = JSON.parse(body);
      } catch {
        json = undefined;
      }
      const webhook: ReceivedWebhook = { headers, body, json, receivedAt: Date.now(), path: req.url ?? "/" };
      const index = received.push(webhook) - 1;
      for (const wake of waiters) wake();
      try {
        const answer = await respond(webhook, index);
        if (answer !== "hang") res.writeHead(answer, { "content-type": "text/plain" }).end(String(answer));
      } catch {
        res.writeHead(500).end("responder threw");
      }
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    received,
    /** Resolves with the first n deliveries once they have arrived. */
    waitFor(n: number, timeoutMs = EVENTUALLY_MS): Promise<ReceivedWebhook[]> {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (received.length < n) return;
          clearTimeout(timer);
          waiters.delete(check);
          resolve(received.slice(0, n));
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          const seen = received.map((r) => `${r.path} ${r.headers["webhook-id"] ?? "(no webhook-id)"}`).join("; ");
          reject(new Error(`webhook receiver: expected ${n} deliveries within ${timeoutMs} ms, got ${received.length}${seen ? `: ${seen}` : ""}`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    setResponder(fn: WebhookResponder) {
      respond = fn;
    },
    /** Also drops "hang" requests still open, which server.close() alone would wait for forever. */
    close(): Promise<void> {
      return new Promise((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      });
    },
  };
}

export type WebhookReceiver = Awaited<ReturnType<typeof startWebhookReceiver>>;
