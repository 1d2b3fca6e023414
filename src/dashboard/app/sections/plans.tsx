import { useState } from "preact/hooks";
import { ApiError, mutate } from "../api.ts";
import { graphql } from "../gql/index.ts";
import type { DashboardPlanFragment, PlanInterval } from "../gql/graphql.ts";
import { formatDate, formatMoney, parseMajorUnits, titleCase } from "../format.ts";
import { CardForm, useFocusOnMount } from "../forms.tsx";
import { NumberedPager } from "../paging.tsx";
import { canWrite, type Session } from "../session.ts";
import { Listing, Table } from "../tables.tsx";
import { EmptyState, PageHeader, announce, useQuery } from "../ui.tsx";

/**
 * Plans (GraphQL `plansPage`, newest first): what a subscription bills each period. A writer makes one with the form;
 * a plan never changes once made (a new price is a new plan), so there is nothing to edit or delete.
 */
graphql(`
  fragment DashboardPlan on Plan { id name amount currency interval intervalCount trialDays createdAt }
`);
type Plan = DashboardPlanFragment;

const PAGE_SIZE = 20;
const LIST = graphql(`
  query DashboardPlans($page: Int, $limit: Int) {
    plansPage(page: $page, limit: $limit) { __typename ...DashboardError ... on PlanPage { total page pages items { ...DashboardPlan } } }
  }
`);
const CREATE = graphql(`
  mutation DashboardCreatePlan($input: CreatePlanInput!) { createPlan(input: $input) { __typename ...DashboardError ... on Plan { ...DashboardPlan } } }
`);

const INTERVALS: PlanInterval[] = ["day", "week", "month", "quarter", "year"];
const plural = (count: number, unit: string) => `${count} ${unit}${count === 1 ? "" : "s"}`;

/** How often a plan bills, as a merchant says it: "every month", "every 2 weeks". */
export function billingPeriod(plan: { interval: string; intervalCount: number }): string {
  return plan.intervalCount === 1 ? `every ${plan.interval}` : `every ${plural(plan.intervalCount, plan.interval)}`;
}

/** A plan's price per period: "KES 25.00 every month". */
export const planPrice = (plan: { amount: number; currency: string; interval: string; intervalCount: number }) => `${formatMoney(plan.amount, plan.currency)} ${billingPeriod(plan)}`;

export function Plans({ session }: { session: Session }) {
  const writable = canWrite(session);
  const [page, setPage] = useState(1);
  const [creating, setCreating] = useState(false);
  const { data, error, loading, reload } = useQuery(LIST, { page, limit: PAGE_SIZE });
  const result = data?.plansPage;
  const list = result?.__typename === "PlanPage" ? result : null;
  const failure = result && result.__typename !== "PlanPage" ? (result as { message: string }).message : null;

  return (
    <section>
      <PageHeader title="Plans">
        {writable && !creating && (
          <button type="button" id="new-plan" onClick={() => setCreating(true)}>
            New plan
          </button>
        )}
      </PageHeader>
      <p class="muted">What a subscription bills its customer each period, on the customer's saved payment method. A plan cannot change once made: a new price is a new plan.</p>
      {writable && creating && (
        <PlanForm
          onCancel={() => setCreating(false)}
          onCreated={() => {
            setCreating(false);
            setPage(1);
            void reload();
          }}
        />
      )}
      <Listing
        items={list?.items}
        loading={loading && !data}
        error={error ?? failure}
        empty={<EmptyState title="No plans yet">{writable && <p>Make a plan here or with POST /v1/plans, then subscribe customers to it through the API.</p>}</EmptyState>}
      >
        {(plans) => (
          <>
            <p class="muted count" id="plans-count">
              {plural(list!.total, "plan")}
            </p>
            <Table
              label="Plans"
              bodyId="plans-rows"
              rows={plans}
              rowKey="id"
              rowProps={(plan) => ({ "data-id": plan.id })}
              columns={[
                { label: "Name", class: "break", cell: (plan) => plan.name, note: (plan) => <span class="mono">{plan.id}</span> },
                { label: "Price", num: true, cell: (plan) => formatMoney(plan.amount, plan.currency) },
                { label: "Billed", cell: (plan) => titleCase(billingPeriod(plan)) },
                { label: "Trial", cell: (plan) => (plan.trialDays ? plural(plan.trialDays, "day") : "—") },
                { label: "Created", cell: (plan) => formatDate(plan.createdAt) },
              ]}
            />
          </>
        )}
      </Listing>
      {list && <NumberedPager list={list} onPage={setPage} />}
    </section>
  );
}

/** The New plan form: the amount in major units of the currency; the API checks the rest and names a refused field. */
function PlanForm({ onCreated, onCancel }: { onCreated: (plan: Plan) => void; onCancel: () => void }) {
  const [name, setName] = useState("");
  const [amount, setAmount] = useState("");
  const [currency, setCurrency] = useState("KES");
  const [interval, setPlanInterval] = useState<PlanInterval>("month");
  const [intervalCount, setIntervalCount] = useState("1");
  const [trialDays, setTrialDays] = useState("0");
  const nameRef = useFocusOnMount<HTMLInputElement>();
  const submit = async () => {
    const code = currency.trim().toUpperCase();
    const minor = parseMajorUnits(amount, code);
    if (minor === null) throw new ApiError(`Amount: enter it in ${code || "the currency"}, e.g. 2500.00`, "validation_failed");
    const plan = await mutate(CREATE, "createPlan", {
      input: { name: name.trim(), amount: minor, currency: code, interval, intervalCount: Number(intervalCount), trialDays: Number(trialDays) },
    });
    announce(`Plan ${plan.name} created: ${planPrice(plan)}`);
    onCreated(plan);
  };
  return (
    <CardForm title="New plan" titleId="plan-title" id="plan-form" submit="Create plan" onSubmit={submit} onCancel={onCancel}>
      <div class="grid">
        <div class="field">
          <label for="plan-name">Name</label>
          <input id="plan-name" ref={nameRef} type="text" required maxLength={200} value={name} onInput={(e) => setName(e.currentTarget.value)} />
        </div>
        <div class="field">
          <label for="plan-amount">Amount each period</label>
          <input id="plan-amount" type="text" inputMode="decimal" autoComplete="off" required value={amount} onInput={(e) => setAmount(e.currentTarget.value)} />
        </div>
        <div class="field">
          <label for="plan-currency">Currency</label>
          <input id="plan-currency" type="text" required maxLength={3} value={currency} onInput={(e) => setCurrency(e.currentTarget.value)} />
        </div>
        <div class="field">
          <label for="plan-interval">Billed every</label>
          <select id="plan-interval" value={interval} onChange={(e) => setPlanInterval(e.currentTarget.value as PlanInterval)}>
            {INTERVALS.map((value) => (
              <option value={value} key={value}>
                {value}
              </option>
            ))}
          </select>
        </div>
        <div class="field">
          <label for="plan-interval-count">Intervals per period</label>
          <input id="plan-interval-count" type="number" min={1} step={1} required value={intervalCount} onInput={(e) => setIntervalCount(e.currentTarget.value)} />
        </div>
        <div class="field">
          <label for="plan-trial-days">Trial days</label>
          <input id="plan-trial-days" type="number" min={0} step={1} required value={trialDays} onInput={(e) => setTrialDays(e.currentTarget.value)} />
        </div>
      </div>
      <p class="muted hint">E.g. every 2 weeks: "week" with 2 intervals per period. A trial delays the first charge by that many days.</p>
    </CardForm>
  );
}
