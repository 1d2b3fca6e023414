import type { PaymentChannel } from "../../db/generated/prisma/client.ts";
import type { Connectors } from "../../providers/index.ts";
import type { CallbackUrlBuilder, ChannelCallbackUrls, RefundCallbackUrls } from "../../providers/types.ts";
import { encodeCallbackToken } from "./service.ts";

type ChannelKey = Pick<PaymentChannel, "provider" | "callbackToken">;

/**
 * The gateway's own callback URLs for a channel, as its connector lays them out under
 * `${PUBLIC_BASE_URL}/callbacks/<segment>/<hex token>`: the core names no provider and no path.
 */
export function createCallbackUrls(connectors: Connectors, publicBaseUrl: string) {
  const builder = (channel: ChannelKey): CallbackUrlBuilder => {
    const token = encodeCallbackToken(channel.callbackToken);
    return (segment, path) => `${publicBaseUrl}/callbacks/${segment}/${token}${path}`;
  };

  return {
    /** Handed to the provider with each request; throws a ValidationError when the provider would refuse them. */
    of(channel: ChannelKey): ChannelCallbackUrls {
      return connectors.for(channel)?.inbound?.callbackUrls(builder(channel)) ?? {};
    },

    /** Where the provider posts one refund's result, timeout and status answer; undefined when it posts none. */
    refundsOf(channel: ChannelKey, reference: string): RefundCallbackUrls | undefined {
      return connectors.for(channel)?.inbound?.refundCallbackUrls?.(builder(channel), reference);
    },

    /** Where the provider posts the answer to a balance request made for one reconciliation; undefined when it posts none. */
    balanceOf(channel: ChannelKey, reference: string): { result: string; timeout: string } | undefined {
      return connectors.for(channel)?.inbound?.balanceCallbackUrls?.(builder(channel), reference);
    },

    /** The URL a merchant pastes into the provider's dashboard; null when the gateway hands out its URLs itself. */
    webhookUrl(channel: ChannelKey): string | null {
      return connectors.for(channel)?.inbound?.webhookUrl?.(builder(channel)) ?? null;
    },
  };
}

export type CallbackUrls = ReturnType<typeof createCallbackUrls>;
