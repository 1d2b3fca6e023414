import type { Principal } from "../../auth.ts";
import type { PrismaClient } from "../../db/database.ts";
import type { Prisma } from "../../db/generated/prisma/client.ts";
import { GatewayError } from "../../errors.ts";
import { recordRecoveryPoint, recoveredObject } from "../../idempotency/scope.ts";
import { askUntilSettled } from "../../jobs/ask-until-settled.ts";
import { enqueue, reschedule, type JobKey } from "../../jobs/store.ts";
import type { Logger } from "../../logger.ts";
import { withProviderCallScope, type ProviderCallScope } from "../../providers/call-record.ts";
import type { SettledCollectionOutcome } from "../../providers/types.ts";
import { applyTransition, type StatusMachineDeps, type StatusRow, type StatusTable } from "../events/status-machine.ts";

/**
 * The life of money sent out of a merchant's balance (a payout, a refund), shared by both services; each keeps only
 * its own rules (which channel or rail, what matches a result, what a pending answer records):
 *
 * - send once: the row is committed with its reservation (available -> pending_out), its recovery point and the
 *   job that will ask about it, before the provider hears of it; then the one connector call. A refusal settles
 *   it as failed; anything else leaves it pending, to be asked about, never sent again.
 * - settle: a provider's outcome goes through the one status machine, whose statement also writes its postings.
 * - ask until settled: the status-query job, and "ask now" when the provider's queue gave up on the request.
 *
 * Every connector call runs inside withProviderCallScope, so the provider calls it makes are on record for the row.
 */

/** The columns an outcome writes. */
type OutcomeChange = "providerReference" | "failureCode" | "failureReason";

export interface MoneyOutRow extends StatusRow {
  reference: string;
  status: string;
  providerReference: string | null;
  failureReason: string | null;
}

export interface MoneyOutKind<Row extends MoneyOutRow, Change extends string> {
  /** Its part in the status machine; `subject` also names its recovery points and its job's payload ({ payoutId }). */
  table: StatusTable<Row, Change, unknown>;
  /** The kind of its status-query job. */
  queryJob: string;
  /** What the provider calls made about a row belong to. */
  callScope(row: Row): ProviderCallScope;
  /** Its store's read of one row in the caller's merchant and mode. */
  findScoped(db: PrismaClient, principal: Principal, key: { id: number }): Promise<Row | null>;
}

export interface MoneyOutDeps extends StatusMachineDeps {
  logger: Logger;
}

export interface SendSteps<Row> {
  /** Inserts the row with its reservation, in the caller's transaction; throws a refusal. */
  reserve(tx: Prisma.TransactionClient): Promise<Row>;
  /** When to ask about it first, if no result came. */
  firstAskInMs: number;
  /** The one connector call, and what its answer records (run inside the row's provider-call scope). */
  send(row: Row): Promise<void>;
  /** The provider refused it: nothing was sent. Settles it as failed (and may throw to the caller). */
  refused(row: Row, error: GatewayError): Promise<void>;
  transactionOptions?: { maxWait?: number; timeout?: number };
}

/** A key given as digits is an id, anything else a reference. */
export const idOrReference = (key: string): { id: number } | { reference: string } => {
  const trimmed = key.trim();
  return /^\d{1,9}$/.test(trimmed) ? { id: Number(trimmed) } : { reference: trimmed };
};

/** `Extra`: the columns beyond an outcome's that the kind writes with it (a refund's reversed receipt). */
export function createMoneyOut<Row extends MoneyOutRow, Extra extends string = never>(deps: MoneyOutDeps, kind: MoneyOutKind<Row, OutcomeChange | Extra>) {
  const { prisma, logger } = deps;
  // Payouts and refunds: the money objects that are sent out.
  const subject = kind.table.subject as "payout" | "refund";

  /** A connector call about `row`, on record against it. */
  const callFor = <T>(row: Row, call: () => Promise<T>): Promise<T> => withProviderCallScope(kind.callScope(row), call);
  const jobIdField = `${subject}Id`;
  const jobKey = (id: number): JobKey => ({ [jobIdField]: id });

  return {
    callFor,

    /**
     * A settled outcome through the status machine (exactly once, with its event and postings). A note kept while
     * pending no longer applies once it completed; `extra` is what the kind writes with it.
     */
    applyOutcome(row: Row, outcome: SettledCollectionOutcome | { state: "completed"; providerReference: string | null }, extra: Partial<Record<Extra, string | null>> = {}) {
      const changes: Partial<Record<OutcomeChange, string | null>> =
        outcome.state === "completed"
          ? { providerReference: outcome.providerReference ?? row.providerReference, ...(row.failureReason !== null ? { failureReason: null } : {}) }
          : { failureCode: outcome.code, failureReason: outcome.message.slice(0, 500) || null };
      return applyTransition(deps, kind.table, { id: row.id, to: outcome.state, changes: { ...changes, ...extra } as Partial<Record<OutcomeChange | Extra, string | null>> });
    },

    /** The row an interrupted earlier attempt of this Idempotency-Keyed request committed: it is never sent twice. */
    recovered: (principal: Principal) => recoveredObject(principal, subject, (id) => kind.findScoped(prisma, principal, { id })),

    /** Reserve, commit, then send once (see the top of this file); answers the row as it stands after. */
    async reserveAndSend(principal: Principal, steps: SendSteps<Row>): Promise<Row> {
      const row = await prisma.$transaction(async (tx) => {
        const reserved = await steps.reserve(tx);
        await recordRecoveryPoint(tx, principal, subject, reserved.id);
        await enqueue(tx, kind.queryJob, jobKey(reserved.id), { runAt: new Date(Date.now() + steps.firstAskInMs) });
        return reserved;
      }, steps.transactionOptions);
      deps.metrics?.statusChanged(subject, "pending", row.channelId);
      try {
        await callFor(row, () => steps.send(row));
      } catch (error) {
        // A refusal is final: the provider said no, so nothing was sent. Anything else is unknown: stay pending, ask later.
        if (error instanceof GatewayError && error.code !== "provider_unavailable") {
          await steps.refused(row, error);
        } else {
          logger.warn({ reference: row.reference, err: (error as Error).message }, `${subject} outcome unknown; it stays pending until the provider is asked`);
        }
      }
      return (await kind.table.findById(deps.sql, row.id))!;
    },

    /** Registers the status-query job (src/jobs/ask-until-settled.ts). */
    askUntilSettled<Loaded extends Row, Via>(options: {
      find(id: number): Promise<Loaded | null>;
      via(row: Loaded): Via | undefined;
      /** Asks (inside callFor) and answers whether the row is settled now. */
      ask(row: Loaded, via: Via): Promise<boolean>;
      firstWaitMs(via: Via): number;
    }) {
      deps.jobs.register(askUntilSettled({ kind: kind.queryJob, logger, ...options, find: (payload: JobKey) => options.find(Number(payload[jobIdField])) }));
    },

    /** The provider's queue gave up on the request: whether it went through is unknown, so ask now rather than wait. */
    async askNow(row: Row | null): Promise<void> {
      if (!row || row.status !== "pending") return;
      await reschedule(prisma, kind.queryJob, jobKey(row.id), new Date());
      deps.jobs.nudge();
    },
  };
}
