import { GatewayError } from "../errors.ts";
import { currentProviderCallScope, type ProviderCallRecord, type ProviderCallSink } from "./call-record.ts";
import type { Scrubber } from "./scrub.ts";

/**
 * The one way a connector calls its provider. Every call has a deadline, and every exchange is handed
 * (scrubbed by the connector's own scrubber) to the call sink with the scope the core set around it.
 *
 * Unknown vs refused: a call that got no whole answer (timed out, could not connect, reset, its answer cut
 * off) throws `provider_unavailable`, which the core treats as "the provider may have acted: ask, never resend".
 * An answer, whatever its status, is handed back: what a 4xx or 5xx means is the provider's own rule (Daraja
 * refuses with an errorCode even on a 500; Paystack's 429 is worth retrying), decided by its client.
 */
export interface ProviderHttpOptions {
  /** The connector's registry name, recorded with each call ("mpesa"). */
  connector: string;
  /** The provider as people read it, in error messages ("M-Pesa"). */
  label: string;
  timeoutMs: number;
  recordCall?: ProviderCallSink | undefined;
}

export interface ProviderHttpRequest {
  /** What the call does, in words for messages ("STK push"); recorded in snake_case ("stk_push"). */
  operation: string;
  method: "GET" | "POST" | "PUT";
  url: string;
  headers?: Record<string, string>;
  /** Sent as JSON. */
  body?: unknown;
  /** Sent as these bytes instead of `body` (a file to a signed upload URL); recorded as its size and type, never its bytes. */
  file?: { bytes: Buffer; contentType: string };
  /** The connector's scrubber for this channel: applied to both bodies before they are recorded. */
  scrub: Scrubber;
}

export interface ProviderHttpAnswer {
  status: number;
  /** The body when it is a JSON object; null otherwise (empty, HTML, an array). */
  body: Record<string, any> | null;
}

/** Bodies longer than this are cut in the record (Paystack's list pages run to hundreds of kilobytes). */
const RECORDED_BODY_LIMIT = 64 * 1024;

/** "STK push" -> "stk_push". */
export const operationName = (words: string) => words.trim().toLowerCase().replace(/[^a-z0-9]+/g, "_").replace(/^_|_$/g, "");

/** Why no answer came, in a few words: what the record keeps and the message says. */
function whyUnanswered(error: unknown, timedOut: boolean): "timeout" | "connection refused" | "connection reset" | string {
  if (timedOut || (error as Error)?.name === "TimeoutError") return "timeout";
  const code = (error as { cause?: { code?: string } })?.cause?.code ?? (error as { code?: string })?.code;
  if (code === "ECONNREFUSED") return "connection refused";
  if (code === "ECONNRESET" || code === "UND_ERR_SOCKET" || code === "EPIPE") return "connection reset";
  return code ?? ((error as Error)?.message || "no answer");
}

function parseObject(raw: string): Record<string, any> | null {
  try {
    const parsed = JSON.parse(raw) as unknown;
    return parsed && typeof parsed === "object" && !Array.isArray(parsed) ? (parsed as Record<string, any>) : null;
  } catch {
    return null;
  }
}

function pathOf(url: string): string {
  try {
    return new URL(url).pathname;
  } catch {
    return url.split("?")[0] ?? url;
  }
}

export function createProviderHttp(options: ProviderHttpOptions) {
  const { label } = options;

  function record(request: ProviderHttpRequest, startedAt: number, requestText: string | null, answer: { status: number | null; text: string | null; error: string | null }) {
    if (!options.recordCall) return;
    const scrubbed = (text: string | null) => (text === null || text === "" ? null : request.scrub(text).slice(0, RECORDED_BODY_LIMIT));
    const entry: ProviderCallRecord = {
      connector: options.connector,
      operation: operationName(request.operation),
      method: request.method,
      path: pathOf(request.url),
      statusCode: answer.status,
      durationMs: Math.max(0, Math.round(performance.now() - startedAt)),
      requestBody: scrubbed(requestText),
      responseBody: scrubbed(answer.text),
      error: answer.error,
    };
    try {
      options.recordCall(entry, currentProviderCallScope());
    } catch {
      // The record is for support; a sink that fails never changes the call's outcome.
    }
  }

  return async function send(request: ProviderHttpRequest): Promise<ProviderHttpAnswer> {
    const { file } = request;
    const json = file || request.body === undefined ? null : JSON.stringify(request.body);
    const requestText = file ? `<file ${file.bytes.length} bytes ${file.contentType}>` : json;
    const signal = AbortSignal.timeout(options.timeoutMs);
    const startedAt = performance.now();
    let response: Response;
    try {
      response = await fetch(request.url, {
        method: request.method,
        headers: { ...(file ? { "content-type": file.contentType } : json === null ? {} : { "content-type": "application/json" }), ...request.headers },
        // A copy typed as fetch wants it (a Buffer may sit on a shared ArrayBuffer).
        ...(file ? { body: new Uint8Array(file.bytes) } : json === null ? {} : { body: json }),
        signal,
      });
    } catch (error) {
      const why = whyUnanswered(error, signal.aborted);
      record(request, startedAt, requestText, { status: null, text: null, error: why });
      const message = why === "timeout" ? `${label} did not answer the ${request.operation} in time` : `${label} could not be reached for the ${request.operation}`;
      throw new GatewayError("provider_unavailable", message, { cause: error });
    }
    let raw: string;
    try {
      raw = await response.text();
    } catch (error) {
      // The request got there and its answer was cut off: what the provider did is unknown, not refused.
      const why = whyUnanswered(error, signal.aborted);
      record(request, startedAt, requestText, { status: response.status, text: null, error: `answer cut off (${why})` });
      throw new GatewayError("provider_unavailable", `${label}'s answer to the ${request.operation} was cut off`, { cause: error });
    }
    record(request, startedAt, requestText, { status: response.status, text: raw, error: null });
    return { status: response.status, body: parseObject(raw) };
  };
}

export type ProviderHttp = ReturnType<typeof createProviderHttp>;
