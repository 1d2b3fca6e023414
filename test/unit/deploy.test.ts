import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { repoRoot } from "../support/process.ts";

/**
 * deploy/: HAProxy accepts its configuration as shipped, and the files agree with one another where a
 * mismatch would lose requests: the gateway's drain outlasts HAProxy's detection of a draining instance,
 * and Docker's and systemd's stop timeouts outlast the gateway's own SHUTDOWN_TIMEOUT_MS.
 * (test/postgres/haproxy-rolling.test.ts runs the same configuration in front of three gateways.)
 */
const deploy = (file: string) => join(repoRoot, "deploy", file);
const haproxyBin = existsSync("/usr/sbin/haproxy") ? "/usr/sbin/haproxy" : "haproxy";
const haproxyConfig = readFileSync(deploy("haproxy.cfg"), "utf8");
const composeText = readFileSync(deploy("compose.yaml"), "utf8");
/** One top-level service's block of deploy/compose.yaml (no YAML parser among the dependencies; the file keeps to plain keys). */
function service(name: string): string {
  const match = new RegExp(`^  ${name}:\\n((?:    .*\\n|\\s*\\n)+)`, "m").exec(composeText);
  if (!match) throw new Error(`no service ${name} in deploy/compose.yaml`);
  return match[1]!;
}
const setting = (block: string, key: string) => {
  const match = new RegExp(`^\\s+${key}: "?([^"\\n]+)"?$`, "m").exec(block);
  if (!match) throw new Error(`no ${key} in ${block}`);
  return match[1]!;
};

function ms(duration: string): number {
  const match = /^(\d+)(ms|s)$/.exec(duration.trim());
  if (!match) throw new Error(`not a duration: ${duration}`);
  return Number(match[1]) * (match[2] === "s" ? 1000 : 1);
}

/** haproxy -c loads the certificate too: a self-signed one (chain then key in one PEM, as HAProxy wants it). */
const certDir = mkdtempSync(join(tmpdir(), "deploy-test-"));
const certificate = join(certDir, "gateway.pem");
execFileSync("openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj", "/CN=pay.example.test", "-keyout", join(certDir, "key.pem"), "-out", join(certDir, "cert.pem")], { stdio: "ignore" });
writeFileSync(certificate, readFileSync(join(certDir, "cert.pem"), "utf8") + readFileSync(join(certDir, "key.pem"), "utf8"));

describe("deploy/", () => {
  afterAll(() => rmSync(certDir, { recursive: true, force: true }));

  it("haproxy -c accepts deploy/haproxy.cfg, with its defaults and with Compose's settings (a certificate provided)", () => {
    const haproxyService = service("haproxy");
    const compose = Object.fromEntries(
      ["GATEWAY_DNS", "GATEWAY_PORT", "HAPROXY_HTTPS_BIND", "HAPROXY_HTTP_BIND", "HAPROXY_STATS", "ACME_PORT"].map((key) => [key, setting(haproxyService, key)]),
    );
    for (const env of [{}, compose]) {
      const out = execFileSync(haproxyBin, ["-c", "-f", deploy("haproxy.cfg")], {
        env: { PATH: process.env.PATH ?? "", HAPROXY_CERT: certificate, ...env },
        encoding: "utf8",
        stdio: ["ignore", "pipe", "pipe"],
      });
      expect(out).toContain("Configuration file is valid");
    }
  });

  it("haproxy -c refuses to start without a certificate (no silent plain-HTTP fallback)", () => {
    expect(() =>
      execFileSync(haproxyBin, ["-c", "-f", deploy("haproxy.cfg")], { env: { PATH: process.env.PATH ?? "", HAPROXY_CERT: join(certDir, "missing.pem") }, stdio: "pipe" }),
    ).toThrow(/missing\.pem/);
  });

  it("Compose publishes 443 and 80 onto HAProxy's TLS and plain-HTTP binds, and mounts the certificate where HAPROXY_CERT says", () => {
    const haproxyService = service("haproxy");
    const port = (bind: string) => bind.replace(/^.*:/, "");
    expect(haproxyService).toContain(`- "443:${port(setting(haproxyService, "HAPROXY_HTTPS_BIND"))}"`);
    expect(haproxyService).toContain(`- "80:${port(setting(haproxyService, "HAPROXY_HTTP_BIND"))}"`);
    const cert = setting(haproxyService, "HAPROXY_CERT");
    const mount = /^\s+- (\S+):(\S+):ro$/m.exec(haproxyService.replace(/^.*haproxy\.cfg.*$/m, ""))!;
    expect(cert.startsWith(`${mount[2]}/`), `${cert} under ${mount[2]}`).toBe(true);
    // The gateway's public URL is https, and it trusts forwarded headers only from Compose's private network.
    expect(setting(service("gateway"), "PUBLIC_BASE_URL")).toMatch(/^\$\{PUBLIC_BASE_URL:\?/);
    expect(setting(service("gateway"), "TRUST_PROXY")).toBe("uniquelocal");
  });

  it("checks /ready, and the gateway's drain delay outlasts HAProxy taking a draining instance out", () => {
    expect(haproxyConfig).toMatch(/^\s+http-check send meth GET uri \/ready\b/m);
    expect(haproxyConfig).toMatch(/^\s+http-check expect status 200$/m);
    const [, inter, fall] = /^\s+default-server inter (\d+m?s) fall (\d+) rise \d+ check$/m.exec(haproxyConfig)!;
    const detection = ms(inter!) * Number(fall);
    expect(Number(setting(service("gateway"), "SHUTDOWN_DRAIN_DELAY_MS"))).toBeGreaterThan(detection);
    const unit = readFileSync(deploy("payment-gateway.service"), "utf8");
    expect(Number(/SHUTDOWN_DRAIN_DELAY_MS=(\d+)/.exec(unit)![1])).toBeGreaterThan(detection);
  });

  it("Docker and systemd wait longer than SHUTDOWN_TIMEOUT_MS before killing a draining gateway", () => {
    const gateway = service("gateway");
    expect(ms(setting(gateway, "stop_grace_period"))).toBeGreaterThan(Number(setting(gateway, "SHUTDOWN_TIMEOUT_MS")));
    const unit = readFileSync(deploy("payment-gateway.service"), "utf8");
    expect(Number(/^TimeoutStopSec=(\d+)$/m.exec(unit)![1]) * 1000).toBeGreaterThan(Number(/SHUTDOWN_TIMEOUT_MS=(\d+)/.exec(unit)![1]));
  });

  it("Compose runs PostgreSQL, Redis, gateway replicas built from this repository, and HAProxy with deploy/haproxy.cfg", () => {
    const services = /^services:\n([\s\S]*?)^\S/m.exec(composeText)![1]!;
    expect([...services.matchAll(/^  (\w+):$/gm)].map((m) => m[1]).sort()).toEqual(["gateway", "haproxy", "postgres", "redis"]);
    expect(setting(service("gateway"), "replicas")).toBe("${GATEWAY_REPLICAS:-3}");
    expect(setting(service("gateway"), "dockerfile")).toBe("deploy/Dockerfile");
    expect(service("haproxy")).toContain("- ./haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro");
    const dockerfile = readFileSync(deploy("Dockerfile"), "utf8");
    expect(dockerfile).toMatch(/RUN npm ci .*&& npm run build/);
    // Every path the image copies from the build context exists in the repository.
    for (const [, sources] of dockerfile.matchAll(/^COPY (?!--from)(.+) \S+$/gm)) {
      for (const source of sources!.split(" ")) expect(existsSync(join(repoRoot, source)), source).toBe(true);
    }
  });
});
