import { useEffect, useState } from "preact/hooks";

/** A tiny History API router: every client route lives under /dashboard. */
export const BASE = "/dashboard";
const listeners = new Set<() => void>();

/** The path inside the dashboard, e.g. "/transactions/txn_abc" (always starting with "/"). */
export function currentRoute(): string {
  const path = location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length) : "/";
  return path === "" ? "/" : path;
}

export function navigate(route: string, replace = false): void {
  const url = BASE + route;
  if (url !== location.pathname + location.search) history[replace ? "replaceState" : "pushState"](null, "", url);
  listeners.forEach((listener) => listener());
  window.scrollTo(0, 0);
}

window.addEventListener("popstate", () => listeners.forEach((listener) => listener()));

export function useRoute(): string {
  const [route, setRoute] = useState(currentRoute);
  useEffect(() => {
    const update = () => setRoute(currentRoute());
    listeners.add(update);
    return () => void listeners.delete(update);
  }, []);
  return route;
}

/** A click on a client link navigates without a reload, unless the user asks for a new tab or window. */
export function onLinkClick(event: MouseEvent, route: string): void {
  if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  event.preventDefault();
  navigate(route);
}
