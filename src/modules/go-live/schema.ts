import { builder } from "../../graphql/builder.ts";
import { GO_LIVE_CHECK_IDS, type GoLiveCheck, type GoLiveReport } from "./service.ts";

const GoLiveCheckId = builder.enumType("GoLiveCheckId", { values: GO_LIVE_CHECK_IDS });

const GoLiveCheckRef = builder.objectRef<GoLiveCheck>("GoLiveCheck").implement({
  description: "One thing that must be true before real money flows.",
  fields: (t) => ({
    id: t.field({ type: GoLiveCheckId, resolve: (check) => check.id }),
    ok: t.exposeBoolean("ok"),
    message: t.exposeString("message", { description: "What is wrong (or right), in the merchant's words." }),
    fix: t.exposeString("fix", { description: "Where it is fixed: a dashboard path (/dashboard/channels) or what to set in the gateway's environment." }),
  }),
});

const GoLiveReportRef = builder.objectRef<GoLiveReport>("GoLive").implement({
  description: "The go-live checklist, read from live mode whatever the caller's mode.",
  fields: (t) => ({
    ready: t.exposeBoolean("ready", { description: "True only when every check is ok." }),
    checks: t.field({ type: [GoLiveCheckRef], description: "Always the same checks, in the same order.", resolve: (report) => report.checks }),
  }),
});

builder.queryField("goLive", (t) =>
  t.field({
    type: GoLiveReportRef,
    description: "What must be true before the merchant takes live payments. Owners and developers, with a key or a session of either mode.",
    resolve: (_root, _args, ctx) => ctx.services.goLive.report(ctx.principal!),
  }),
);
