import { describe, expect, it } from "vitest";
import { createForeground } from "../../src/jobs/foreground.ts";

const spin = (ms: number) => {
  const until = performance.now() + ms;
  while (performance.now() < until);
};
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The API's load as the job runner sees it (src/jobs/foreground.ts): busy needs requests arriving and a loop mostly occupied. */
describe("foreground", () => {
  it("is busy while requests arrive on an occupied event loop, and not when either is missing", async () => {
    const foreground = createForeground();
    // The loop occupied, no request: a drain alone is not held back.
    spin(250);
    expect(foreground.busy()).toBe(false);
    // Requests arriving while the loop is occupied: busy.
    spin(250);
    foreground.requestArrived();
    expect(foreground.busy()).toBe(true);
    // A request on an idle loop: not busy (light traffic does not slow background work).
    await sleep(250);
    foreground.requestArrived();
    expect(foreground.busy()).toBe(false);
    // Busy again, then no request for a while: not busy, even before the next sample of the loop.
    spin(250);
    foreground.requestArrived();
    expect(foreground.busy()).toBe(true);
    await sleep(120);
    expect(foreground.busy()).toBe(false);
  });
});
