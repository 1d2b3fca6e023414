import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
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

describe("deploy/", () => {
  it("haproxy -c accepts deploy/haproxy.cfg, with its defaults and with Compose's settings", () => {
    for (const env of [{}, { GATEWAY_DNS: "gateway", GATEWAY_PORT: "3000", HAPROXY_BIND: ":8080", HAPROXY_STATS: ":8404" }]) {
      const out = execFileSync(haproxyBin, ["-c", "-f", deploy("haproxy.cfg")], { env: { PATH: process.env.PATH ?? "", ...env }, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
      expect(out).toContain("Configuration file is valid");
    }
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
