import { createHash } from "node:crypto";
import { isTimeZone } from "../../days.ts";
import { crc32 } from "node:zlib";
import { z } from "zod";
import type { Principal } from "../../auth.ts";
import { allows, refusal } from "../../authorization.ts";
import type { PrismaClient, Sql } from "../../db/database.ts";
import { GatewayError, ValidationError, isUniqueViolation } from "../../errors.ts";
import type { CheckoutBrand } from "../../checkout/page.ts";
import type { Prisma } from "../../db/generated/prisma/client.ts";
import { merchantNameOf } from "../merchants/profile.ts";

/** The largest logo a merchant may upload: a page header image, not a photo. */
export const MAX_LOGO_BYTES = 256 * 1024;
/**
 * The widest and tallest logo, in pixels: a page header needs far less, and a few compressed bytes can claim
 * 100,000 x 100,000 pixels (40 GB decoded) for every payer's browser to allocate.
 */
export const MAX_LOGO_SIDE = 4096;
export const MAX_DISPLAY_NAME = 100;
/** WCAG 2's AA threshold for normal text: the page puts white text on the accent colour. */
export const MIN_CONTRAST = 4.5;

export type LogoType = "image/png" | "image/jpeg" | "image/webp";

/** The media type the bytes really are, by their magic numbers (never the type a client declares); null for anything else. */
export function sniffLogoType(bytes: Uint8Array): LogoType | null {
  if (startsWith(bytes, 0, PNG_SIGNATURE)) return "image/png";
  if (startsWith(bytes, 0, [0xff, 0xd8, 0xff])) return "image/jpeg";
  if (startsWith(bytes, 0, ascii("RIFF")) && startsWith(bytes, 8, ascii("WEBP"))) return "image/webp";
  return null;
}

const ascii = (text: string) => [...text].map((c) => c.charCodeAt(0));
const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];
const startsWith = (bytes: Uint8Array, offset: number, values: number[]) => bytes.length >= offset + values.length && values.every((value, i) => bytes[offset + i] === value);

/**
 * Whether the bytes after the magic number hold together as that format (a PNG signature on junk does not):
 * PNG's chunks walked with their CRCs, from IHDR to a final IEND; JPEG from SOI to EOI; WebP's RIFF size and
 * first chunk. Not a decoder: the browser decodes, sandboxed, and only these three formats ever reach it.
 */
export function wellFormed(bytes: Uint8Array, type: LogoType): boolean {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (type === "image/png") {
    let offset = 8;
    let chunks = 0;
    while (offset + 12 <= bytes.length) {
      const length = view.getUint32(offset);
      const end = offset + 12 + length;
      if (end > bytes.length) return false;
      const typeAndData = bytes.subarray(offset + 4, offset + 8 + length);
      if (crc32(typeAndData) !== view.getUint32(offset + 8 + length)) return false;
      const name = String.fromCharCode(...bytes.subarray(offset + 4, offset + 8));
      if (chunks === 0 && (name !== "IHDR" || length !== 13 || view.getUint32(offset + 8) === 0 || view.getUint32(offset + 12) === 0)) return false;
      chunks++;
      offset = end;
      if (name === "IEND") return offset === bytes.length;
    }
    return false;
  }
  if (type === "image/jpeg") return bytes.length >= 4 && bytes[bytes.length - 2] === 0xff && bytes[bytes.length - 1] === 0xd9;
  // RIFF's size counts everything after its first 8 bytes; the first chunk is the image (lossy, lossless or extended).
  return bytes.length >= 20 && view.getUint32(4, true) === bytes.length - 8 && ["VP8 ", "VP8L", "VP8X"].some((fourcc) => startsWith(bytes, 12, ascii(fourcc)));
}

/**
 * The pixel size a well-formed logo declares in its header, read without decoding anything: PNG's IHDR, the
 * JPEG frame header (SOFn, found by walking the segments before the scan), the WebP bitstream's or VP8X's
 * canvas size. Null when the header does not say (a JPEG with no frame before its scan, or a height left to a
 * later DNL marker).
 */
export function logoDimensions(bytes: Uint8Array, type: LogoType): { width: number; height: number } | null {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (type === "image/png") return { width: view.getUint32(16), height: view.getUint32(20) }; // IHDR, checked by wellFormed
  if (type === "image/jpeg") {
    let offset = 2;
    while (offset + 4 <= bytes.length) {
      if (bytes[offset] !== 0xff) return null;
      const marker = bytes[offset + 1]!;
      if (marker === 0xff) {
        offset++; // fill byte
        continue;
      }
      // Markers without a length: TEM and RST0-7.
      if (marker === 0x01 || (marker >= 0xd0 && marker <= 0xd7)) {
        offset += 2;
        continue;
      }
      if (marker === 0xda || marker === 0xd9) return null; // the scan (or the end) before any frame header
      const length = view.getUint16(offset + 2);
      // SOF0-15, except DHT (C4), JPG (C8) and DAC (CC): precision, height, width.
      if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
        if (length < 8 || offset + 9 > bytes.length) return null;
        const height = view.getUint16(offset + 5);
        return height === 0 ? null : { width: view.getUint16(offset + 7), height };
      }
      if (length < 2) return null;
      offset += 2 + length;
    }
    return null;
  }
  // WebP: the first chunk's payload starts at 20 (wellFormed checked its fourcc and that 20 bytes are there).
  const fourcc = String.fromCharCode(...bytes.subarray(12, 16));
  if (fourcc === "VP8X" && bytes.length >= 30) {
    const u24 = (at: number) => bytes[at]! | (bytes[at + 1]! << 8) | (bytes[at + 2]! << 16);
    return { width: u24(24) + 1, height: u24(27) + 1 };
  }
  if (fourcc === "VP8L" && bytes.length >= 25 && bytes[20] === 0x2f) {
    const bits = view.getUint32(21, true);
    return { width: (bits & 0x3fff) + 1, height: ((bits >>> 14) & 0x3fff) + 1 };
  }
  // Lossy: a 3-byte frame tag, the start code 9d 01 2a, then 14-bit width and height (2 scaling bits each).
  if (fourcc === "VP8 " && bytes.length >= 30 && bytes[23] === 0x9d && bytes[24] === 0x01 && bytes[25] === 0x2a) {
    return { width: view.getUint16(26, true) & 0x3fff, height: view.getUint16(28, true) & 0x3fff };
  }
  return null;
}

/** WCAG 2 contrast ratio of a #rrggbb colour against white. */
export function contrastWithWhite(hex: string): number {
  const channel = (i: number) => {
    const c = parseInt(hex.slice(1 + 2 * i, 3 + 2 * i), 16) / 255;
    return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  };
  const luminance = 0.2126 * channel(0) + 0.7152 * channel(1) + 0.0722 * channel(2);
  return 1.05 / (luminance + 0.05);
}

/** Any control character (C0, DEL, C1) or a bidirectional override: a name is one line of plain text. */
const NAME_FORBIDDEN = /[\p{Cc}\u200E\u200F\u202A-\u202E\u2066-\u2069]/u;
const email = z.string().max(254, "must be at most 254 characters").pipe(z.email("must be a valid e-mail address"));

/** Text field rules: undefined leaves the stored value, null or blank clears it (the page's default returns). */
function displayNameOf(value: string | null | undefined): string | null | undefined {
  if (value === undefined) return undefined;
  const text = value?.trim() ?? "";
  if (text === "") return null;
  if (NAME_FORBIDDEN.test(text)) throw new ValidationError("displayName", "must not contain control characters (such as NUL or a line break)");
  if ([...text].length > MAX_DISPLAY_NAME) throw new ValidationError("displayName", `must be 1 to ${MAX_DISPLAY_NAME} characters`);
  return text;
}

function accentColorOf(value: string | null | undefined): string | null | undefined {
  if (value === undefined) return undefined;
  const text = value?.trim() ?? "";
  if (text === "") return null;
  if (!/^#[0-9a-fA-F]{6}$/.test(text)) throw new ValidationError("accentColor", "must be a colour written #rrggbb, e.g. #1a56db");
  const ratio = contrastWithWhite(text);
  if (ratio < MIN_CONTRAST) {
    // Rounded down, so a colour just under the threshold never reads as 4.50:1.
    const shown = (Math.floor(ratio * 100) / 100).toFixed(2);
    throw new ValidationError("accentColor", `${text} has a contrast ratio of ${shown}:1 against white text; at least ${MIN_CONTRAST}:1 is needed (choose a darker colour)`);
  }
  return text.toLowerCase();
}

function supportEmailOf(value: string | null | undefined, field = "supportEmail"): string | null | undefined {
  if (value === undefined) return undefined;
  const text = value?.trim() ?? "";
  if (text === "") return null;
  const parsed = email.safeParse(text);
  if (!parsed.success || NAME_FORBIDDEN.test(text)) throw new ValidationError(field, parsed.success ? "must be a valid e-mail address" : parsed.error.issues[0]!.message);
  return parsed.data;
}

/** A logo's bytes checked: present, small enough, really a PNG, JPEG or WebP, and at most MAX_LOGO_SIDE pixels each way. */
export function checkLogo(bytes: Uint8Array): { bytes: Uint8Array; type: LogoType; hash: string } {
  if (bytes.length === 0) throw new ValidationError("logo", "is empty; upload a PNG, JPEG or WebP image");
  if (bytes.length > MAX_LOGO_BYTES) throw new ValidationError("logo", `is ${bytes.length.toLocaleString("en")} bytes; at most ${MAX_LOGO_BYTES.toLocaleString("en")} bytes (256 KB) is allowed`);
  const type = sniffLogoType(bytes);
  if (!type) throw new ValidationError("logo", "must be a PNG, JPEG or WebP image (GIF, SVG and other formats are not accepted)");
  const format = type.slice(6).toUpperCase();
  if (!wellFormed(bytes, type)) throw new ValidationError("logo", `starts like a ${format} image but is not a complete, valid one; export it again`);
  // By the header alone, before anything decodes it (only payers' browsers ever do).
  const size = logoDimensions(bytes, type);
  if (!size || size.width === 0 || size.height === 0) throw new ValidationError("logo", `is a ${format} image whose header does not give its width and height; export it again`);
  if (size.width > MAX_LOGO_SIDE || size.height > MAX_LOGO_SIDE) {
    const side = MAX_LOGO_SIDE.toLocaleString("en");
    throw new ValidationError("logo", `is ${size.width.toLocaleString("en")}x${size.height.toLocaleString("en")} pixels; at most ${side}x${side} is allowed`);
  }
  return { bytes, type, hash: createHash("sha256").update(bytes).digest("hex") };
}

export interface BrandInput {
  merchantName?: string | null;
  displayName?: string | null;
  accentColor?: string | null;
  supportEmail?: string | null;
  removeLogo?: boolean | null;
  receiptsEnabled?: boolean | null;
  replyTo?: string | null;
  website?: string | null;
  timezone?: string | null;
  language?: string | null;
}

/** An IANA zone name the runtime knows (Africa/Nairobi, UTC); days.ts holds the day arithmetic in zones. */
export { isTimeZone };

function timezoneOf(value: string | null | undefined): string | undefined {
  if (value === undefined || value === null) return undefined;
  const text = value.trim();
  if (!isTimeZone(text)) throw new ValidationError("timezone", "must be an IANA time zone name, e.g. Africa/Nairobi or UTC");
  return text;
}

function languageOf(value: string | null | undefined): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (value !== "en" && value !== "sw") throw new ValidationError("language", "must be en (English) or sw (Swahili)");
  return value;
}

/** The shop's website: an https URL of at most 200 characters (payers are sent back to it). */
function websiteOf(value: string | null | undefined): string | null | undefined {
  if (value === undefined) return undefined;
  const text = value?.trim() ?? "";
  if (text === "") return null;
  if (text.length > 200 || !URL.canParse(text) || new URL(text).protocol !== "https:" || NAME_FORBIDDEN.test(text)) {
    throw new ValidationError("website", "must be an https:// address of at most 200 characters, e.g. https://shop.example");
  }
  return new URL(text).href;
}

/** What a message from the merchant needs: its brand, where replies go, its zone and language, whether payers get receipts. */
export interface MailIdentity {
  name: string;
  accentColor: string | null;
  supportEmail: string | null;
  replyTo: string | null;
  website: string | null;
  receiptsEnabled: boolean;
  logoHash: string | null;
  timezone: string;
  language: string;
}

/** The merchant's brand settings as an owner edits them (null: not set, the page's default applies). */
export interface BrandSettings {
  merchantId: number;
  /** The merchant's own name: what payers see while displayName is null. */
  merchantName: string;
  displayName: string | null;
  accentColor: string | null;
  supportEmail: string | null;
  logoUrl: string | null;
  logoType: string | null;
  logoSize: number | null;
  receiptsEnabled: boolean;
  replyTo: string | null;
  website: string | null;
  /** The merchant's time zone (IANA) and language (en | sw): its receipts' dates and its team's notices. */
  timezone: string;
  language: string;
  updatedAt: Date | null;
}

/** The logo's public, same-origin path; the hash makes it change with the logo. */
export const logoPath = (merchantId: number, hash: string) => `/brand/${merchantId}/logo/${hash}`;

const settingsColumns = { displayName: true, accentColor: true, supportEmail: true, logoType: true, logoHash: true, logoSize: true, receiptsEnabled: true, replyTo: true, website: true, updatedAt: true } as const;

function requireOwner(principal: Principal): void {
  // The brand is the merchant's in both modes: the table's signed_in_owner (never an API key), as updateBrand.
  if (!allows(principal, "signed_in_owner")) throw new GatewayError("forbidden", refusal(principal, "signed_in_owner"));
}

/**
 * The merchant's brand on its payers' pages (checkout, payment links): display name, logo, accent colour and
 * support e-mail, one set per merchant for both modes. Owners change it; everyone of the merchant reads it.
 */
export function createBrandService(deps: { prisma: PrismaClient; sql: Sql }) {
  const { prisma, sql } = deps;

  async function settings(merchantId: number): Promise<BrandSettings> {
    const merchant = await prisma.merchant.findUniqueOrThrow({ where: { id: merchantId }, select: { name: true, timezone: true, language: true, brand: { select: settingsColumns } } });
    const brand = merchant.brand;
    return {
      merchantId,
      merchantName: merchant.name,
      displayName: brand?.displayName ?? null,
      accentColor: brand?.accentColor ?? null,
      supportEmail: brand?.supportEmail ?? null,
      logoUrl: brand?.logoHash ? logoPath(merchantId, brand.logoHash) : null,
      logoType: brand?.logoType ?? null,
      logoSize: brand?.logoSize ?? null,
      receiptsEnabled: brand?.receiptsEnabled ?? true,
      replyTo: brand?.replyTo ?? null,
      website: brand?.website ?? null,
      timezone: merchant.timezone,
      language: merchant.language,
      updatedAt: brand?.updatedAt ?? null,
    };
  }

  /** Creates the merchant's row or changes it; two first saves at once both land (the loser of the insert updates). */
  async function save(merchantId: number, data: Omit<Prisma.MerchantBrandUncheckedCreateInput, "merchantId">): Promise<void> {
    const upsert = () => prisma.merchantBrand.upsert({ where: { merchantId }, create: { merchantId, ...data }, update: data, select: { merchantId: true } });
    try {
      await upsert();
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      await upsert();
    }
  }

  return {
    /** What the checkout and payment-link pages show: one indexed query (merchant and brand by primary key), never the logo's bytes. */
    async checkoutBrand(merchantId: number): Promise<CheckoutBrand> {
      const [row] = await sql.query<{ name: string; display_name: string | null; accent_color: string | null; support_email: string | null; logo_hash: string | null }>(
        `SELECT m.name, b.display_name, b.accent_color, b.support_email, b.logo_hash
           FROM merchants m LEFT JOIN merchant_brands b ON b.merchant_id = m.id
          WHERE m.id = $1`,
        [merchantId],
      );
      return {
        displayName: row?.display_name ?? row?.name ?? "",
        accentColor: row?.accent_color ?? null,
        logoUrl: row?.logo_hash ? logoPath(merchantId, row.logo_hash) : null,
        supportEmail: row?.support_email ?? null,
      };
    },

    get: (principal: Principal) => settings(principal.merchantId),

    /** What a message from the merchant needs (mail/service.ts): one query, never the logo's bytes. */
    async mailIdentity(merchantId: number): Promise<MailIdentity | null> {
      const merchant = await prisma.merchant.findUnique({ where: { id: merchantId }, select: { name: true, timezone: true, language: true, brand: { select: settingsColumns } } });
      if (!merchant) return null;
      const brand = merchant.brand;
      return {
        name: brand?.displayName ?? merchant.name,
        accentColor: brand?.accentColor ?? null,
        supportEmail: brand?.supportEmail ?? null,
        replyTo: brand?.replyTo ?? null,
        website: brand?.website ?? null,
        receiptsEnabled: brand?.receiptsEnabled ?? true,
        logoHash: brand?.logoHash ?? null,
        timezone: merchant.timezone,
        language: merchant.language,
      };
    },

    /** Changes the fields given (null or blank clears one); removeLogo drops the logo. Owners only. */
    async update(principal: Principal, input: BrandInput): Promise<BrandSettings> {
      requireOwner(principal);
      const data = {
        displayName: displayNameOf(input.displayName),
        accentColor: accentColorOf(input.accentColor),
        supportEmail: supportEmailOf(input.supportEmail),
        replyTo: supportEmailOf(input.replyTo, "replyTo"),
        website: websiteOf(input.website),
        ...(typeof input.receiptsEnabled === "boolean" ? { receiptsEnabled: input.receiptsEnabled } : {}),
        ...(input.removeLogo ? { logo: null, logoType: null, logoHash: null, logoSize: null } : {}),
      };
      // The merchant's own name is renamed here too (null leaves it: a merchant always has a name).
      const name = input.merchantName === undefined || input.merchantName === null ? undefined : merchantNameOf(input.merchantName, "merchantName");
      const merchant = { timezone: timezoneOf(input.timezone), language: languageOf(input.language), name };
      await save(principal.merchantId, data);
      if (merchant.timezone !== undefined || merchant.language !== undefined || name !== undefined) await prisma.merchant.update({ where: { id: principal.merchantId }, data: merchant });
      return settings(principal.merchantId);
    },

    /** Replaces the logo with these bytes, once checked (checkLogo). Owners only. */
    async setLogo(principal: Principal, bytes: Uint8Array): Promise<BrandSettings> {
      requireOwner(principal);
      const logo = checkLogo(bytes);
      const data = { logo: new Uint8Array(logo.bytes), logoType: logo.type, logoHash: logo.hash, logoSize: logo.bytes.length };
      await save(principal.merchantId, data);
      return settings(principal.merchantId);
    },

    /** The stored logo for its public route, only while its hash is the current one; null otherwise. */
    async logo(merchantId: number, hash: string): Promise<{ bytes: Uint8Array; type: string } | null> {
      const brand = await prisma.merchantBrand.findFirst({ where: { merchantId, logoHash: hash }, select: { logo: true, logoType: true } });
      return brand?.logo && brand.logoType ? { bytes: brand.logo, type: brand.logoType } : null;
    },
  };
}

export type BrandService = ReturnType<typeof createBrandService>;
