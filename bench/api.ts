/**
 * Hot paths of the REST API against bare `pg`: the gateway (HTTP -> Fastify -> API-key lookup -> GraphQL
 * operation from the route table -> services -> Prisma) next to the same SQL work done with a bare pg.Pool of
 * the same size (10), both on one throwaway PostgreSQL (test/support/postgres.ts), in one process.
 *
 * Operations, each N requests after a warm-up, serially and CONCURRENCY_HIGH at a time, gateway and baseline
 * interleaved in slices so drift on a shared machine hits both alike:
 *  1. POST /api/transactions/initialize     (sandbox channel, existing customers)
 *  2. GET  /api/transactions/verify/{ref}   (over ~2,000 seeded transactions)
 *  3. GET  /api/transactions/list?limit=20
 *  4. POST /callbacks/daraja/{token}/stk    (success callbacks for pending STK pushes started through REST
 *                                            against the loopback Daraja of test/fakes/daraja.ts)
 * Serially, two in-process layers are measured in the same slices to split the gateway's overhead: the route
 * handler's work without HTTP (auth + graphql.execute of the route's operation + response body) and the services
 * alone (auth + the service calls the resolvers make, i.e. Prisma), plus a bare Fastify route returning a constant.
 * SQL statements per request are counted on a second gateway instance (Prisma's query events), so the timed one
 * runs without query logging.
 *
 *   node --import tsx bench/api.ts            # print the tables
 *   node --import tsx bench/api.ts --write    # and record them in bench/README.md
 */
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { Agent, request } from "node:http";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import Fastify, { type FastifyInstance } from "fastify";
import pg from "pg";
import type { Principal } from "../src/auth.ts";
import { loadConfig } from "../src/config.ts";
import type { GraphQLContext } from "../src/graphql/context.ts";
import { schema } from "../src/app/schema.ts";
import { createLogger } from "../src/logger.ts";
import { newReference } from "../src/modules/transactions/service.ts";
import { compileRoutes, runOperation, type CompiledRoute, type RestRequest } from "../src/rest/route-table.ts";
import { restRoutes } from "../src/app/rest-routes.ts";
import { createGateway, type Gateway } from "../src/server.ts";
import { startFakeDaraja, type FakeDaraja } from "../test/fakes/daraja.ts";
import { settleWithPg } from "./baseline-settle.ts";
import { startPostgres, type PostgresServer } from "../test/support/postgres.ts";

const N = 1000;
const WARMUP = 100;
const SLICES = 4;
const CONCURRENCY_HIGH = 10;
const POOL_SIZE = 10; // the gateway's Prisma pool (src/db/database.ts default)
const SEED_TRANSACTIONS = 2000;
const CUSTOMERS = 500;
const SEED_CONCURRENCY = 10;
const PROBE = 20; // requests per operation on the statement-counting instance
const OVERALL_TIMEOUT_MS = 240_000;
const PHONE = "254708374149";
const STK_AMOUNT = 150_000; // KES 1,500.00 in minor units (M-Pesa takes whole shillings)

const write = process.argv.includes("--write");
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------------------------------------------------------
// HTTP client: keep-alive over loopback

const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY_HIGH });

interface HttpResult {
  status: number;
  text: string;
}

function http(port: number, method: "GET" | "POST", path: string, headers: Record<string, string>, body?: string): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port,
        method,
        path,
        agent,
        headers: body === undefined ? headers : { ...headers, "content-type": "application/json", "content-length": String(Buffer.byteLength(body)) },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => (text += chunk));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

function expectStatus(what: string, result: HttpResult, status: number): HttpResult {
  if (result.status !== status) throw new Error(`${what}: HTTP ${result.status} (expected ${status}): ${result.text.slice(0, 300)}`);
  return result;
}

// ---------------------------------------------------------------------------------------------------------------
// Measurement

type Call = () => Promise<void>;

interface Target {
  name: string;
  call: Call;
  latenciesMs: number[];
  wallMs: number;
}

interface Stats {
  name: string;
  p50: number;
  p99: number;
  mean: number;
  rps: number;
  count: number;
}

const target = (name: string, call: Call): Target => ({ name, call, latenciesMs: [], wallMs: 0 });

/** `count` calls, `concurrency` in flight at a time; returns the wall time. */
async function drive(call: Call, count: number, concurrency: number, latencies: number[] | null): Promise<number> {
  let started = 0;
  const t0 = performance.now();
  const worker = async () => {
    while (started < count) {
      started++;
      const s = performance.now();
      await call();
      if (latencies) latencies.push(performance.now() - s);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return performance.now() - t0;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

/** Warms every target up, then measures them interleaved in SLICES slices at one concurrency. */
async function measure(targets: Target[], concurrency: number): Promise<Stats[]> {
  for (const t of targets) {
    t.latenciesMs = [];
    t.wallMs = 0;
    await drive(t.call, WARMUP, concurrency, null);
  }
  for (let slice = 0; slice < SLICES; slice++) {
    for (const t of targets) t.wallMs += await drive(t.call, N / SLICES, concurrency, t.latenciesMs);
  }
  return targets.map((t) => {
    const sorted = [...t.latenciesMs].sort((a, b) => a - b);
    return {
      name: t.name,
      p50: percentile(sorted, 50),
      p99: percentile(sorted, 99),
      mean: sorted.reduce((a, b) => a + b, 0) / sorted.length,
      rps: (sorted.length / t.wallMs) * 1000,
      count: sorted.length,
    };
  });
}

/** Items consumed one per call (rows a callback settles, bodies to post); running out is a bench bug. */
function queue<T>(name: string, items: T[]): () => T {
  let i = 0;
  return () => {
    const item = items[i++];
    if (item === undefined) throw new Error(`${name}: ran out of prepared items (${items.length})`);
    return item;
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Setup helpers

interface Instance {
  gateway: Gateway;
  port: number;
  dataDir: string;
}

async function startInstance(env: Record<string, string>, onQuery?: (sql: string) => void): Promise<Instance> {
  const dataDir = mkdtempSync(join(tmpdir(), "bench-api-"));
  const config = loadConfig({ NODE_ENV: "production", LOG_LEVEL: "silent", DATA_DIR: dataDir, HOST: "127.0.0.1", PORT: "0", ...env });
  const gateway = await createGateway(config, createLogger("silent"), onQuery ? { onQuery } : {});
  await gateway.app.listen({ port: 0, host: "127.0.0.1" });
  const address = gateway.app.server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return { gateway, port, dataDir };
}

/** "SELECT api_keys", "INSERT transactions", "BEGIN"...: what a statement is, in two words. */
function summarizeSql(sql: string): string {
  const verb = (sql.trim().split(/\s+/)[0] ?? "").toUpperCase();
  const table = /\b(?:FROM|INTO|UPDATE)\s+(?:"?public"?\.)?"?([A-Za-z_]+)"?/i.exec(sql)?.[1];
  return table ? `${verb} ${table}` : verb;
}

const hashKey = (key: string) => createHash("sha256").update(key, "utf8").digest("hex");

// ---------------------------------------------------------------------------------------------------------------
// Main

interface OpResult {
  op: string;
  serial: Stats[]; // [gateway HTTP, (in-process GraphQL), in-process services, bare pg]
  concurrent: Stats[]; // [gateway HTTP, bare pg]
  hasGraphql: boolean;
  gatewaySql: number;
  gatewaySqlList: string[];
  baselineSql: number;
}

async function main() {
  const runStarted = performance.now();
  const loadBefore = loadavg();
  let postgres: PostgresServer | undefined;
  let fake: FakeDaraja | undefined;
  let timed: Instance | undefined;
  let counting: Instance | undefined;
  let pool: pg.Pool | undefined;
  let bare: FastifyInstance | undefined;
  const results: OpResult[] = [];
  const floors: Stats[][] = [];
  let pgVersion = "";
  let authSplit: Stats[] = [];

  try {
    postgres = await startPostgres();
    const databaseUrl = await postgres.createDatabase();
    fake = await startFakeDaraja();
    const env = {
      DATABASE_URL: databaseUrl,
      ENCRYPTION_KEY: randomBytes(32).toString("hex"),
      RATE_LIMIT_ENABLED: "false",
      MPESA_BASE_URL: fake.url,
      PUBLIC_BASE_URL: "https://pay.gateway.test",
      // No reconciliation passes during the run: every pending push is settled by the callbacks we post.
      JOBS_ENABLED: "false",
      STK_CALLBACK_OVERDUE_MS: "3600000",
    };
    timed = await startInstance(env);
    let recording: string[] | null = null;
    counting = await startInstance(env, (sql) => recording?.push(sql));
    const gw = timed.gateway;
    const port = timed.port;

    pool = new pg.Pool({ connectionString: databaseUrl, max: POOL_SIZE });
    pgVersion = (await pool.query<{ server_version: string }>("SHOW server_version")).rows[0]!.server_version;

    // --- seed: merchant, channels, transactions -----------------------------------------------------------
    const { keys } = await gw.services.merchants.createMerchant({ name: "Bench Merchant", email: "bench@merchants.test" });
    const apiKey = keys.test.plaintext;
    const principal = (await gw.services.merchants.authenticate(apiKey))!;
    const auth = { "x-api-key": apiKey };
    const post = (path: string, body: unknown, p = port) => http(p, "POST", path, auth, JSON.stringify(body));
    const get = (path: string, p = port) => http(p, "GET", path, auth);

    const sandboxChannelId = JSON.parse(
      expectStatus("create sandbox channel", await post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} }), 201).text,
    ).channel.id as number;
    const mpesaChannelId = JSON.parse(
      expectStatus("create mpesa channel", await post("/api/payment-channels/create", { name: "M-Pesa", provider: "mpesa", config: fake.channelConfig() }), 201).text,
    ).channel.id as number;

    let seq = 0;
    const initializeBody = () => {
      const i = seq++;
      return {
        amount: 100 + ((i * 7919) % 1_000_000),
        email: `customer${i % CUSTOMERS}@example.test`,
        currency: "KES",
        payment_channel_id: sandboxChannelId,
        first_name: "Amina",
        last_name: "Otieno",
        description: `Order ${i}`,
      };
    };
    const references: string[] = [];
    const seedStarted = performance.now();
    await drive(
      async () => {
        const res = expectStatus("seed initialize", await post("/api/transactions/initialize", initializeBody()), 200);
        references.push(JSON.parse(res.text).reference as string);
      },
      SEED_TRANSACTIONS,
      SEED_CONCURRENCY,
      null,
    );
    console.log(`seeded ${references.length} transactions through REST in ${((performance.now() - seedStarted) / 1000).toFixed(1)} s`);

    // --- the in-process layers ----------------------------------------------------------------------------
    const routes = compileRoutes(schema, restRoutes);
    const route = (method: string, path: string): CompiledRoute => {
      const found = routes.find((r) => r.method === method && r.path === path);
      if (!found) throw new Error(`no REST route ${method} ${path}`);
      return found;
    };
    const shutdown = new AbortController();
    const contextFor = (p: Principal | null): GraphQLContext => ({ principal: p, prisma: gw.db.prisma, services: gw.services, shutdownSignal: shutdown.signal, log: createLogger("silent") });
    /** What the Fastify route handler and the auth hook do, without HTTP and Fastify. */
    const handlerWork = async (r: CompiledRoute, restRequest: RestRequest) => {
      const p = await gw.services.merchants.authenticate(apiKey);
      if (!p) throw new Error("in-process authentication failed");
      const data = await runOperation(schema, r, r.variables(restRequest), contextFor(p));
      const { body } = r.respond(data, restRequest);
      return typeof body === "string" ? body : JSON.stringify(body);
    };
    const authenticate = async () => {
      const p = await gw.services.merchants.authenticate(apiKey);
      if (!p) throw new Error("in-process authentication failed");
      return p;
    };

    // --- bare pg ------------------------------------------------------------------------------------------
    const db = pool;
    const keyHash = () => hashKey(apiKey);
    const pgAuth = async () => {
      const { rows } = await db.query("SELECT id, merchant_id, mode, prefix, revoked_at FROM api_keys WHERE hash = $1", [keyHash()]);
      const key = rows[0];
      if (!key || key.revoked_at) throw new Error("baseline: key not found");
      return { merchantId: key.merchant_id as number, mode: key.mode as string };
    };

    /** Statements per request on the counting instance, and the statements of the last request. */
    const probe = async (call: (p: number) => Promise<void>) => {
      let total = 0;
      let last: string[] = [];
      for (let i = 0; i < PROBE; i++) {
        recording = [];
        await call(counting!.port);
        await sleep(1); // query events are emitted asynchronously
        // The pg adapter sends an interactive transaction's BEGIN itself, outside Prisma's query events (its
        // COMMIT is reported): count one BEGIN per COMMIT.
        total += recording.length + recording.filter((q) => /^\s*COMMIT\b/i.test(q)).length;
        last = recording;
      }
      recording = null;
      const statements = last.map(summarizeSql);
      if (statements.includes("COMMIT") && !statements.includes("BEGIN")) statements.unshift("(BEGIN, unreported)");
      return { perRequest: total / PROBE, statements };
    };

    async function runOp(
      op: string,
      layers: { http: Call; graphql?: Call; services: Call; baseline: Call; baselineSql: number; probe: (p: number) => Promise<void> },
    ) {
      console.log(`\n${op}`);
      const serialTargets = [
        target("gateway (HTTP)", layers.http),
        ...(layers.graphql ? [target("in-process: auth + GraphQL", layers.graphql)] : []),
        target("in-process: services (Prisma)", layers.services),
        target("bare pg", layers.baseline),
      ];
      const serial = await measure(serialTargets, 1);
      const concurrent = await measure([target("gateway (HTTP)", layers.http), target("bare pg", layers.baseline)], CONCURRENCY_HIGH);
      const counted = await probe(layers.probe);
      const result: OpResult = {
        op,
        serial,
        concurrent,
        hasGraphql: Boolean(layers.graphql),
        gatewaySql: counted.perRequest,
        gatewaySqlList: counted.statements,
        baselineSql: layers.baselineSql,
      };
      for (const [label, stats] of [["concurrency 1", serial], [`concurrency ${CONCURRENCY_HIGH}`, concurrent]] as const) {
        for (const s of stats) console.log(`  ${label.padEnd(15)} ${s.name.padEnd(32)} p50 ${s.p50.toFixed(2).padStart(7)} ms  p99 ${s.p99.toFixed(2).padStart(7)} ms  ${s.rps.toFixed(0).padStart(6)} req/s`);
      }
      console.log(`  SQL statements per request: gateway ${counted.perRequest.toFixed(1)} (${counted.statements.join(", ")}), bare pg ${layers.baselineSql}`);
      results.push(result);
    }

    // --- floors: a bare Fastify route, and the key lookup alone --------------------------------------------
    bare = Fastify();
    bare.get("/const", async () => ({ status: "success" }));
    bare.post("/const", async () => ({ status: "success" }));
    await bare.listen({ port: 0, host: "127.0.0.1" });
    const bareAddress = bare.server.address();
    const barePort = typeof bareAddress === "object" && bareAddress ? bareAddress.port : 0;
    const sampleBody = JSON.stringify(initializeBody());
    const bareGet: Call = async () => void expectStatus("bare GET", await http(barePort, "GET", "/const", auth), 200);
    const barePost: Call = async () => void expectStatus("bare POST", await http(barePort, "POST", "/const", auth, sampleBody), 200);
    console.log("\nbare Fastify, constant reply");
    floors.push(await measure([target("GET, constant JSON", bareGet), target("POST JSON body, constant JSON", barePost)], 1));
    floors.push(await measure([target("GET, constant JSON", bareGet), target("POST JSON body, constant JSON", barePost)], CONCURRENCY_HIGH));
    for (const s of [...floors[0]!, ...floors[1]!]) console.log(`  ${s.name.padEnd(32)} p50 ${s.p50.toFixed(2)} ms  p99 ${s.p99.toFixed(2)} ms  ${s.rps.toFixed(0)} req/s`);
    authSplit = await measure([target("auth: Prisma findUnique", async () => void (await authenticate())), target("auth: bare pg", async () => void (await pgAuth()))], 1);
    for (const s of authSplit) console.log(`  ${s.name.padEnd(32)} p50 ${s.p50.toFixed(3)} ms  p99 ${s.p99.toFixed(3)} ms`);

    // --- 2. verify -----------------------------------------------------------------------------------------
    {
      let i = 0;
      const nextRef = () => references[i++ % references.length]!;
      const verifyRoute = route("GET", "/api/transactions/verify/:reference");
      await runOp("GET /api/transactions/verify/{reference}", {
        http: async () => void expectStatus("verify", await get(`/api/transactions/verify/${nextRef()}`), 200),
        graphql: async () => void (await handlerWork(verifyRoute, { body: {}, query: {}, params: { reference: nextRef() } })),
        services: async () => {
          const p = await authenticate();
          // what the resolver does: the scoped lookup, then the re-read with the selection's relations (none here)
          const found = await gw.services.transactions.getByReference(p, nextRef());
          await gw.db.prisma.transaction.findUniqueOrThrow({ where: { id: found.id } });
        },
        baseline: async () => {
          const key = await pgAuth();
          const { rows } = await db.query("SELECT * FROM transactions WHERE reference = $1 AND merchant_id = $2 AND mode = $3", [nextRef(), key.merchantId, key.mode]);
          if (rows.length !== 1) throw new Error("baseline verify: not found");
          JSON.stringify({ status: "success", transaction: { id: rows[0].id, reference: rows[0].reference, amount: Number(rows[0].amount), status: rows[0].status } });
        },
        baselineSql: 2,
        probe: async (p) => void expectStatus("verify probe", await get(`/api/transactions/verify/${nextRef()}`, p), 200),
      });
    }

    // --- 3. list -------------------------------------------------------------------------------------------
    {
      const listRoute = route("GET", "/api/transactions/list");
      await runOp("GET /api/transactions/list?limit=20", {
        http: async () => void expectStatus("list", await get("/api/transactions/list?limit=20"), 200),
        graphql: async () => void (await handlerWork(listRoute, { body: {}, query: { limit: "20" }, params: {} })),
        services: async () => void (await gw.services.transactions.listPage(await authenticate(), { limit: 20 })),
        baseline: async () => {
          const key = await pgAuth();
          const [page, count] = await Promise.all([
            db.query("SELECT * FROM transactions WHERE merchant_id = $1 AND mode = $2 ORDER BY created_at DESC, id DESC LIMIT $3 OFFSET $4", [key.merchantId, key.mode, 20, 0]),
            db.query<{ total: string }>("SELECT count(*) AS total FROM transactions WHERE merchant_id = $1 AND mode = $2", [key.merchantId, key.mode]),
          ]);
          JSON.stringify({ status: "success", data: page.rows.map((r) => ({ id: r.id, reference: r.reference, amount: Number(r.amount), status: r.status })), total: Number(count.rows[0]!.total) });
        },
        baselineSql: 3,
        probe: async (p) => void expectStatus("list probe", await get("/api/transactions/list?limit=20", p), 200),
      });
    }

    // --- 1. initialize -------------------------------------------------------------------------------------
    {
      const initRoute = route("POST", "/api/transactions/initialize");
      await runOp("POST /api/transactions/initialize", {
        http: async () => void expectStatus("initialize", await post("/api/transactions/initialize", initializeBody()), 200),
        graphql: async () => void (await handlerWork(initRoute, { body: initializeBody(), query: {}, params: {} })),
        services: async () => {
          const b = initializeBody();
          await gw.services.transactions.initialize(await authenticate(), {
            amount: BigInt(b.amount),
            email: b.email,
            currency: b.currency,
            paymentChannelId: b.payment_channel_id,
            firstName: b.first_name,
            lastName: b.last_name,
            description: b.description,
          });
        },
        baseline: async () => {
          const b = initializeBody();
          const key = await pgAuth();
          const channel = await db.query("SELECT * FROM payment_channels WHERE id = $1 AND merchant_id = $2 AND mode = $3", [b.payment_channel_id, key.merchantId, key.mode]);
          if (!channel.rows[0]?.is_active) throw new Error("baseline initialize: channel");
          const client = await db.connect();
          try {
            await client.query("BEGIN");
            await client.query(
              "INSERT INTO customers (merchant_id, mode, email, first_name, last_name) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (merchant_id, mode, email) DO NOTHING",
              [key.merchantId, key.mode, b.email, b.first_name, b.last_name],
            );
            const customer = await client.query("SELECT * FROM customers WHERE merchant_id = $1 AND mode = $2 AND email = $3", [key.merchantId, key.mode, b.email]);
            const inserted = await client.query(
              `INSERT INTO transactions (merchant_id, mode, reference, access_code, amount, currency, description, email, channel_id, customer_id, updated_at)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, now()) RETURNING *`,
              [key.merchantId, key.mode, newReference(), randomBytes(12).toString("base64url"), b.amount, b.currency, b.description, b.email, b.payment_channel_id, customer.rows[0].id],
            );
            await client.query("COMMIT");
            JSON.stringify({ status: "success", reference: inserted.rows[0].reference, access_code: inserted.rows[0].access_code });
          } catch (error) {
            await client.query("ROLLBACK").catch(() => {});
            throw error;
          } finally {
            client.release();
          }
        },
        baselineSql: 7,
        probe: async (p) => void expectStatus("initialize probe", await post("/api/transactions/initialize", initializeBody(), p), 200),
      });
    }

    // --- 4. STK callbacks ----------------------------------------------------------------------------------
    {
      // Pending pushes for the gateway, started through REST against the fake Daraja: HTTP at both
      // concurrencies, the in-process service serially, and the statement probe.
      const httpCount = 2 * (WARMUP + N);
      const serviceCount = WARMUP + N;
      const pushes: { checkoutRequestId: string }[] = [];
      const pushStarted = performance.now();
      const pushOnce = async () => {
        const res = expectStatus(
          "STK push",
          await post("/api/momo/stk-push", { amount: STK_AMOUNT, phone_number: PHONE, payment_channel_id: mpesaChannelId, reference: `INV-${pushes.length}`, description: "Bench order" }),
          200,
        );
        pushes.push({ checkoutRequestId: JSON.parse(res.text).transaction.checkout_request_id as string });
      };
      await pushOnce(); // fetches and caches the Daraja token before the concurrent pushes
      await drive(
        pushOnce,
        httpCount + serviceCount + PROBE - 1,
        SEED_CONCURRENCY,
        null,
      );
      console.log(`\nstarted ${pushes.length} STK pushes through REST in ${((performance.now() - pushStarted) / 1000).toFixed(1)} s`);
      const callbacks = pushes.map(({ checkoutRequestId }) => {
        const body = fake!.stkCallbackBody(checkoutRequestId);
        const path = new URL(fake!.pushes.get(checkoutRequestId)!.body.CallBackURL as string).pathname;
        return { path, token: path.split("/")[3]!, body, text: JSON.stringify(body) };
      });
      const httpQueue = queue("callback HTTP", callbacks.slice(0, httpCount));
      const serviceQueue = queue("callback service", callbacks.slice(httpCount, httpCount + serviceCount));
      const probeQueue = queue("callback probe", callbacks.slice(httpCount + serviceCount));

      // Pending pushes for the baseline: the same rows (with their reconciliation jobs), bulk-inserted.
      const channelRow = (await db.query("SELECT callback_token FROM payment_channels WHERE id = $1", [mpesaChannelId])).rows[0];
      const tokenSegment = Buffer.from(channelRow.callback_token as string, "utf8").toString("hex");
      const baselineCount = 2 * (WARMUP + N);
      const prefix = `ws_CO_bench_${randomBytes(4).toString("hex")}_`;
      await db.query(
        `WITH inserted AS (
           INSERT INTO transactions (merchant_id, mode, reference, access_code, amount, currency, description, phone_number,
                                     payment_method, client_reference, checkout_request_id, channel_id, updated_at)
           SELECT $1, $2, 'txn_' || substr(md5(random()::text || g), 1, 20), md5(random()::text || g), $3, 'KES', 'Bench order', '+' || $4,
                  'momo_stk', 'INV-' || g, $5 || g, $6, now()
           FROM generate_series(1, $7::int) AS g
           RETURNING id, channel_id, phone_number, checkout_request_id, created_at),
         -- Each API push is an attempt too (issue 36): its callback finds it there.
         attempts AS (
           INSERT INTO transaction_attempts (transaction_id, method, origin, channel_id, phone_number, checkout_request_id, created_at)
           SELECT id, 'mpesa', 'api', channel_id, phone_number, checkout_request_id, created_at FROM inserted)
         INSERT INTO jobs (kind, payload, run_at) SELECT 'transaction.reconcile', jsonb_build_object('transactionId', id), now() + interval '1 hour' FROM inserted`,
        [principal.merchantId, principal.mode, STK_AMOUNT, PHONE, prefix, mpesaChannelId, baselineCount],
      );
      const baselineQueue = queue(
        "callback baseline",
        Array.from({ length: baselineCount }, (_, k) => {
          const body = {
            Body: {
              stkCallback: {
                CheckoutRequestID: `${prefix}${k + 1}`,
                ResultCode: 0,
                CallbackMetadata: { Item: [{ Name: "Amount", Value: STK_AMOUNT / 100 }, { Name: "MpesaReceiptNumber", Value: `NLJ${k}` }, { Name: "PhoneNumber", Value: Number(PHONE) }] },
              },
            },
          };
          return { token: tokenSegment, body };
        }),
      );

      await runOp("POST /callbacks/daraja/{token}/stk (success)", {
        http: async () => {
          const c = httpQueue();
          expectStatus("STK callback", await http(port, "POST", c.path, {}, c.text), 200);
        },
        services: async () => {
          const c = serviceQueue();
          await gw.services.callbacks.receive({ provider: "daraja", token: c.token, path: "/stk", rawBody: Buffer.from(c.text), contentType: "application/json", headers: {} });
        },
        baseline: async () => {
          const { token, body } = baselineQueue();
          const cb = body.Body.stkCallback;
          const item = (name: string) => cb.CallbackMetadata.Item.find((x) => x.Name === name)?.Value;
          const channel = await db.query("SELECT * FROM payment_channels WHERE callback_token = $1", [Buffer.from(token, "hex").toString("latin1")]);
          if (!channel.rows[0]) throw new Error("baseline callback: channel");
          const found = await db.query("SELECT * FROM transactions WHERE channel_id = $1 AND checkout_request_id = $2 LIMIT 1", [channel.rows[0].id, cb.CheckoutRequestID]);
          const t = found.rows[0];
          if (!t || Number(t.amount) !== Number(item("Amount")) * 100) throw new Error("baseline callback: transaction");
          // This merchant has no webhook endpoints, as in the gateway's run: the fan-out is one index probe.
          if (!(await settleWithPg(db, t.id, String(item("MpesaReceiptNumber"))))) throw new Error("baseline callback: not pending");
        },
        baselineSql: 7,
        probe: async (p) => {
          const c = probeQueue();
          expectStatus("STK callback probe", await http(p, "POST", c.path, {}, c.text), 200);
        },
      });

      const notCompleted = await db.query<{ n: string }>(
        "SELECT count(*) AS n FROM transactions WHERE channel_id = $1 AND payment_method = 'momo_stk' AND status <> 'completed'",
        [mpesaChannelId],
      );
      if (Number(notCompleted.rows[0]!.n) !== 0) throw new Error(`${notCompleted.rows[0]!.n} STK transactions were not completed by their callbacks`);
    }
    shutdown.abort();
  } finally {
    agent.destroy();
    await bare?.close().catch(() => {});
    await timed?.gateway.close().catch((e: unknown) => console.error("closing gateway:", e));
    await counting?.gateway.close().catch((e: unknown) => console.error("closing gateway:", e));
    for (const dir of [timed?.dataDir, counting?.dataDir]) if (dir) rmSync(dir, { recursive: true, force: true });
    await pool?.end().catch(() => {});
    await fake?.close().catch(() => {});
    await postgres?.stop().catch((e: unknown) => console.error("stopping PostgreSQL:", e));
  }

  const seconds = Math.round((performance.now() - runStarted) / 1000);
  const context =
    `N=${N} per operation, layer and concurrency after ${WARMUP} warm-up, ${SEED_TRANSACTIONS} seeded transactions, PostgreSQL ${pgVersion} (throwaway, fsync off), ` +
    `pool ${POOL_SIZE} both sides, Node ${process.version}, ${availableParallelism()} CPUs (load ${loadBefore[0]!.toFixed(2)} before, ${loadavg()[0]!.toFixed(2)} after), ` +
    `${new Date().toISOString().slice(0, 10)}, run took ${seconds} s`;
  const order = ["POST /api/transactions/initialize", "GET /api/transactions/verify", "GET /api/transactions/list", "POST /callbacks"];
  results.sort((a, b) => order.findIndex((o) => a.op.startsWith(o)) - order.findIndex((o) => b.op.startsWith(o)));
  const section = render(results, floors, authSplit, context);
  console.log(`\n${section}`);
  if (write) {
    recordInReadme(section);
    console.log("recorded in bench/README.md");
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Report

const ms = (v: number) => v.toFixed(2);
const x = (v: number) => `${v.toFixed(1)}x`;

function mainTable(results: OpResult[], pick: (r: OpResult) => Stats[]): string {
  return [
    "| operation | gateway p50 / p99 (ms) | bare pg p50 / p99 (ms) | ratio p50 | ratio p99 | req/s gateway / bare pg | SQL / request gateway / bare pg |",
    "|---|---:|---:|---:|---:|---:|---:|",
    ...results.map((r) => {
      const s = pick(r);
      const g = s[0]!;
      const b = s[s.length - 1]!;
      return `| ${r.op} | ${ms(g.p50)} / ${ms(g.p99)} | ${ms(b.p50)} / ${ms(b.p99)} | ${x(g.p50 / b.p50)} | ${x(g.p99 / b.p99)} | ${g.rps.toFixed(0)} / ${b.rps.toFixed(0)} | ${r.gatewaySql.toFixed(1)} / ${r.baselineSql} |`;
    }),
  ].join("\n");
}

/** p50 of each layer, serially, and the differences between adjacent layers. */
function splitTable(results: OpResult[]): string {
  const rows = results.map((r) => {
    const [http, ...rest] = r.serial;
    const base = r.serial[r.serial.length - 1]!;
    const services = r.serial[r.serial.length - 2]!;
    const graphql = r.hasGraphql ? rest[0]! : undefined;
    const inner = graphql ?? services;
    const cells = [
      ms(http!.p50),
      graphql ? ms(graphql.p50) : "n/a",
      ms(services.p50),
      ms(base.p50),
      ms(http!.p50 - inner.p50),
      graphql ? ms(graphql.p50 - services.p50) : "n/a",
      ms(services.p50 - base.p50),
    ];
    return `| ${r.op} | ${cells.join(" | ")} |`;
  });
  return [
    "| operation | gateway over HTTP | in-process: auth + GraphQL | in-process: services (Prisma) | bare pg | HTTP + Fastify (1st - 2nd) | GraphQL layer (2nd - 3rd) | Prisma over pg (3rd - 4th) |",
    "|---|---:|---:|---:|---:|---:|---:|---:|",
    ...rows,
  ].join("\n");
}

function render(results: OpResult[], floors: Stats[][], auth: Stats[], context: string): string {
  const lines: string[] = [];
  lines.push(
    "Latency per request of the REST hot paths, gateway over keep-alive HTTP on 127.0.0.1 against the same SQL work with a bare `pg.Pool` of the",
    "same size (10) in the same process, on one throwaway PostgreSQL (`test/support/postgres.ts`). Gateway and baseline run interleaved in",
    "four slices; ratio = gateway / bare pg. The gateway runs with `RATE_LIMIT_ENABLED=false`, `LOG_LEVEL=silent`, `NODE_ENV=production`; its",
    "SQL statements are counted on a second instance (Prisma query events) so the timed one has no query logging. Run with",
    "`node --import tsx bench/api.ts [--write]`: needs `initdb`/`pg_ctl` (or `TEST_DATABASE_URL`), takes one to three minutes and gives up",
    "after four.",
    "",
    "What each bare-pg baseline does (every API-key route starts with the key lookup the gateway's auth hook makes:",
    "sha256 of the key, then `SELECT id, merchant_id, mode, prefix, revoked_at FROM api_keys WHERE hash = $1`):",
    "",
    "- **initialize** (`amount`, `email` of one of 500 existing customers, `currency`, `payment_channel_id` of the sandbox channel, names,",
    "  description): key lookup; `SELECT * FROM payment_channels WHERE id AND merchant_id AND mode`; then one transaction: `BEGIN`,",
    "  `INSERT INTO customers ... ON CONFLICT (merchant_id, mode, email) DO NOTHING`, `SELECT * FROM customers WHERE merchant_id AND mode AND email`,",
    "  `INSERT INTO transactions (...) RETURNING *`, `COMMIT` (7 statements). The gateway sends 2: the channel with the merchant's currency, then the customer and the row in one statement.",
    "- **verify**: key lookup; `SELECT * FROM transactions WHERE reference = $1 AND merchant_id = $2 AND mode = $3` (2 statements). The",
    "  gateway serves verified keys from memory and sends the one SELECT.",
    "- **list**: key lookup; the page (`SELECT * ... WHERE merchant_id AND mode ORDER BY created_at DESC, id DESC LIMIT 20 OFFSET 0`) and",
    "  `SELECT count(*)` with the same filter, concurrently on two pooled connections as the gateway does (3 statements).",
    "- **STK callback** (Daraja's success body, for a pending push started through `POST /api/momo/stk-push` against `test/fakes/daraja.ts`;",
    "  the baseline's pending rows are bulk-inserted copies): `SELECT * FROM payment_channels WHERE callback_token`, `SELECT * FROM transactions",
    "  WHERE channel_id AND checkout_request_id`, then `BEGIN`, `UPDATE transactions SET status = 'completed', provider_reference, completed_at",
    "  ... WHERE id = $1 AND status = 'pending' RETURNING *`, `INSERT INTO events` (the transaction snapshot as payload), the webhook fan-out",
    "  `INSERT INTO webhook_deliveries ... SELECT FROM webhook_endpoints` (and its jobs), `COMMIT` (7 statements). No API key; the gateway",
    "  sends 3: the channel, the transaction, then the status change with its event, fan-out and jobs as one statement of data-modifying CTEs.",
    "",
    "Baselines build a small JSON reply from the rows but do no HTTP; the gateway figures include the HTTP client, which shares the process",
    "and the two CPUs with the server.",
    "",
    `<!-- api:start -->`,
    context,
    "",
    "Serially (concurrency 1):",
    "",
    mainTable(results, (r) => r.serial),
    "",
    `Concurrency ${CONCURRENCY_HIGH}:`,
    "",
    mainTable(results, (r) => r.concurrent),
    "",
    "Where the serial p50 goes (ms; each layer measured in the same slices; the STK callback route runs no GraphQL):",
    "",
    splitTable(results),
    "",
    "Floors: a bare Fastify 5 instance in the same process (no hooks, no plugins), and the key lookup alone:",
    "",
    "| request | p50 / p99 (ms), concurrency 1 | req/s, concurrency 1 | p50 / p99 (ms), concurrency 10 | req/s, concurrency 10 |",
    "|---|---:|---:|---:|---:|",
    ...floors[0]!.map((s, i) => {
      const c = floors[1]![i]!;
      return `| ${s.name} | ${ms(s.p50)} / ${ms(s.p99)} | ${s.rps.toFixed(0)} | ${ms(c.p50)} / ${ms(c.p99)} | ${c.rps.toFixed(0)} |`;
    }),
    ...auth.map((s) => `| ${s.name} (in-process) | ${s.p50.toFixed(3)} / ${s.p99.toFixed(3)} | ${s.rps.toFixed(0)} | | |`),
    "",
    "Statements the gateway sent for one request (Prisma query events, in order; the pg adapter sends an interactive transaction's BEGIN outside them, so the counts above add one per COMMIT):",
    "",
    ...results.map((r) => `- ${r.op}: ${r.gatewaySqlList.join(", ")}`),
    `<!-- api:end -->`,
    "",
  );

  // Reading it: computed from this run's figures.
  const ordered = ["POST /api/transactions/initialize", "GET /api/transactions/verify", "GET /api/transactions/list", "POST /callbacks"]
    .map((prefix) => results.find((r) => r.op.startsWith(prefix)))
    .filter((r): r is OpResult => r !== undefined);
  const short = (r: OpResult) => (r.op.startsWith("POST /callbacks") ? "STK callback" : r.op.split(" ")[1]!.replace("/api/transactions/", "").replace(/[/?].*$/, ""));
  const layers = (r: OpResult) => {
    const http = r.serial[0]!;
    const graphql = r.hasGraphql ? r.serial[1]! : undefined;
    const services = r.serial[r.serial.length - 2]!;
    const base = r.serial[r.serial.length - 1]!;
    return { http: http.p50 - (graphql ?? services).p50, graphql: graphql ? graphql.p50 - services.p50 : undefined, prisma: services.p50 - base.p50 };
  };
  const range = (values: number[]) => {
    const lo = Math.min(...values);
    const hi = Math.max(...values);
    return lo === hi ? ms(lo) : `${ms(lo)} to ${ms(hi)}`;
  };
  const shares = {
    "HTTP + Fastify": ordered.map((r) => layers(r).http),
    "GraphQL execution": ordered.flatMap((r) => (layers(r).graphql === undefined ? [] : [layers(r).graphql!])),
    "Prisma over pg": ordered.map((r) => layers(r).prisma),
  };
  const bySize = Object.entries(shares).sort((a, b) => b[1].reduce((s, v) => s + v, 0) / b[1].length - a[1].reduce((s, v) => s + v, 0) / a[1].length);
  const getFloor = floors[0]![0]!;
  const postFloor = floors[0]![1]!;
  lines.push(
    `Reading it: serially the gateway takes ${ordered.map((r) => `${x(r.serial[0]!.p50 / r.serial[r.serial.length - 1]!.p50)} (${short(r)})`).join(", ")} the bare-pg time. ` +
      `Of the extra time at p50, ${bySize.map(([name, v]) => `${name} is ${range(v)} ms`).join(", then ")} per request (table above; differences of medians, ` +
      `so take them to a few tenths of a millisecond on a shared machine). "Prisma over pg" is Prisma's per-query cost plus the difference in statements ` +
      `(statements per request ${ordered.map((r) => `${r.gatewaySql.toFixed(0)} vs ${r.baselineSql}`).join(", ")}; the key lookup alone is ` +
      `${auth[0] ? ms(auth[0].p50) : "?"} ms through Prisma against ${auth[1] ? ms(auth[1].p50) : "?"} ms with bare pg).`,
    `A bare Fastify route answering a constant costs ${ms(getFloor.p50)} ms (GET) and ${ms(postFloor.p50)} ms (POST with the initialize body) over the same client, ` +
      `against ${range(shares["HTTP + Fastify"])} ms for the gateway's HTTP + Fastify share: the rest of that share is what the gateway's Fastify instance adds ` +
      `(its hooks and plugins, larger replies), not split further.`,
    `At concurrency ${CONCURRENCY_HIGH} the two CPUs are the limit: gateway ${ordered.map((r) => `${r.concurrent[0]!.rps.toFixed(0)}`).join(", ")} req/s against bare pg ` +
      `${ordered.map((r) => `${r.concurrent[1]!.rps.toFixed(0)}`).join(", ")} (same order), with the HTTP client, Fastify, GraphQL and Prisma competing with PostgreSQL for the same cores.`,
  );
  return lines.join("\n");
}

const HEADING = "## Hot paths: REST against bare pg";

/** Replaces this benchmark's own section (from its heading to the next "## " heading or the end), or appends it. */
function recordInReadme(body: string): void {
  const readme = fileURLToPath(new URL("./README.md", import.meta.url));
  const text = readFileSync(readme, "utf8"); // re-read right before writing: others may be appending sections
  const section = `${HEADING}\n\n${body.trimEnd()}\n`;
  const from = text.indexOf("## Hot paths: REST against bare pg");
  if (from < 0) {
    writeFileSync(readme, `${text.trimEnd()}\n\n${section}`);
    return;
  }
  const next = text.indexOf("\n## ", from + 3);
  const rest = next < 0 ? "" : `\n${text.slice(next + 1)}`;
  writeFileSync(readme, `${text.slice(0, from)}${section}${rest}`);
}

const deadline = setTimeout(() => {
  console.error(`bench/api.ts: gave up after ${OVERALL_TIMEOUT_MS / 1000} s`);
  process.exit(2); // test/support's exit hook stops the throwaway PostgreSQL
}, OVERALL_TIMEOUT_MS);
deadline.unref();

main().then(
  () => clearTimeout(deadline),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
