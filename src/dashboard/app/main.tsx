import { render } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { errorMessage } from "./api.ts";
import { onDisputeEvent, onLiveStatus, onRefundEvent, onTransactionEvent, startLive, type LiveStatus } from "./live.ts";
import { formatMoney, setDisplayTimeZone } from "./format.ts";
import { BASE, navigate, onLinkClick, useRoute } from "./router.ts";
import { ApiKeys } from "./sections/api-keys.tsx";
import { BrandSettings } from "./sections/brand.tsx";
import { Channels } from "./sections/channels.tsx";
import { CustomerDetail } from "./sections/customer-detail.tsx";
import { Customers } from "./sections/customers.tsx";
import { Disputes } from "./sections/disputes.tsx";
import { Inbox } from "./sections/inbox.tsx";
import { Overview } from "./sections/overview.tsx";
import { PaymentLinks } from "./sections/payment-links.tsx";
import { Payouts } from "./sections/payouts.tsx";
import { Plans } from "./sections/plans.tsx";
import { Profile } from "./sections/profile.tsx";
import { BalancesPage } from "./sections/balances.tsx";
import { RefundsPage } from "./sections/refunds-page.tsx";
import { Reconciliations } from "./sections/reconciliations.tsx";
import { SignIn } from "./sections/signin.tsx";
import { Subscriptions } from "./sections/subscriptions.tsx";
import { TransactionDetail } from "./sections/transaction-detail.tsx";
import { Transactions } from "./sections/transactions.tsx";
import { Users } from "./sections/users.tsx";
import { Webhooks } from "./sections/webhooks.tsx";
import { hasStoredSession, refresh, signOut, switchMode, useSession, type Mode, type Session } from "./session.ts";
import { LiveRegion, announce, useQuery } from "./ui.tsx";
import { graphql } from "./gql/index.ts";
import "./styles.css";

/**
 * The sections, in the nav's order; `testOnly` ones are shown (and reachable) in test mode only. The daily ones
 * are on the bar; the rest are under "More", so the bar fits one line at 1280 px (on phones a Menu lists them all).
 */
type Section = readonly [path: string, label: string, testOnly?: boolean];
const NAV: readonly Section[] = [
  ["/overview", "Overview"],
  ["/transactions", "Transactions"],
  ["/refunds", "Refunds"],
  ["/balances", "Balances"],
  ["/payouts", "Payouts"],
  ["/payment-links", "Payment links"],
  ["/disputes", "Disputes"],
  ["/customers", "Customers"],
];
const MORE: readonly Section[] = [
  ["/subscriptions", "Subscriptions"],
  ["/plans", "Plans"],
  ["/channels", "Payment channels"],
  ["/api-keys", "API keys"],
  ["/webhooks", "Webhooks"],
  ["/reconciliations", "Reconciliation"],
  ["/users", "Users"],
  ["/brand", "Brand"],
  // Last: it comes and goes with the mode, and the others keep their places.
  ["/inbox", "Inbox", true],
];
/** Pages reached from elsewhere than the nav: the user's own, from their e-mail in the header. */
const OTHER_PAGES = [["/profile", "Your profile"]] as const;

function App() {
  const session = useSession();
  // A refresh token in this tab's storage resumes the session after a reload.
  const [resuming, setResuming] = useState(hasStoredSession);
  const [notice, setNotice] = useState<string | null>(null);
  useEffect(() => {
    if (resuming) void refresh().catch(() => false).finally(() => setResuming(false));
  }, []);
  if (resuming && !session) return <p class="muted center" aria-busy="true">Loading…</p>;
  if (!session) return <SignIn notice={notice} />;
  return <Shell key={`${session.user.id}-${session.mode}`} session={session} onSignedOut={() => setNotice("You have signed out.")} />;
}

const EVENT_WORDS: Record<string, string> = { "transaction.completed": "completed", "transaction.failed": "failed", "transaction.pending": "waiting for the payer" };

/** Everything after sign-in, for one user and mode (a mode switch remounts it, reconnecting live data). */
function Shell({ session, onSignedOut }: { session: Session; onSignedOut: () => void }) {
  const route = useRoute();
  const viewer = useQuery(graphql(`query DashboardViewer { viewer { name timezone } }`));
  // Dates everywhere in the merchant's time zone (format.ts), before the page below renders with them.
  setDisplayTimeZone(viewer.data?.viewer.timezone);
  const [live, setLive] = useState<LiveStatus>("connecting");
  const [switching, setSwitching] = useState<string | null>(null);
  const [signingOut, setSigningOut] = useState(false);
  const firstRoute = useRef(true);
  const test = session.mode === "test";
  const nav = NAV.filter(([, , testOnly]) => test || !testOnly);
  const more = MORE.filter(([, , testOnly]) => test || !testOnly);
  const pages = [...nav, ...more, ...OTHER_PAGES];

  useEffect(() => startLive(), []);
  useEffect(() => onLiveStatus((status) => setLive(status)), []);
  useEffect(
    () =>
      onTransactionEvent(({ type, transaction }) => {
        const amount = formatMoney(transaction.amount, transaction.currency);
        const words = EVENT_WORDS[type];
        announce(words ? `Payment ${transaction.reference} of ${amount} ${words}` : `New payment: ${amount} from ${transaction.email ?? "a customer"}`);
      }),
    [],
  );
  useEffect(
    () =>
      onRefundEvent(({ type, refund }) =>
        announce(`Refund ${refund.reference} of ${formatMoney(refund.amount, refund.currency)} on payment ${refund.transactionReference} ${type === "refund.completed" ? "completed" : "failed"}`),
      ),
    [],
  );
  useEffect(
    () =>
      onDisputeEvent(({ type, dispute }) => {
        if (type === "dispute.created") announce(`Payment ${dispute.transactionReference} disputed: ${formatMoney(dispute.amount, dispute.currency)} held until the dispute closes`);
        if (type === "dispute.closed") announce(`Dispute ${dispute.reference} on payment ${dispute.transactionReference} ${dispute.status}`);
      }),
    [],
  );
  useEffect(() => {
    if (route === "/" || !pages.some(([path]) => route === path || route.startsWith(`${path}/`))) navigate("/overview", true);
    // After a client-side navigation, move focus to the new page's heading (as a page load would). On a change
    // of route only: when the merchant's name arrived later (it is in the title), this took the focus from
    // whatever field the user was typing in.
    if (!firstRoute.current) document.querySelector<HTMLElement>("main h1")?.focus();
    firstRoute.current = false;
  }, [route]);
  useEffect(() => {
    const section = pages.find(([path]) => route.startsWith(path));
    document.title = `${section ? section[1] : "Dashboard"} · ${viewer.data?.viewer.name ?? "Payment gateway"}`;
  }, [route, viewer.data]);

  const changeMode = async (mode: Mode) => {
    if (mode === session.mode) return;
    setSwitching(null);
    try {
      if (!(await switchMode(mode))) return;
      announce(`Switched to ${mode} mode`);
    } catch (error) {
      setSwitching(errorMessage(error));
    }
  };

  const detail = /^\/transactions\/([^/]+)$/.exec(route);
  let page;
  const customer = /^\/customers\/(\d+)$/.exec(route);
  if (detail) page = <TransactionDetail reference={decodeURIComponent(detail[1]!)} session={session} />;
  else if (customer) page = <CustomerDetail key={customer[1]} id={Number(customer[1])} session={session} />;
  else if (route.startsWith("/overview")) page = <Overview session={session} />;
  else if (route.startsWith("/customers")) page = <Customers />;
  else if (route.startsWith("/subscriptions")) page = <Subscriptions session={session} />;
  else if (route.startsWith("/plans")) page = <Plans session={session} />;
  else if (route.startsWith("/disputes")) page = <Disputes route={route} session={session} />;
  else if (route.startsWith("/channels")) page = <Channels session={session} />;
  else if (route.startsWith("/api-keys")) page = <ApiKeys session={session} />;
  else if (route.startsWith("/webhooks")) page = <Webhooks session={session} />;
  else if (route.startsWith("/payouts")) page = <Payouts session={session} />;
  else if (route.startsWith("/refunds")) page = <RefundsPage />;
  else if (route.startsWith("/balances")) page = <BalancesPage />;
  else if (route.startsWith("/payment-links")) page = <PaymentLinks session={session} />;
  else if (route.startsWith("/reconciliations")) page = <Reconciliations route={route} session={session} />;
  else if (route.startsWith("/users")) page = <Users session={session} />;
  else if (route.startsWith("/brand")) page = <BrandSettings session={session} />;
  else if (route.startsWith("/inbox")) page = <Inbox route={route} />;
  else if (route.startsWith("/profile")) page = <Profile session={session} />;
  else page = <Transactions mode={session.mode} />;

  return (
    <div class={`app ${test ? "mode-test" : "mode-live"}`}>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="topbar">
        <div class="brand">
          <span class="merchant" id="merchant-name">
            {viewer.data?.viewer.name ?? "…"}
          </span>
          {test ? (
            <span class="mode-badge" id="mode-badge">
              TEST MODE
            </span>
          ) : (
            <span class="mode-badge live" id="mode-badge">
              LIVE
            </span>
          )}
          <span class={`live-dot ${live}`} id="live-status" data-status={live} title="New payments and status changes appear without reloading">
            {live === "live" ? "Auto-updating" : live === "connecting" ? "Connecting…" : "Reconnecting…"}
          </span>
        </div>
        <div class="account">
          <div class="mode-switch" role="group" aria-label="Mode">
            <button type="button" aria-pressed={test} onClick={() => void changeMode("test")}>
              Test
            </button>
            <button type="button" aria-pressed={!test} onClick={() => void changeMode("live")}>
              Live
            </button>
          </div>
          <span class="user" id="user">
            <a
              class="user-email"
              href={`${BASE}/profile`}
              title="Your profile: the e-mails you get"
              aria-current={route === "/profile" ? "page" : undefined}
              onClick={(e) => onLinkClick(e, "/profile")}
            >
              {session.user.email}
            </a>{" "}
            <span class="role">{session.user.role}</span>
          </span>
          <button
            type="button"
            class="secondary small"
            disabled={signingOut}
            onClick={() => {
              setSigningOut(true);
              onSignedOut();
              void signOut();
            }}
          >
            {signingOut ? "Signing out…" : "Sign out"}
          </button>
        </div>
      </header>
      {switching && (
        <p class="error banner" role="alert">
          {switching}
        </p>
      )}
      <SectionsNav route={route} nav={nav} more={more} />
      <main id="main" tabIndex={-1}>
        {page}
      </main>
      <LiveRegion />
    </div>
  );
}

const isCurrent = (route: string, path: string) => route === path || route.startsWith(`${path}/`);

/**
 * The sections bar: the daily pages, then "More" (a disclosure listing the others). Below 640 px the bar is
 * folded behind a Menu button and lists every section in one column.
 */
function SectionsNav({ route, nav, more }: { route: string; nav: readonly Section[]; more: readonly Section[] }) {
  const [menuOpen, setMenuOpen] = useState(false);
  const [moreOpen, setMoreOpen] = useState(false);
  const moreRef = useRef<HTMLDivElement>(null);
  const inMore = more.find(([path]) => isCurrent(route, path));
  // A navigation closes both; so does a click elsewhere or Escape (as a menu would).
  useEffect(() => {
    setMenuOpen(false);
    setMoreOpen(false);
  }, [route]);
  useEffect(() => {
    if (!moreOpen) return;
    const outside = (event: MouseEvent) => moreRef.current && !moreRef.current.contains(event.target as Node) && setMoreOpen(false);
    const escape = (event: KeyboardEvent) => event.key === "Escape" && setMoreOpen(false);
    document.addEventListener("click", outside);
    document.addEventListener("keydown", escape);
    return () => {
      document.removeEventListener("click", outside);
      document.removeEventListener("keydown", escape);
    };
  }, [moreOpen]);
  const link = ([path, label]: Section) => (
    <a key={path} href={BASE + path} aria-current={isCurrent(route, path) ? "page" : undefined} onClick={(e) => onLinkClick(e, path)}>
      {label}
    </a>
  );
  return (
    <nav class={`sections${menuOpen ? " open" : ""}`} aria-label="Sections">
      <button type="button" class="menu-toggle secondary" id="menu-toggle" aria-expanded={menuOpen} aria-controls="section-links" onClick={() => setMenuOpen(!menuOpen)}>
        Menu{inMore || nav.some(([path]) => isCurrent(route, path)) ? `: ${(inMore ?? nav.find(([path]) => isCurrent(route, path)))![1]}` : ""}
      </button>
      <div class="section-links" id="section-links">
        {nav.map(link)}
        <div class={`more${moreOpen ? " open" : ""}`} ref={moreRef}>
          <button type="button" class={`more-toggle${inMore ? " current" : ""}`} id="more-toggle" aria-expanded={moreOpen} aria-controls="more-links" onClick={() => setMoreOpen(!moreOpen)}>
            {inMore ? inMore[1] : "More"}
            <span aria-hidden="true"> ▾</span>
          </button>
          <div class="more-links" id="more-links">
            {more.map(link)}
          </div>
        </div>
      </div>
    </nav>
  );
}

render(<App />, document.getElementById("app")!);
