import { postOutbound, type OutboundResult } from "../../security/outbound.ts";

export type SendResult = OutboundResult;

/**
 * POSTs one signed webhook through the gateway's one outbound-HTTP path (src/security/outbound.ts):
 * a 2xx within the timeout is success, a redirect is not followed, the connected address is checked.
 */
export function sendWebhook(url: string, headers: Record<string, string>, body: string, options: { timeoutMs: number; allowPrivate: boolean }): Promise<SendResult> {
  return postOutbound(url, { headers, body, ...options });
}
