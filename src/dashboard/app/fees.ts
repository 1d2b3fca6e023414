import { formatMoney } from "./format.ts";

/**
 * A channel's fee schedule as people write it: the percentage as "1.5" (%), the fixed part and the cap in major
 * units. The fee itself is never computed here: the preview asks the gateway (feePreview), which computes it as a
 * payment's fee is computed when it completes.
 */

/** "1.5" (%) as basis points (150); null when it is not a percentage from 0 to 100 with at most two decimals. */
export function percentToBps(text: string): number | null {
  const match = /^(\d{1,3})(?:\.(\d{0,2}))?$/.exec(text.trim().replace(/\s*%$/, ""));
  if (!match) return null;
  const bps = Number(match[1]) * 100 + Number((match[2] ?? "").padEnd(2, "0") || "0");
  return bps <= 10_000 ? bps : null;
}

/** 150 as "1.5", 200 as "2", 5 as "0.05". */
export function bpsToPercent(bps: number): string {
  return (bps / 100).toFixed(2).replace(/\.?0+$/, "");
}

export interface FeeScheduleView {
  feePercentBps: number;
  feeFixed: number;
  feeCap: number | null;
}

/** "1.5 % + KES 10.00, at most KES 20.00"; "No fees" for a schedule of nothing. */
export function feeScheduleText(schedule: FeeScheduleView, currency: string): string {
  const parts: string[] = [];
  if (schedule.feePercentBps > 0) parts.push(`${bpsToPercent(schedule.feePercentBps)} %`);
  if (schedule.feeFixed > 0) parts.push(formatMoney(schedule.feeFixed, currency));
  if (parts.length === 0 || schedule.feeCap === 0) return "No fees";
  return `${parts.join(" + ")}${schedule.feeCap !== null ? `, at most ${formatMoney(schedule.feeCap, currency)}` : ""}`;
}
