import type { PrismaClient } from "../../db/database.ts";
import type { Event, Mode, Prisma } from "../../db/generated/prisma/client.ts";
import type { JobRunner } from "../../jobs/runner.ts";
import { enqueueJobs, type JobRequest } from "../../jobs/store.ts";
import type { EventPublisher, PublishedEvent } from "./publisher.ts";
import { recordEvent } from "./outbox.ts";
import { guardStatus, type Status, type TerminalStatus } from "./status-rules.ts";

/**
 * How a status changes: pending -> completed | failed, and terminal states never change (the rules:
 * status-rules.ts). This is the
 * payouts' implementation; transactions, on every payment's path, keep the same contract in one SQL
 * statement (transactions/state-machine.ts). The row update and its Event (with the
 * event's webhook deliveries and any follow-up jobs) are written in one database transaction; the
 * update is conditional on the row still being pending, so of any number of concurrent callers
 * exactly one applies the change (PostgreSQL re-checks the WHERE after waiting on the row lock).
 * Subscribers hear of it only after commit.
 */
export type { TerminalStatus };

export interface StatusChangeDeps {
  prisma: PrismaClient;
  publisher: EventPublisher;
  jobs: JobRunner;
  /** Told once per committed change (metrics); never of a change that did not apply or rolled back. */
  metrics?: StatusCounter;
}

/** Counts status changes (src/metrics): `pending` when a row is created, then its terminal status. */
export interface StatusCounter {
  statusChanged(subject: "transaction" | "payout", status: "pending" | TerminalStatus, channelId: number | null): void;
}

/** How one table takes part: its conditional update, its re-read, its snapshot and its event's link. */
export interface StatusSubject<Row extends { merchantId: number; mode: Mode; channelId: number | null }> {
  /** The event type's prefix: transaction.completed, payout.failed ... */
  name: "transaction" | "payout";
  /** Sets the status (and changes) only while the row's status is `from` (pending); returns the number of rows changed. */
  update(tx: Prisma.TransactionClient, id: number, from: Status, data: Record<string, unknown>): Promise<number>;
  read(tx: Prisma.TransactionClient, id: number): Promise<Row>;
  snapshot(row: Row): Prisma.InputJsonObject;
  link(id: number): { transactionId: number } | { payoutId: number };
}

export interface StatusChangeResult<Row> {
  /** False when the row was already terminal: nothing was written. */
  applied: boolean;
  row: Row;
  event: PublishedEvent | null;
}

export function toPublishedEvent(event: Event): PublishedEvent {
  return {
    id: event.id.toString(),
    type: event.type,
    merchantId: event.merchantId,
    mode: event.mode,
    transactionId: event.transactionId,
    payoutId: event.payoutId,
    createdAt: event.createdAt.toISOString(),
    payload: event.payload,
  };
}

/** After commit: subscribers hear of the event, and this instance starts on the jobs it queued. */
export function afterCommit(deps: StatusChangeDeps, event: Event | null, jobsQueued: number): PublishedEvent | null {
  const published = event ? toPublishedEvent(event) : null;
  if (published) deps.publisher.publish(published);
  if (jobsQueued > 0) deps.jobs.nudge();
  return published;
}

export async function changeStatus<Row extends { merchantId: number; mode: Mode; channelId: number | null }>(
  deps: StatusChangeDeps,
  subject: StatusSubject<Row>,
  request: { id: number; to: TerminalStatus; changes?: Record<string, unknown>; jobs?: JobRequest[] },
): Promise<StatusChangeResult<Row>> {
  const outcome = await deps.prisma.$transaction(async (tx) => {
    const data = { ...request.changes, status: request.to, ...(request.to === "completed" ? { completedAt: new Date() } : {}) };
    const count = await subject.update(tx, request.id, guardStatus(request.to), data);
    const row = await subject.read(tx, request.id);
    if (count === 0) return { row, event: null, jobsQueued: 0 };
    const { event, deliveriesQueued } = await recordEvent(tx, {
      merchantId: row.merchantId,
      mode: row.mode,
      type: `${subject.name}.${request.to}`,
      ...subject.link(request.id),
      payload: { [subject.name]: subject.snapshot(row) },
    });
    await enqueueJobs(tx, request.jobs ?? []);
    return { row, event, jobsQueued: deliveriesQueued + (request.jobs?.length ?? 0) };
  });
  const event = afterCommit(deps, outcome.event, outcome.jobsQueued);
  if (event) deps.metrics?.statusChanged(subject.name, request.to, outcome.row.channelId);
  return { applied: event !== null, row: outcome.row, event };
}
