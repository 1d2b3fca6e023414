import { describe, expect, it } from "vitest";
import type { LookupAddress } from "node:dns";
import { ValidationError } from "../../src/errors.ts";
import { checkOutboundUrl, guardedLookup, isPublicAddress } from "../../src/security/url-guard.ts";

/** No test here touches real DNS: IP literals resolve locally, host names go through an injected lookup. */
const strict = { requireHttps: true, allowPrivate: false };
const lookupTo = (...addresses: string[]) => async () => addresses;

describe("isPublicAddress", () => {
  it.each([
    ["8.8.8.8", true],
    ["1.1.1.1", true],
    ["172.32.0.1", true],
    ["100.128.0.1", true],
    ["2606:4700:4700::1111", true],
    ["::ffff:8.8.8.8", true],
    ["127.0.0.1", false],
    ["127.255.255.254", false],
    ["10.0.0.5", false],
    ["172.16.0.1", false],
    ["172.31.255.255", false],
    ["192.168.1.1", false],
    ["169.254.169.254", false],
    ["100.64.0.1", false],
    ["100.100.100.200", false],
    ["0.0.0.0", false],
    ["224.0.0.1", false],
    ["240.0.0.1", false],
    ["255.255.255.255", false],
    ["::1", false],
    ["::", false],
    ["fc00::1", false],
    ["fd00:ec2::254", false],
    ["fe80::1", false],
    ["fe80::1%eth0", false],
    ["ff02::1", false],
    ["::ffff:127.0.0.1", false],
    ["::ffff:7f00:1", false],
    ["::ffff:169.254.169.254", false],
    ["64:ff9b::a00:5", false], // NAT64 of 10.0.0.5
    ["2002:7f00:1::", false], // 6to4 of 127.0.0.1
    ["not-an-ip", false],
    ["", false],
  ])("%s -> %s", (ip, expected) => {
    expect(isPublicAddress(ip)).toBe(expected);
  });
});

describe("checkOutboundUrl", () => {
  it.each([
    ["http://hooks.example.com/x", /must use https/],
    ["https://127.0.0.1/x", /private, loopback or reserved/],
    ["https://localhost/x", /localhost/],
    ["https://api.localhost/x", /localhost/],
    ["https://169.254.169.254/latest/meta-data/", /private, loopback or reserved/],
    ["https://10.0.0.5/x", /private, loopback or reserved/],
    ["https://[::1]/x", /private, loopback or reserved/],
    ["https://[::ffff:127.0.0.1]/x", /private, loopback or reserved/],
    ["https://0x7f.1/x", /private, loopback or reserved/],
    ["https://user:pass@hooks.example.com/x", /username or password/],
    ["ftp://hooks.example.com/x", /http or https/],
    ["not a url", /whitespace/],
    ["garbage", /not a valid URL/],
    ["https://hooks.exa\nmple.com/x", /whitespace or control/],
    ["https://hooks.example.com/\0", /whitespace or control/],
    [`https://hooks.example.com/${"a".repeat(2048)}`, /at most 2048/],
  ])("refuses %j", async (url, reason) => {
    const attempt = checkOutboundUrl(url, { ...strict, lookup: lookupTo("93.184.215.14") });
    await expect(attempt).rejects.toBeInstanceOf(ValidationError);
    await expect(attempt).rejects.toThrow(reason);
    await expect(attempt).rejects.toThrow(/^url: /);
  });

  it("accepts a public https URL and returns it parsed", async () => {
    const url = await checkOutboundUrl("https://hooks.example.com/payments?x=1", { ...strict, lookup: lookupTo("93.184.215.14") });
    expect(url.href).toBe("https://hooks.example.com/payments?x=1");
  });

  it("refuses a host name that resolves to a private address, even among public ones", async () => {
    await expect(checkOutboundUrl("https://internal.example.com/", { ...strict, lookup: lookupTo("10.1.2.3") })).rejects.toThrow(
      /private, loopback or reserved/,
    );
    await expect(
      checkOutboundUrl("https://mixed.example.com/", { ...strict, lookup: lookupTo("93.184.215.14", "127.0.0.1") }),
    ).rejects.toThrow(/private, loopback or reserved/);
  });

  it("refuses a host name that does not resolve", async () => {
    const failing = async () => {
      throw Object.assign(new Error("getaddrinfo ENOTFOUND"), { code: "ENOTFOUND" });
    };
    await expect(checkOutboundUrl("https://nowhere.invalid/", { ...strict, lookup: failing })).rejects.toThrow(/does not resolve/);
    await expect(checkOutboundUrl("https://empty.example.com/", { ...strict, lookup: lookupTo() })).rejects.toThrow(/does not resolve/);
  });

  it("allows private and unresolvable hosts when allowPrivate is set, with https not required", async () => {
    const relaxed = { requireHttps: false, allowPrivate: true };
    expect((await checkOutboundUrl("http://127.0.0.1:9/x", relaxed)).port).toBe("9");
    const failing = async (): Promise<string[]> => {
      throw new Error("ENOTFOUND");
    };
    expect((await checkOutboundUrl("http://receiver.internal/x", { ...relaxed, lookup: failing })).hostname).toBe("receiver.internal");
    await expect(checkOutboundUrl("ftp://127.0.0.1/x", relaxed)).rejects.toThrow(/http or https/);
  });

  it("names the field it checked, and the setting that lifts a private-address refusal only when asked to", async () => {
    const named = checkOutboundUrl("http://127.0.0.1:9/x", { requireHttps: false, allowPrivate: false, field: "validation_url", suggestSetting: true });
    await expect(named).rejects.toThrow(/^validation_url: must not point to a private, loopback or reserved address; set ALLOW_PRIVATE_URLS=true to allow it in test mode$/);
    await expect(checkOutboundUrl("http://localhost/x", { requireHttps: false, allowPrivate: false, suggestSetting: true })).rejects.toThrow(/ALLOW_PRIVATE_URLS/);
    await expect(checkOutboundUrl("https://127.0.0.1/x", strict)).rejects.not.toThrow(/ALLOW_PRIVATE_URLS/);
    // Only the private-address refusals: the setting cannot fix a bad scheme.
    await expect(checkOutboundUrl("ftp://127.0.0.1/x", { ...strict, suggestSetting: true })).rejects.not.toThrow(/ALLOW_PRIVATE_URLS/);
  });
});

describe("guardedLookup", () => {
  const lookup = (allowPrivate: boolean, all: boolean) =>
    new Promise<{ error: NodeJS.ErrnoException | null; address: string | LookupAddress[]; family?: number }>((resolve) =>
      guardedLookup(allowPrivate)("127.0.0.1", { all }, (error, address, family) => resolve({ error, address, family })),
    );

  it("refuses a loopback address when private addresses are not allowed", async () => {
    for (const all of [false, true]) {
      const { error } = await lookup(false, all);
      expect(error?.code).toBe("EADDRNOTALLOWED");
      expect(error?.message).toMatch(/address not allowed/);
    }
  });

  it("passes it through in both callback shapes when they are", async () => {
    expect(await lookup(true, false)).toEqual({ error: null, address: "127.0.0.1", family: 4 });
    expect(await lookup(true, true)).toEqual({ error: null, address: [{ address: "127.0.0.1", family: 4 }], family: undefined });
  });
});
