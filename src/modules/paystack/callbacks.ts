import type { FastifyInstance } from "fastify";
import { GatewayError, NotFoundError } from "../../errors.ts";
import type { Services } from "../../services.ts";

/** Paystack's webhooks are small; anything larger is not one. */
const WEBHOOK_BODY_LIMIT_BYTES = 256 * 1024;

/**
 * Paystack's webhooks for one channel, at the URL its create response shows (`webhook_url`). No API
 * key: the per-channel token in the path finds the channel, and `x-paystack-signature` (HMAC-SHA512 of
 * the exact bytes, keyed with the channel's secret key) is checked before anything is read. A signed
 * event only says what to look at: the outcome is taken from Paystack's verify endpoint, and applied
 * through the state machine, so 50 copies of one webhook make one transition.
 */
export function registerPaystackCallbackRoutes(app: FastifyInstance, services: Services) {
  const { channels, connectors, transactions, payouts } = services;

  async function handle(segment: string, rawBody: Buffer, headers: Record<string, string | string[] | undefined>) {
    const channel = await channels.findByCallbackSegment(segment, "paystack");
    const hosted = channel ? connectors.for(channel)?.hosted : undefined;
    if (!channel || !hosted) throw new NotFoundError("Callback");
    const notification = hosted.readNotification({ config: channels.readChannelConfig(channel), rawBody, headers });
    if (!notification) throw new GatewayError("invalid_signature");
    if (notification.kind === "collection") {
      await transactions.verifyHostedPaymentByReference(notification.reference, `webhook ${notification.event}`, channel.id);
    } else if (notification.kind === "payout") {
      await payouts.verifyPayout(channel, notification.reference);
    }
    return hosted.notificationAck();
  }

  // The signature covers the bytes as sent, so this route keeps its body raw.
  app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser("*", { parseAs: "buffer", bodyLimit: WEBHOOK_BODY_LIMIT_BYTES }, (_request, body, done) => done(null, body));
    scope.post<{ Params: { token: string } }>("/callbacks/paystack/:token", async (request, reply) => {
      const rawBody = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
      const ack = await handle(request.params.token, rawBody, request.headers);
      return reply.code(200).type("application/json; charset=utf-8").send(ack);
    });
  });
}
