import { MAIL_FAN_OUT_CTES } from "../mail/store.ts";
import { WEBHOOK_FAN_OUT_CTES } from "../webhooks/store.ts";

/**
 * Everything an event fans out to, as CTEs over a CTE named `ev` (id, merchant_id, mode, type, payload) of the
 * events a statement records: webhook deliveries (webhooks/store.ts) and e-mails (mail/store.ts), each with its
 * job, so an event that never committed is never sent and one that did is sent once. `fan_out_jobs` has a row
 * per job queued (the caller nudges the runner when there are any).
 */
export const EVENT_FAN_OUT_CTES = `${WEBHOOK_FAN_OUT_CTES}, ${MAIL_FAN_OUT_CTES}, fan_out_jobs AS (SELECT id FROM delivery_jobs UNION ALL SELECT id FROM mail_jobs)`;

/** The number of jobs the fan-out queued, as a scalar subquery. */
export const FAN_OUT_JOBS_QUEUED = "(SELECT count(*)::int FROM fan_out_jobs)";
