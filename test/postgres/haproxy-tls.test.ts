import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { createServer, request as httpRequest, type IncomingHttpHeaders, type Server } from "node:http";
import { connect as http2Connect, type ClientHttp2Session } from "node:http2";
import { request as httpsRequest, type RequestOptions } from "node:https";
import { connect as tlsConnect, type TLSSocket } from "node:tls";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "graphql-ws";
import WebSocket from "ws";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../support/backend.ts";
import { freePort } from "../support/local-server.ts";
import { printedTestKey, processEnv, repoRoot, startGatewayProcess, type StartedGatewayProcess } from "../support/process.ts";
import { until } from "../support/wait.ts";

/**
 * deploy/haproxy.cfg's TLS side with the real HAProxy binary and a certificate this test makes (openssl), in front
 * of one gateway process: https end to end over HTTP/1.1 and HTTP/2 (ALPN), GraphQL over WebSockets on both (wss
 * by HTTP/1.1 Upgrade, and HTTP/2's extended CONNECT), TLS below 1.2 refused, the headers HAProxy forwards (a
 * client's own X-Forwarded-* dropped; the gateway, trusting HAProxy, sees the client's address), plain HTTP
 * redirected to https with its path and query, and ACME's HTTP-01 challenges passed to the ACME server instead.
 */
const HOST = "pay.example.test";
const PUBLIC_BASE_URL = `https://${HOST}`;

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
  alpn?: string | false | null;
}

describe("HAProxy terminates TLS in front of the gateway (deploy/haproxy.cfg)", () => {
  let database: TestDatabase;
  let gateway: StartedGatewayProcess;
  let work: string;
  let ca: string;
  let apiKey: string;
  const haproxies: { child: ChildProcess; output: () => string }[] = [];
  let httpsPort: number;
  let httpPort: number;
  /** A second HAProxy, same configuration, whose "gateway" echoes the request headers it received. */
  let echoHttpsPort: number;
  let echo: Server;
  let echoCertificate: string;
  let echoCa: string;
  let echoMaster: ChildProcess;
  let acme: Server;
  const acmeSeen: string[] = [];
  /** The front HAProxy's log (one line per request, naming the backend it chose). */
  let frontLog: () => string;

  /** deploy/haproxy.cfg as shipped, with one server (the test's) in place of the Docker DNS template. */
  function startHaproxy(name: string, backendPort: number, ports: { https: number; http: number; stats: number; acme: number }, options: { certificate: string; masterWorker?: boolean }) {
    const shipped = readFileSync(join(repoRoot, "deploy/haproxy.cfg"), "utf8");
    const config = shipped.replace(/^ {4}server-template .*$/gm, `    server gw1 127.0.0.1:${backendPort} check`);
    expect(config).not.toContain("server-template");
    const file = join(work, `${name}.cfg`);
    writeFileSync(file, config);
    // -W: master-worker, as the Docker image and Debian's unit run it, so SIGHUP / systemctl reload re-reads everything.
    const child = spawn("haproxy", [...(options.masterWorker ? ["-W"] : []), "-db", "-f", file], {
      env: {
        PATH: process.env.PATH ?? "",
        HAPROXY_HTTPS_BIND: `127.0.0.1:${ports.https}`,
        HAPROXY_HTTP_BIND: `127.0.0.1:${ports.http}`,
        HAPROXY_CERT: options.certificate,
        HAPROXY_STATS: `127.0.0.1:${ports.stats}`,
        HAPROXY_SOCKET: join(work, `${name}.sock`),
        ACME_HOST: "127.0.0.1",
        ACME_PORT: String(ports.acme),
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout!.on("data", (c: Buffer) => (output += c.toString()));
    child.stderr!.on("data", (c: Buffer) => (output += c.toString()));
    haproxies.push({ child, output: () => output });
    return { child, statsUrl: `http://127.0.0.1:${ports.stats}/stats`, output: () => output };
  }

  /** Until HAProxy's check has the server UP (its stats page, as CSV). */
  async function serverUp(statsUrl: string) {
    await until(
      () => fetch(`${statsUrl};csv`).then((r) => r.text()).catch(() => ""),
      (csv) => csv.split("\n").some((row) => row.startsWith("gateways,gw1,") && row.split(",")[17] === "UP"),
    );
  }

  /** One https request on a connection of its own, trusting the test's CA, from a given loopback address. */
  function https(port: number, path: string, options: { headers?: Record<string, string>; method?: string; body?: string; localAddress?: string; ca?: string } = {}): Promise<Answer> {
    return new Promise((resolve, reject) => {
      // ALPN offering only http/1.1 (https.request passes tls.connect's options on; its type does not list this one).
      const tlsOptions = { ALPNProtocols: ["http/1.1"] } as RequestOptions;
      const req = httpsRequest(
        { host: "127.0.0.1", port, path, method: options.method ?? "GET", headers: options.headers, ca: options.ca ?? ca, agent: false, localAddress: options.localAddress, ...tlsOptions },
        (res) => {
          let body = "";
          res.on("data", (c: Buffer) => (body += c.toString()));
          res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body, alpn: (res.socket as TLSSocket).alpnProtocol }));
        },
      );
      req.on("error", reject);
      req.end(options.body);
    });
  }

  function http(port: number, path: string, headers: Record<string, string> = {}): Promise<Answer> {
    return new Promise((resolve, reject) => {
      httpRequest({ host: "127.0.0.1", port, path, headers, agent: false }, (res) => {
        let body = "";
        res.on("data", (c: Buffer) => (body += c.toString()));
        res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body }));
      })
        .on("error", reject)
        .end();
    });
  }

  function h2Session(port: number): Promise<ClientHttp2Session> {
    return new Promise((resolve, reject) => {
      const session = http2Connect(`https://127.0.0.1:${port}`, { ca });
      session.once("error", reject);
      // The peer's SETTINGS (enableConnectProtocol among them) have arrived once "remoteSettings" fires.
      session.once("remoteSettings", () => resolve(session));
    });
  }

  function h2Request(session: ClientHttp2Session, headers: Record<string, string>, body?: string): Promise<Answer> {
    return new Promise((resolve, reject) => {
      const stream = session.request(headers);
      let status = 0;
      let responseHeaders: IncomingHttpHeaders = {};
      let text = "";
      stream.on("response", (h) => {
        status = Number(h[":status"]);
        responseHeaders = h as IncomingHttpHeaders;
      });
      stream.on("data", (c: Buffer) => (text += c.toString()));
      stream.on("end", () => resolve({ status, headers: responseHeaders, body: text }));
      stream.on("error", reject);
      stream.end(body);
    });
  }

  /**
   * A self-signed certificate for the public name and for 127.0.0.1 (the address the clients here dial), written as
   * HAProxy wants it: the chain then the key in one PEM, at `pem`. Answers the certificate (the clients' CA).
   */
  function makeCertificate(pem: string, serial: string): string {
    execFileSync("openssl", [
      "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-set_serial", serial,
      "-subj", `/CN=${HOST}`, "-addext", `subjectAltName=DNS:${HOST},IP:127.0.0.1`,
      "-keyout", join(work, "key.pem"), "-out", join(work, "cert.pem"),
    ], { stdio: "ignore" });
    const certificate = readFileSync(join(work, "cert.pem"), "utf8");
    writeFileSync(`${pem}.new`, certificate + readFileSync(join(work, "key.pem"), "utf8"), { mode: 0o600 });
    // Replaced whole, as a renewal hook should: HAProxy never reads half a file.
    renameSync(`${pem}.new`, pem);
    rmSync(join(work, "key.pem"));
    return certificate;
  }

  /** The serial number of the certificate HAProxy presents on `port` (hex, as openssl's -set_serial took it). */
  function servedSerial(port: number): Promise<string> {
    return new Promise((resolve, reject) => {
      const socket = tlsConnect({ host: "127.0.0.1", port, rejectUnauthorized: false }, () => {
        resolve(socket.getPeerCertificate().serialNumber.replace(/^0+/, ""));
        socket.end();
      });
      socket.on("error", reject);
    });
  }

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "haproxy-tls-"));
    ca = makeCertificate(join(work, "gateway.pem"), "0x1001");

    database = await createTestDatabase();
    gateway = await startGatewayProcess(
      processEnv(database, {
        PUBLIC_BASE_URL,
        // HAProxy connects from loopback; so do the test's clients (127.0.0.2, 127.0.0.3), which HAProxy names in
        // X-Forwarded-For. Trusting all of loopback, the gateway would take a client's own X-Forwarded-For too if
        // HAProxy passed it on: that it does not is what the budgets below show.
        TRUST_PROXY: "loopback",
        RATE_LIMIT_ENABLED: "true",
        RATE_LIMIT_IP_PER_MINUTE: "5",
      }),
    );
    apiKey = await printedTestKey(gateway);

    echo = createServer((req, res) => {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify(req.url === "/ready" ? {} : req.headers));
    });
    acme = createServer((req, res) => {
      acmeSeen.push(req.url!);
      res.end(`token-for:${req.url}`);
    });
    const [echoPort, acmePort] = [await freePort(), await freePort()];
    await Promise.all([new Promise<void>((r) => echo.listen(echoPort, "127.0.0.1", r)), new Promise<void>((r) => acme.listen(acmePort, "127.0.0.1", r))]);

    const ports = { https: await freePort(), http: await freePort(), stats: await freePort(), acme: acmePort };
    [httpsPort, httpPort] = [ports.https, ports.http];
    const front = startHaproxy("gateway", Number(new URL(gateway.url).port), ports, { certificate: join(work, "gateway.pem") });
    frontLog = front.output;
    const echoPorts = { https: await freePort(), http: await freePort(), stats: await freePort(), acme: acmePort };
    echoHttpsPort = echoPorts.https;
    echoCertificate = join(work, "echo.pem");
    echoCa = makeCertificate(echoCertificate, "0x2001");
    const behind = startHaproxy("echo", echoPort, echoPorts, { certificate: echoCertificate, masterWorker: true });
    echoMaster = behind.child;
    await serverUp(front.statsUrl).catch((e) => Promise.reject(new Error(`${String(e)}\n${front.output()}`)));
    await serverUp(behind.statsUrl).catch((e) => Promise.reject(new Error(`${String(e)}\n${behind.output()}`)));
  });

  afterAll(async () => {
    // SIGTERM first: a master (-W) stops its worker; SIGKILL would orphan it.
    for (const { child } of haproxies) child.kill("SIGTERM");
    await Promise.all(haproxies.map(({ child }) => (child.exitCode === null && child.signalCode === null ? new Promise((r) => child.once("exit", r)) : undefined)));
    if (gateway && gateway.child.exitCode === null && gateway.child.signalCode === null) gateway.child.kill("SIGKILL");
    await gateway?.exited;
    await new Promise((r) => (echo ? echo.close(r) : r(undefined)));
    await new Promise((r) => (acme ? acme.close(r) : r(undefined)));
    await database?.drop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it("answers over https with HTTP/1.1 when the client offers only that, and says to stay on https", async () => {
    const res = await https(httpsPort, "/v1/status", { headers: { "x-api-key": apiKey } });
    expect(res.alpn).toBe("http/1.1");
    expect(res.status, res.body).toBe(200);
    expect(res.headers["strict-transport-security"]).toBe("max-age=31536000");
  });

  it("negotiates HTTP/2 by ALPN; a payment initialized over it has a checkout URL on PUBLIC_BASE_URL (https), served over it too", async () => {
    const session = await h2Session(httpsPort);
    try {
      expect(session.alpnProtocol).toBe("h2");
      const status = await h2Request(session, { ":path": "/v1/status", "x-api-key": apiKey });
      expect(status.status, status.body).toBe(200);

      const json = { ":method": "POST", "x-api-key": apiKey, "content-type": "application/json" };
      const channel = await h2Request(session, { ...json, ":path": "/api/payment-channels/create" }, JSON.stringify({ name: "Cards", provider: "sandbox" }));
      expect(channel.status, channel.body).toBe(201);
      const channelId = (JSON.parse(channel.body) as { channel: { id: number } }).channel.id;
      const init = await h2Request(
        session,
        { ...json, ":path": "/api/transactions/initialize" },
        JSON.stringify({ amount: 2500, email: "payer@tls.test", payment_channel_id: channelId }),
      );
      expect(init.status, init.body).toBe(200);
      const { authorization_url: authorizationUrl } = JSON.parse(init.body) as { authorization_url: string };
      expect(authorizationUrl.startsWith(`${PUBLIC_BASE_URL}/`), authorizationUrl).toBe(true);
      // The checkout page itself, through the same TLS connection.
      const page = await h2Request(session, { ":path": new URL(authorizationUrl).pathname });
      expect(page.status).toBe(200);
      expect(page.headers["content-type"]).toMatch(/^text\/html/);
    } finally {
      session.close();
    }
  });

  it("carries GraphQL over wss (HTTP/1.1 Upgrade) to the gateway", async () => {
    const client = createClient({
      url: `wss://127.0.0.1:${httpsPort}/graphql`,
      // ws with the test's CA: the certificate is checked as a browser would.
      webSocketImpl: class extends WebSocket {
        constructor(url: string, protocols?: string | string[]) {
          super(url, protocols, { ca });
        }
      },
      connectionParams: { "X-API-Key": apiKey },
      retryAttempts: 0,
    });
    try {
      const result = await new Promise<unknown>((resolve, reject) => {
        client.subscribe({ query: "{ __typename }" }, { next: resolve, error: reject, complete: () => {} });
      });
      expect(result).toEqual({ data: { __typename: "Query" } });
    } finally {
      await client.dispose();
    }
    // Balanced as a WebSocket (backend gateways_ws), not as a request (HAProxy logs it once it has closed).
    await until(frontLog, (log) => /gateways_ws\/gw1 \S+ 101 .*"GET \/graphql HTTP\/1\.1"/.test(log));
  });

  it("carries a WebSocket over HTTP/2 too (extended CONNECT, RFC 8441), which HAProxy hands to the gateway as an Upgrade", async () => {
    const session = await h2Session(httpsPort);
    try {
      expect(session.remoteSettings.enableConnectProtocol).toBe(true);
      const stream = session.request({
        ":method": "CONNECT",
        ":protocol": "websocket",
        ":path": "/graphql",
        ":scheme": "https",
        ":authority": `127.0.0.1:${httpsPort}`,
        "sec-websocket-version": "13",
        "sec-websocket-protocol": "graphql-transport-ws",
      });
      const status = await new Promise<number>((resolve, reject) => {
        stream.once("response", (h) => resolve(Number(h[":status"])));
        stream.once("error", reject);
      });
      expect(status).toBe(200);
      // WebSocket frames on the stream: a masked text frame from the client, unmasked ones back.
      const received: string[] = [];
      let buffered = Buffer.alloc(0);
      stream.on("data", (chunk: Buffer) => {
        buffered = Buffer.concat([buffered, chunk]);
        while (buffered.length >= 2) {
          let length = buffered[1]! & 0x7f;
          let offset = 2;
          if (length === 126) [length, offset] = [buffered.readUInt16BE(2), 4];
          if (buffered.length < offset + length) break;
          if ((buffered[0]! & 0x0f) === 1) received.push(buffered.subarray(offset, offset + length).toString());
          buffered = buffered.subarray(offset + length);
        }
      });
      const send = (message: unknown) => {
        const payload = Buffer.from(JSON.stringify(message));
        expect(payload.length).toBeLessThan(126);
        const mask = Buffer.from([1, 2, 3, 4]);
        stream.write(Buffer.concat([Buffer.from([0x81, 0x80 | payload.length]), mask, payload.map((b, i) => b ^ mask[i % 4]!)]));
      };
      send({ type: "connection_init", payload: { "X-API-Key": apiKey } });
      await until(() => received, (r) => r.length >= 1);
      expect(JSON.parse(received[0]!)).toMatchObject({ type: "connection_ack" });
      send({ id: "1", type: "subscribe", payload: { query: "{ __typename }" } });
      await until(() => received, (r) => r.length >= 2);
      expect(JSON.parse(received[1]!)).toEqual({ id: "1", type: "next", payload: { data: { __typename: "Query" } } });
      stream.close();
    } finally {
      session.close();
    }
    await until(frontLog, (log) => /gateways_ws\/gw1 \S+ 101 .*"GET https:\/\/[^"]+\/graphql HTTP\/2\.0"/.test(log));
  });

  it("refuses TLS below 1.2", async () => {
    const handshake = (version: "TLSv1.1" | "TLSv1.2") =>
      new Promise<string>((resolve) => {
        // SECLEVEL=0 lets this client offer TLS 1.1 at all (OpenSSL 3 refuses it by default): the refusal is HAProxy's.
        const socket = tlsConnect({ host: "127.0.0.1", port: httpsPort, ca, minVersion: version, maxVersion: version, ciphers: "DEFAULT:@SECLEVEL=0" }, () => {
          resolve(socket.getProtocol() ?? "none");
          socket.end();
        });
        socket.on("error", (error) => resolve(`refused: ${(error as NodeJS.ErrnoException).code ?? error.message}`));
      });
    expect(await handshake("TLSv1.2")).toBe("TLSv1.2");
    expect(await handshake("TLSv1.1")).toMatch(/^refused/);
  });

  it("serves a renewed certificate after a reload (SIGHUP, what the renewal hook sends), without a restart", async () => {
    expect(await servedSerial(echoHttpsPort)).toBe("2001");
    const pid = echoMaster.pid;
    const renewed = makeCertificate(echoCertificate, "0x2002");
    // Until the reload, HAProxy keeps the certificate it loaded.
    expect(await servedSerial(echoHttpsPort)).toBe("2001");
    echoMaster.kill("SIGHUP");
    await until(() => servedSerial(echoHttpsPort).catch(() => "unreachable"), (serial) => serial === "2002");
    expect(echoMaster.pid).toBe(pid);
    expect(echoMaster.exitCode).toBeNull();
    echoCa = renewed;
  });

  it("forwards X-Forwarded-Proto https and the client's address, dropping the X-Forwarded-* a client sent", async () => {
    const res = await https(echoHttpsPort, "/headers", {
      ca: echoCa,
      localAddress: "127.0.0.2",
      headers: { "x-forwarded-for": "203.0.113.9", "x-forwarded-proto": "http", "x-forwarded-host": "evil.test", "x-forwarded-port": "80", forwarded: "for=203.0.113.9;proto=http" },
    });
    expect(res.status).toBe(200);
    const seen = JSON.parse(res.body) as IncomingHttpHeaders;
    expect(seen["x-forwarded-proto"]).toBe("https");
    expect(seen["x-forwarded-for"]).toBe("127.0.0.2");
    expect(seen["x-forwarded-host"]).toBeUndefined();
    expect(seen["x-forwarded-port"]).toBeUndefined();
    expect(seen.forwarded).toBeUndefined();
  });

  it("the gateway, trusting HAProxy, counts each client's address, and a client's own X-Forwarded-For buys it no fresh budget", async () => {
    // Requests without a key spend their address's budget (RATE_LIMIT_IP_PER_MINUTE=5).
    const remaining = async (from: string, headers: Record<string, string> = {}) => {
      const res = await https(httpsPort, "/v1/status", { localAddress: from, headers });
      expect(res.status).toBe(401);
      return Number(res.headers["x-ratelimit-remaining"]);
    };
    expect(await remaining("127.0.0.2")).toBe(4);
    expect(await remaining("127.0.0.2")).toBe(3);
    expect(await remaining("127.0.0.3")).toBe(4);
    expect(await remaining("127.0.0.2", { "x-forwarded-for": "198.51.100.7" })).toBe(2);
  });

  it("redirects plain HTTP to the same path and query on https (301)", async () => {
    const res = await http(httpPort, "/pay/some-link?ref=abc", { host: HOST });
    expect(res.status).toBe(301);
    expect(res.headers.location).toBe(`https://${HOST}/pay/some-link?ref=abc`);
    // An ACME-looking path elsewhere is redirected like any other.
    expect((await http(httpPort, "/v1/.well-known/acme-challenge/x", { host: HOST })).status).toBe(301);
  });

  it("passes ACME's HTTP-01 challenges on plain HTTP to the ACME server instead of redirecting them", async () => {
    const res = await http(httpPort, "/.well-known/acme-challenge/token-123", { host: HOST });
    expect(res.status).toBe(200);
    expect(res.body).toBe("token-for:/.well-known/acme-challenge/token-123");
    expect(acmeSeen).toEqual(["/.well-known/acme-challenge/token-123"]);
  });
});
