import { useEffect } from "preact/hooks";
import { onDisputeEvent, onLiveStatus, onRefundEvent, onTransactionEvent } from "./live.ts";

/**
 * Runs `reload` shortly after money moves (a payment or refund settles, a dispute holds or releases an amount, or the
 * live connection comes back after events may have been missed), once for a burst of events: what the Overview's
 * figures and balances follow.
 */
export function useReloadOnMoney(reload: () => unknown, delayMs = 400) {
  useEffect(() => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const soon = () => {
      clearTimeout(timer);
      timer = setTimeout(() => void reload(), delayMs);
    };
    const stops = [
      onTransactionEvent(({ type }) => type !== "transaction.pending" && soon()),
      onRefundEvent(() => soon()),
      onDisputeEvent(({ type }) => type !== "dispute.updated" && soon()),
      onLiveStatus((_status, reconnected) => reconnected && soon()),
    ];
    return () => {
      clearTimeout(timer);
      stops.forEach((stop) => stop());
    };
  }, [reload, delayMs]);
}
