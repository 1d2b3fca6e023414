import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import { graphql } from "./gql/index.ts";
import type { DashboardPageInfoFragment } from "./gql/graphql.ts";

/** What a Relay connection's pager needs: every connection the dashboard pages selects `pageInfo { ...DashboardPageInfo }`. */
graphql(`fragment DashboardPageInfo on PageInfo { hasNextPage endCursor }`);
export type PageInfo = DashboardPageInfoFragment;

/** Previous, "Page …", Next. */
export function Pager({ hasPrevious, hasNext, onPrevious, onNext, children }: { hasPrevious: boolean; hasNext: boolean; onPrevious: () => void; onNext: () => void; children: ComponentChildren }) {
  return (
    <nav class="pager" aria-label="Pages">
      <button type="button" class="secondary" disabled={!hasPrevious} onClick={onPrevious}>
        Previous
      </button>
      <span class="muted">{children}</span>
      <button type="button" class="secondary" disabled={!hasNext} onClick={onNext}>
        Next
      </button>
    </nav>
  );
}

/** Relay paging forward: the cursors of the pages before this one are kept, so Previous pops one. */
export function useCursors() {
  const [cursors, setCursors] = useState<(string | null)[]>([]);
  return {
    /** The `after` variable of this page's query. */
    after: cursors[cursors.length - 1] ?? null,
    /** This page's number, from 1. */
    page: cursors.length + 1,
    previous: () => setCursors(cursors.slice(0, -1)),
    next: (endCursor: string | null) => setCursors([...cursors, endCursor]),
    /** Back to the first page (the filters changed). */
    reset: () => setCursors([]),
  };
}
export type Cursors = ReturnType<typeof useCursors>;

/** The pager of a connection paged with useCursors; nothing while all of it fits on the first page. */
export function CursorPager({ cursors, pageInfo }: { cursors: Cursors; pageInfo: PageInfo }) {
  if (cursors.page === 1 && !pageInfo.hasNextPage) return null;
  return (
    <Pager hasPrevious={cursors.page > 1} hasNext={pageInfo.hasNextPage} onPrevious={cursors.previous} onNext={() => cursors.next(pageInfo.endCursor)}>
      Page {cursors.page}
    </Pager>
  );
}

/** The pager of a list paged by number (the `...Page` queries' page and pages); nothing while it fits on one page. */
export function NumberedPager({ list, onPage }: { list: { page: number; pages: number }; onPage: (page: number) => void }) {
  if (list.pages <= 1) return null;
  return (
    <Pager hasPrevious={list.page > 1} hasNext={list.page < list.pages} onPrevious={() => onPage(list.page - 1)} onNext={() => onPage(list.page + 1)}>
      Page {list.page} of {list.pages}
    </Pager>
  );
}
