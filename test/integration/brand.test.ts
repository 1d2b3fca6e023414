import { crc32 } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { graphql } from "../gql/index.ts";
import { apiClient, bearerClient, startTestGateway, type TestGateway, type TestMerchant } from "../support/gateway.ts";
import { solidPng } from "../support/png.ts";

/**
 * A merchant's brand (issue 25): signed-in owners (never an API key: the brand spans both modes, issue 35) set
 * display name, accent colour, support e-mail and a logo over GraphQL and PUT /v1/brand/logo; everyone of the
 * merchant reads it; the logo is served, same-origin and inert, at a
 * path that changes with it; the checkout reads it in one statement without the logo's bytes.
 */
const Brand = graphql(`
  query BrandSettings {
    brand { displayName merchantName accentColor supportEmail logoUrl logoType logoSize }
  }
`);

const UpdateBrand = graphql(`
  mutation BrandUpdate($input: UpdateBrandInput!) {
    updateBrand(input: $input) {
      __typename
      ... on Brand { displayName merchantName accentColor supportEmail logoUrl logoType logoSize }
      ...FieldFailure
    }
  }
`);

const PNG = solidPng(4, 2, [0x1a, 0x56, 0xdb]);
const GIF = Buffer.concat([Buffer.from("GIF89a", "latin1"), Buffer.from([1, 0, 1, 0, 0x80, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0x2c, 0, 0, 0, 0, 1, 0, 1, 0, 0, 2, 2, 0x44, 1, 0, 0x3b])]);
const SVG = Buffer.from(`<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><script>alert(1)</script></svg>`);
/** SOI, APP0 (JFIF), a 1x1 frame header (SOF0: its size is read before anything else), EOI. */
const JPEG = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 0x10, ...Buffer.from("JFIF\0", "latin1"), 1, 1, 0, 0, 1, 0, 1, 0, 0, 0xff, 0xc0, 0, 11, 8, 0, 1, 0, 1, 1, 1, 0x11, 0, 0xff, 0xd9]);

/** A 1x1 lossless WebP. */
const WEBP = Buffer.from("UklGRhoAAABXRUJQVlA4TA0AAAAvAAAAEAcQERGIiP4HAA==", "base64");

/** A valid PNG of exactly `size` bytes: a private ancillary chunk ("prVt") pads it, placed before IEND. */
function pngOfSize(size: number): Buffer {
  const iend = PNG.subarray(PNG.length - 12);
  const padding = size - PNG.length - 12;
  const chunk = Buffer.alloc(12 + padding);
  chunk.writeUInt32BE(padding, 0);
  chunk.write("prVt", 4, "latin1");
  return Buffer.concat([PNG.subarray(0, PNG.length - 12), withCrc(chunk), iend]);
}

function withCrc(chunk: Buffer): Buffer {
  chunk.writeUInt32BE(crc32(chunk.subarray(4, chunk.length - 4)), chunk.length - 4);
  return chunk;
}

describe("brand settings", () => {
  let gw: TestGateway;
  let merchant: TestMerchant;
  let other: TestMerchant;
  let viewerToken: string;
  let developerToken: string;
  let ownerToken: string;
  const statements: string[] = [];
  let recording = false;

  const tokenOf = async (user: { email: string; password: string }) => {
    const res = await apiClient(gw.url).post("/v1/auth/login", { email: user.email, password: user.password });
    expect(res.status, res.text).toBe(200);
    return res.body.data.access_token as string;
  };
  const upload = (bytes: Buffer, credential: Record<string, string>, type = "image/png") =>
    apiClient(gw.url).raw("/v1/brand/logo", { method: "PUT", headers: { "content-type": type, ...credential }, body: new Uint8Array(bytes) });
  /** A signed-in owner of the merchant, in test mode: who changes the brand. */
  const asOwner = async (m: TestMerchant = merchant) => ({ authorization: `Bearer ${await gw.signIn(m.id, "owner")}` });
  const update = async (input: Record<string, unknown>, client?: ReturnType<typeof apiClient>) => {
    client ??= bearerClient(gw.url, ownerToken);
    const res = await client.graphql(UpdateBrand, { input });
    expect(res.status, res.text).toBe(200);
    return res.body;
  };
  const failure = async (input: Record<string, unknown>) => (await update(input)).data?.updateBrand as { __typename: string; code: string; field: string; message: string };

  beforeAll(async () => {
    // No job runner: its polls would land in the statements counted on a busy machine.
    gw = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false", JOBS_ENABLED: "false" }, onQuery: (sql) => recording && statements.push(sql) });
    [merchant, other] = await Promise.all([gw.createMerchant("Duka la Mama"), gw.createMerchant("Other Shop")]);
    const [viewer, developer, owner] = await Promise.all([gw.createUser(merchant.id, "viewer"), gw.createUser(merchant.id, "developer"), gw.createUser(merchant.id, "owner")]);
    [viewerToken, developerToken, ownerToken] = await Promise.all([tokenOf(viewer), tokenOf(developer), tokenOf(owner)]);
  });
  afterAll(() => gw?.close());

  it("starts from the merchant's name and the page's defaults", async () => {
    const res = await apiClient(gw.url, merchant.testKey).graphql(Brand);
    expect(res.body.data?.brand).toEqual({ displayName: null, merchantName: "Duka la Mama", accentColor: null, supportEmail: null, logoUrl: null, logoType: null, logoSize: null });
    expect(await gw.gateway.services.brand.checkoutBrand(merchant.id)).toEqual({ displayName: "Duka la Mama", accentColor: null, logoUrl: null, supportEmail: null });
  });

  it("an owner sets name, colour, e-mail and logo; every user of the merchant reads them; the checkout gets them in one statement without the bytes", async () => {
    const set = await update({ displayName: "  Mama's Duka  ", accentColor: "#1A56DB", supportEmail: "help@duka.test" }, bearerClient(gw.url, ownerToken));
    expect(set.data?.updateBrand).toMatchObject({ __typename: "Brand", displayName: "Mama's Duka", accentColor: "#1a56db", supportEmail: "help@duka.test", logoUrl: null });

    const uploaded = await upload(PNG, await asOwner(), "application/octet-stream");
    expect(uploaded.status, uploaded.text).toBe(200);
    const logoUrl = uploaded.body.data.logo_url as string;
    expect(logoUrl).toMatch(new RegExp(`^/brand/${merchant.id}/logo/[0-9a-f]{64}$`));
    expect(uploaded.body.data).toMatchObject({ display_name: "Mama's Duka", logo_type: "image/png", logo_size: PNG.length });

    // A viewer, a developer and the other mode's key read the same brand: one per merchant.
    for (const client of [bearerClient(gw.url, viewerToken), bearerClient(gw.url, developerToken), apiClient(gw.url, merchant.liveKey)]) {
      const read = await client.graphql(Brand);
      expect(read.body.data?.brand).toEqual({ displayName: "Mama's Duka", merchantName: "Duka la Mama", accentColor: "#1a56db", supportEmail: "help@duka.test", logoUrl, logoType: "image/png", logoSize: PNG.length });
    }

    statements.length = 0;
    recording = true;
    const brand = await gw.gateway.services.brand.checkoutBrand(merchant.id);
    recording = false;
    expect(brand).toEqual({ displayName: "Mama's Duka", accentColor: "#1a56db", logoUrl, supportEmail: "help@duka.test" });
    expect(statements).toHaveLength(1);
    expect(statements[0]).not.toMatch(/b\.logo\b(?!_)/);

    // The logo itself: public, the stored bytes and type, inert and cached forever (its URL changes with it).
    const logo = await fetch(`${gw.url}${logoUrl}`);
    expect(logo.status).toBe(200);
    expect(Buffer.from(await logo.arrayBuffer()).equals(PNG)).toBe(true);
    expect(logo.headers.get("content-type")).toBe("image/png");
    expect(logo.headers.get("x-content-type-options")).toBe("nosniff");
    expect(logo.headers.get("content-security-policy")).toBe("default-src 'none'; sandbox");
    expect(logo.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");

    // A new logo is a new URL; the old one is gone.
    // (As curl --data-binary sends it: the declared type is not what decides.)
    const replaced = await upload(JPEG, await asOwner(), "application/x-www-form-urlencoded");
    expect(replaced.status, replaced.text).toBe(200);
    expect(replaced.body.data).toMatchObject({ logo_type: "image/jpeg", logo_size: JPEG.length });
    expect(replaced.body.data.logo_url).not.toBe(logoUrl);
    expect((await fetch(`${gw.url}${logoUrl}`)).status).toBe(404);
    const jpeg = await fetch(`${gw.url}${replaced.body.data.logo_url}`);
    expect([jpeg.status, jpeg.headers.get("content-type")]).toEqual([200, "image/jpeg"]);
    const webp = await upload(WEBP, await asOwner(), "image/webp");
    expect([webp.status, webp.body.data?.logo_type, webp.body.data?.logo_size], webp.text).toEqual([200, "image/webp", WEBP.length]);
  });

  it("a field left out is unchanged, an empty one is cleared; removeLogo deletes the logo and its URL", async () => {
    await update({ displayName: "Keep Me", accentColor: "#0b5394", supportEmail: "a@b.test" });
    const logoUrl = (await upload(PNG, await asOwner())).body.data.logo_url as string;
    const partial = await update({ supportEmail: "" });
    expect(partial.data?.updateBrand).toMatchObject({ displayName: "Keep Me", accentColor: "#0b5394", supportEmail: null, logoUrl });

    const removed = await update({ removeLogo: true, displayName: null });
    expect(removed.data?.updateBrand).toMatchObject({ displayName: null, accentColor: "#0b5394", logoUrl: null, logoType: null, logoSize: null });
    const gone = await fetch(`${gw.url}${logoUrl}`);
    expect([gone.status, (await gone.json()).code]).toEqual([404, "not_found"]);
    expect(await gw.gateway.services.brand.checkoutBrand(merchant.id)).toEqual({ displayName: "Duka la Mama", accentColor: "#0b5394", logoUrl: null, supportEmail: null });
  });

  it("refuses a logo that is not a complete PNG, JPEG or WebP of at most 256 KB, whatever its declared type", async () => {
    const refusals: [string, Buffer, string, RegExp][] = [
      ["GIF", GIF, "image/gif", /must be a PNG, JPEG or WebP image/],
      ["SVG declared as PNG", SVG, "image/png", /must be a PNG, JPEG or WebP image/],
      ["PNG header on junk", Buffer.concat([PNG.subarray(0, 8), Buffer.from("this is not an image at all, only text")]), "image/png", /starts like a PNG image but is not a complete, valid one/],
      ["PNG with a broken CRC", Buffer.concat([PNG.subarray(0, 30), Buffer.from([PNG[30]! ^ 0xff]), PNG.subarray(31)]), "image/png", /not a complete, valid one/],
      ["WebP cut short", WEBP.subarray(0, 30), "image/webp", /starts like a WEBP image but is not a complete, valid one/],
      ["JPEG without its end", JPEG.subarray(0, JPEG.length - 2), "image/jpeg", /starts like a JPEG image/],
      ["empty", Buffer.alloc(0), "image/png", /is empty/],
      ["256 KB + 1", pngOfSize(262_145), "image/png", /is 262,145 bytes; at most 262,144 bytes \(256 KB\)/],
      ["NUL bytes", Buffer.alloc(1000), "image/png", /must be a PNG, JPEG or WebP image/],
    ];
    for (const [name, bytes, type, message] of refusals) {
      const res = await upload(bytes, await asOwner(), type);
      expect([name, res.status, res.body?.status, res.body?.code], res.text).toEqual([name, 400, "error", "validation_failed"]);
      expect(res.body.message, name).toMatch(/^logo: /);
      expect(res.body.message, name).toMatch(message);
    }
    // Exactly 256 KB is fine; far past the body limit is the 413 envelope, never a 500.
    const atLimit = await upload(pngOfSize(262_144), await asOwner());
    expect([atLimit.status, atLimit.body.data.logo_size], atLimit.text).toEqual([200, 262_144]);
    const absurd = await upload(Buffer.alloc(3 * 1024 * 1024, 0x89), await asOwner());
    expect([absurd.status, absurd.body?.code]).toEqual([413, "payload_too_large"]);
  });

  it("refuses a bad name, colour (saying the contrast found) or e-mail, naming the field; NUL and control characters are 400s", async () => {
    const cases: [Record<string, unknown>, string, RegExp][] = [
      [{ accentColor: "#ffcc00" }, "accentColor", /^accentColor: #ffcc00 has a contrast ratio of 1\.51:1 against white text; at least 4\.5:1 is needed/],
      [{ accentColor: "#777777" }, "accentColor", /contrast ratio of 4\.47:1/],
      [{ accentColor: "red" }, "accentColor", /#rrggbb/],
      [{ accentColor: "#12345" }, "accentColor", /#rrggbb/],
      [{ displayName: "x".repeat(101) }, "displayName", /1 to 100 characters/],
      [{ displayName: "Mama\u0085Duka" }, "displayName", /control characters/],
      [{ displayName: "Mama\u202eakuD" }, "displayName", /control characters/],
      [{ supportEmail: "not an address" }, "supportEmail", /valid e-mail address/],
      [{ supportEmail: `${"a".repeat(250)}@x.test` }, "supportEmail", /at most 254/],
    ];
    for (const [input, field, message] of cases) {
      const result = await failure(input);
      expect([JSON.stringify(input), result.__typename, result.code, result.field]).toEqual([JSON.stringify(input), "ValidationError", "validation_failed", field]);
      expect(result.message).toMatch(message);
    }
    // A colour just dark enough passes (#767676 is 4.54:1), and a 100-character name.
    expect((await update({ accentColor: "#767676", displayName: "é".repeat(100) })).data?.updateBrand).toMatchObject({ accentColor: "#767676" });
    // NUL is refused before any resolver, as everywhere in GraphQL.
    const nul = await update({ displayName: "Mama\u0000" });
    expect(nul.errors?.[0]?.extensions?.code).toBe("validation_failed");
    expect(nul.errors?.[0]?.message).toMatch(/displayName/);
  });

  it("only signed-in owners change it: viewers, developers and API keys of either mode are refused, over GraphQL and the upload", async () => {
    // Before issue 35 an API key acted as an owner and could change the brand; the brand is the merchant's in both
    // modes, so now no key can (a test key would change live checkout pages).
    const before = (await apiClient(gw.url, merchant.testKey).graphql(Brand)).body.data?.brand;
    const refused: [string, Record<string, string>][] = [
      ["viewer", { authorization: `Bearer ${viewerToken}` }],
      ["developer", { authorization: `Bearer ${developerToken}` }],
      ["test key", { "x-api-key": merchant.testKey }],
      ["live key", { "x-api-key": merchant.liveKey }],
    ];
    for (const [who, credential] of refused) {
      const res = await apiClient(gw.url).graphql(UpdateBrand, { input: { displayName: "Hijacked" } }, credential);
      expect([who, res.body.errors?.[0]?.extensions?.code], res.text).toEqual([who, "forbidden"]);
      const put = await upload(PNG, credential);
      expect([who, put.status, put.body.status, put.body.code], put.text).toEqual([who, 403, "error", "forbidden"]);
    }
    const anonymous = await upload(PNG, {});
    expect([anonymous.status, anonymous.body.code]).toEqual([401, "invalid_api_key"]);
    expect((await apiClient(gw.url, merchant.testKey).graphql(Brand)).body.data?.brand).toEqual(before);
  });

  it("saves a new merchant's first brand from several requests at once, each told the truth", async () => {
    const fresh = await gw.createMerchant("Fresh Shop");
    const client = bearerClient(gw.url, await gw.signIn(fresh.id, "owner"));
    const names = ["One", "Two", "Three", "Four", "Five"];
    const results = await Promise.all(names.map((displayName) => update({ displayName }, client)));
    expect(results.map((r) => (r.data?.updateBrand as { __typename: string }).__typename)).toEqual(names.map(() => "Brand"));
    expect(names).toContain((await client.graphql(Brand)).body.data?.brand.displayName);
  });

  it("keeps tenants apart: another merchant sees its own brand and cannot reach this one's logo under its id", async () => {
    const mine = (await upload(PNG, await asOwner())).body.data.logo_url as string;
    await update({ displayName: "Only Mine" });
    const theirs = await apiClient(gw.url, other.testKey).graphql(Brand);
    expect(theirs.body.data?.brand).toMatchObject({ displayName: null, merchantName: "Other Shop", logoUrl: null });
    await update({ displayName: "Theirs" }, bearerClient(gw.url, await gw.signIn(other.id, "owner")));
    expect((await apiClient(gw.url, merchant.testKey).graphql(Brand)).body.data?.brand?.displayName).toBe("Only Mine");

    const hash = mine.split("/").pop()!;
    for (const path of [`/brand/${other.id}/logo/${hash}`, `/brand/${merchant.id}/logo/${"0".repeat(64)}`, `/brand/${merchant.id}/logo/${hash.toUpperCase()}`, `/brand/abc/logo/${hash}`, `/brand/99999999999/logo/${hash}`]) {
      const res = await fetch(`${gw.url}${path}`);
      expect([path, res.status, (await res.json()).code]).toEqual([path, 404, "not_found"]);
    }
  });
});
