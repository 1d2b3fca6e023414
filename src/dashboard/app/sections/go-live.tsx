import { mutate } from "../api.ts";
import { graphql } from "../gql/index.ts";
import type { DashboardGoLiveQuery } from "../gql/graphql.ts";
import { BASE, onLinkClick } from "../router.ts";
import { ErrorNote, announce, useAction, useQuery } from "../ui.tsx";

/**
 * The go-live checklist on the live Overview (goLive): shown until every check is ok, each item with what is wrong
 * and a link to the page where it is fixed (or what to set on the server), and "Check again" for the live channels'
 * credentials, which asks their providers now.
 */
const QUERY = graphql(`
  query DashboardGoLive {
    goLive { ready checks { id ok message fix } }
    paymentChannels(activeOnly: true) { databaseId name }
  }
`);
const CHECK = graphql(`
  mutation DashboardCheckCredentials($id: Int!) {
    checkChannelCredentials(id: $id) { __typename ...DashboardError ... on ChannelCredentialCheck { ok message } }
  }
`);
type Check = DashboardGoLiveQuery["goLive"]["checks"][number];

const TITLES: Record<Check["id"], string> = {
  public_https_url: "A public https address",
  live_channel: "A live payment channel",
  live_channel_credentials: "Credentials the provider accepts",
  c2b_urls: "M-Pesa C2B URLs registered",
  webhook_endpoint: "A webhook endpoint that answers",
  live_api_key: "A live API key",
  owners: "A second owner",
  mail: "E-mail to payers and your team",
};

/** The dashboard pages a fix can point at, by path, as the nav names them. */
const PAGES: Record<string, string> = {
  "/channels": "Payment channels",
  "/webhooks": "Webhooks",
  "/api-keys": "API keys",
  "/users": "Users",
};

function Fix({ check }: { check: Check }) {
  const route = check.fix.startsWith(`${BASE}/`) ? check.fix.slice(BASE.length) : null;
  if (route) {
    return (
      <a class="go-live-fix" href={check.fix} onClick={(e) => onLinkClick(e, route)}>
        {check.ok ? "Review" : "Fix"} in {PAGES[route] ?? route}
        <span class="visually-hidden"> ({TITLES[check.id]})</span>
      </a>
    );
  }
  return (
    <span class="go-live-fix muted">
      {check.ok ? "Set by" : "Fix"}: <code>{check.fix}</code>
    </span>
  );
}

export function GoLiveChecklist() {
  const { data, error, reload } = useQuery(QUERY);
  const action = useAction();
  if (!data || data.goLive.ready) return <ErrorNote message={error} />;
  const { checks } = data.goLive;
  const done = checks.filter((check) => check.ok).length;
  const checkAgain = () =>
    action.run(async () => {
      const verdicts = [];
      // One after another: each is a call to the channel's provider.
      for (const channel of data.paymentChannels) verdicts.push(await mutate(CHECK, "checkChannelCredentials", { id: channel.databaseId }));
      announce(verdicts.every((verdict) => verdict.ok) ? "The providers accepted the credentials" : "A provider refused a channel's credentials");
      await reload();
    });
  return (
    <section class="card go-live" id="go-live" aria-labelledby="go-live-title" data-ready="false">
      <h2 id="go-live-title">Before you take live payments</h2>
      <p class="muted hint" id="go-live-progress">
        {done} of {checks.length} done. This list goes away once everything is ready.
      </p>
      <ErrorNote message={error ?? action.error} />
      <ol class="go-live-list">
        {checks.map((check) => (
          <li key={check.id} class={check.ok ? "done" : "todo"} data-check={check.id} data-ok={String(check.ok)}>
            <div class="go-live-title">
              <span class={`badge ${check.ok ? "badge-completed" : "badge-pending"}`}>{check.ok ? "Done" : "To do"}</span> <strong>{TITLES[check.id] ?? check.id}</strong>
            </div>
            <p class="go-live-message">{check.message}</p>
            <div class="go-live-actions">
              <Fix check={check} />
              {check.id === "live_channel_credentials" && data.paymentChannels.length > 0 && (
                <button type="button" class="secondary small" disabled={action.busy} onClick={() => void checkAgain()}>
                  {action.busy ? "Checking…" : "Check again"}
                </button>
              )}
            </div>
          </li>
        ))}
      </ol>
    </section>
  );
}
