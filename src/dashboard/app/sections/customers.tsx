import { useState } from "preact/hooks";
import { graphql } from "../gql/index.ts";
import { formatDate } from "../format.ts";
import { NumberedPager } from "../paging.tsx";
import { BASE, navigate, onLinkClick } from "../router.ts";
import { Listing, Table } from "../tables.tsx";
import { EmptyState, PageHeader, useQuery } from "../ui.tsx";

const QUERY = graphql(`
  query DashboardCustomers($search: String, $page: Int, $limit: Int) {
    customers(search: $search, page: $page, limit: $limit) {
      __typename
      ...DashboardError
      ... on CustomerPage { total page pages items { databaseId email firstName lastName phone createdAt } }
    }
  }
`);

export function Customers() {
  const [draft, setDraft] = useState("");
  const [search, setSearch] = useState("");
  const [page, setPage] = useState(1);
  const { data, error, loading } = useQuery(QUERY, { search: search || null, page, limit: 20 });
  const result = data?.customers;
  const list = result?.__typename === "CustomerPage" ? result : null;
  const failure = result && result.__typename !== "CustomerPage" ? result.message : null;

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
      <Listing
        items={list?.items}
        loading={loading && !data /* a refused search (failure) is an answer too */}
        error={error ?? failure}
        empty={<EmptyState title={search ? `No customers match “${search}”` : "No customers yet"}>{!search && <p>Customers are added when they pay or through the API.</p>}</EmptyState>}
      >
        {(customers) =>
          list && (
            <>
              <p class="muted count">{list.total} customer{list.total === 1 ? "" : "s"}</p>
              <Table
                label="Customers"
                rows={customers}
                rowKey="databaseId"
                rowProps={(customer) => ({ "data-id": String(customer.databaseId), class: "clickable", onClick: () => navigate(`/customers/${customer.databaseId}`) })}
                columns={[
                  {
                    label: "E-mail",
                    class: "break",
                    cell: (customer) => (
                      <a href={`${BASE}/customers/${customer.databaseId}`} onClick={(e) => (e.stopPropagation(), onLinkClick(e, `/customers/${customer.databaseId}`))}>
                        {customer.email}
                      </a>
                    ),
                  },
                  { label: "Name", cell: (customer) => [customer.firstName, customer.lastName].filter(Boolean).join(" ") || "—" },
                  { label: "Phone", cell: (customer) => customer.phone ?? "—" },
                  { label: "Created", cell: (customer) => formatDate(customer.createdAt) },
                ]}
              />
              <NumberedPager list={list} onPage={setPage} />
            </>
          )
        }
      </Listing>
    </section>
  );
}
