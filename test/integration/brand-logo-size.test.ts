import { crc32 } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { solidPng } from "../support/png.ts";

/**
 * Issue 35 item 14: a logo is refused by the pixel size its header claims (at most 4096 x 4096), before anything
 * decodes it, with a 400 naming `logo`; the byte limit stays. Crafted headers over the real upload route, for
 * each accepted format: PNG (IHDR), JPEG (SOFn) and WebP (VP8, VP8L, VP8X).
 */

/** A well-formed PNG (CRCs right) whose IHDR claims `width` x `height`; its pixel data is a 1x1 image's. */
function pngClaiming(width: number, height: number): Buffer {
  const png = Buffer.from(solidPng(1, 1, [0, 0, 0]));
  png.writeUInt32BE(width, 16);
  png.writeUInt32BE(height, 20);
  png.writeUInt32BE(crc32(png.subarray(12, 29)), 29); // IHDR's type and data
  return png;
}

/** A JPEG whose frame header (`sof`: SOF0 0xc0, progressive 0xc2 ...) claims `width` x `height`, after an APP0 segment. */
function jpegClaiming(width: number, height: number, sof = 0xc0): Buffer {
  const app0 = [0xff, 0xe0, 0, 0x10, ...Buffer.from("JFIF\0", "latin1"), 1, 1, 0, 0, 1, 0, 1, 0, 0];
  const frame = [0xff, sof, 0, 11, 8, height >> 8, height & 0xff, width >> 8, width & 0xff, 1, 1, 0x11, 0];
  return Buffer.from([0xff, 0xd8, ...app0, ...frame, 0xff, 0xd9]);
}

/** A RIFF WebP around one chunk. */
function webp(fourcc: string, payload: Buffer): Buffer {
  const chunk = Buffer.concat([Buffer.from(fourcc, "latin1"), Buffer.alloc(4), payload, Buffer.alloc(payload.length % 2)]);
  chunk.writeUInt32LE(payload.length, 4);
  const riff = Buffer.concat([Buffer.from("RIFF", "latin1"), Buffer.alloc(4), Buffer.from("WEBP", "latin1"), chunk]);
  riff.writeUInt32LE(riff.length - 8, 4);
  return riff;
}

/** Lossless (VP8L): the signature 0x2f, then width - 1 and height - 1 in 14 bits each. */
function webpLosslessClaiming(width: number, height: number): Buffer {
  const payload = Buffer.alloc(10);
  payload[0] = 0x2f;
  payload.writeUInt32LE(((width - 1) | ((height - 1) << 14)) >>> 0, 1);
  return webp("VP8L", payload);
}

/** Lossy (VP8): a 3-byte frame tag, the start code 9d 01 2a, then width and height in 14 bits each. */
function webpLossyClaiming(width: number, height: number): Buffer {
  const payload = Buffer.alloc(14);
  payload.set([0x9d, 0x01, 0x2a], 3);
  payload.writeUInt16LE(width, 6);
  payload.writeUInt16LE(height, 8);
  return webp("VP8 ", payload);
}

/** Extended (VP8X): flags, then the canvas's width - 1 and height - 1 in 24 bits each. */
function webpExtendedClaiming(width: number, height: number): Buffer {
  const payload = Buffer.alloc(10);
  payload.writeUIntLE(width - 1, 4, 3);
  payload.writeUIntLE(height - 1, 7, 3);
  return webp("VP8X", payload);
}

describe("logo pixel size", () => {
  let gw: TestGateway;
  let owner: Record<string, string>;

  beforeAll(async () => {
    gw = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false" } });
    const merchant = await gw.createMerchant("Big Logo Shop");
    const user = await gw.createUser(merchant.id, "owner");
    const login = await apiClient(gw.url).post("/v1/auth/login", { email: user.email, password: user.password });
    expect(login.status, login.text).toBe(200);
    owner = { authorization: `Bearer ${login.body.data.access_token}` };
  });
  afterAll(() => gw?.close());

  const upload = (bytes: Buffer, type: string) =>
    apiClient(gw.url).raw("/v1/brand/logo", { method: "PUT", headers: { "content-type": type, ...owner }, body: new Uint8Array(bytes) });

  it("refuses a header that claims more than 4096 pixels either way, in every accepted format, saying the size", async () => {
    const refusals: [string, Buffer, string, string][] = [
      ["PNG 100,000 x 100,000", pngClaiming(100_000, 100_000), "image/png", "logo: is 100,000x100,000 pixels; at most 4,096x4,096 is allowed"],
      ["PNG 4,097 wide", pngClaiming(4097, 1), "image/png", "logo: is 4,097x1 pixels; at most 4,096x4,096 is allowed"],
      ["PNG 4,097 tall", pngClaiming(1, 4097), "image/png", "logo: is 1x4,097 pixels; at most 4,096x4,096 is allowed"],
      ["PNG 2^31 - 1 square", pngClaiming(2 ** 31 - 1, 2 ** 31 - 1), "image/png", "logo: is 2,147,483,647x2,147,483,647 pixels; at most 4,096x4,096 is allowed"],
      ["JPEG baseline 65,535 square", jpegClaiming(65_535, 65_535), "image/jpeg", "logo: is 65,535x65,535 pixels; at most 4,096x4,096 is allowed"],
      ["JPEG progressive 5,000 x 10", jpegClaiming(5000, 10, 0xc2), "image/jpeg", "logo: is 5,000x10 pixels; at most 4,096x4,096 is allowed"],
      ["WebP lossless 16,384 square", webpLosslessClaiming(16_384, 16_384), "image/webp", "logo: is 16,384x16,384 pixels; at most 4,096x4,096 is allowed"],
      ["WebP lossy 10,000 x 20", webpLossyClaiming(10_000, 20), "image/webp", "logo: is 10,000x20 pixels; at most 4,096x4,096 is allowed"],
      ["WebP extended 100,000 square", webpExtendedClaiming(100_000, 100_000), "image/webp", "logo: is 100,000x100,000 pixels; at most 4,096x4,096 is allowed"],
    ];
    for (const [name, bytes, type, message] of refusals) {
      const res = await upload(bytes, type);
      expect([name, res.status, res.body?.status, res.body?.code, res.body?.message], res.text).toEqual([name, 400, "error", "validation_failed", message]);
    }
    // Nothing was stored.
    const brand = await apiClient(gw.url).post("/graphql", { query: "{ brand { logoUrl logoSize } }" }, owner);
    expect(brand.body).toEqual({ data: { brand: { logoUrl: null, logoSize: null } } });
  });

  it("refuses a header that does not give the size: a JPEG with no frame header, a zero height", async () => {
    const noFrame = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 0x10, ...Buffer.from("JFIF\0", "latin1"), 1, 1, 0, 0, 1, 0, 1, 0, 0, 0xff, 0xd9]);
    for (const [name, bytes, type] of [
      ["JPEG without SOF", noFrame, "image/jpeg"],
      ["JPEG height 0 (left to a DNL marker)", jpegClaiming(100, 0), "image/jpeg"],
      ["WebP lossy without its start code", webp("VP8 ", Buffer.alloc(14)), "image/webp"],
    ] as const) {
      const res = await upload(bytes, type);
      expect([name, res.status, res.body?.code], res.text).toEqual([name, 400, "validation_failed"]);
      expect(res.body.message, name).toMatch(/^logo: is a (JPEG|WEBP) image whose header does not give its width and height/);
    }
  });

  it("accepts up to 4096 x 4096 in every format, and keeps the byte limit", async () => {
    for (const [name, bytes, type] of [
      ["PNG 4,096 square", pngClaiming(4096, 4096), "image/png"],
      ["JPEG 4,096 x 1", jpegClaiming(4096, 1), "image/jpeg"],
      ["WebP lossless 4,096 square", webpLosslessClaiming(4096, 4096), "image/webp"],
      ["WebP lossy 4,096 x 300", webpLossyClaiming(4096, 300), "image/webp"],
      ["WebP extended 1 x 4,096", webpExtendedClaiming(1, 4096), "image/webp"],
    ] as const) {
      const res = await upload(bytes, type);
      expect([name, res.status, res.body?.data?.logo_type, res.body?.data?.logo_size], res.text).toEqual([name, 200, type, bytes.length]);
    }
    const tooManyBytes = await upload(Buffer.concat([pngClaiming(16, 16), Buffer.alloc(300 * 1024)]), "image/png");
    expect([tooManyBytes.status, tooManyBytes.body?.code]).toEqual([400, "validation_failed"]);
    expect(tooManyBytes.body.message).toMatch(/^logo: is 307,\d{3} bytes; at most 262,144 bytes/);
  });
});
