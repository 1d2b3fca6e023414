import { isIP } from "node:net";
import type { Principal } from "../../auth.ts";
import { isPublicAddress } from "../../security/url-guard.ts";
import type { ChannelService, PaymentChannel } from "../channels/service.ts";
import type { MerchantService } from "../merchants/service.ts";
import type { MomoService } from "../momo/service.ts";
import type { UserService } from "../users/service.ts";
import type { WebhookService } from "../webhooks/service.ts";

/**
 * The go-live checklist: what must be true before real money flows, read from live mode whatever the caller's mode
 * (a test-mode session prepares the live launch too). Each check says what is wrong (or right) in the merchant's
 * words and where it is fixed: a dashboard page or what to set. `ready` only when every check is ok.
 *
 * The ids are stable and in this order; a check that does not apply (C2B when no live channel takes it) is present
 * and ok, so a client can show the same list for every merchant.
 */
export const GO_LIVE_CHECK_IDS = ["public_https_url", "live_channel", "live_channel_credentials", "c2b_urls", "webhook_endpoint", "live_api_key", "owners", "mail"] as const;
export type GoLiveCheckId = (typeof GO_LIVE_CHECK_IDS)[number];

export interface GoLiveCheck {
  id: GoLiveCheckId;
  ok: boolean;
  message: string;
  fix: string;
}

export interface GoLiveReport {
  ready: boolean;
  checks: GoLiveCheck[];
}

/** A webhook endpoint counts as working when it answered a 2xx this recently. */
export const WEBHOOK_PROOF_DAYS = 7;
/** Owners a merchant needs, so that one leaving does not lock the rest out of what only owners can do. */
export const MIN_OWNERS = 2;

/** Where each check is fixed: dashboard pages (under /dashboard, in live mode) or the gateway's environment. */
const FIX = {
  public_https_url: "Set PUBLIC_BASE_URL to the gateway's public https address (e.g. https://pay.example.com) and restart it",
  live_channel: "/dashboard/channels",
  live_channel_credentials: "/dashboard/channels",
  c2b_urls: "POST /api/momo/register-c2b-urls with a live key (payment_channel_id, confirmation_url, validation_url)",
  webhook_endpoint: "/dashboard/webhooks",
  live_api_key: "/dashboard/api-keys",
  owners: "/dashboard/users",
  mail: "Set SMTP_URL (e.g. smtp://user:password@smtp.example.com:587) and MAIL_FROM, and restart the gateway",
} satisfies Record<GoLiveCheckId, string>;

/** Names that never reach the public internet: one label, or a suffix reserved for local networks. */
const LOCAL_SUFFIXES = [".localhost", ".local", ".internal", ".lan", ".home.arpa", ".test", ".invalid", ".example"];

/**
 * Why PUBLIC_BASE_URL cannot take Daraja's callbacks and payers' browsers (plain http, a loopback or private
 * address, a local name), or null when it can. Only the URL is judged: no DNS lookup, so the answer is stable.
 */
export function publicBaseUrlProblem(publicBaseUrl: string): string | null {
  let url: URL;
  try {
    url = new URL(publicBaseUrl);
  } catch {
    return `PUBLIC_BASE_URL (${publicBaseUrl}) is not a URL`;
  }
  if (url.protocol !== "https:") return `PUBLIC_BASE_URL is ${url.origin}: M-Pesa posts payment results only to https addresses, and payers' card pages need https`;
  const host = url.hostname.replace(/^\[|\]$/g, "").toLowerCase();
  if (isIP(host)) {
    return isPublicAddress(host) ? null : `PUBLIC_BASE_URL is ${url.origin}, a private or loopback address that providers and payers cannot reach`;
  }
  if (host === "localhost" || !host.includes(".") || LOCAL_SUFFIXES.some((suffix) => host.endsWith(suffix))) {
    return `PUBLIC_BASE_URL is ${url.origin}, a name that only this machine or network knows; providers and payers cannot reach it`;
  }
  return null;
}

export interface GoLiveServiceDeps {
  config: { publicBaseUrl: string; smtpConfigured: boolean };
  channels: ChannelService;
  momo: Pick<MomoService, "c2bStatus">;
  webhooks: Pick<WebhookService, "latestSuccessfulDelivery" | "countEndpoints">;
  merchants: Pick<MerchantService, "activeKeyCount">;
  users: Pick<UserService, "activeOwnerCount">;
}

const label = (channel: PaymentChannel) => `${channel.name} (${channel.provider})`;
const day = (date: Date) => date.toISOString().slice(0, 10);
const minute = (date: Date) => `${date.toISOString().slice(0, 16).replace("T", " ")} UTC`;

export function createGoLiveService(deps: GoLiveServiceDeps) {
  const { channels, momo, webhooks, merchants, users, config } = deps;

  function publicUrlCheck(): GoLiveCheck {
    const problem = publicBaseUrlProblem(config.publicBaseUrl);
    return { id: "public_https_url", ok: problem === null, message: problem ?? `The gateway's public address is ${config.publicBaseUrl}`, fix: FIX.public_https_url };
  }

  async function channelChecks(live: Principal): Promise<GoLiveCheck[]> {
    // A live channel of a test provider (made before that was refused) takes no money: it does not count.
    const active = (await channels.listChannels(live, { activeOnly: true })).filter((channel) => channels.isUsableChannel(channel));
    const none = "There is no active live channel yet";
    const liveChannel: GoLiveCheck = active.length
      ? { id: "live_channel", ok: true, message: `Live payments go through ${active.map(label).join(", ")}`, fix: FIX.live_channel }
      : { id: "live_channel", ok: false, message: `${none}: add an M-Pesa or Paystack channel with your production credentials in live mode`, fix: FIX.live_channel };

    const verdicts = await channels.credentialChecks(active.map((channel) => channel.id));
    const problems: string[] = [];
    for (const channel of active) {
      const verdict = verdicts.get(channel.id);
      if (!verdict) problems.push(`${label(channel)}: its credentials have not been checked with the provider yet (Check again)`);
      else if (!verdict.ok) problems.push(`${label(channel)}: ${verdict.message} (checked ${minute(verdict.checkedAt)})`);
    }
    const credentials: GoLiveCheck = !active.length
      ? { id: "live_channel_credentials", ok: false, message: `${none}, so no credentials have been checked`, fix: FIX.live_channel_credentials }
      : problems.length
        ? { id: "live_channel_credentials", ok: false, message: problems.join("; "), fix: FIX.live_channel_credentials }
        : {
            id: "live_channel_credentials",
            ok: true,
            message: active.map((channel) => `${label(channel)}: ${verdicts.get(channel.id)!.message}`).join("; "),
            fix: FIX.live_channel_credentials,
          };

    const c2b = await Promise.all(active.map(async (channel) => ({ channel, ...(await momo.c2bStatus(channel)) })));
    const takingC2b = c2b.filter((entry) => entry.takesC2b);
    const unregistered = takingC2b.filter((entry) => !entry.registered);
    const c2bUrls: GoLiveCheck = !takingC2b.length
      ? { id: "c2b_urls", ok: true, message: "No live channel takes payments made from the M-Pesa menu (C2B), so there are no URLs to register", fix: FIX.c2b_urls }
      : unregistered.length
        ? {
            id: "c2b_urls",
            ok: false,
            message: `Payments made to ${unregistered.map((entry) => `${label(entry.channel)}`).join(", ")} from the M-Pesa menu will not be recorded: register its C2B URLs with M-Pesa (or set "c2b": false in the channel's config if payers only ever get STK prompts)`,
            fix: FIX.c2b_urls,
          }
        : { id: "c2b_urls", ok: true, message: `C2B URLs are registered for ${takingC2b.map((entry) => label(entry.channel)).join(", ")}`, fix: FIX.c2b_urls };
    return [liveChannel, credentials, c2bUrls];
  }

  async function webhookCheck(live: Principal): Promise<GoLiveCheck> {
    const since = new Date(Date.now() - WEBHOOK_PROOF_DAYS * 24 * 3600_000);
    const proof = await webhooks.latestSuccessfulDelivery(live, since);
    if (proof) {
      return {
        id: "webhook_endpoint",
        ok: true,
        message: `${proof.endpoint.url} answered ${proof.lastStatusCode ?? "2xx"} to a live event on ${day(proof.deliveredAt!)}`,
        fix: FIX.webhook_endpoint,
      };
    }
    const endpoints = await webhooks.countEndpoints(live);
    const message = endpoints
      ? `No live webhook endpoint answered an event with a 2xx in the last ${WEBHOOK_PROOF_DAYS} days: your systems would not hear of payments (see the endpoint's deliveries, or send an event again)`
      : "There is no live webhook endpoint: your systems would not hear of payments as they complete";
    return { id: "webhook_endpoint", ok: false, message, fix: FIX.webhook_endpoint };
  }

  async function keyCheck(live: Principal): Promise<GoLiveCheck> {
    const keys = await merchants.activeKeyCount(live.merchantId, "live");
    return keys
      ? { id: "live_api_key", ok: true, message: `${keys} live API key${keys === 1 ? "" : "s"} can take payments`, fix: FIX.live_api_key }
      : { id: "live_api_key", ok: false, message: "There is no live API key: your systems cannot start live payments (create one in live mode; it is shown once)", fix: FIX.live_api_key };
  }

  async function ownersCheck(live: Principal): Promise<GoLiveCheck> {
    const owners = await users.activeOwnerCount(live.merchantId);
    return owners >= MIN_OWNERS
      ? { id: "owners", ok: true, message: `${owners} owners can sign in`, fix: FIX.owners }
      : {
          id: "owners",
          ok: false,
          message: `${owners === 0 ? "No owner" : "Only one owner"} can sign in: add a second owner, so that live channels, payouts and the team are not locked away if one leaves`,
          fix: FIX.owners,
        };
  }

  function mailCheck(): GoLiveCheck {
    return config.smtpConfigured
      ? { id: "mail", ok: true, message: "E-mail is sent through the configured SMTP server (receipts, notices to your team)", fix: FIX.mail }
      : { id: "mail", ok: false, message: "No SMTP server is configured: receipts to payers and notices to your team are not sent", fix: FIX.mail };
  }

  return {
    /** The merchant's checklist, read in live mode whatever the principal's mode. */
    async report(principal: Principal): Promise<GoLiveReport> {
      const live: Principal = { ...principal, mode: "live" };
      const [channelResults, webhook, key, owners] = await Promise.all([channelChecks(live), webhookCheck(live), keyCheck(live), ownersCheck(live)]);
      const checks = [publicUrlCheck(), ...channelResults, webhook, key, owners, mailCheck()];
      return { ready: checks.every((check) => check.ok), checks };
    },
  };
}

export type GoLiveService = ReturnType<typeof createGoLiveService>;
