import type { Config } from "../config.ts";
import type { Database } from "../db/database.ts";
import { GatewayError } from "../errors.ts";
import type { RedisConnections } from "../infra/redis.ts";
import type { Logger } from "../logger.ts";
import type { ReconciliationService } from "../modules/reconciliation/service.ts";
import { loadOrCreateKeyFile, SecretBox } from "../security/encryption.ts";
import { createServices } from "../services.ts";
import { required, UsageError } from "./usage.ts";

/**
 * `reconcile --channel N --date YYYY-MM-DD`: one channel's day against its provider, now, as a new report (the daily
 * job's is kept too). Differences are what a reconciliation is for, so they exit 0 like a clean day; only a run that
 * failed (the provider could not be read) exits 1, with its error. Output is JSON like every command's.
 */
export const reconcileHelp = {
  usage: "reconcile --channel <id> --date <YYYY-MM-DD>",
  help: "Reconciles a payment channel's payments of one UTC day with the provider's record now, stores the report and prints its summary and differences. Exits 0 when it completed (differences or not), 1 when it failed.",
  flags: [
    ["--channel <id>", "the payment channel's id (required)"],
    ["--date <YYYY-MM-DD>", "the UTC day, today or earlier (required)"],
  ] as [string, string][],
};

export type OperatorReconciliations = Pick<ReconciliationService, "runForOperator">;

/** The services a CLI process needs to reconcile (providers, decryption of channel credentials, the verify path). */
export function reconciliationsFor(config: Config, db: Database, redis: RedisConnections | undefined, logger: Logger): OperatorReconciliations {
  const encryptionKey = config.encryptionKey ?? loadOrCreateKeyFile(config.dataDir);
  return createServices({ prisma: db.prisma, sql: db.sql, secrets: new SecretBox(encryptionKey), encryptionKey, config, redis, logger }).reconciliations;
}

export async function runReconcileCommand(options: Record<string, string | boolean | undefined>, reconciliations: OperatorReconciliations | undefined) {
  const channel = Number(required(options, "channel"));
  if (!Number.isSafeInteger(channel) || channel <= 0 || channel > 2_147_483_647) throw new UsageError("--channel must be a payment channel id");
  const date = required(options, "date");
  if (!/^\d{4}-\d{2}-\d{2}$/.test(date)) throw new UsageError("--date must be a day as YYYY-MM-DD (UTC)");
  if (!reconciliations) throw new GatewayError("service_unavailable", "reconcile cannot run here");
  const report = await reconciliations.runForOperator(channel, date);
  if (report.status === "failed") throw new GatewayError("provider_unavailable", `reconciliation ${report.id} of channel ${channel} for ${date} failed: ${report.error ?? "unknown error"}`);
  const summary = report.summary as Record<string, unknown>;
  return {
    reconciliation: { id: report.id, channel_id: report.channelId, date: report.date, status: report.status },
    differences: summary.differences ?? report.items.length,
    items_by_kind: summary.items,
    settled_via_verify: summary.settled_via_verify,
    gateway: summary.gateway,
    provider_record: summary.provider_record,
    ...(summary.settlements ? { settlements: summary.settlements } : {}),
    ...(summary.balance ? { balance: summary.balance } : {}),
    items: report.items.map((i) => ({
      kind: i.kind,
      reference: i.reference,
      provider_reference: i.providerReference,
      gateway: i.gatewayStatus === null ? null : `${i.gatewayStatus} ${i.gatewayAmount ?? ""} ${i.currency ?? ""}`.trim(),
      provider: i.providerStatus === null ? null : `${i.providerStatus} ${i.providerAmount ?? ""} ${i.currency ?? ""}`.trim(),
      resolution: i.resolution,
    })),
  };
}
