import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A loopback Daraja: OAuth, STK push and query, C2B register and simulate, speaking the documented
 * wire formats (see /work/shared/notes/providers.md) and checking what a real Daraja checks
 * (token, Password, Nairobi Timestamp, field limits, forbidden callback-URL words).
 * Switches reproduce its failures; sendStkCallback posts callbacks the way Daraja does.
 */
export const SANDBOX_SHORTCODE = "174379";
export const SANDBOX_PASSKEY = "bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919";

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

const FORBIDDEN = ["mpesa", "safaricom", "exe", "exec", "cmd", "sql", "query"];

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

export async function startFakeDaraja(options: { consumerKey?: string; consumerSecret?: string; shortcode?: string; passkey?: string } = {}) {
  const consumerKey = options.consumerKey ?? `ck_${randomBytes(6).toString("hex")}`;
  const consumerSecret = options.consumerSecret ?? `cs_${randomBytes(12).toString("hex")}`;
  const shortcode = options.shortcode ?? SANDBOX_SHORTCODE;
  const passkey = options.passkey ?? SANDBOX_PASSKEY;

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
  };
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
    }
    return { status: 404, body: { errorMessage: "Not found" } };
  }

  async function postJson(url: string, body: unknown) {
    const target = switches.callbackOrigin ? `${switches.callbackOrigin}${new URL(url).pathname}` : url;
    const response = await fetch(target, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    const text = await response.text();
    let parsed: any;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    return { status: response.status, body: parsed };
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
    get tokensIssued() {
      return tokensIssued;
    },
    get registered() {
      return registered;
    },
    /** The channel config for this fake (a sandbox-environment paybill). */
    channelConfig(extra: Record<string, unknown> = {}) {
      return { consumer_key: consumerKey, consumer_secret: consumerSecret, shortcode, passkey, environment: "sandbox", transaction_type: "paybill", ...extra };
    },
    stkCallbackBody,
    /** POSTs a callback to the URL the push named (or another URL), as Daraja does. */
    async sendStkCallback(checkoutRequestId: string, result: Parameters<typeof stkCallbackBody>[1] = {}, url?: string) {
      const push = pushes.get(checkoutRequestId)!;
      return postJson(url ?? push.body.CallBackURL, stkCallbackBody(checkoutRequestId, result));
    },
    postJson,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

export type FakeDaraja = Awaited<ReturnType<typeof startFakeDaraja>>;
