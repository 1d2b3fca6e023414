import { useState } from "preact/hooks";
import { formatDate } from "../format.ts";
import { EmptyState, ErrorNote, Loading, PageHeader, TableWrap, useQuery } from "../ui.tsx";

const QUERY = `query DashboardCustomers($search: String, $page: Int, $limit: Int) {
  customers(search: $search, page: $page, limit: $limit) {
    __typename
    ... on Error { code message }
    ... on CustomerPage { total page pages items { databaseId email firstName lastName phone createdAt } }
  }
}`;

interface Customer {
  databaseId: number;
  email: string;
  firstName: string | null;
  lastName: string | null;
  phone: string | null;
  createdAt: string;
}
type Answer = { customers: { __typename: "CustomerPage"; total: number; page: number; pages: number; items: Customer[] } | { __typename: string; message: string } };

export function Customers() {
  const [draft, setDraft] = useState("");
  const [search, setSearch] = useState("");
  const [page, setPage] = useState(1);
  const { data, error, loading } = useQuery<Answer>(QUERY, { search: search || null, page, limit: 20 });
  const result = data?.customers;
  const list = result?.__typename === "CustomerPage" ? (result as Extract<Answer["customers"], { __typename: "CustomerPage" }>) : null;
  const failure = result && !list ? (result as { message: string }).message : null;

  return (
    <section>
      <PageHeader title="Customers" />
      <form
        class="filters"
        role="search"
        onSubmit={(event) => {
          event.preventDefault();
          setSearch(draft.trim());
          setPage(1);
        }}
      >
        <div class="field grow">
          <label for="customer-search">Search by name, e-mail or phone</label>
          <input id="customer-search" type="search" maxLength={100} value={draft} onInput={(e) => setDraft(e.currentTarget.value)} />
        </div>
        <button type="submit">Search</button>
      </form>
      <ErrorNote message={error ?? failure} />
      {!data && loading && <Loading />}
      {list && list.items.length === 0 && (
        <EmptyState title={search ? `No customers match “${search}”` : "No customers yet"}>{!search && <p>Customers are added when they pay or through the API.</p>}</EmptyState>
      )}
      {list && list.items.length > 0 && (
        <>
          <p class="muted count">{list.total} customer{list.total === 1 ? "" : "s"}</p>
          <TableWrap label="Customers">
            <thead>
              <tr>
                <th scope="col">E-mail</th>
                <th scope="col">Name</th>
                <th scope="col">Phone</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {list.items.map((customer) => (
                <tr key={customer.databaseId}>
                  <th scope="row" data-label="E-mail" class="break">
                    {customer.email}
                  </th>
                  <td data-label="Name">{[customer.firstName, customer.lastName].filter(Boolean).join(" ") || "—"}</td>
                  <td data-label="Phone">{customer.phone ?? "—"}</td>
                  <td data-label="Created">{formatDate(customer.createdAt)}</td>
                </tr>
              ))}
            </tbody>
          </TableWrap>
          {list.pages > 1 && (
            <nav class="pager" aria-label="Pages">
              <button type="button" class="secondary" disabled={page <= 1} onClick={() => setPage(page - 1)}>
                Previous
              </button>
              <span class="muted">
                Page {list.page} of {list.pages}
              </span>
              <button type="button" class="secondary" disabled={page >= list.pages} onClick={() => setPage(page + 1)}>
                Next
              </button>
            </nav>
          )}
        </>
      )}
    </section>
  );
}
