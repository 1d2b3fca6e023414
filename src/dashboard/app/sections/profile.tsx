import { useState } from "preact/hooks";
import { mutate } from "../api.ts";
import { CardForm } from "../forms.tsx";
import { graphql } from "../gql/index.ts";
import { BASE, onLinkClick } from "../router.ts";
import type { Session } from "../session.ts";
import { DetailFields, ErrorNote, Loading, PageHeader, announce, useQuery } from "../ui.tsx";

/**
 * The signed-in user's own page (/profile, from their e-mail in the header): which notices the gateway e-mails them.
 * The API keeps the kinds they opted out of (User.mailOptOuts); here each kind is a box ticked when it is wanted.
 */

const PROFILE = graphql(`query DashboardProfile { currentUser { databaseId email role mailOptOuts } }`);
const SAVE = graphql(`
  mutation DashboardUpdateNoticePreferences($optOuts: [String!]!) {
    updateNoticePreferences(optOuts: $optOuts) { __typename ...DashboardError ... on MutationUpdateNoticePreferencesSuccess { data } }
  }
`);

/** The notices, in the words of "E-mail me when…". */
export const NOTICES = [
  ["payout_failed", "a payout fails"],
  ["refund_failed", "a refund fails"],
  ["dispute_opened", "a payer's bank disputes a payment"],
  ["dispute_reminder", "a dispute still needs my answer before its deadline"],
  ["webhook_disabled", "a webhook endpoint is turned off after failing deliveries"],
  ["daily_summary", "each morning, with yesterday's payments (daily summary)"],
] as const;

/** Who the gateway sends notices to: owners (both modes) and developers (test mode); viewers get none. */
const WHO: Record<string, string> = {
  owner: "As an owner you get them for live and test mode.",
  developer: "As a developer you get them for test mode only.",
  viewer: "Viewers are not sent notices; your choices here apply if an owner gives you another role.",
};

export function Profile({ session }: { session: Session }) {
  const { data, error, loading, setData } = useQuery(PROFILE);
  const user = data?.currentUser;
  return (
    <section>
      <PageHeader title="Your profile" />
      <ErrorNote message={error} />
      {!data && loading && <Loading />}
      {data && !user && <p>Only a signed-in user has a profile.</p>}
      {user && (
        <>
          <DetailFields
            id="profile-fields"
            fields={[
              ["E-mail", user.email],
              ["Role", <span class="role">{user.role}</span>],
            ]}
          />
          <NoticeForm key={user.databaseId} optOuts={user.mailOptOuts} role={session.user.role} onSaved={(mailOptOuts) => setData((current) => ({ currentUser: current.currentUser && { ...current.currentUser, mailOptOuts } }))} />
          <p class="muted">
            To change your password, see{" "}
            <a href={`${BASE}/users`} onClick={(e) => onLinkClick(e, "/users")}>
              Users
            </a>
            .
          </p>
        </>
      )}
    </section>
  );
}

function NoticeForm({ optOuts, role, onSaved }: { optOuts: string[]; role: string; onSaved: (optOuts: string[]) => void }) {
  const [wanted, setWanted] = useState(() => new Set<string>(NOTICES.map(([kind]) => kind).filter((kind) => !optOuts.includes(kind))));
  const [saved, setSaved] = useState(false);
  const toggle = (kind: string, on: boolean) => {
    setSaved(false);
    const next = new Set(wanted);
    if (on) next.add(kind);
    else next.delete(kind);
    setWanted(next);
  };
  const save = async () => {
    setSaved(false);
    // Kinds this page does not know (a newer gateway's) stay as they were.
    const known = new Set<string>(NOTICES.map(([kind]) => kind));
    const next = [...optOuts.filter((kind) => !known.has(kind)), ...NOTICES.map(([kind]) => kind).filter((kind) => !wanted.has(kind))];
    const result = await mutate(SAVE, "updateNoticePreferences", { optOuts: next });
    onSaved(result.data);
    setSaved(true);
    announce("Your e-mail notices are saved");
  };
  return (
    <CardForm
      title="E-mail notices"
      titleId="notices-title"
      id="notices-form"
      submit="Save notices"
      onSubmit={save}
      status={
        saved && (
          <p class="ok" role="status" id="notices-saved">
            Saved. {wanted.size === 0 ? "You will get no notices." : `You will get ${wanted.size} of ${NOTICES.length} kinds of notice.`}
          </p>
        )
      }
    >
      <p class="muted hint">The gateway e-mails your team about things that need a look. {WHO[role] ?? ""}</p>
      <fieldset>
        <legend>E-mail me when…</legend>
        <div class="notice-checks">
          {NOTICES.map(([kind, words]) => (
            <label class="inline" key={kind}>
              <input type="checkbox" name="notices" value={kind} checked={wanted.has(kind)} onChange={(e) => toggle(kind, e.currentTarget.checked)} /> {words}
            </label>
          ))}
        </div>
      </fieldset>
    </CardForm>
  );
}
