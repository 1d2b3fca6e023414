import { constants, generateKeyPairSync, privateDecrypt, publicEncrypt, randomBytes, randomInt, type KeyObject } from "node:crypto";
import { writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { parseJsonOrUndefined } from "../support/json.ts";

/**
 * A loopback Daraja: OAuth, STK push and query, C2B register and simulate, B2C payouts and
 * Transaction Status, speaking the documented wire formats (see /work/shared/notes/providers.md) and
 * checking what a real Daraja checks (token, Password, Nairobi Timestamp, SecurityCredential, field
 * limits, forbidden callback-URL words, OriginatorConversationID reuse), and the Reversal API with its
 * Result (ResultCode switchable per reversed receipt: 0, R000001 already reversed, 2001, R000002, ...).
 * Switches reproduce its failures; sendStkCallback / sendB2cResult / sendReversalResult post callbacks the
 * way Daraja does.
 *
 * The fake holds its own RSA key pair in place of Safaricom's certificate: point the gateway at
 * writePublicKey(dir) (MPESA_CERT_PATH) so the credentials it encrypts decrypt here.
 */
export const SANDBOX_SHORTCODE = "174379";
export const SANDBOX_PASSKEY = "bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919";
export const SANDBOX_B2C_SHORTCODE = "600980";
export const SANDBOX_INITIATOR_NAME = "testapi";

/**
 * What points a gateway at the fake: MPESA_BASE_URL, and the public address the gateway gives Daraja for its
 * callbacks (PUBLIC_BASE_URL). Set `switches.callbackOrigin` to where the gateway listens and the fake posts them there.
 */
export function darajaGatewayEnv(fake: { url: string }): Record<string, string> {
  return { MPESA_BASE_URL: fake.url, PUBLIC_BASE_URL: "https://pay.gateway.test" };
}

export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingMessage["headers"];
  body: any;
}

export interface StkPushRecord {
  body: Record<string, any>;
  merchantRequestId: string;
  checkoutRequestId: string;
}

/** How M-Pesa settles a payout. ResultCode 0 is paid; anything else failed (no TransactionReceipt). */
export interface B2cOutcome {
  ResultCode: number | string;
  ResultDesc: string;
  /** What a Transaction Status query reports for it; default "Completed" when paid, else "Failed". */
  TransactionStatus?: string;
}

export interface B2cPayoutRecord {
  body: Record<string, any>;
  conversationId: string;
  /** "SFX" + 7 characters; present on failures too (the receipt is only in successful results). */
  transactionId: string;
  /** Decided when the request is accepted (b2cOutcomes by PartyB, else paid); results and status queries report it. */
  outcome: B2cOutcome;
  /** Fixed at acceptance, so every (duplicate) result for the payout is the same body. */
  completedDateTime: string;
  completedTimestamp: number;
  utilityFundsAfter: number;
}

/** How M-Pesa settles a reversal: ResultCode 0 reversed, R000001 already reversed, anything else failed. */
export interface ReversalOutcome {
  ResultCode: number | string;
  ResultDesc: string;
}

export interface ReversalRecord {
  body: Record<string, any>;
  originatorConversationId: string;
  conversationId: string;
  /** The reversal's own M-Pesa transaction id. */
  transactionId: string;
  outcome: ReversalOutcome;
}

export interface StatusQueryRecord {
  body: Record<string, any>;
  /** The query's own ids (Daraja's reply and the top of its Result), not the payout's. */
  originatorConversationId: string;
  conversationId: string;
  /** The OriginatorConversationID of the payout the query named, or null when it named none the fake knows. */
  payout: string | null;
  /** The OriginatorConversationID of the reversal the query named, or null. */
  reversal?: string | null;
}

export interface PostedResult {
  kind: "b2c_result" | "b2c_timeout" | "status_result" | "reversal_result" | "reversal_timeout" | "balance_result" | "balance_timeout";
  url: string;
  body: unknown;
  /** The receiver's answer; null when the POST failed (error says why). */
  reply: { status: number; body: any } | null;
  error?: string;
}

const FORBIDDEN = ["mpesa", "safaricom", "exe", "exec", "cmd", "sql", "query"];
const B2C_COMMANDS = ["BusinessPayment", "SalaryPayment", "PromotionPayment"];
const REASON_TYPES: Record<string, string> = {
  BusinessPayment: "Business Payment to Customer via API",
  SalaryPayment: "Salary Payment via API",
  PromotionPayment: "Promotion Payment via API",
};
const MSISDN = /^2547\d{8}$|^2541\d{8}$/;
/** Where Daraja's own queue lives: real results name it in ReferenceData, not the caller's URL. */
const INTERNAL_TIMEOUT_URL = "https://internalsandbox.safaricom.co.ke/mpesa/b2cresults/v1/submit";
const PAID: B2cOutcome = { ResultCode: 0, ResultDesc: "The service request is processed successfully." };
const REVERSED: ReversalOutcome = { ResultCode: 0, ResultDesc: "The service request is processed successfully." };

function nairobiNow(): Date {
  return new Date(Date.now() + 3 * 3600_000);
}

/** YYYYMMDDHHmmss read as Nairobi wall time -> ms offset from now (0 when it is "now" in Nairobi). */
function timestampSkewMs(timestamp: string): number | null {
  const m = /^(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})$/.exec(timestamp);
  if (!m) return null;
  const asUtc = Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!);
  return Math.abs(asUtc - nairobiNow().getTime());
}

const pad2 = (n: number) => String(n).padStart(2, "0");
/** Nairobi wall time as YYYYMMDDHHmmss. */
const compactNairobi = () => nairobiNow().toISOString().replace(/[-:T]/g, "").slice(0, 14);
/** Nairobi wall time as B2C results write it: DD.MM.YYYY HH:mm:ss. */
function b2cDateTime(): string {
  const d = nairobiNow();
  return `${pad2(d.getUTCDate())}.${pad2(d.getUTCMonth() + 1)}.${d.getUTCFullYear()} ${pad2(d.getUTCHours())}:${pad2(d.getUTCMinutes())}:${pad2(d.getUTCSeconds())}`;
}
const conversationIdNow = () => `AG_${compactNairobi().slice(0, 8)}_${randomBytes(10).toString("hex")}`;
function mpesaTransactionId(): string {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  return `SFX${Array.from({ length: 7 }, () => alphabet[randomInt(alphabet.length)]).join("")}`;
}

function isHttpsCallbackUrl(url: unknown): boolean {
  if (typeof url !== "string") return false;
  try {
    if (new URL(url).protocol !== "https:") return false;
  } catch {
    return false;
  }
  return !FORBIDDEN.some((w) => url.toLowerCase().includes(w));
}

/**
 * RSA PKCS#1 v1.5 decryption done by hand: Node 20 refuses RSA_PKCS1_PADDING for private decryption
 * (CVE-2023-46809), so decrypt raw and strip 00 02 <8+ nonzero bytes> 00 ourselves. Null when malformed.
 */
function pkcs1v15Decrypt(key: KeyObject, ciphertext: Buffer): Buffer | null {
  let block: Buffer;
  try {
    block = privateDecrypt({ key, padding: constants.RSA_NO_PADDING }, ciphertext);
  } catch {
    return null;
  }
  if (block[0] !== 0x00 || block[1] !== 0x02) return null;
  const separator = block.indexOf(0x00, 2);
  if (separator < 10) return null;
  return block.subarray(separator + 1);
}

export interface FakeDarajaOptions {
  consumerKey?: string;
  consumerSecret?: string;
  shortcode?: string;
  passkey?: string;
  /** B2C / Transaction Status initiator (default "testapi") and its password (default random). */
  initiatorName?: string;
  initiatorPassword?: string;
  /** The shortcode B2C pays from (PartyA); default "600980". */
  b2cShortcode?: string;
}

export async function startFakeDaraja(options: FakeDarajaOptions = {}) {
  const consumerKey = options.consumerKey ?? `ck_${randomBytes(6).toString("hex")}`;
  const consumerSecret = options.consumerSecret ?? `cs_${randomBytes(12).toString("hex")}`;
  const shortcode = options.shortcode ?? SANDBOX_SHORTCODE;
  const passkey = options.passkey ?? SANDBOX_PASSKEY;
  const initiatorName = options.initiatorName ?? SANDBOX_INITIATOR_NAME;
  const initiatorPassword = options.initiatorPassword ?? `Ip#${randomBytes(9).toString("base64url")}`;
  const b2cShortcode = options.b2cShortcode ?? SANDBOX_B2C_SHORTCODE;
  /** Stands in for Safaricom's certificate key pair. */
  const { publicKey, privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const publicKeyPem = publicKey.export({ type: "spki", format: "pem" }).toString();

  const requests: RecordedRequest[] = [];
  const pushes = new Map<string, StkPushRecord>();
  /** STK query answers per CheckoutRequestID; absent means "being processed". */
  const queryResults = new Map<string, { ResultCode: string; ResultDesc: string }>();
  const switches = {
    /** The next API call answers 404.001.03 as if the token had expired. */
    invalidTokenOnce: false,
    busy: false,
    quota: false,
    wrongCredentials: false,
    tokenExpiresIn: "3599",
    /** Confirmation posted after a simulate (like the real sandbox); off to test the pending answer. */
    confirmOnSimulate: true,
    /** Where callbacks really go: the test gateway listens on an ephemeral port PUBLIC_BASE_URL cannot know. */
    callbackOrigin: undefined as string | undefined,
    /** Delay before an accepted B2C request's Result is posted to its ResultURL. */
    b2cResultDelayMs: 20,
    /** Accept B2C requests but never post their Result (the gateway must ask Transaction Status). */
    b2cNoResult: false,
    /** Delay before a Transaction Status Result is posted. */
    statusResultDelayMs: 20,
    /** Accept status queries but never post their Result. */
    statusNoResult: false,
    /** Record (and schedule the Result of) each accepted B2C request, but hang its reply until releaseB2cReplies(). */
    b2cHoldReply: false,
    /** Delay before an accepted Reversal request's Result is posted to its ResultURL. */
    reversalResultDelayMs: 20,
    /** Accept Reversal requests but never post their Result (the gateway must ask Transaction Status). */
    reversalNoResult: false,
    /** Post the queue-timeout notice to QueueTimeOutURL instead of a Result. */
    reversalQueueTimeout: false,
    /** Record (and schedule the Result of) each accepted Reversal request, but hang its reply until releaseReversalReplies(). */
    reversalHoldReply: false,
    /** Delay before an Account Balance Result is posted to its ResultURL. */
    balanceResultDelayMs: 20,
    /** Accept Account Balance requests but never post their Result. */
    balanceNoResult: false,
    /** Post the queue-timeout notice to QueueTimeOutURL instead of the Account Balance Result. */
    balanceQueueTimeout: false,
    /** Run after a push is accepted (recorded, the payer prompted) and before Daraja's reply leaves. */
    beforeStkReply: undefined as ((push: StkPushRecord) => Promise<void>) | undefined,
  };
  /** What an Account Balance Result reports, per account: "Name|KES|current|available|reserved|uncleared" in shillings. */
  const accountBalances: { account: string; current: string; available: string; reserved?: string; uncleared?: string }[] = [
    { account: "Working Account", current: "453845.00", available: "453845.00" },
    { account: "Utility Account", current: "65602.00", available: "65602.00" },
    { account: "Charges Paid Account", current: "-660.00", available: "-660.00" },
  ];
  /** Accepted Account Balance requests. */
  const balanceQueries: { body: Record<string, any>; originatorConversationId: string; conversationId: string }[] = [];
  /** Replies held by b2cHoldReply, released in order. */
  const heldB2cReplies: (() => void)[] = [];
  /** Replies held by reversalHoldReply, released in order. */
  const heldReversalReplies: (() => void)[] = [];
  /** Accepted B2C requests by OriginatorConversationID (a reuse is refused: Daraja's idempotency). */
  const payouts = new Map<string, B2cPayoutRecord>();
  /** Settlement per PartyB (2547...); absent means paid. */
  const b2cOutcomes = new Map<string, B2cOutcome>();
  const statusQueries: StatusQueryRecord[] = [];
  /** Accepted Reversal requests by OriginatorConversationID. */
  const reversals = new Map<string, ReversalRecord>();
  /** Settlement per reversed receipt (TransactionID); absent means reversed (ResultCode 0). */
  const reversalOutcomes = new Map<string, ReversalOutcome>();
  /** Every Result / timeout the fake posted, with the receiver's answer. */
  const postedResults: PostedResult[] = [];
  const timers = new Set<NodeJS.Timeout>();
  let utilityFunds = 500_000;
  let currentToken: string | null = null;
  let tokensIssued = 0;
  let registered: { ShortCode: string; ResponseType: string; ConfirmationURL: string; ValidationURL: string } | null = null;
  const validationReplies: unknown[] = [];

  const error = (status: number, errorCode: string, errorMessage: string) => ({
    status,
    body: { requestId: `${randomBytes(4).toString("hex")}-${Date.now()}`, errorCode, errorMessage },
  });

  function checkCredentials(body: Record<string, any>) {
    if (body.BusinessShortCode !== shortcode) return error(500, "500.001.1001", "Merchant does not exist");
    const skew = typeof body.Timestamp === "string" ? timestampSkewMs(body.Timestamp) : null;
    if (skew === null || skew > 60_000) return error(400, "400.002.02", "Bad Request - Invalid Timestamp");
    const expected = Buffer.from(`${shortcode}${passkey}${body.Timestamp}`).toString("base64");
    if (body.Password !== expected) return error(500, "500.001.1001", "Wrong credentials");
    return null;
  }

  /** Initiator name and SecurityCredential (the password, RSA PKCS#1 v1.5 with our public key, base64). */
  function checkInitiator(name: unknown, credential: unknown) {
    const bytes = typeof credential === "string" && /^[A-Za-z0-9+/]+={0,2}$/.test(credential) ? Buffer.from(credential, "base64") : null;
    if (!bytes || bytes.length !== 256) return error(400, "400.002.02", "Bad Request - Invalid SecurityCredential");
    const password = pkcs1v15Decrypt(privateKey, bytes);
    if (name !== initiatorName || password === null || password.toString("utf8") !== initiatorPassword) {
      return error(500, "500.001.1001", "The initiator information is invalid.");
    }
    return null;
  }

  const isText = (value: unknown, min: number, max: number) => typeof value === "string" && value.length >= min && value.length <= max;

  /** Runs fn after ms unless the fake is closed first. */
  function later(ms: number, fn: () => Promise<unknown>) {
    const timer = setTimeout(() => {
      timers.delete(timer);
      fn().catch(() => {});
    }, ms);
    timers.add(timer);
  }

  async function handle(method: string, path: string, headers: IncomingMessage["headers"], body: any): Promise<{ status: number; body: unknown }> {
    if (method === "GET" && path === "/oauth/v1/generate?grant_type=client_credentials") {
      const expected = `Basic ${Buffer.from(`${consumerKey}:${consumerSecret}`).toString("base64")}`;
      if (switches.wrongCredentials || headers.authorization !== expected) return error(400, "400.008.01", "Invalid Authentication passed");
      currentToken = randomBytes(14).toString("base64url");
      tokensIssued++;
      return { status: 200, body: { access_token: currentToken, expires_in: switches.tokenExpiresIn } };
    }
    if (method !== "POST") return { status: 404, body: { errorMessage: "Not found" } };
    if (switches.invalidTokenOnce || headers.authorization !== `Bearer ${currentToken}`) {
      switches.invalidTokenOnce = false;
      return error(404, "404.001.03", "Invalid Access Token");
    }
    if (switches.busy) return error(500, "500.003.02", "System is busy. Please try again in few minutes.");
    if (switches.quota) return error(500, "500.003.03", "Quota Violation");

    switch (path) {
      case "/mpesa/stkpushrequest/v1/processrequest":
      case "/mpesa/stkpush/v1/processrequest": {
        const bad = checkCredentials(body);
        if (bad) return bad;
        if (!["CustomerPayBillOnline", "CustomerBuyGoodsOnline"].includes(body.TransactionType)) return error(400, "400.002.02", "Bad Request - Invalid TransactionType");
        if (!Number.isInteger(body.Amount) || body.Amount < 1 || body.Amount > 250_000) return error(400, "400.002.02", "Bad Request - Invalid Amount");
        if (!/^2547\d{8}$|^2541\d{8}$/.test(String(body.PhoneNumber)) || body.PartyA !== body.PhoneNumber) return error(400, "400.002.02", "Bad Request - Invalid PhoneNumber");
        if (typeof body.AccountReference !== "string" || body.AccountReference.length > 12) return error(400, "400.002.02", "Bad Request - Invalid AccountReference");
        if (typeof body.TransactionDesc !== "string" || body.TransactionDesc.length > 13) return error(400, "400.002.02", "Bad Request - Invalid TransactionDesc");
        const url = String(body.CallBackURL ?? "");
        if (!/^https?:\/\//.test(url) || FORBIDDEN.some((w) => url.toLowerCase().includes(w))) return error(400, "400.002.02", "Bad Request - Invalid CallBackURL");
        const record = { body, merchantRequestId: `${randomBytes(3).toString("hex")}-${Date.now()}`, checkoutRequestId: `ws_CO_${Date.now()}${randomBytes(4).toString("hex")}` };
        pushes.set(record.checkoutRequestId, record);
        await switches.beforeStkReply?.(record);
        return {
          status: 200,
          body: {
            MerchantRequestID: record.merchantRequestId,
            CheckoutRequestID: record.checkoutRequestId,
            ResponseCode: "0",
            ResponseDescription: "Success. Request accepted for processing",
            CustomerMessage: "Success. Request accepted for processing",
          },
        };
      }
      case "/mpesa/stkpushquery/v1/query": {
        const bad = checkCredentials(body);
        if (bad) return bad;
        const push = pushes.get(body.CheckoutRequestID);
        if (!push) return error(500, "500.001.1001", "Invalid CheckoutRequestID");
        const result = queryResults.get(body.CheckoutRequestID);
        if (!result) return error(500, "500.001.1001", "The transaction is being processed");
        return {
          status: 200,
          body: { ResponseCode: "0", ResponseDescription: "The service request has been accepted successsfully", MerchantRequestID: push.merchantRequestId, CheckoutRequestID: push.checkoutRequestId, ...result },
        };
      }
      case "/mpesa/c2b/v1/registerurl": {
        if (body.ShortCode !== shortcode) return error(500, "500.001.1001", "Merchant does not exist");
        for (const url of [body.ConfirmationURL, body.ValidationURL]) {
          if (typeof url !== "string" || FORBIDDEN.some((w) => url.toLowerCase().includes(w))) return error(400, "400.002.02", "Bad Request - Invalid URL");
        }
        if (!["Completed", "Cancelled"].includes(body.ResponseType)) return error(400, "400.002.02", "Bad Request - Invalid ResponseType");
        registered = body;
        return { status: 200, body: { OriginatorCoversationID: randomBytes(6).toString("hex"), ResponseCode: "0", ResponseDescription: "Success" } };
      }
      case "/mpesa/c2b/v1/simulate": {
        if (!registered) return error(500, "500.001.1001", "No URLs registered");
        const transId = `SIM${randomBytes(4).toString("hex").toUpperCase()}`.slice(0, 10);
        const payload = {
          TransactionType: "Pay Bill",
          TransID: transId,
          TransTime: nairobiNow().toISOString().replace(/[-:T]/g, "").slice(0, 14),
          TransAmount: Number(body.Amount).toFixed(2),
          BusinessShortCode: body.ShortCode,
          BillRefNumber: body.BillRefNumber,
          InvoiceNumber: "",
          OrgAccountBalance: "100.00",
          ThirdPartyTransID: "",
          MSISDN: String(body.Msisdn),
          FirstName: "John",
          MiddleName: "",
          LastName: "",
        };
        if (switches.confirmOnSimulate) {
          const target = registered;
          setImmediate(async () => {
            const validation = await postJson(target.ValidationURL, payload).catch(() => null);
            validationReplies.push(validation?.body);
            if (validation?.body?.ResultCode === "0") await postJson(target.ConfirmationURL, payload).catch(() => null);
          });
        }
        return { status: 200, body: { OriginatorCoversationID: randomBytes(6).toString("hex"), ResponseCode: "0", ResponseDescription: "Accept the service request successfully." } };
      }
      case "/mpesa/b2c/v3/paymentrequest": {
        const ocid = body?.OriginatorConversationID;
        if (!isText(ocid, 1, 100)) return error(400, "400.002.02", "Bad Request - Invalid OriginatorConversationID");
        if (!B2C_COMMANDS.includes(body.CommandID)) return error(400, "400.002.02", "Bad Request - Invalid CommandID");
        if (!Number.isInteger(body.Amount) || body.Amount < 10 || body.Amount > 250_000) return error(400, "400.002.02", "Bad Request - Invalid Amount");
        if (!MSISDN.test(String(body.PartyB))) return error(400, "400.002.02", "Bad Request - Invalid PartyB");
        if (!isText(body.Remarks, 2, 100)) return error(400, "400.002.02", "Bad Request - Invalid Remarks");
        if (!isHttpsCallbackUrl(body.QueueTimeOutURL)) return error(400, "400.002.02", "Bad Request - Invalid QueueTimeOutURL");
        if (!isHttpsCallbackUrl(body.ResultURL)) return error(400, "400.002.02", "Bad Request - Invalid ResultURL");
        const bad = checkInitiator(body.InitiatorName, body.SecurityCredential);
        if (bad) return bad;
        if (String(body.PartyA) !== b2cShortcode) return error(500, "500.001.1001", "Merchant does not exist");
        // Checked and recorded with no await in between, so concurrent reuses see each other.
        if (payouts.has(ocid)) return error(400, "400.002.02", "Bad Request - Duplicate OriginatorConversationID");
        const outcome = b2cOutcomes.get(String(body.PartyB)) ?? PAID;
        if (Number(outcome.ResultCode) === 0) utilityFunds -= body.Amount;
        const record: B2cPayoutRecord = {
          body,
          conversationId: conversationIdNow(),
          transactionId: mpesaTransactionId(),
          outcome: { ...outcome },
          completedDateTime: b2cDateTime(),
          completedTimestamp: Number(compactNairobi()),
          utilityFundsAfter: utilityFunds,
        };
        payouts.set(ocid, record);
        if (!switches.b2cNoResult) later(switches.b2cResultDelayMs, () => sendB2cResult(ocid));
        if (switches.b2cHoldReply) await new Promise<void>((release) => heldB2cReplies.push(release));
        return {
          status: 200,
          body: { ConversationID: record.conversationId, OriginatorConversationID: ocid, ResponseCode: "0", ResponseDescription: "Accept the service request successfully." },
        };
      }
      case "/mpesa/reversal/v1/request": {
        if (body?.CommandID !== "TransactionReversal") return error(400, "400.002.02", "Bad Request - Invalid CommandID");
        if (!isText(body.TransactionID, 1, 100)) return error(400, "400.002.02", "Bad Request - Invalid TransactionID");
        if (!Number.isInteger(body.Amount) || body.Amount < 1) return error(400, "400.002.02", "Bad Request - Invalid Amount");
        // Safaricom's spelling; the correctly spelt key is not read.
        if (!["11", "4"].includes(String(body.RecieverIdentifierType))) return error(400, "400.002.02", "Bad Request - Invalid RecieverIdentifierType");
        if (!isText(body.Remarks, 2, 100)) return error(400, "400.002.02", "Bad Request - Invalid Remarks");
        if (body.Occasion !== undefined && !isText(body.Occasion, 0, 100)) return error(400, "400.002.02", "Bad Request - Invalid Occasion");
        if (!isHttpsCallbackUrl(body.QueueTimeOutURL)) return error(400, "400.002.02", "Bad Request - Invalid QueueTimeOutURL");
        if (!isHttpsCallbackUrl(body.ResultURL)) return error(400, "400.002.02", "Bad Request - Invalid ResultURL");
        const bad = checkInitiator(body.Initiator, body.SecurityCredential);
        if (bad) return bad;
        if (String(body.ReceiverParty) !== shortcode) return error(500, "500.001.1001", "Merchant does not exist");
        // The caller's OriginatorConversationID is echoed when given (a reuse refused), else Daraja makes one.
        const ocid = isText(body.OriginatorConversationID, 1, 100) ? body.OriginatorConversationID : `${randomInt(10_000, 99_999)}-${randomInt(1_000_000, 99_999_999)}-1`;
        if (reversals.has(ocid)) return error(400, "400.002.02", "Bad Request - Duplicate OriginatorConversationID");
        const record: ReversalRecord = {
          body,
          originatorConversationId: ocid,
          conversationId: conversationIdNow(),
          transactionId: mpesaTransactionId(),
          outcome: { ...(reversalOutcomes.get(body.TransactionID) ?? REVERSED) },
        };
        reversals.set(ocid, record);
        if (switches.reversalQueueTimeout) later(switches.reversalResultDelayMs, () => sendReversalTimeout(ocid));
        else if (!switches.reversalNoResult) later(switches.reversalResultDelayMs, () => sendReversalResult(ocid));
        if (switches.reversalHoldReply) await new Promise<void>((release) => heldReversalReplies.push(release));
        return {
          status: 200,
          body: { OriginatorConversationID: ocid, ConversationID: record.conversationId, ResponseCode: "0", ResponseDescription: "Accept the service request successfully." },
        };
      }
      case "/mpesa/transactionstatus/v1/query": {
        if (body?.CommandID !== "TransactionStatusQuery") return error(400, "400.002.02", "Bad Request - Invalid CommandID");
        const transactionId = isText(body.TransactionID, 1, 100) ? body.TransactionID : null;
        const originalId = isText(body.OriginalConversationID, 1, 100) ? body.OriginalConversationID : null;
        if (!transactionId && !originalId) return error(400, "400.002.02", "Bad Request - Invalid TransactionID");
        if (String(body.IdentifierType) !== "4") return error(400, "400.002.02", "Bad Request - Invalid IdentifierType");
        if (!isText(body.Remarks, 2, 100)) return error(400, "400.002.02", "Bad Request - Invalid Remarks");
        if (!isHttpsCallbackUrl(body.QueueTimeOutURL)) return error(400, "400.002.02", "Bad Request - Invalid QueueTimeOutURL");
        if (!isHttpsCallbackUrl(body.ResultURL)) return error(400, "400.002.02", "Bad Request - Invalid ResultURL");
        const bad = checkInitiator(body.Initiator, body.SecurityCredential);
        if (bad) return bad;
        let payout: string | null = null;
        for (const [ocid, record] of payouts) {
          if ((transactionId && record.transactionId === transactionId) || (originalId && (ocid === originalId || record.conversationId === originalId))) {
            payout = ocid;
            break;
          }
        }
        let reversal: string | null = null;
        for (const [ocid, record] of reversals) {
          if ((transactionId && record.transactionId === transactionId) || (originalId && (ocid === originalId || record.conversationId === originalId))) {
            reversal = ocid;
            break;
          }
        }
        // A reversal happened on the collection shortcode, a payout on the B2C one.
        if (String(body.PartyA) !== (reversal && !payout ? shortcode : b2cShortcode)) return error(500, "500.001.1001", "Merchant does not exist");
        const query: StatusQueryRecord = {
          body,
          originatorConversationId: isText(body.OriginatorConversationID, 1, 100) ? body.OriginatorConversationID : `${randomInt(10_000, 99_999)}-${randomInt(1_000_000, 99_999_999)}-1`,
          conversationId: conversationIdNow(),
          payout,
          reversal,
        };
        statusQueries.push(query);
        if (!switches.statusNoResult) later(switches.statusResultDelayMs, () => sendStatusResult(query.originatorConversationId));
        return {
          status: 200,
          body: { OriginatorConversationID: query.originatorConversationId, ConversationID: query.conversationId, ResponseCode: "0", ResponseDescription: "Accept the service request successfully." },
        };
      }
      case "/mpesa/accountbalance/v1/query": {
        if (body?.CommandID !== "AccountBalance") return error(400, "400.002.02", "Bad Request - Invalid CommandID");
        if (String(body.IdentifierType) !== "4") return error(400, "400.002.02", "Bad Request - Invalid IdentifierType");
        if (String(body.PartyA) !== shortcode && String(body.PartyA) !== b2cShortcode) return error(500, "500.001.1001", "Merchant does not exist");
        if (!isText(body.Remarks, 2, 100)) return error(400, "400.002.02", "Bad Request - Invalid Remarks");
        if (!isHttpsCallbackUrl(body.QueueTimeOutURL)) return error(400, "400.002.02", "Bad Request - Invalid QueueTimeOutURL");
        if (!isHttpsCallbackUrl(body.ResultURL)) return error(400, "400.002.02", "Bad Request - Invalid ResultURL");
        const bad = checkInitiator(body.Initiator, body.SecurityCredential);
        if (bad) return bad;
        const query = { body, originatorConversationId: `${randomInt(10_000, 99_999)}-${randomInt(1_000_000, 99_999_999)}-1`, conversationId: conversationIdNow() };
        balanceQueries.push(query);
        if (switches.balanceQueueTimeout) later(switches.balanceResultDelayMs, () => postResult("balance_timeout", body.QueueTimeOutURL, { Result: { ResultType: 0, ResultCode: 1, ResultDesc: "The request timed out in the queue.", OriginatorConversationID: query.originatorConversationId, ConversationID: query.conversationId, TransactionID: mpesaTransactionId() } }));
        else if (!switches.balanceNoResult) later(switches.balanceResultDelayMs, () => sendBalanceResult(query));
        return {
          status: 200,
          body: { OriginatorConversationID: query.originatorConversationId, ConversationID: query.conversationId, ResponseCode: "0", ResponseDescription: "Accept the service request successfully." },
        };
      }
    }
    return { status: 404, body: { errorMessage: "Not found" } };
  }

  /** Daraja's Account Balance Result (as its documentation's sample has it): accounts joined by "&", BOCompletedTime. */
  function balanceResultBody(query: (typeof balanceQueries)[number]) {
    const value = accountBalances.map((a) => `${a.account}|KES|${a.current}|${a.available}|${a.reserved ?? "0.00"}|${a.uncleared ?? "0.00"}`).join("&");
    return {
      Result: {
        ResultType: 0,
        ResultCode: 0,
        ResultDesc: "The service request is processed successfully.",
        OriginatorConversationID: query.originatorConversationId,
        ConversationID: query.conversationId,
        TransactionID: mpesaTransactionId(),
        ResultParameters: { ResultParameter: [{ Key: "AccountBalance", Value: value }, { Key: "BOCompletedTime", Value: 20261125102456 }] },
        ReferenceData: { ReferenceItem: { Key: "QueueTimeoutURL", Value: "https://internalsandbox.safaricom.co.ke/mpesa/abresults/v1/submit" } },
      },
    };
  }

  function sendBalanceResult(query: (typeof balanceQueries)[number], url?: string) {
    return postResult("balance_result", url ?? query.body.ResultURL, balanceResultBody(query));
  }

  async function postJson(url: string, body: unknown) {
    const target = switches.callbackOrigin ? `${switches.callbackOrigin}${new URL(url).pathname}${new URL(url).search}` : url;
    const response = await fetch(target, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    return { status: response.status, body: parseJsonOrUndefined(await response.text()) };
  }

  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks).toString("utf8");
    let body: any = undefined;
    try {
      body = raw ? JSON.parse(raw) : undefined;
    } catch {
      body = raw;
    }
    const path = req.url ?? "/";
    requests.push({ method: req.method ?? "GET", path, headers: req.headers, body });
    const result = await handle(req.method ?? "GET", path, req.headers, body);
    res.writeHead(result.status, { "content-type": "application/json" });
    res.end(JSON.stringify(result.body));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  function shuffle<T>(items: T[]): T[] {
    const out = [...items];
    for (let i = out.length - 1; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1));
      [out[i], out[j]] = [out[j]!, out[i]!];
    }
    return out;
  }

  /** Daraja's STK callback for a recorded push; success carries CallbackMetadata in a shuffled order. */
  function stkCallbackBody(checkoutRequestId: string, result: { resultCode?: number; resultDesc?: string; amount?: number; phone?: string; receipt?: string } = {}) {
    const push = pushes.get(checkoutRequestId);
    if (!push) throw new Error(`no push ${checkoutRequestId}`);
    const resultCode = result.resultCode ?? 0;
    const stkCallback: Record<string, unknown> = {
      MerchantRequestID: push.merchantRequestId,
      CheckoutRequestID: checkoutRequestId,
      ResultCode: resultCode,
      ResultDesc: result.resultDesc ?? (resultCode === 0 ? "The service request is processed successfully." : `Failed with ${resultCode}`),
    };
    if (resultCode === 0) {
      stkCallback.CallbackMetadata = {
        Item: shuffle([
          { Name: "Amount", Value: result.amount ?? push.body.Amount },
          { Name: "MpesaReceiptNumber", Value: result.receipt ?? `NLJ${randomBytes(4).toString("hex").toUpperCase()}`.slice(0, 10) },
          { Name: "Balance" },
          { Name: "TransactionDate", Value: Number(nairobiNow().toISOString().replace(/[-:T]/g, "").slice(0, 14)) },
          { Name: "PhoneNumber", Value: Number(result.phone ?? push.body.PhoneNumber) },
        ]),
      };
    }
    return { Body: { stkCallback } };
  }

  function payoutOf(originatorConversationId: string): B2cPayoutRecord {
    const payout = payouts.get(originatorConversationId);
    if (!payout) throw new Error(`no payout ${originatorConversationId}`);
    return payout;
  }

  /**
   * Daraja's B2C Result for a recorded payout: its recorded outcome unless overridden. Failures carry no
   * ResultParameters (so no TransactionReceipt); TransactionID is always there. The same payout always
   * gives the same body, as Daraja's duplicates do.
   */
  function b2cResultBody(originatorConversationId: string, overrides: Partial<B2cOutcome> & { amount?: number; receipt?: string } = {}) {
    const payout = payoutOf(originatorConversationId);
    const resultCode = overrides.ResultCode ?? payout.outcome.ResultCode;
    const result: Record<string, unknown> = {
      ResultType: 0,
      ResultCode: resultCode,
      ResultDesc: overrides.ResultDesc ?? (overrides.ResultCode === undefined ? payout.outcome.ResultDesc : `Failed with ${resultCode}`),
      OriginatorConversationID: originatorConversationId,
      ConversationID: payout.conversationId,
      TransactionID: payout.transactionId,
    };
    if (Number(resultCode) === 0) {
      result.ResultParameters = {
        ResultParameter: [
          { Key: "TransactionAmount", Value: overrides.amount ?? payout.body.Amount },
          { Key: "TransactionReceipt", Value: overrides.receipt ?? payout.transactionId },
          { Key: "ReceiverPartyPublicName", Value: `${payout.body.PartyB} - John Doe` },
          { Key: "TransactionCompletedDateTime", Value: payout.completedDateTime },
          { Key: "B2CUtilityAccountAvailableFunds", Value: payout.utilityFundsAfter },
          { Key: "B2CWorkingAccountAvailableFunds", Value: 900_000 },
          { Key: "B2CRecipientIsRegisteredCustomer", Value: "Y" },
          { Key: "B2CChargesPaidAccountAvailableFunds", Value: 0 },
        ],
      };
    }
    result.ReferenceData = { ReferenceItem: { Key: "QueueTimeoutURL", Value: INTERNAL_TIMEOUT_URL } };
    return { Result: result };
  }

  /** What QueueTimeOutURL receives when Daraja's queue gives up on a request: the outcome is unknown, not failed. */
  function b2cTimeoutBody(originatorConversationId: string) {
    const payout = payoutOf(originatorConversationId);
    return {
      Result: {
        ResultType: 0,
        ResultCode: "SFC_IC0003",
        ResultDesc: "The service request timed out.",
        OriginatorConversationID: originatorConversationId,
        ConversationID: payout.conversationId,
        TransactionID: "",
      },
    };
  }

  /**
   * Daraja's Transaction Status Result, as the real one is: the envelope of a B2C Result, but its top-level
   * OriginatorConversationID / ConversationID are the QUERY's, TransactionID is a placeholder, and the
   * payout is described by ResultParameters (OriginatorConversationID, ConversationID, ReceiptNo, Amount,
   * TransactionStatus "Completed" when paid). ResultCode 0 means the query worked, not that the payout did.
   * A query naming no known payout gets ResultCode "R000001" (the fake's choice; Daraja's exact code for
   * this is unconfirmed) and no ResultParameters.
   */
  function statusResultBody(queryOriginatorConversationId: string) {
    const query = [...statusQueries].reverse().find((q) => q.originatorConversationId === queryOriginatorConversationId);
    if (!query) throw new Error(`no status query ${queryOriginatorConversationId}`);
    const ids = { OriginatorConversationID: query.originatorConversationId, ConversationID: query.conversationId };
    const referenceData = { ReferenceItem: { Key: "Occasion", Value: typeof query.body.Occasion === "string" ? query.body.Occasion : "" } };
    /** The query worked (ResultCode 0): the transaction it found, described by its parameters. */
    const found = (transactionId: string, parameters: { Key: string; Value?: unknown }[]) => ({
      Result: {
        ResultType: 0,
        ResultCode: 0,
        ResultDesc: "The service request is processed successfully.",
        ...ids,
        TransactionID: `${transactionId.slice(0, 3)}0000000`,
        ResultParameters: { ResultParameter: parameters },
        ReferenceData: referenceData,
      },
    });
    if (query.payout === null && query.reversal) {
      const reversal = reversals.get(query.reversal)!;
      const code = String(reversal.outcome.ResultCode);
      const reversed = code === "0" || code === "R000001";
      return found(reversal.transactionId, [
        { Key: "DebitPartyName", Value: `${shortcode} - Fake Paybill` },
        { Key: "OriginatorConversationID", Value: query.reversal },
        { Key: "ReasonType", Value: "Reversal" },
        reversed ? { Key: "TransactionReason" } : { Key: "TransactionReason", Value: reversal.outcome.ResultDesc },
        { Key: "TransactionStatus", Value: reversed ? "Completed" : "Failed" },
        { Key: "Amount", Value: reversal.body.Amount },
        { Key: "ConversationID", Value: reversal.conversationId },
        { Key: "ReceiptNo", Value: reversal.transactionId },
      ]);
    }
    if (query.payout === null) {
      return {
        Result: {
          ResultType: 0,
          ResultCode: "R000001",
          ResultDesc: "The transaction does not exist: no payout has this TransactionID or OriginalConversationID.",
          ...ids,
          TransactionID: "SFX0000000",
          ReferenceData: referenceData,
        },
      };
    }
    const payout = payoutOf(query.payout);
    const paid = Number(payout.outcome.ResultCode) === 0;
    return found(payout.transactionId, [
      { Key: "DebitPartyName", Value: `${b2cShortcode} - Fake B2C` },
      { Key: "CreditPartyName", Value: `${payout.body.PartyB} - John Doe` },
      { Key: "OriginatorConversationID", Value: query.payout },
      { Key: "InitiatedTime", Value: payout.completedTimestamp },
      { Key: "DebitAccountType", Value: "Utility Account" },
      paid ? { Key: "DebitPartyCharges", Value: "Fee For B2C Payment|KES|22.40" } : { Key: "DebitPartyCharges" },
      paid ? { Key: "TransactionReason" } : { Key: "TransactionReason", Value: payout.outcome.ResultDesc },
      { Key: "ReasonType", Value: REASON_TYPES[payout.body.CommandID] ?? "Business Payment to Customer via API" },
      { Key: "TransactionStatus", Value: payout.outcome.TransactionStatus ?? (paid ? "Completed" : "Failed") },
      { Key: "FinalisedTime", Value: payout.completedTimestamp },
      { Key: "Amount", Value: payout.body.Amount },
      { Key: "ConversationID", Value: payout.conversationId },
      { Key: "ReceiptNo", Value: payout.transactionId },
    ]);
  }

  async function postResult(kind: PostedResult["kind"], url: string, body: unknown) {
    const posted: PostedResult = { kind, url, body, reply: null };
    postedResults.push(posted);
    try {
      posted.reply = await postJson(url, body);
    } catch (err) {
      posted.error = err instanceof Error ? err.message : String(err);
    }
    return posted.reply;
  }

  function reversalOf(originatorConversationId: string): ReversalRecord {
    const reversal = reversals.get(originatorConversationId);
    if (!reversal) throw new Error(`no reversal ${originatorConversationId}`);
    return reversal;
  }

  /**
   * Daraja's Reversal Result for a recorded reversal: its recorded outcome unless overridden. ResultCode is a
   * string for R-codes and a number for 0 (both occur); failures carry no ResultParameters.
   */
  function reversalResultBody(originatorConversationId: string, overrides: Partial<ReversalOutcome> = {}) {
    const reversal = reversalOf(originatorConversationId);
    const resultCode = overrides.ResultCode ?? reversal.outcome.ResultCode;
    const result: Record<string, unknown> = {
      ResultType: 0,
      ResultCode: resultCode,
      ResultDesc: overrides.ResultDesc ?? (overrides.ResultCode === undefined ? reversal.outcome.ResultDesc : `Failed with ${resultCode}`),
      OriginatorConversationID: originatorConversationId,
      ConversationID: reversal.conversationId,
      TransactionID: reversal.transactionId,
    };
    if (String(resultCode) === "0") {
      result.ResultParameters = {
        ResultParameter: [
          { Key: "DebitAccountBalance", Value: "Utility Account|KES|51661.00|51661.00|0.00|0.00" },
          { Key: "Amount", Value: reversal.body.Amount },
          { Key: "TransCompletedTime", Value: Number(compactNairobi()) },
          { Key: "OriginalTransactionID", Value: reversal.body.TransactionID },
          { Key: "Charge", Value: 0 },
          { Key: "CreditPartyPublicName", Value: "254708374149 - John Doe" },
          { Key: "DebitPartyPublicName", Value: `${shortcode} - Fake Paybill` },
        ],
      };
    }
    result.ReferenceData = { ReferenceItem: { Key: "QueueTimeoutURL", Value: INTERNAL_TIMEOUT_URL } };
    return { Result: result };
  }

  /** POSTs a reversal's Result to its ResultURL (or url); safe to call many times, concurrently. */
  async function sendReversalResult(originatorConversationId: string, overrides: Partial<ReversalOutcome> & { url?: string } = {}) {
    const { url: target, ...rest } = overrides;
    return postResult("reversal_result", target ?? reversalOf(originatorConversationId).body.ResultURL, reversalResultBody(originatorConversationId, rest));
  }

  /** POSTs the queue-timeout notice for a reversal to its QueueTimeOutURL. */
  async function sendReversalTimeout(originatorConversationId: string) {
    const reversal = reversalOf(originatorConversationId);
    const body = {
      Result: { ResultType: 0, ResultCode: "SFC_IC0003", ResultDesc: "The service request timed out.", OriginatorConversationID: originatorConversationId, ConversationID: reversal.conversationId, TransactionID: "" },
    };
    return postResult("reversal_timeout", reversal.body.QueueTimeOutURL, body);
  }

  /** POSTs a payout's Result to its ResultURL (or url); safe to call many times, concurrently. Null when the POST failed. */
  async function sendB2cResult(originatorConversationId: string, overrides: Parameters<typeof b2cResultBody>[1] & { url?: string } = {}) {
    const { url: target, ...rest } = overrides;
    return postResult("b2c_result", target ?? payoutOf(originatorConversationId).body.ResultURL, b2cResultBody(originatorConversationId, rest));
  }

  /** POSTs the queue-timeout notice to the payout's QueueTimeOutURL (or url). */
  async function sendB2cTimeout(originatorConversationId: string, url?: string) {
    return postResult("b2c_timeout", url ?? payoutOf(originatorConversationId).body.QueueTimeOutURL, b2cTimeoutBody(originatorConversationId));
  }

  /** POSTs a status query's Result (named by the query's OriginatorConversationID) to its ResultURL (or url). */
  async function sendStatusResult(queryOriginatorConversationId: string, url?: string) {
    const body = statusResultBody(queryOriginatorConversationId);
    const query = [...statusQueries].reverse().find((q) => q.originatorConversationId === queryOriginatorConversationId)!;
    return postResult("status_result", url ?? query.body.ResultURL, body);
  }

  /** A valid SecurityCredential for this fake: the initiator password encrypted with its public key. */
  function securityCredential(password = initiatorPassword): string {
    return publicEncrypt({ key: publicKey, padding: constants.RSA_PKCS1_PADDING }, Buffer.from(password, "utf8")).toString("base64");
  }

  type ChannelExtra = Record<string, unknown> & {
    initiator_name?: string;
    initiator_password?: string;
    security_credential?: string;
    b2c_shortcode?: string;
  };

  /** The channel config for this fake (a sandbox-environment paybill); extra fields override or add (B2C ones included). */
  function channelConfig(extra: ChannelExtra = {}) {
    return { consumer_key: consumerKey, consumer_secret: consumerSecret, shortcode, passkey, environment: "sandbox", transaction_type: "paybill", ...extra };
  }

  /**
   * channelConfig plus this fake's B2C initiator, password and shortcode. For a channel holding the
   * portal's verbatim credential: b2cChannelConfig({ initiator_password: undefined, security_credential: fake.securityCredential() }).
   */
  function b2cChannelConfig(extra: ChannelExtra = {}) {
    return channelConfig({ initiator_name: initiatorName, initiator_password: initiatorPassword, b2c_shortcode: b2cShortcode, ...extra });
  }

  return {
    url,
    consumerKey,
    consumerSecret,
    shortcode,
    passkey,
    requests,
    pushes,
    queryResults,
    switches,
    validationReplies,
    initiatorName,
    initiatorPassword,
    b2cShortcode,
    /** The fake's RSA public key (SPKI PEM), standing in for Safaricom's certificate. */
    publicKeyPem,
    payouts,
    b2cOutcomes,
    statusQueries,
    postedResults,
    reversals,
    reversalOutcomes,
    reversalResultBody,
    sendReversalResult,
    sendReversalTimeout,
    accountBalances,
    balanceQueries,
    balanceResultBody,
    sendBalanceResult,
    get tokensIssued() {
      return tokensIssued;
    },
    get registered() {
      return registered;
    },
    channelConfig,
    b2cChannelConfig,
    securityCredential,
    /** Writes publicKeyPem to dir and returns the path (for MPESA_CERT_PATH). */
    writePublicKey(dir: string): string {
      const path = join(dir, `daraja-fake-${new URL(url).port}.pem`);
      writeFileSync(path, publicKeyPem);
      return path;
    },
    b2cResultBody,
    b2cTimeoutBody,
    statusResultBody,
    sendB2cResult,
    sendB2cTimeout,
    sendStatusResult,
    stkCallbackBody,
    /** POSTs a callback to the URL the push named (or another URL), as Daraja does. */
    async sendStkCallback(checkoutRequestId: string, result: Parameters<typeof stkCallbackBody>[1] = {}, url?: string) {
      const push = pushes.get(checkoutRequestId)!;
      return postJson(url ?? push.body.CallBackURL, stkCallbackBody(checkoutRequestId, result));
    },
    postJson,
    /** Answers every B2C request held by switches.b2cHoldReply (to a caller that may be gone); returns how many. */
    releaseB2cReplies(): number {
      const held = heldB2cReplies.splice(0);
      for (const release of held) release();
      return held.length;
    },
    /** Answers every Reversal request held by switches.reversalHoldReply (to a caller that may be gone); returns how many. */
    releaseReversalReplies(): number {
      const held = heldReversalReplies.splice(0);
      for (const release of held) release();
      return held.length;
    },
    close: () => {
      for (const release of heldB2cReplies.splice(0)) release();
      for (const release of heldReversalReplies.splice(0)) release();
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export type FakeDaraja = Awaited<ReturnType<typeof startFakeDaraja>>;
